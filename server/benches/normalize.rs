//! The claude normalizer alone: CLI stdout lines in, event payloads out.
//!
//! `cargo bench -p agent-harness-server --bench normalize`
//!
//! Three line sets, each fed through one [`Normalizer`] in a loop:
//! - the load tool's assistant line (`tests/load/src/bin/load_cli.rs`: the
//!   first `assistant` line of `cassettes/plain_turn.cassette.jsonl` with
//!   its ids replaced and its text padded so the line is about 600 bytes,
//!   and 4 KiB),
//! - the load tool's `stream_event` text delta (`--deltas`),
//! - every `out` line of the claude cassettes (`cassettes/*.cassette.jsonl`)
//!   in order: a mix of init, assistant, user, result, stream and control
//!   lines.
//!
//! Each line is copied into a fresh `String` first, as the stdout reader
//! hands over a new one per line, and handed to the normalizer as the run
//! task hands it (`line_owned`). Prints lines/s and ns per line.

use std::time::{Duration, Instant};

use agent_harness_server::adapter::StdoutLine;
use agent_harness_server::normalize::Normalizer;
use serde_json::{Value, json};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../cassettes");

fn out_lines(path: &str) -> Vec<String> {
    let text = std::fs::read_to_string(path).expect("cassette");
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap_or("{}")).expect("header");
    if header["agent"].as_str().is_some_and(|a| a != "claude") {
        return Vec::new();
    }
    lines
        .filter_map(|l| {
            let rec: Value = serde_json::from_str(l).expect("record");
            (rec["dir"] == "out").then(|| rec["line"].as_str().unwrap_or("").to_owned())
        })
        .collect()
}

/// The load tool's assistant line, about `size` bytes.
fn load_assistant(size: usize) -> String {
    let recorded = out_lines(&format!("{ROOT}/plain_turn.cassette.jsonl"))
        .into_iter()
        .map(|l| serde_json::from_str::<Value>(&l).expect("line"))
        .find(|v| v["type"] == "assistant")
        .expect("an assistant line");
    let mut v = recorded;
    v["session_id"] = json!("load-0001-0000-4000-8000-000000000001");
    if v.get("uuid").is_some() {
        v["uuid"] = json!("00000000-0000-4000-8000-000000000001");
    }
    v["message"]["id"] = json!("msg_load_1");
    v["message"]["content"][0]["text"] = json!("");
    let bare = v.to_string().len();
    let mut text = format!("load 1 t={} ", 1_790_000_000_000_000_000u64);
    text.extend(std::iter::repeat_n(
        'x',
        size.saturating_sub(bare + text.len()),
    ));
    v["message"]["content"][0]["text"] = json!(text);
    v.to_string()
}

/// The load tool's text delta, with its 40-byte fragment.
fn load_delta() -> String {
    let recorded = out_lines(&format!(
        "{ROOT}/transcripts/partial_messages.transcript.jsonl"
    ))
    .into_iter()
    .map(|l| serde_json::from_str::<Value>(&l).expect("line"))
    .find(|v| v["type"] == "stream_event" && v["event"]["type"] == "content_block_delta")
    .expect("a recorded delta");
    let mut v = recorded;
    v["session_id"] = json!("load-0001-0000-4000-8000-000000000001");
    v["event"]["delta"]["text"] = json!(format!("{:0>40}", 1_790_000_000_000u64));
    v.to_string()
}

fn mix() -> Vec<String> {
    let mut files: Vec<_> = std::fs::read_dir(ROOT)
        .expect("cassettes")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".cassette.jsonl"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|p| out_lines(&p.to_string_lossy()))
        .collect()
}

/// Feeds `lines` round and round for about `budget`; (lines, elapsed).
fn run(lines: &[String], budget: Duration) -> (u64, Duration) {
    let mut n = Normalizer::new(10 << 20);
    let mut fed = 0u64;
    let mut events = 0usize;
    let start = Instant::now();
    while start.elapsed() < budget {
        for l in lines {
            let line = StdoutLine::Line(l.clone());
            events += std::hint::black_box(n.line_owned(line)).len();
            std::hint::black_box(n.take_partial());
            fed += 1;
        }
    }
    std::hint::black_box(events);
    (fed, start.elapsed())
}

fn main() {
    let budget = Duration::from_millis(
        std::env::var("NORMALIZE_BENCH_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(2_000),
    );
    let sets: Vec<(&str, Vec<String>)> = vec![
        ("load assistant line, 600 B", vec![load_assistant(600)]),
        ("load assistant line, 4 KiB", vec![load_assistant(4096)]),
        ("load stream_event text delta", vec![load_delta()]),
        ("claude cassettes, every out line", mix()),
    ];
    for (name, lines) in &sets {
        let bytes: usize = lines.iter().map(String::len).sum::<usize>() / lines.len();
        run(lines, budget / 10);
        let (fed, took) = run(lines, budget);
        let secs = took.as_secs_f64();
        println!(
            "{name} ({} lines, mean {bytes} B): {:.0} lines/s, {:.0} ns/line",
            lines.len(),
            fed as f64 / secs,
            secs * 1e9 / fed as f64
        );
    }
}
