//! What the differential tests against upstream (`oracle.rs`, `oracle_webhooks.rs`) share: the
//! seeded generator of their cases and the reading of their lists of known differences.

use std::collections::BTreeMap;

/// xorshift64*: small, seeded, the same sequence everywhere.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())].clone()
    }
    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    /// One of `items`, each as likely as its weight.
    pub fn weighted<T: Clone>(&mut self, items: &[(usize, T)]) -> T {
        let total: usize = items.iter().map(|(w, _)| w).sum();
        let mut at = self.below(total);
        for (w, item) in items {
            if at < *w {
                return item.clone();
            }
            at -= w;
        }
        unreachable!()
    }
}

/// A list of known differences (`tests/oracle/known-differences*.txt`): `name: what differs`
/// a line, `#` lines and blank ones aside.
pub fn known_differences(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| match line.split_once(':') {
            Some((name, why)) => (name.trim().to_owned(), why.trim().to_owned()),
            None => (line.to_owned(), String::new()),
        })
        .collect()
}
