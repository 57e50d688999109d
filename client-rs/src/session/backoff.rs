//! Reconnect delays: exponential growth capped at a maximum, with full
//! jitter so that many clients dropped by one server restart do not all
//! come back in the same instant.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// How reconnect delays grow. The n-th consecutive failure (counting from 0)
/// waits a uniformly random time in `[0, min(max, initial * 2^n)]`
/// ("full jitter").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BackoffPolicy {
    /// Ceiling of the first delay.
    pub initial: Duration,
    /// Largest ceiling any delay can reach.
    pub max: Duration,
}

impl Default for BackoffPolicy {
    /// 200 ms initial, 10 s max: fast enough that a blip is invisible,
    /// slow enough that a dead server is not hammered.
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(10),
        }
    }
}

impl BackoffPolicy {
    /// The upper bound of the delay after `attempt` consecutive failures:
    /// `min(max, initial * 2^attempt)`, saturating instead of overflowing.
    pub fn ceiling(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
        self.initial
            .checked_mul(factor)
            .unwrap_or(self.max)
            .min(self.max)
    }
}

/// A backoff sequence: call [`Backoff::next_delay`] after each failure and
/// [`Backoff::reset`] once a connection makes progress.
#[derive(Debug, Clone)]
pub struct Backoff {
    policy: BackoffPolicy,
    attempt: u32,
    rng: StdRng,
}

impl Backoff {
    /// A sequence seeded from the OS, for production use.
    pub fn new(policy: BackoffPolicy) -> Self {
        Self::with_rng(policy, StdRng::from_rng(&mut rand::rng()))
    }

    /// A deterministic sequence, for tests and reproducible runs.
    pub fn with_seed(policy: BackoffPolicy, seed: u64) -> Self {
        Self::with_rng(policy, StdRng::seed_from_u64(seed))
    }

    fn with_rng(policy: BackoffPolicy, rng: StdRng) -> Self {
        Self {
            policy,
            attempt: 0,
            rng,
        }
    }

    /// The delay before the next attempt; each call counts one more failure.
    pub fn next_delay(&mut self) -> Duration {
        let ceiling = self.policy.ceiling(self.attempt);
        self.attempt = self.attempt.saturating_add(1);
        let nanos = u64::try_from(ceiling.as_nanos()).unwrap_or(u64::MAX);
        Duration::from_nanos(self.rng.random_range(0..=nanos))
    }

    /// Consecutive failures counted so far.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Forgets past failures: the next delay is drawn under `initial` again.
    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    /// The policy this sequence follows.
    pub fn policy(&self) -> BackoffPolicy {
        self.policy
    }
}
