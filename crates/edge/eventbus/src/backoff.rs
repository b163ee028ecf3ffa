//! The delay between attempts to reach a broker: exponential from 500 ms
//! to 30 s, each delay drawn from its upper half (so that many edges that
//! lost the same broker do not come back in step). KubeEdge retries every
//! 5 s (`common/util/common.go` `LoopConnectPeriord`).

use std::time::Duration;

const INITIAL: Duration = Duration::from_millis(500);
const MAX: Duration = Duration::from_secs(30);

/// Backoff state: how many attempts failed in a row.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failures: u32,
}

impl Backoff {
    pub(crate) fn new() -> Backoff {
        Backoff::default()
    }

    /// The delay before the next attempt; `random` is in `[0, 1)`.
    pub(crate) fn next_delay(&mut self, random: f64) -> Duration {
        let ceiling = INITIAL.saturating_mul(1u32 << self.failures.min(16)).min(MAX);
        self.failures = self.failures.saturating_add(1);
        ceiling.mul_f64(0.5 + 0.5 * random.clamp(0.0, 1.0))
    }

    /// A connection succeeded: start again from the shortest delay.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_up_to_the_cap_and_resets() {
        let mut b = Backoff::new();
        assert_eq!(b.next_delay(1.0), Duration::from_millis(500));
        assert_eq!(b.next_delay(1.0), Duration::from_secs(1));
        assert_eq!(b.next_delay(0.0), Duration::from_secs(1));
        for _ in 0..40 {
            assert!(b.next_delay(1.0) <= MAX);
        }
        assert_eq!(b.next_delay(1.0), MAX);
        b.reset();
        assert_eq!(b.next_delay(0.0), Duration::from_millis(250));
    }
}
