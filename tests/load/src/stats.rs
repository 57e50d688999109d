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
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let q = |q: f64| {
            if samples.is_empty() {
                return 0.0;
            }
            // Nearest rank: the smallest sample with at least q of them at or below it.
            let rank = ((samples.len() as f64) * q).ceil() as usize;
            ms(samples[rank.clamp(1, samples.len()) - 1])
        };
        Self {
            n: samples.len() as u64,
            p50: q(0.50),
            p99: q(0.99),
            p999: q(0.999),
            max: samples.last().map(|d| ms(*d)).unwrap_or(0.0),
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
