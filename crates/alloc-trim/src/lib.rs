//! The one unsafe call of admission-gateway, kept out of the main crate (which forbids
//! `unsafe`): asking mimalloc, the binary's global allocator, to return the memory it holds
//! free to the operating system.
//!
//! mimalloc keeps freed memory in the calling thread's heap, and gives it back only when that
//! thread allocates or frees again. A tokio worker that goes idle after a burst therefore keeps
//! the burst's memory until the next burst: `admission-gateway` calls [`collect`] when a worker
//! parks (`src/alloc.rs` of the main crate says when).

/// Frees what the calling thread's heap holds empty (blocks other threads freed into it
/// included) and purges free memory whose purge delay has passed; `force` purges all of it
/// at once, and collects abandoned memory too.
pub fn collect(force: bool) {
    // SAFETY: `mi_collect` takes no pointers and may be called from any thread at any time;
    // it only touches mimalloc's own state, under mimalloc's own synchronisation.
    unsafe { libmimalloc_sys::mi_collect(force) }
}
