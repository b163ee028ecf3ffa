//! The upstream token bucket: `qps` messages a second on average, bursts of
//! up to `burst` (KubeEdge `messageQPS` 30, `messageBurst` 60). Keepalives
//! and ACKs do not go through it.

use std::time::Duration;

use tokio::time::Instant;

/// A token bucket on tokio's clock.
#[derive(Debug)]
pub struct RateLimiter {
    per_token: Duration,
    burst: f64,
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// `qps` tokens a second, at most `burst` saved up; starts full.
    pub fn new(qps: f64, burst: u32) -> RateLimiter {
        let qps = if qps.is_finite() && qps > 0.0 { qps } else { f64::MAX };
        let burst = f64::from(burst.max(1));
        RateLimiter { per_token: Duration::from_secs_f64(1.0 / qps), burst, tokens: burst, at: Instant::now() }
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.at);
        self.at = now;
        let per = self.per_token.as_secs_f64();
        let gained = if per > 0.0 { elapsed.as_secs_f64() / per } else { self.burst };
        self.tokens = (self.tokens + gained).min(self.burst);
    }

    /// Takes a token now, or says when one will be there.
    pub fn try_take(&mut self) -> Result<(), Instant> {
        let now = Instant::now();
        self.refill(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(now + self.per_token.mul_f64(1.0 - self.tokens))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_burst_then_the_rate() {
        let mut l = RateLimiter::new(10.0, 5);
        let start = Instant::now();
        let mut sent = 0;
        while Instant::now() < start + Duration::from_secs(2) {
            match l.try_take() {
                Ok(()) => sent += 1,
                Err(at) => tokio::time::sleep_until(at).await,
            }
        }
        // 5 at once, then 10 a second for 2 s.
        assert!((24..=26).contains(&sent), "{sent}");
    }
}
