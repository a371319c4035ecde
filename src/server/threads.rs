//! The admission listener served by a few threads, each running a single-threaded runtime of
//! its own, as nginx runs its workers: a connection, the reviews on it and the calls they make
//! to webhooks all stay on the thread that accepted it, with that thread's own pools of
//! upstream connections (`upstream.rs` picks the pool by `lanes::lane`). Nothing of a review hops
//! between threads, where the work-stealing runtime woke another thread for about every
//! second step of a review (`loadtest/README.md`, "Profile hints").
//!
//! Each thread has a listening socket of its own on the same address (`SO_REUSEPORT`): the
//! kernel spreads new connections over them by their addresses, where threads sharing one
//! socket left the first to wake with most of a burst of connections (one core busy, the other
//! mostly idle). The address is first bound once without the option, so that one already in
//! use — by another process, even one of ours — is still refused. The threads share the
//! connection cap and everything in `State`. The price: one connection's reviews never spread
//! over two cores — what an HTTP/2 client, which sends everything over one connection, would
//! notice; the API server calls a webhook over a pool of HTTP/1.1 connections.

use std::net::SocketAddr;
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch, Semaphore};

use super::{limits, Listener, State};

/// Blocking threads per serving thread (`upstream::DECODE_ASIDE_BYTES`).
const BLOCKING_THREADS: usize = 2;

/// Connections waiting to be accepted, per socket (tokio's own default).
const LISTEN_BACKLOG: i32 = 1024;

/// The listening sockets of `threads` serving threads, all on `address` (its port chosen once
/// when 0), and that address.
pub(crate) fn bind(
    address: SocketAddr,
    threads: usize,
) -> std::io::Result<(SocketAddr, Vec<std::net::TcpListener>)> {
    let refused =
        |e: std::io::Error| std::io::Error::new(e.kind(), format!("cannot listen on {address}: {e}"));
    // A given port, without SO_REUSEPORT first: one in use is an error, as for any server. Port
    // 0 needs no such check, and the port the kernel picks must never be free between the
    // sockets (another process could take it): the first socket picks it, the others join.
    if address.port() != 0 {
        drop(std::net::TcpListener::bind(address).map_err(refused)?);
    }
    let mut address = address;
    let mut listeners = Vec::with_capacity(threads);
    for _ in 0..threads.max(1) {
        let socket = Socket::new(Domain::for_address(address), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        socket.set_nonblocking(true)?;
        socket.bind(&address.into()).map_err(refused)?;
        socket.listen(LISTEN_BACKLOG)?;
        if address.port() == 0 {
            address = socket.local_addr()?.as_socket().unwrap_or(address);
        }
        listeners.push(socket.into());
    }
    Ok((address, listeners))
}

/// The running serving threads.
pub(crate) struct ServingThreads {
    /// To wake each thread's runtime (`crate::alloc::watch`).
    pub(crate) handles: Vec<tokio::runtime::Handle>,
    finished: Vec<oneshot::Receiver<()>>,
}

impl ServingThreads {
    /// Resolves once every thread has drained its connections and stopped.
    pub(crate) async fn finished(self) {
        for finished in self.finished {
            let _ = finished.await;
        }
    }
}

/// Starts a serving thread on each of `listeners` ([`bind`]), within one connection cap,
/// until `shutdown`.
pub(crate) fn start(
    listeners: Vec<std::net::TcpListener>,
    tls: Option<Arc<rustls::ServerConfig>>,
    state: &Arc<State>,
    connection_limits: limits::ConnectionLimits,
    shutdown: &watch::Receiver<bool>,
) -> std::io::Result<ServingThreads> {
    let slots = Arc::new(Semaphore::new(connection_limits.max));
    let (mut handles, mut finished) =
        (Vec::with_capacity(listeners.len()), Vec::with_capacity(listeners.len()));
    for (listener, index) in listeners.into_iter().zip(1..) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            // Large webhook answers are decoded on blocking threads (`upstream.rs`): a few per
            // serving thread, the rest wait their turn, as many as there are reviews in flight.
            .max_blocking_threads(BLOCKING_THREADS)
            .on_thread_park(crate::alloc::on_park)
            .build()?;
        handles.push(runtime.handle().clone());
        let (tls, state, slots, shutdown) = (tls.clone(), state.clone(), slots.clone(), shutdown.clone());
        let (done, finished_rx) = oneshot::channel();
        finished.push(finished_rx);
        std::thread::Builder::new().name(format!("admission-{index}")).spawn(move || {
            crate::lanes::enter(index);
            runtime.block_on(async move {
                match TcpListener::from_std(listener) {
                    Ok(listener) => {
                        let limits = super::Slots { slots, idle: connection_limits.idle };
                        super::serve_with(listener, tls, state, Listener::Admission, limits, shutdown).await;
                    }
                    Err(error) => tracing::error!(%error, "serving thread {index} cannot use the listener"),
                }
            });
            // Dropping the runtime here ends what the thread's reviews left behind (idle
            // upstream connections, cancelled shadow calls) before saying it is done.
            drop(runtime);
            let _ = done.send(());
        })?;
    }
    Ok(ServingThreads { handles, finished })
}
