//! TEMPORARY: replaced by the go-compat module on merge.
pub(crate) mod duration;
