//! Prometheus metrics: `GET /metrics` on the serving port, in the text
//! exposition format 0.0.4, behind the same origin/Host checks and bearer
//! token as the RPCs.
//!
//! Hot paths only touch atomics: the log writer observes each commit's
//! size and duration, and each live Subscribe stream its lag when it sees a
//! new head, into [`Histogram`]s with fixed buckets (one relaxed
//! `fetch_add` per bucket and sum). Everything else (live runs, open
//! streams, resident sessions, storage health) is read when scraped.
//!
//! [`Scrape`] answers `GET /metrics` through a [`crate::plain::PlainLayer`]
//! inside the access layer (so a foreign origin or Host is refused before
//! it) and in front of grpc-web and the services.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use http::header::HeaderValue;
use http::{Request, Response, StatusCode};

use crate::auth::AuthInterceptor;
use crate::connections::ConnectionStats;
use crate::manager::SessionManager;
use crate::plain::Responder;
use crate::rpc::Rpc;

/// Where the metrics are served.
pub const PATH: &str = "/metrics";
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
        }
    }
}

/// What a scrape reads: the manager (live runs, and through its log the
/// log's counters and histograms), the service (open streams) and the
/// accept loop (connections).
#[derive(Debug, Clone)]
pub struct Source {
    manager: SessionManager,
    rpc: Rpc,
    connections: Arc<ConnectionStats>,
}

impl Source {
    /// Metrics of `manager`, of the streams `rpc` holds open and of the
    /// connections counted in `connections`.
    pub fn new(manager: SessionManager, rpc: Rpc, connections: Arc<ConnectionStats>) -> Self {
        Self {
            manager,
            rpc,
            connections,
        }
    }

    /// Every metric in the text exposition format 0.0.4.
    pub fn render(&self) -> String {
        let logs = self.manager.logs();
        let stats = logs.stats();
        let storage_ok = *logs.storage_ok().borrow();
        let m = logs.metrics();
        let mut t = Text(String::with_capacity(4096));
        t.gauge(
            "agent_harness_live_runs",
            "CLI processes alive now (at most --max-live-runs).",
            self.manager.live_runs() as u64,
        );
        t.gauge(
            "agent_harness_open_streams",
            "Subscribe and ReadFullEvent streams open now (at most --max-streams).",
            self.rpc.open_streams() as u64,
        );
        t.gauge(
            "agent_harness_subscribers",
            "Subscribe streams the event log is feeding now.",
            stats.subscribers as u64,
        );
        t.counter(
            "agent_harness_events_appended_total",
            "Events durably committed to the log since start-up.",
            stats.committed_events,
        );
        t.counter(
            "agent_harness_commits_total",
            "Successful group commits since start-up.",
            stats.commits,
        );
        t.histogram(
            "agent_harness_commit_batch_events",
            "Events per group commit.",
            &m.commit_events.snapshot(),
            1.0,
        );
        t.histogram(
            "agent_harness_commit_duration_seconds",
            "Duration of each durable store commit (transaction and fsync).",
            &m.commit_micros.snapshot(),
            1e6,
        );
        t.histogram(
            "agent_harness_subscriber_lag_events",
            "Events a live Subscribe stream was behind the head when it saw a new head.",
            &m.subscriber_lag.snapshot(),
            1.0,
        );
        t.counter(
            "agent_harness_partial_fragments_total",
            "Live typing: CLI text fragments published to subscribers' boards.",
            m.partial_fragments.load(Ordering::Relaxed),
        );
        t.counter(
            "agent_harness_partial_fragments_dropped_total",
            "Live typing: fragments dropped at --max-partial-bytes (the content event carries the whole text).",
            m.partial_dropped.load(Ordering::Relaxed),
        );
        t.counter(
            "agent_harness_deltas_sent_total",
            "Live typing: deltas sent on Subscribe streams (one coalesced delta counts once).",
            m.deltas_sent.load(Ordering::Relaxed),
        );
        t.gauge(
            "agent_harness_queued_events",
            "Events and meta changes waiting for the log writer.",
            stats.queued as u64,
        );
        t.gauge(
            "agent_harness_resident_sessions",
            "Sessions whose log is resident in memory.",
            stats.sessions as u64,
        );
        t.gauge(
            "agent_harness_window_events",
            "Events held in the in-memory windows of all sessions.",
            stats.window_events as u64,
        );
        t.gauge(
            "agent_harness_window_bytes",
            "Encoded bytes of those events.",
            stats.window_bytes as u64,
        );
        t.gauge(
            "agent_harness_connections_open",
            "Connections open now, TLS handshakes included (at most --max-connections).",
            self.connections.open(),
        );
        t.counter(
            "agent_harness_connections_refused_total",
            "Connections closed at once because --max-connections were open.",
            self.connections.refused(),
        );
        t.counter(
            "agent_harness_accept_errors_total",
            "Failed accepts (e.g. out of file descriptors), each followed by a backoff.",
            self.connections.accept_errors(),
        );
        t.gauge(
            "agent_harness_storage_ok",
            "1 while the last commit succeeded, 0 from a failed commit until one succeeds.",
            u64::from(storage_ok),
        );
        t.0
    }
}

/// The exposition text being written.
struct Text(String);

impl Text {
    fn head(&mut self, name: &str, help: &str, kind: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}\n# TYPE {name} {kind}");
    }

    fn gauge(&mut self, name: &str, help: &str, value: u64) {
        self.head(name, help, "gauge");
        let _ = writeln!(self.0, "{name} {value}");
    }

    fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.head(name, help, "counter");
        let _ = writeln!(self.0, "{name} {value}");
    }

    /// `per_unit` converts the recorded unit to the exported one (1e6: µs
    /// to s); dividing by a power of ten prints the bounds exactly.
    fn histogram(&mut self, name: &str, help: &str, h: &HistogramSnapshot, per_unit: f64) {
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

/// Answers `GET /metrics` (when enabled) with the bearer token checked as
/// for every RPC: without it, 401. Every other request goes on unchanged
/// (see [`crate::plain`]).
#[derive(Debug)]
pub struct Scrape {
    source: Option<Source>,
    auth: AuthInterceptor,
}

impl Scrape {
    /// Serves `source` (`None`: metrics off, `/metrics` is like any other
    /// path) to requests that pass `auth`.
    pub fn new(source: Option<Source>, auth: AuthInterceptor) -> Self {
        Self { source, auth }
    }
}

impl Responder for Scrape {
    fn respond<B>(&self, req: &Request<B>) -> Option<Response<tonic::body::Body>> {
        let source = self.source.as_ref()?;
        if req.method() != http::Method::GET || req.uri().path() != PATH {
            return None;
        }
        let presented = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        if let Err(why) = self.auth.check(presented) {
            let mut resp = text(StatusCode::UNAUTHORIZED, format!("{why}\n"));
            resp.headers_mut().insert(
                http::header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer"),
            );
            return Some(resp);
        }
        let mut resp = text(StatusCode::OK, source.render());
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static(CONTENT_TYPE),
        );
        Some(resp)
    }
}

fn text(status: StatusCode, body: String) -> Response<tonic::body::Body> {
    let mut resp = Response::new(tonic::body::Body::new(body));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    resp.headers_mut().insert(
        http::header::CACHE_CONTROL,
        HeaderValue::from_static("no-store"),
    );
    resp
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
