//! Backoff for the engine's loops when a backend call fails.

use std::time::Duration;

/// Exponential backoff for a loop whose backend call failed: 100 ms doubling to 3.2 s,
/// each delay drawn from its upper half ("equal jitter"), so the nodes of a fleet
/// that met the same outage do not retry in lockstep once it ends.
#[derive(Debug, Default)]
pub(crate) struct Backoff(u32);

impl Backoff {
    pub(crate) fn reset(&mut self) {
        self.0 = 0;
    }

    /// The next delay: half the step's ceiling plus up to as much again, at random.
    pub(crate) fn next_delay(&mut self) -> Duration {
        self.jittered(fastrand::f64())
    }

    /// The next delay for a random draw `r` in `[0, 1)`.
    fn jittered(&mut self, r: f64) -> Duration {
        self.0 = (self.0 + 1).min(6);
        let ceiling = Duration::from_millis(100 << (self.0 - 1));
        ceiling / 2 + ceiling.mul_f64(r.clamp(0.0, 1.0) / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_to_3200_ms_within_their_upper_half() {
        let ms = |d: Duration| d.as_millis();
        let mut b = Backoff::default();
        let low: Vec<u128> = (0..8).map(|_| ms(b.jittered(0.0))).collect();
        assert_eq!(low, [50, 100, 200, 400, 800, 1600, 1600, 1600]);
        let mut b = Backoff::default();
        let high: Vec<u128> = (0..8).map(|_| ms(b.jittered(0.999_999))).collect();
        assert_eq!(high, [99, 199, 399, 799, 1599, 3199, 3199, 3199]);
        b.reset();
        assert_eq!(ms(b.jittered(0.5)), 75);
        // Two nodes drawing differently wait differently.
        let (mut a, mut c) = (Backoff::default(), Backoff::default());
        assert_ne!(a.jittered(0.1), c.jittered(0.9));
    }
}
