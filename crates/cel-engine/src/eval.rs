//! Evaluation (being written).

use crate::error::{Error, Result};

/// The cost spent so far and the limit, cel-go's `CostTracker`.
#[derive(Debug)]
pub struct Meter {
    pub cost: u64,
    pub limit: u64,
}

impl Meter {
    pub fn charge(&mut self, cost: u64) -> Result<()> {
        self.cost = self.cost.saturating_add(cost);
        if self.cost > self.limit {
            return Err(Error::cost_limit());
        }
        Ok(())
    }
}

pub struct Limits;
pub trait Activation {}
