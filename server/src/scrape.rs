//! `GET /metrics`: reads the numbers of the manager, the service, the log
//! and the accept loop when scraped and writes them in the Prometheus text
//! format ([`crate::metrics`]), behind the same origin/Host checks and
//! bearer token as the RPCs.
//!
//! [`Scrape`] answers through a [`crate::plain::PlainLayer`] inside the
//! access layer (so a foreign origin or Host is refused before it) and in
//! front of grpc-web and the services. The hot paths never see this
//! module: they only fill the recorders of [`crate::metrics`].

use std::sync::Arc;
use std::sync::atomic::Ordering;

use http::header::HeaderValue;
use http::{Request, Response, StatusCode};

use crate::auth::AuthInterceptor;
use crate::connections::ConnectionStats;
use crate::manager::SessionManager;
use crate::metrics::{CONTENT_TYPE, Text};
use crate::plain::Responder;
use crate::rpc::Rpc;

/// Where the metrics are served.
pub const PATH: &str = "/metrics";

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
            "agent_harness_live_runs_limit",
            "Most CLI processes alive at once (--max-live-runs): a Start or respawning Send past it is refused.",
            self.manager.max_live_runs() as u64,
        );
        t.gauge(
            "agent_harness_idle_runs",
            "Keep-alive processes idle between turns now (at most --max-idle-runs).",
            self.manager.idle_runs() as u64,
        );
        t.gauge(
            "agent_harness_open_streams",
            "Subscribe and ReadFullEvent streams open now (at most --max-streams).",
            self.rpc.open_streams() as u64,
        );
        t.gauge(
            "agent_harness_open_streams_limit",
            "Most Subscribe and ReadFullEvent streams open at once (--max-streams).",
            self.rpc.max_streams() as u64,
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
        t.counter(
            "agent_harness_fenced_writes_total",
            "Writes (a session's part of a commit, a deletion) the shared store refused because this node no longer owns the session.",
            stats.fenced_writes,
        );
        t.counter(
            "agent_harness_rows_checked_total",
            "Stored rows a read checked decode before sending them as stored; a session's rows found to decode are not checked again while it is resident.",
            stats.rows_checked,
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
            "agent_harness_commits_handed_over_early_total",
            "Batches of CLI output handed to the event log's writer before the commit before them was answered.",
            m.early_commits.load(Ordering::Relaxed),
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
        t.gauge(
            "agent_harness_connections_limit",
            "Most connections open at once (--max-connections): one more is closed at once.",
            self.connections.max(),
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
