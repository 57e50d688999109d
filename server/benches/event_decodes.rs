//! Whether a stored row decodes: a full `pb::Event::decode` against the
//! validator Subscribe and History use (`log::decodable::event_decodes`).
//!
//! `cargo bench -p agent-harness-server --bench event_decodes`
//!
//! Two sets of stored events, each encoded as the writer stores it:
//! - every `out` line of the claude cassettes (`cassettes/*.cassette.jsonl`)
//!   through the normalizer, in order: a mix of init, assistant, user,
//!   result and stream events, each with its CLI line;
//! - the event-log benches' event (`common::new_event`, ~200 B of text plus
//!   its CLI line).
//!
//! Each set is run round and round for the budget; prints ns per event
//! for each and the ratio. Not a timed assertion: figures to read.

mod common;

use std::time::{Duration, Instant};

use agent_harness_protocol::pb;
use agent_harness_server::adapter::StdoutLine;
use agent_harness_server::log::decodable::event_decodes;
use agent_harness_server::normalize::Normalizer;
use prost::Message;
use serde_json::Value;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../cassettes");

fn stored(seq: u64, run_id: String, cli_line: String, payload: pb::event::Payload) -> Vec<u8> {
    pb::Event {
        seq,
        session_id: "bench-session-0001".into(),
        run_id,
        time: Some(pbjson_types::Timestamp {
            seconds: 1_790_000_000,
            nanos: 123_456_789,
        }),
        cli_line,
        truncated: None,
        payload: Some(payload),
    }
    .encode_to_vec()
}

fn cassette_events() -> Vec<Vec<u8>> {
    let mut files: Vec<_> = std::fs::read_dir(ROOT)
        .expect("cassettes")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".cassette.jsonl"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("cassette");
        let mut lines = text.lines();
        let header: Value = serde_json::from_str(lines.next().unwrap_or("{}")).expect("header");
        if header["agent"].as_str().is_some_and(|a| a != "claude") {
            continue;
        }
        let mut n = Normalizer::new(10 << 20);
        for l in lines {
            let rec: Value = serde_json::from_str(l).expect("record");
            if rec["dir"] != "out" {
                continue;
            }
            let line = rec["line"].as_str().unwrap_or("").to_owned();
            for (payload, cli_line) in n.line_owned(StdoutLine::Line(line)) {
                out.push(stored(
                    out.len() as u64 + 1,
                    "run-1".into(),
                    cli_line,
                    payload,
                ));
            }
        }
    }
    out
}

/// Runs `check` over `events` round and round for about `budget`;
/// nanoseconds per event.
fn ns_per_event(events: &[Vec<u8>], budget: Duration, check: impl Fn(&[u8]) -> bool) -> f64 {
    let mut n = 0u64;
    let mut ok = 0usize;
    let start = Instant::now();
    while start.elapsed() < budget {
        for e in events {
            ok += usize::from(check(std::hint::black_box(e)));
            n += 1;
        }
    }
    assert_eq!(ok as u64, n, "every stored event decodes");
    start.elapsed().as_secs_f64() * 1e9 / n as f64
}

fn main() {
    let budget = Duration::from_millis(
        std::env::var("EVENT_DECODES_BENCH_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2_000),
    );
    let bench: Vec<Vec<u8>> = (0..1000)
        .map(|i| {
            let e = common::new_event(i);
            stored(i + 1, e.run_id, e.cli_line, e.payload)
        })
        .collect();
    let sets = [
        ("claude cassettes, every out line", cassette_events()),
        ("the log benches' event", bench),
    ];
    for (name, events) in &sets {
        let mean = events.iter().map(Vec::len).sum::<usize>() / events.len();
        let decode = |b: &[u8]| pb::Event::decode(b).is_ok();
        // Warm up both, then measure each twice, interleaved.
        ns_per_event(events, budget / 10, decode);
        ns_per_event(events, budget / 10, event_decodes);
        let mut figures = Vec::new();
        for _ in 0..2 {
            figures.push((
                ns_per_event(events, budget / 2, decode),
                ns_per_event(events, budget / 2, event_decodes),
            ));
        }
        let (d, v) = figures.iter().fold((f64::MAX, f64::MAX), |(d, v), (a, b)| {
            (d.min(*a), v.min(*b))
        });
        println!(
            "{name} ({} events, mean {mean} B): decode {d:.0} ns/event, validate {v:.0} ns/event \
             ({:.1}x; best of 2 each, all: {})",
            events.len(),
            d / v,
            figures
                .iter()
                .map(|(a, b)| format!("{a:.0}/{b:.0}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}
