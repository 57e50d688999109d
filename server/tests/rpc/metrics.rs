//! `GET /metrics` on the serving port: Prometheus text that follows a
//! scripted run (events appended, live runs, streams, commit and lag
//! histograms), behind the same token and origin/Host rules as the RPCs.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use crate::support::probe::Probe;
use crate::support::server::*;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::ServeOptions;
use agent_harness_server::connections::ConnectionLimits;
use agent_harness_server::manager::ManagerOptions;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::transport::Channel;

/// The series a histogram family adds to its name.
const HISTOGRAM_SERIES: [&str; 3] = ["_bucket", "_sum", "_count"];

/// One HTTP/1.1 response, split up.
pub(crate) struct Http {
    pub(crate) status: u16,
    /// Header lines, lowercased.
    pub(crate) head: String,
    pub(crate) body: String,
}

/// `GET path` over a fresh TCP connection, naming `host`, with `extra`
/// header lines (each ending in CRLF).
pub(crate) async fn get_with(addr: SocketAddr, path: &str, host: &str, extra: &str) -> Http {
    request(addr, "GET", path, host, extra).await
}

/// `METHOD path` over a fresh TCP connection, naming `host`, with `extra`
/// header lines (each ending in CRLF) and no body.
pub(crate) async fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    extra: &str,
) -> Http {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Length: 0\r\nConnection: close\r\n\r\n"
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(WAIT, tcp.read_to_end(&mut raw))
        .await
        .expect("response in time")
        .unwrap();
    let raw = String::from_utf8(raw).expect("utf-8 response");
    let (head, body) = raw.split_once("\r\n\r\n").expect("a head and a body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("status line: {head}"));
    Http {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

/// `GET /metrics` from a loopback client with `extra` headers.
async fn scrape_with(addr: SocketAddr, extra: &str) -> Http {
    get_with(addr, "/metrics", &addr.to_string(), extra).await
}

/// A successful scrape, parsed into series (`name{labels}`) and values;
/// every line is checked against the text format on the way.
async fn scrape(addr: SocketAddr) -> BTreeMap<String, f64> {
    let resp = scrape_with(addr, "").await;
    assert_eq!(resp.status, 200, "{}\n{}", resp.head, resp.body);
    assert!(
        resp.head
            .contains("content-type: text/plain; version=0.0.4"),
        "{}",
        resp.head
    );
    parse(&resp.body)
}

/// The exposition text as series → value; panics on a malformed line or a
/// sample without its `# TYPE`.
fn parse(text: &str) -> BTreeMap<String, f64> {
    let mut typed = Vec::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("# TYPE name kind");
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            typed.push(name.to_owned());
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').expect("series value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("value of {line:?}"));
        let name = series.split('{').next().unwrap();
        let family = HISTOGRAM_SERIES
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .filter(|f| typed.iter().any(|t| t == f))
            .unwrap_or(name);
        assert!(
            typed.iter().any(|t| t == family),
            "{line}: no # TYPE before it"
        );
        assert!(
            samples.insert(series.to_owned(), value).is_none(),
            "{series} twice"
        );
    }
    samples
}

fn value(m: &BTreeMap<String, f64>, series: &str) -> f64 {
    *m.get(series)
        .unwrap_or_else(|| panic!("{series} missing from {m:#?}"))
}

/// A histogram's cumulative buckets (ascending `le`, `+Inf` last), sum and
/// count, checked for consistency.
fn histogram(m: &BTreeMap<String, f64>, name: &str) -> (Vec<(f64, f64)>, f64, f64) {
    let prefix = format!("{name}_bucket{{le=\"");
    let mut buckets: Vec<(f64, f64)> = m
        .iter()
        .filter_map(|(k, v)| {
            let le = k.strip_prefix(&prefix)?.strip_suffix("\"}")?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().unwrap()
            };
            Some((le, *v))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert!(buckets.len() > 1, "{name}: buckets");
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "{name}: cumulative"
    );
    let (sum, count) = (
        value(m, &format!("{name}_sum")),
        value(m, &format!("{name}_count")),
    );
    let last = buckets.last().unwrap();
    assert_eq!(last.0, f64::INFINITY, "{name}: +Inf last");
    assert_eq!(last.1, count, "{name}: +Inf equals _count");
    (buckets, sum, count)
}

#[tokio::test]
async fn metrics_follow_a_run_over_http1() {
    let server = TestServer::start().await;
    let m = scrape(server.addr).await;
    assert_eq!(value(&m, "agent_harness_live_runs"), 0.0);
    assert_eq!(value(&m, "agent_harness_events_appended_total"), 0.0);
    assert_eq!(value(&m, "agent_harness_storage_ok"), 1.0);

    let mut c = server.client().await;
    let (mut sub, _) = first_turn(&mut c, "m1", "hi").await;
    let m = scrape(server.addr).await;
    assert_eq!(
        value(&m, "agent_harness_live_runs"),
        1.0,
        "a keep-alive run"
    );
    assert_eq!(value(&m, "agent_harness_open_streams"), 1.0);
    assert_eq!(value(&m, "agent_harness_subscribers"), 1.0);
    let appended = value(&m, "agent_harness_events_appended_total");
    assert!(appended >= sub.events.len() as f64, "{appended}");
    let commits = value(&m, "agent_harness_commits_total");
    assert!(commits > 0.0);
    assert!(value(&m, "agent_harness_resident_sessions") >= 1.0);
    assert!(value(&m, "agent_harness_window_events") >= sub.events.len() as f64);

    let (_, events, count) = histogram(&m, "agent_harness_commit_batch_events");
    assert_eq!(count, commits, "one observation per commit");
    assert_eq!(events, appended, "batch sizes add up to the events");
    let (buckets, seconds, count) = histogram(&m, "agent_harness_commit_duration_seconds");
    assert_eq!(count, commits);
    assert!(seconds >= 0.0);
    assert!(buckets.iter().any(|(le, _)| *le < 0.001), "sub-ms buckets");
    // The live subscriber saw new heads while the turn ran.
    let (_, lag, count) = histogram(&m, "agent_harness_subscriber_lag_events");
    assert!(count > 0.0, "lag observed");
    assert!(
        lag >= count,
        "each observation is at least one event behind"
    );

    // The scripted CLI exits on this turn: the run ends.
    send(&mut c, "m1", "CRASH").await.unwrap();
    sub.until("run_end", is_run_end).await;
    // The run's permit is released before its run_end is appended.
    let m = scrape(server.addr).await;
    assert_eq!(value(&m, "agent_harness_live_runs"), 0.0);
    let head = sub.events.last().unwrap().seq as f64;
    assert!(value(&m, "agent_harness_events_appended_total") >= head);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn metrics_need_the_token() {
    let server = TestServer::serving(ServeOptions {
        auth_token: Some("s3cret-token".into()),
        ..ServeOptions::default()
    })
    .await;
    for extra in [
        "",
        "Authorization: Bearer nope\r\n",
        "Authorization: s3cret-token\r\n",
    ] {
        let resp = scrape_with(server.addr, extra).await;
        assert_eq!(resp.status, 401, "{extra:?}: {}", resp.head);
        assert!(
            resp.head.contains("www-authenticate: bearer"),
            "{}",
            resp.head
        );
        assert!(!resp.body.contains("agent_harness_"), "{}", resp.body);
    }
    let resp = scrape_with(server.addr, "Authorization: Bearer s3cret-token\r\n").await;
    assert_eq!(resp.status, 200, "{}", resp.head);
    let m = parse(&resp.body);
    assert_eq!(value(&m, "agent_harness_live_runs"), 0.0);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn metrics_refuse_a_foreign_origin_or_host() {
    let server = TestServer::start().await;
    let host = server.addr.to_string();
    for (host, extra) in [
        (host.as_str(), "Origin: http://evil.example\r\n"),
        (host.as_str(), "Origin: null\r\n"),
        ("evil.example", ""),
    ] {
        let resp = get_with(server.addr, "/metrics", host, extra).await;
        assert_eq!(resp.status, 403, "{host} {extra:?}: {}", resp.head);
        assert!(!resp.body.contains("agent_harness_"), "{}", resp.body);
        assert!(
            !resp.head.contains("access-control-allow-origin"),
            "{}",
            resp.head
        );
    }
    // The control: a loopback page passes the same checks.
    let resp = get_with(
        server.addr,
        "/metrics",
        &host,
        "Origin: http://localhost:5173\r\n",
    )
    .await;
    assert_eq!(resp.status, 200, "{}", resp.head);
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn other_paths_and_no_metrics_serve_no_metrics() {
    let server = TestServer::start().await;
    let host = server.addr.to_string();
    // Only GET /metrics: any other plain GET is the web console's, which
    // knows no such path.
    for path in ["/metrics/", "/metricsx"] {
        let resp = get_with(server.addr, path, &host, "").await;
        assert_eq!(resp.status, 404, "{path}: {}", resp.head);
        assert!(!resp.body.contains("agent_harness_"), "{}", resp.body);
    }
    server.shutdown().await.unwrap();

    let server = TestServer::serving(ServeOptions {
        metrics: false,
        ..ServeOptions::default()
    })
    .await;
    let resp = scrape_with(server.addr, "").await;
    assert_eq!(resp.status, 404, "{}", resp.head);
    assert!(!resp.body.contains("agent_harness_"), "{}", resp.body);
    server.shutdown().await.unwrap();
}

/// The metric families a scrape declares (its `# TYPE` lines).
fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|rest| rest.split(' ').next().unwrap().to_owned())
        .collect()
}

/// Every `agent_harness_*` name in `text`, a histogram's `_bucket`, `_sum`
/// and `_count` series named by their family.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("agent_harness_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let family = HISTOGRAM_SERIES
            .iter()
            .find_map(|s| name.strip_suffix(s))
            .unwrap_or(name);
        // Prose about the prefix itself (`agent_harness_*`) names nothing.
        if family != "agent_harness_" {
            names.insert(family.to_owned());
        }
        rest = &tail[end..];
    }
    names
}

/// The limits are served beside what they limit (what the alert rules
/// compare), and the metrics docs/operations.md documents and the alert
/// rules of deploy/alerts.yml name are exactly ones a server serves: a
/// metric renamed or dropped fails here, not in an operator's silent alert.
#[tokio::test]
async fn limits_are_served_and_docs_and_alert_rules_name_served_metrics() {
    let server = TestServer::with(
        Default::default(),
        ManagerOptions {
            max_live_runs: 7,
            ..fast_opts()
        },
        ServeOptions {
            max_streams: 77,
            connections: ConnectionLimits {
                max_connections: 99,
                ..ConnectionLimits::default()
            },
            ..ServeOptions::default()
        },
    )
    .await;
    let resp = scrape_with(server.addr, "").await;
    assert_eq!(resp.status, 200, "{}", resp.head);
    let m = parse(&resp.body);
    assert_eq!(value(&m, "agent_harness_live_runs_limit"), 7.0);
    assert_eq!(value(&m, "agent_harness_open_streams_limit"), 77.0);
    assert_eq!(value(&m, "agent_harness_connections_limit"), 99.0);
    let served = families(&resp.body);
    server.shutdown().await.unwrap();

    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let ops = std::fs::read_to_string(root.join("docs/operations.md")).unwrap();
    // The metrics table: from its header to the first line that is not a row.
    let table: String = ops
        .lines()
        .skip_while(|l| !l.starts_with("| Metric |"))
        .take_while(|l| l.starts_with('|'))
        .map(|l| l.split('|').nth(1).unwrap_or_default().to_owned() + "\n")
        .collect();
    let documented = metric_names(&table);
    assert_eq!(
        documented, served,
        "docs/operations.md's metrics table against a scrape"
    );

    let alerts = std::fs::read_to_string(root.join("deploy/alerts.yml")).unwrap();
    let named = metric_names(&alerts);
    assert!(named.len() >= 8, "{named:?}");
    let unknown: Vec<_> = named.difference(&served).collect();
    assert!(unknown.is_empty(), "deploy/alerts.yml names {unknown:?}");
}

/// Lines the scripted CLI's FLOOD turns write.
const FLOOD_LINES: usize = 3000;

/// A session whose store takes 30 ms a commit (the scripted CLI writes a
/// whole batch's lines meanwhile), sent `text` (a FLOOD turn) after its
/// first turn and followed until `until` holds.
struct Flooded {
    /// Kept so the server runs until the test ends.
    _server: TestServer,
    client: SessionServiceClient<Channel>,
    /// The first turn's last seq: where the subscription started.
    head: u64,
    sub: Sub,
    /// The session's whole log once `until` held.
    events: Vec<pb::Event>,
}

impl Flooded {
    /// Runs the flood; asserts that batches were handed over early
    /// meanwhile (the counter rose).
    async fn run(session: &str, text: &str, what: &str, until: fn(&pb::Event) -> bool) -> Self {
        let store = Probe::slow(std::time::Duration::from_millis(30));
        let server = TestServer::on_store(std::sync::Arc::new(store)).await;
        let mut client = server.client().await;
        let (first, _) = first_turn(&mut client, session, "hi").await;
        let head = first.events.last().expect("the first turn's events").seq;
        let early = || async {
            value(
                &scrape(server.addr).await,
                "agent_harness_commits_handed_over_early_total",
            )
        };
        let before = early().await;
        let mut sub = Sub::open(&mut client, session, head).await;
        send(&mut client, session, text).await.unwrap();
        sub.until(what, until).await;
        assert!(
            early().await > before,
            "no batch of the {FLOOD_LINES} lines was handed over early"
        );
        let events = history_all(&mut client, session).await;
        Flooded {
            _server: server,
            client,
            head,
            sub,
            events,
        }
    }

    /// The flood's lines in the log, in order.
    fn lines(&self) -> Vec<&str> {
        self.events
            .iter()
            .filter_map(text_of)
            .filter(|t| t.starts_with("flood "))
            .collect()
    }
}

/// A lone session writing faster than its store commits: a batch read
/// ahead while the one before it is being committed goes to the writer
/// before that commit is answered (counted), and the log still holds every
/// line once, in order, with the turn ending once.
#[tokio::test]
async fn a_lone_session_writing_fast_hands_its_batches_over_early_in_order() {
    let text = format!("FLOOD {FLOOD_LINES}");
    let mut f = Flooded::run("flood", &text, "the flood's turn_end", is_turn_end).await;
    let events = &f.events;
    assert!(
        events.windows(2).all(|w| w[1].seq == w[0].seq + 1),
        "consecutive seqs"
    );
    let want: Vec<String> = (0..FLOOD_LINES).map(|i| format!("flood {i}")).collect();
    assert_eq!(f.lines(), want, "every line once, in order");
    let ends = events.iter().filter(|e| is_turn_end(e)).count();
    assert_eq!(ends, 2, "the first turn's end and the flood's, once each");
    let end = f.sub.events.last().expect("the flood's events").seq;
    let streamed: Vec<&pb::Event> = events
        .iter()
        .filter(|e| e.seq > f.head && e.seq <= end)
        .collect();
    assert!(
        streamed.iter().copied().eq(f.sub.events.iter()),
        "the stream saw what History holds"
    );
    assert_derived_matches_log(&mut f.client, "flood").await;
}

/// The text of a content event's first block.
fn text_of(e: &pb::Event) -> Option<&str> {
    match &e.payload {
        Some(Payload::Content(c)) => c.blocks.first().map(|b| b.text.as_str()),
        _ => None,
    }
}

/// A hostile CLI line after batches handed over early: a CLI that floods
/// content and then reports a permission mode the policy does not allow
/// is still stopped with a policy error. That line's batch is not plain, so
/// it waits for the commits before it and is checked before its own.
#[tokio::test]
async fn a_mode_beyond_the_policy_after_a_flood_is_still_refused() {
    let text = format!("FLOOD {FLOOD_LINES} MODE bypassPermissions");
    let f = Flooded::run("escalate", &text, "run_end", is_run_end).await;
    assert_eq!(
        f.lines().len(),
        FLOOD_LINES,
        "every line before the mode's report"
    );
    assert_stopped_by_policy_after_mode(&f.events, "bypassPermissions");
}
