//! Reconnect delays: exponential backoff with full jitter.
//!
//! After the n-th failure in a row the edge waits a uniformly random time in
//! `[0, min(cap, base * 2^n)]`. When a cloud restarts, every edge of the
//! fleet loses its link at the same moment; with a fixed retry delay (KubeEdge
//! waits 30 s) they all come back in the same second and the cloud takes the
//! whole fleet's TLS handshakes at once. Full jitter spreads them evenly over
//! the window instead.

use std::time::Duration;

/// Backoff state of one reconnecting edge.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    failures: u32,
    rng: fastrand::Rng,
}

impl Backoff {
    /// Delays start below `base` and never exceed `cap`.
    pub fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff::with_rng(base, cap, fastrand::Rng::new())
    }

    /// As [`Backoff::new`], with a given random source (tests seed it).
    pub fn with_rng(base: Duration, cap: Duration, rng: fastrand::Rng) -> Backoff {
        let base = base.max(Duration::from_millis(1));
        Backoff { base, cap: cap.max(base), failures: 0, rng }
    }

    /// The ceiling of the next delay: `min(cap, base * 2^failures)`.
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.failures.min(31)).unwrap_or(u32::MAX);
        self.base.checked_mul(factor).map_or(self.cap, |d| d.min(self.cap))
    }

    /// Records a failure and returns how long to wait before the next try.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.ceiling();
        self.failures = self.failures.saturating_add(1);
        let ms = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
        Duration::from_millis(self.rng.u64(0..=ms))
    }

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// A connection worked: the next failure starts from `base` again.
    pub fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ceiling_doubles_up_to_the_cap_and_delays_stay_under_it() {
        let mut b = Backoff::with_rng(Duration::from_secs(1), Duration::from_secs(30), fastrand::Rng::with_seed(7));
        let ceilings: Vec<u64> = (0..8)
            .map(|_| {
                let c = b.ceiling();
                let d = b.next_delay();
                assert!(d <= c, "{d:?} over {c:?}");
                c.as_secs()
            })
            .collect();
        assert_eq!(ceilings, [1, 2, 4, 8, 16, 30, 30, 30]);
        b.reset();
        assert_eq!(b.ceiling(), Duration::from_secs(1));
        assert_eq!(b.failures(), 0);
    }

    #[test]
    fn huge_failure_counts_do_not_overflow() {
        let mut b = Backoff::with_rng(Duration::from_secs(1), Duration::from_secs(60), fastrand::Rng::with_seed(1));
        for _ in 0..1000 {
            assert!(b.next_delay() <= Duration::from_secs(60));
        }
        assert_eq!(b.ceiling(), Duration::from_secs(60));
    }
}
