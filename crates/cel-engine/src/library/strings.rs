//! (to be written)

use crate::func::Registry;

pub(super) fn register(_registry: &mut Registry) {}
