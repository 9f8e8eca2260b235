//! Backoff for the engine's loops when a backend call fails.

use std::time::Duration;

/// Exponential backoff for a loop whose backend call failed: 100 ms doubling to 5 s.
#[derive(Debug, Default)]
pub(crate) struct Backoff(u32);

impl Backoff {
    pub(crate) fn reset(&mut self) {
        self.0 = 0;
    }
    pub(crate) fn next_delay(&mut self) -> Duration {
        self.0 = (self.0 + 1).min(6);
        Duration::from_millis(100 << (self.0 - 1)).min(Duration::from_secs(5))
    }
}
