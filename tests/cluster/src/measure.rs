//! `agent-harness-cluster measure`: what the cluster does per second and
//! how fast it fans out, through HAProxy, with one node and with three on
//! one PostgreSQL (docs/cluster.md, "Measured").
//!
//! - **Starts**: `clients` concurrent clients, each on its own connection,
//!   start `sessions` new sessions between them (cassette adapter, the
//!   routing header as every client helper sends it); after each Start is
//!   answered the same client subscribes and waits for the session's first
//!   event. Rates are sessions over the wall time until the last Start was
//!   answered, and until the last first event was seen.
//! - **Fan-out**: per round a new session plays its first turn; then
//!   `subscribers` Subscribe streams open through HAProxy without the
//!   routing header, so the balancer spreads them over the nodes (the
//!   owner serves some live, the others follow the shared store); once all
//!   are caught up the second turn is sent, and each subscriber records,
//!   for every event of that turn, the time from the event's commit stamp
//!   (`Event.time`, set by the owner when it sequenced the batch) to
//!   receipt. Every subscriber must see every event, gapless: that is the
//!   smoke mode's assertion; its timings are printed, never asserted.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use agent_harness_protocol::pb;
use pb::subscribe_response::Kind;

use crate::cluster::{Cluster, PATIENCE, Paths, connect};
use crate::proofs::{NODE_HEADER, new_session_id, routed, send, start};

/// The sizes of one measurement.
#[derive(Clone, Debug)]
pub struct Sizes {
    pub sessions: usize,
    pub clients: usize,
    pub subscribers: usize,
    pub rounds: usize,
}

impl Sizes {
    /// The smoke run: proves delivery in seconds.
    pub const SMOKE: Sizes = Sizes {
        sessions: 6,
        clients: 3,
        subscribers: 6,
        rounds: 1,
    };
    /// The measured run (docs/cluster.md).
    pub const FULL: Sizes = Sizes {
        sessions: 200,
        clients: 16,
        subscribers: 60,
        rounds: 5,
    };
}

/// What one cluster size gave.
#[derive(Debug)]
struct Row {
    nodes: usize,
    sessions: usize,
    clients: usize,
    starts_per_sec: f64,
    first_events_per_sec: f64,
    start_latency: Percentiles,
    first_event_latency: Percentiles,
    subscribers: usize,
    rounds: usize,
    /// Subscribe streams each node served, by node id.
    spread: Vec<(String, usize)>,
    fanout_events: usize,
    fanout: Percentiles,
}

#[derive(Debug, Clone, Copy)]
struct Percentiles {
    p50: Duration,
    p99: Duration,
    max: Duration,
}

impl Percentiles {
    fn of(mut samples: Vec<Duration>) -> Self {
        assert!(!samples.is_empty(), "no samples");
        samples.sort();
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Self {
            p50: at(0.5),
            p99: at(0.99),
            max: *samples.last().unwrap(),
        }
    }

