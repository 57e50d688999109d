//! Figures every measurement reports: rates and latency quantiles.

use std::time::Duration;

use serde::Serialize;

/// Events moved in some wall-clock time.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Rate {
    /// Events counted.
    pub events: u64,
    /// Seconds they took.
    pub secs: f64,
}

impl Rate {
    /// Events per second (0 when nothing was timed).
    pub fn per_sec(&self) -> f64 {
        if self.secs > 0.0 {
            self.events as f64 / self.secs
        } else {
            0.0
        }
    }
}

/// Latency quantiles in milliseconds over `n` samples.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Latency {
    /// Samples taken.
    pub n: u64,
    /// Median, ms.
    pub p50: f64,
    /// 99th percentile, ms.
    pub p99: f64,
    /// 99.9th percentile, ms.
    pub p999: f64,
    /// Largest sample, ms.
    pub max: f64,
}

impl Latency {
    /// Quantiles of these samples (sorted here).
    pub fn from_samples(mut samples: Vec<Duration>) -> Self {
        samples.sort_unstable();
        Self::of_sorted(&samples, |d| d.as_secs_f64() * 1e3)
    }

    /// Quantiles of samples given in whole microseconds (compact: live
    /// typing takes tens of millions of them).
    pub fn from_micros(mut samples: Vec<u32>) -> Self {
        samples.sort_unstable();
        Self::of_sorted(&samples, |us| us as f64 / 1e3)
    }

    fn of_sorted<T: Copy>(sorted: &[T], ms: impl Fn(T) -> f64) -> Self {
        let q = |q: f64| {
            if sorted.is_empty() {
                return 0.0;
            }
            // Nearest rank: the smallest sample with at least q of them at or below it.
            let rank = ((sorted.len() as f64) * q).ceil() as usize;
            ms(sorted[rank.clamp(1, sorted.len()) - 1])
        };
        Self {
            n: sorted.len() as u64,
            p50: q(0.50),
            p99: q(0.99),
            p999: q(0.999),
            max: sorted.last().map(|&s| ms(s)).unwrap_or(0.0),
        }
    }

    /// Quantiles of samples given in milliseconds.
    pub fn from_ms(samples: impl IntoIterator<Item = f64>) -> Self {
        Self::from_samples(
            samples
                .into_iter()
                .map(|ms| Duration::from_secs_f64(ms.max(0.0) / 1e3))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let l = Latency::from_samples((1..=1000).map(Duration::from_millis).collect());
        assert_eq!(l.n, 1000);
        assert!((l.p50 - 500.0).abs() < 1e-6, "{l:?}");
        assert!((l.p99 - 990.0).abs() < 1e-6, "{l:?}");
        assert!((l.p999 - 999.0).abs() < 1e-6, "{l:?}");
        assert!((l.max - 1000.0).abs() < 1e-6, "{l:?}");
        assert_eq!(Latency::from_samples(Vec::new()).n, 0);
        let us = Latency::from_micros((1..=1000).rev().map(|ms| ms * 1000).collect());
        assert_eq!(
            (us.n, us.p50, us.p99, us.p999, us.max),
            (l.n, l.p50, l.p99, l.p999, l.max)
        );
    }

    #[test]
    fn rate_per_second() {
        assert_eq!(
            Rate {
                events: 500,
                secs: 0.5
            }
            .per_sec(),
            1000.0
        );
        assert_eq!(Rate::default().per_sec(), 0.0);
    }
}
