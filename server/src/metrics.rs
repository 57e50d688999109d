//! Prometheus metrics: the recorders the hot paths fill, and the text
//! exposition format 0.0.4 they are written in.
//!
//! Hot paths only touch atomics: the log writer observes each commit's
//! size and duration, and each live Subscribe stream its lag when it sees a
//! new head, into [`Histogram`]s with fixed buckets (one relaxed
//! `fetch_add` per bucket and sum). Everything else (live runs, open
//! streams, resident sessions, storage health) is read when scraped
//! ([`crate::scrape`], which serves `GET /metrics`).
//!
//! This module imports nothing of the server: the log depends on it, and
//! the scrape reads the others, so the numbers flow one way.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// The exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Upper bounds of the commit batch size histogram, in events (a commit
/// holds at most `max_batch`, 10,000 by default).
pub const BATCH_BUCKETS: &[u64] = &[1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000];
/// Upper bounds of the commit duration histogram, in microseconds
/// (exported in seconds: 100 µs to 2.5 s).
pub const COMMIT_MICROS_BUCKETS: &[u64] = &[
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000,
];
/// Upper bounds of the subscriber lag histogram, in events (Subscribe
/// replays at most `--max-replay`, 10,000 by default, before it resets).
pub const LAG_BUCKETS: &[u64] = &[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096, 10_000];

/// A histogram of non-negative integers with fixed upper bounds, updated
/// with two relaxed atomic adds and no lock.
#[derive(Debug)]
pub struct Histogram {
    /// Inclusive upper bounds, ascending.
    bounds: &'static [u64],
    /// Observations per bucket (not cumulative); the last is `+Inf`.
    counts: Box<[AtomicU64]>,
    /// Sum of the observed values.
    sum: AtomicU64,
}

/// A histogram read at one moment: cumulative bucket counts (the last is
/// `+Inf`, the total) and the sum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// The bounds the counts belong to (without `+Inf`).
    pub bounds: &'static [u64],
    /// Cumulative counts: `cumulative[i]` observations were `<= bounds[i]`;
    /// the extra last entry counts them all.
    pub cumulative: Vec<u64>,
    /// Sum of the observed values.
    pub sum: u64,
}

impl HistogramSnapshot {
    /// How many values were observed.
    pub fn count(&self) -> u64 {
        self.cumulative.last().copied().unwrap_or(0)
    }
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending, inclusive).
    pub fn new(bounds: &'static [u64]) -> Self {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]));
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    /// Records one value.
    pub fn observe(&self, value: u64) {
        let bucket = self.bounds.partition_point(|&b| b < value);
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut total = 0;
        let cumulative = self
            .counts
            .iter()
            .map(|c| {
                total += c.load(Ordering::Relaxed);
                total
            })
            .collect();
        HistogramSnapshot {
            bounds: self.bounds,
            cumulative,
            sum: self.sum.load(Ordering::Relaxed),
        }
    }
}

/// The histograms the event log fills as it works.
#[derive(Debug)]
pub struct LogMetrics {
    /// Events per successful group commit.
    pub commit_events: Histogram,
    /// Duration of each successful durable store commit (transaction and
    /// fsync), in microseconds.
    pub commit_micros: Histogram,
    /// Events a live Subscribe stream was behind the head each time it saw
    /// a new head (1 for a stream keeping up with single-event commits).
    pub subscriber_lag: Histogram,
    /// Live typing: CLI fragments published to the boards.
    pub partial_fragments: AtomicU64,
    /// Live typing: CLI fragments dropped because a session's partial text
    /// reached `--max-partial-bytes`.
    pub partial_dropped: AtomicU64,
    /// Live typing: deltas sent to subscribers (a coalesced delta counts once).
    pub deltas_sent: AtomicU64,
    /// Batches of CLI output handed to the writer before the commit before
    /// them was answered (a lone session writing fast).
    pub early_commits: AtomicU64,
}

impl Default for LogMetrics {
    fn default() -> Self {
        Self {
            commit_events: Histogram::new(BATCH_BUCKETS),
            commit_micros: Histogram::new(COMMIT_MICROS_BUCKETS),
            subscriber_lag: Histogram::new(LAG_BUCKETS),
            partial_fragments: AtomicU64::new(0),
            partial_dropped: AtomicU64::new(0),
            deltas_sent: AtomicU64::new(0),
            early_commits: AtomicU64::new(0),
        }
    }
}
/// The exposition text being written: what [`crate::scrape`] renders the
/// numbers into.
pub(crate) struct Text(pub(crate) String);

impl Text {
    fn head(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    pub(crate) fn gauge(&mut self, name: &str, help: &str, value: u64) {
        self.head(name, help, "gauge");
        let _ = writeln!(self.0, "{name} {value}");
    }

    pub(crate) fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.head(name, help, "counter");
        let _ = writeln!(self.0, "{name} {value}");
    }

    /// `per_unit` converts the recorded unit to the exported one (1e6: µs
    /// to s); dividing by a power of ten prints the bounds exactly.
    pub(crate) fn histogram(
        &mut self,
        name: &str,
        help: &str,
        h: &HistogramSnapshot,
        per_unit: f64,
    ) {
        self.head(name, help, "histogram");
        for (bound, count) in h.bounds.iter().zip(&h.cumulative) {
            let le = *bound as f64 / per_unit;
            let _ = writeln!(self.0, "{name}_bucket{{le=\"{le}\"}} {count}");
        }
        let _ = writeln!(self.0, "{name}_bucket{{le=\"+Inf\"}} {}", h.count());
        let _ = writeln!(self.0, "{name}_sum {}", h.sum as f64 / per_unit);
        let _ = writeln!(self.0, "{name}_count {}", h.count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_inclusive_and_cumulative() {
        let h = Histogram::new(&[1, 10, 100]);
        for v in [0, 1, 2, 10, 11, 100, 101, 5000] {
            h.observe(v);
        }
        let s = h.snapshot();
        assert_eq!(s.cumulative, [2, 4, 6, 8]);
        assert_eq!(s.count(), 8);
        assert_eq!(s.sum, 5225);
    }

    #[test]
    fn histogram_text_has_buckets_sum_and_count() {
        let h = Histogram::new(&[250, 1_000_000]);
        h.observe(200);
        h.observe(2_000_000);
        let mut t = Text(String::new());
        t.histogram("x_seconds", "help", &h.snapshot(), 1e6);
        assert_eq!(
            t.0,
            "# HELP x_seconds help\n# TYPE x_seconds histogram\n\
             x_seconds_bucket{le=\"0.00025\"} 1\nx_seconds_bucket{le=\"1\"} 1\n\
             x_seconds_bucket{le=\"+Inf\"} 2\nx_seconds_sum 2.0002\nx_seconds_count 2\n"
        );
    }
}