    fn json(&self) -> String {
        format!(
            "{{\"p50_ms\": {:.3}, \"p99_ms\": {:.3}, \"max_ms\": {:.3}}}",
            ms(self.p50),
            ms(self.p99),
            ms(self.max)
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// `measure [--smoke] [--json FILE] [--nodes 1,3] [--sessions N]
/// [--clients N] [--subscribers N] [--rounds N]`.
pub async fn main(paths: &Paths, args: &[String]) {
    let mut sizes = if args.iter().any(|a| a == "--smoke") {
        Sizes::SMOKE
    } else {
        Sizes::FULL
    };
    let mut json = None;
    let mut node_counts = vec![1, 3];
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        let mut number = || -> usize {
            let v = value();
            v.parse()
                .unwrap_or_else(|_| panic!("{arg}: not a number: {v}"))
        };
        match arg.as_str() {
            "--smoke" => {}
            "--sessions" => sizes.sessions = number(),
            "--clients" => sizes.clients = number(),
            "--subscribers" => sizes.subscribers = number(),
            "--rounds" => sizes.rounds = number(),
            "--json" => json = Some(value().clone()),
            "--nodes" => {
                node_counts = value()
                    .split(',')
                    .map(|n| n.parse().expect("--nodes: numbers, e.g. 1,3"))
                    .collect()
            }
            other => panic!("measure: unknown argument {other}"),
        }
    }
    println!("measure: {sizes:?}");
    let mut rows = Vec::new();
    for &count in &node_counts {
        let c = Cluster::with_nodes(paths, count).await;
        println!(
            "{count} node(s) up: haproxy {}, nodes {}",
            c.haproxy.h2,
            c.nodes
                .iter()
                .map(|n| format!("{}={}", n.id, n.addr))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let row = measure(&c, &sizes).await;
        println!("{row:?}");
        rows.push(row);
    }
    print_table(&rows);
    if let Some(path) = json {
        std::fs::write(&path, to_json(&rows)).unwrap_or_else(|e| panic!("write {path}: {e}"));
        println!("measure: figures written to {path}");
    }
}

async fn measure(c: &Cluster, sizes: &Sizes) -> Row {
    let (starts_per_sec, first_events_per_sec, start_latency, first_event_latency) =
        starts(c, sizes).await;
    let mut samples = Vec::new();
    let mut spread: Vec<(String, usize)> = Vec::new();
    for _ in 0..sizes.rounds {
        let (round, nodes) = fanout_round(c, sizes.subscribers).await;
        samples.extend(round);
        for node in nodes {
            match spread.iter_mut().find(|(n, _)| *n == node) {
                Some((_, k)) => *k += 1,
                None => spread.push((node, 1)),
            }
        }
    }
    spread.sort();
    Row {
        nodes: c.nodes.len(),
        sessions: sizes.sessions,
        clients: sizes.clients,
        starts_per_sec,
        first_events_per_sec,
        start_latency,
        first_event_latency,
        subscribers: sizes.subscribers,
        rounds: sizes.rounds,
        spread,
        fanout_events: samples.len(),
        fanout: Percentiles::of(samples),
    }
}

/// Sessions started per second, and their first events seen per second.
async fn starts(c: &Cluster, sizes: &Sizes) -> (f64, f64, Percentiles, Percentiles) {
    let front = c.haproxy.h2;
    let left = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(sizes.sessions));
    let mut clients = Vec::new();
    // Connections first, so the clock measures Starts, not handshakes.
    let mut conns = Vec::new();
    for _ in 0..sizes.clients {
        conns.push(connect(front).await);
    }
    let t0 = Instant::now();
    for mut client in conns {
        let left = left.clone();
        clients.push(tokio::spawn(async move {
            // (Start answered, first event seen) since t0, and each latency.
            let mut out = Vec::new();
            while left
                .fetch_update(
                    std::sync::atomic::Ordering::SeqCst,
                    std::sync::atomic::Ordering::SeqCst,
                    |n| n.checked_sub(1),
                )
                .is_ok()
            {
                let sid = new_session_id();
                let begun = Instant::now();
                start(&mut client, &sid).await;
                let answered = Instant::now();
                let mut stream = client
                    .subscribe(routed(
                        &sid,
                        pb::SubscribeRequest {
                            session_id: sid.clone(),
                            after_seq: 0,
                            include_deltas: false,
                        },
                    ))
                    .await
                    .unwrap_or_else(|e| panic!("Subscribe {sid}: {e}"))
                    .into_inner();
                loop {
                    let msg = tokio::time::timeout(PATIENCE, stream.message())
                        .await
                        .unwrap_or_else(|_| panic!("{sid}: no first event"))
                        .unwrap_or_else(|e| panic!("{sid}: {e}"))
                        .unwrap_or_else(|| panic!("{sid}: stream ended before any event"));
                    if let Some(Kind::Event(e)) = msg.kind {
                        assert_eq!(e.seq, 1, "{sid}: the first event is seq 1");
                        break;
                    }
                }
                let seen = Instant::now();
                out.push((answered - t0, seen - t0, answered - begun, seen - begun));
            }
            out
        }));
    }
    let mut all = Vec::new();
    for client in clients {
        all.extend(client.await.expect("a client failed"));
    }
    assert_eq!(all.len(), sizes.sessions, "every session started");
    let last_answer = all.iter().map(|r| r.0).max().unwrap();
    let last_seen = all.iter().map(|r| r.1).max().unwrap();
    let n = sizes.sessions as f64;
    (
        n / last_answer.as_secs_f64(),
        n / last_seen.as_secs_f64(),
        Percentiles::of(all.iter().map(|r| r.2).collect()),
        Percentiles::of(all.iter().map(|r| r.3).collect()),
    )
}

/// One fan-out round: commit → receipt of every event of the second turn
/// at every subscriber, and the node that served each subscriber.
async fn fanout_round(c: &Cluster, subscribers: usize) -> (Vec<Duration>, Vec<String>) {
    let front = c.haproxy.h2;
    let sid = new_session_id();
    let mut control = connect(front).await;
    start(&mut control, &sid).await;
    // The first turn ends before anyone subscribes: each subscriber then
    // replays it and waits for the second, live.
    let head = follow(&mut control, &sid, 0).await.1;

    let mut followers = Vec::new();
    let mut ready = Vec::new();
    for i in 0..subscribers {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sid = sid.clone();
        ready.push(rx);
        followers.push(tokio::spawn(async move {
            // Its own connection and no routing header: HAProxy round-robins
            // the streams over the nodes.
            let mut client = connect(front).await;
            let answer = client
                .subscribe(pb::SubscribeRequest {
                    session_id: sid.clone(),
                    after_seq: head,
                    include_deltas: false,
                })
                .await
                .unwrap_or_else(|e| panic!("subscriber {i}: Subscribe {sid}: {e}"));
            let node = answer
                .metadata()
                .get(NODE_HEADER)
                .map(|v| v.to_str().unwrap_or("?").to_owned())
                .unwrap_or_else(|| "?".into());
            let mut stream = answer.into_inner();
            let mut ready = Some(tx);
            let mut last = head;
            let mut samples = Vec::new();
            loop {
                let msg = tokio::time::timeout(PATIENCE, stream.message())
                    .await
                    .unwrap_or_else(|_| panic!("subscriber {i} on {node}: nothing for a minute"))
                    .unwrap_or_else(|e| panic!("subscriber {i} on {node}: {e}"))
                    .unwrap_or_else(|| panic!("subscriber {i} on {node}: stream ended"));
                match msg.kind {
                    Some(Kind::CaughtUp(_)) => {
                        if let Some(tx) = ready.take() {
                            let _ = tx.send(());
                        }
                    }
                    Some(Kind::Event(e)) => {
                        let now = SystemTime::now();
                        assert_eq!(
                            e.seq,
                            last + 1,
                            "subscriber {i} on {node}: gap or duplicate"
                        );
                        last = e.seq;
                        samples.push(since_stamp(&e, now));
                        if matches!(e.payload, Some(pb::event::Payload::TurnEnd(_))) {
                            return (samples, node);
                        }
                    }
                    _ => {}
                }
            }
        }));
    }
    for r in ready {
        r.await.expect("a subscriber failed before caught_up");
    }
    send(&mut control, &sid).await;
    let (events, _) = follow(&mut control, &sid, head).await;
    let mut all = Vec::new();
    let mut nodes = Vec::new();
    for f in followers {
        let (samples, node) = f.await.expect("a subscriber failed");
        assert_eq!(
            samples.len(),
            events,
            "a subscriber on {node} saw {} of the turn's {events} events",
            samples.len()
        );
        all.extend(samples);
        nodes.push(node);
    }
    (all, nodes)
}

/// Follows `sid` (routed, on its owner) from `after_seq` to the next turn
/// end, replayed or live: the events it saw and the seq of that turn end.
async fn follow(
    client: &mut pb::session_service_client::SessionServiceClient<tonic::transport::Channel>,
    sid: &str,
    after_seq: u64,
) -> (usize, u64) {
    let mut stream = client
        .subscribe(routed(
            sid,
            pb::SubscribeRequest {
                session_id: sid.into(),
                after_seq,
                include_deltas: false,
            },
        ))
        .await
        .unwrap_or_else(|e| panic!("Subscribe {sid}: {e}"))
        .into_inner();
    let mut events = 0;
    loop {
        let msg = tokio::time::timeout(PATIENCE, stream.message())
            .await
            .unwrap_or_else(|_| panic!("{sid}: no turn end"))
            .unwrap_or_else(|e| panic!("{sid}: {e}"))
            .unwrap_or_else(|| panic!("{sid}: stream ended before the turn end"));
        if let Some(Kind::Event(e)) = msg.kind {
            events += 1;
            if matches!(e.payload, Some(pb::event::Payload::TurnEnd(_))) {
                return (events, e.seq);
            }
        }
    }
}

/// From the event's commit stamp to `now`; 0 if the clocks disagree (one
/// host: they cannot by more than the clock's resolution).
fn since_stamp(e: &pb::Event, now: SystemTime) -> Duration {
    let t = e.time.as_ref().expect("every event has a time");
    let stamp = UNIX_EPOCH + Duration::new(t.seconds as u64, t.nanos as u32);
    now.duration_since(stamp).unwrap_or_default()
}

fn print_table(rows: &[Row]) {
    println!();
    println!(
        "| nodes | sessions / clients | Starts answered /s | first events seen /s | Start p50 / p99 | first event p50 / p99 | subscribers × rounds (per node) | fan-out events | commit → receipt p50 / p99 / max |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {} / {} | {:.1} | {:.1} | {:.1} / {:.1} ms | {:.1} / {:.1} ms | {} × {} ({}) | {} | {:.1} / {:.1} / {:.1} ms |",
            r.nodes,
            r.sessions,
            r.clients,
            r.starts_per_sec,
            r.first_events_per_sec,
            ms(r.start_latency.p50),
            ms(r.start_latency.p99),
            ms(r.first_event_latency.p50),
            ms(r.first_event_latency.p99),
            r.subscribers,
            r.rounds,
            r.spread
                .iter()
                .map(|(n, k)| format!("{n} {k}"))
                .collect::<Vec<_>>()
                .join(", "),
            r.fanout_events,
            ms(r.fanout.p50),
            ms(r.fanout.p99),
            ms(r.fanout.max),
        );
    }
}

fn to_json(rows: &[Row]) -> String {
    let rows: Vec<String> = rows
        .iter()
        .map(|r| {
            let spread: Vec<String> = r
                .spread
                .iter()
                .map(|(n, k)| format!("\"{n}\": {k}"))
                .collect();
            format!(
                "  {{\"nodes\": {}, \"sessions\": {}, \"clients\": {}, \"starts_per_sec\": {:.2}, \
                 \"first_events_per_sec\": {:.2}, \"start_latency\": {}, \"first_event_latency\": {}, \
                 \"subscribers\": {}, \"rounds\": {}, \"spread\": {{{}}}, \"fanout_events\": {}, \
                 \"commit_to_receipt\": {}}}",
                r.nodes,
                r.sessions,
                r.clients,
                r.starts_per_sec,
                r.first_events_per_sec,
                r.start_latency.json(),
                r.first_event_latency.json(),
                r.subscribers,
                r.rounds,
                spread.join(", "),
                r.fanout_events,
                r.fanout.json()
            )
        })
        .collect();
    format!("[\n{}\n]\n", rows.join(",\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_rank_of_sorted_samples() {
        let samples = (1..=100).rev().map(Duration::from_millis).collect();
        let p = Percentiles::of(samples);
        assert_eq!(p.p50, Duration::from_millis(51));
        assert_eq!(p.p99, Duration::from_millis(99));
        assert_eq!(p.max, Duration::from_millis(100));
        assert_eq!(
            Percentiles::of(vec![Duration::from_millis(7)]).json(),
            "{\"p50_ms\": 7.000, \"p99_ms\": 7.000, \"max_ms\": 7.000}"
        );
    }
}
