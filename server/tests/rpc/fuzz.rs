//! Fuzzing on stable Rust, driven by proptest.
//!
//! - **CLI lines:** every stdout line of the real CLI recordings
//!   (cassettes/transcripts, the same files as the shared cli-transcripts)
//!   is mutated: cut at a byte, bytes flipped, inserted or deleted (invalid
//!   UTF-8 made lossy the way the adapter reads it), a JSON value swapped for
//!   another type, keys dropped or written twice, deep nesting, huge
//!   numbers. The normalizer never panics; a line that is not a JSON object
//!   with a string `type` yields exactly one `run_error{kind: "bad_line"}`;
//!   and bad lines interleaved into a recording change nothing about how its
//!   real lines normalize.
//! - **Deep, wide and huge JSON:** tool inputs, tool_use_results and
//!   permission inputs nested up to 400 levels, 64 keys wide, with strings
//!   past the per-event budget, through the normalizer, the log and a real
//!   redb file: every event reads back decodable (never `unreadable`), its
//!   JSON within the nesting bound, the marked text giving back the rest.
//! - **Requests:** random calls through the real gRPC service (in-process
//!   server, scripted adapter) with random ids (any unicode, 0..300 chars),
//!   StartConfig fields (NUL, `-`-prefixed, large), Send input and content
//!   blocks, History bounds and Subscribe cursors. Every call answers OK or
//!   a typed error a client can act on, never INTERNAL/UNKNOWN, never hangs,
//!   and the server still serves afterwards.
//!
//! Case counts are sized for a loaded 2-core CI machine; set
//! `PROPTEST_CASES` to run more (it scales every test here). The seed is
//! fixed so a CI run is reproducible; set `PROPTEST_RNG_SEED=<u64>` to
//! explore other inputs.

// Requests are built with `..Default::default()` so fields added to the
// proto later (e.g. idempotency keys) keep this file compiling.
#![allow(clippy::needless_update)]

use crate::support::common;
use crate::support::server;

use std::path::PathBuf;
use std::time::Duration;

use agent_harness_protocol::pb::{self, event::Payload, subscribe_response::Kind};
use agent_harness_server::adapter::StdoutLine;
use agent_harness_server::normalize::Normalizer;
use agent_harness_server::supervise::DEFAULT_MAX_LINE_BYTES;
use common::cassettes_dir;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use serde_json::Value;
use server::TestServer;
use tonic::Code;

/// `default` cases (sized per test: cheap tests run more), or
/// `PROPTEST_CASES` when set.
fn config(default: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    Config {
        cases,
        // Failures are reported with their minimal input; no regression
        // files are written into the tree.
        failure_persistence: None,
        rng_seed: if std::env::var_os("PROPTEST_RNG_SEED").is_some() {
            Config::default().rng_seed
        } else {
            proptest::test_runner::RngSeed::Fixed(0x0a6e_47ab)
        },
        ..Config::default()
    }
}

/// One recording: its stdout lines in order, with whether a user message was
/// written to stdin just before each (the normalizer's `input_sent`).
struct Recording {
    name: String,
    lines: Vec<(bool, String)>,
}

fn recordings() -> Vec<Recording> {
    let dir: PathBuf = cassettes_dir().join("transcripts");
    let mut out = Vec::new();
    for name in common::file_stems(&dir, ".transcript.jsonl") {
        let text = std::fs::read_to_string(dir.join(format!("{name}.transcript.jsonl"))).unwrap();
        let mut lines = Vec::new();
        let mut input = false;
        for rec in text.lines() {
            let rec: Value = serde_json::from_str(rec).unwrap();
            let line = rec.get("line").and_then(Value::as_str).unwrap_or("");
            match rec["dir"].as_str() {
                Some("in") => {
                    let v: Value = serde_json::from_str(line).unwrap_or(Value::Null);
                    input |= v["type"] == "user";
                }
                Some("out") => {
                    lines.push((std::mem::take(&mut input), line.to_owned()));
                }
                _ => {}
            }
        }
        out.push(Recording { name, lines });
    }
    assert!(out.len() >= 20, "recordings found: {}", out.len());
    out
}

fn all_lines(recs: &[Recording]) -> Vec<String> {
    recs.iter()
        .flat_map(|r| r.lines.iter().map(|(_, l)| l.clone()))
        .filter(|l| !l.trim().is_empty())
        .collect()
}

// ---------------------------------------------------------------------------
// Mutations
// ---------------------------------------------------------------------------

/// One edit of a line. Indices are taken modulo the current length.
#[derive(Debug, Clone)]
enum Mutation {
    Truncate(usize),
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize),
    /// Replace the n-th JSON value (pre-order) with another of a new type.
    Retype(usize, Replacement),
    /// Remove the n-th object key (pre-order over objects' keys).
    DropKey(usize),
    /// Write the n-th object's first key twice (textually).
    DuplicateKey(usize),
    /// Wrap the n-th value in `depth` arrays.
    Nest(usize, usize),
}

#[derive(Debug, Clone)]
enum Replacement {
    Null,
    Bool(bool),
    Number(f64),
    /// A number literal too large for any integer type (or for f64).
    HugeNumber(String),
    Text(String),
    EmptyObject,
    EmptyArray,
}

impl Replacement {
    /// The JSON text of the replacement.
    fn text(&self) -> String {
        match self {
            Self::Null => "null".into(),
            Self::Bool(b) => b.to_string(),
            Self::Number(n) => Value::from(*n).to_string(),
            Self::HugeNumber(s) => s.clone(),
            Self::Text(s) => Value::from(s.as_str()).to_string(),
            Self::EmptyObject => "{}".into(),
            Self::EmptyArray => "[]".into(),
        }
    }
}

fn replacement() -> impl Strategy<Value = Replacement> {
    prop_oneof![
        Just(Replacement::Null),
        any::<bool>().prop_map(Replacement::Bool),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Replacement::Number),
        prop_oneof![
            "[1-9][0-9]{20,400}",
            "-[1-9][0-9]{20,40}",
            "1e[3-9][0-9]{2}",
            "-1e-[3-9][0-9]{2}",
        ]
        .prop_map(Replacement::HugeNumber),
        "\\PC{0,40}".prop_map(Replacement::Text),
        Just(Replacement::EmptyObject),
        Just(Replacement::EmptyArray),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let idx = any::<usize>();
    prop_oneof![
        idx.prop_map(Mutation::Truncate),
        (idx, any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (idx, any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        idx.prop_map(Mutation::Delete),
        (idx, replacement()).prop_map(|(i, r)| Mutation::Retype(i, r)),
        idx.prop_map(Mutation::DropKey),
        idx.prop_map(Mutation::DuplicateKey),
        (
            idx,
            prop_oneof![1usize..40, 100usize..200, 5000usize..20000]
        )
            .prop_map(|(i, d)| Mutation::Nest(i, d)),
    ]
}

/// Serializes `v` writing the `target`-th value (pre-order) through `edit`,
/// which gets the value's own text and returns what to write instead.
fn rewrite(
    v: &Value,
    target: usize,
    counter: &mut usize,
    edit: &dyn Fn(&Value) -> String,
) -> String {
    let me = *counter;
    *counter += 1;
    if me == target {
        return edit(v);
    }
    match v {
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|i| rewrite(i, target, counter, edit))
                .collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => {
            let parts: Vec<String> = map
                .iter()
                .map(|(k, i)| {
                    format!(
                        "{}:{}",
                        Value::from(k.as_str()),
                        rewrite(i, target, counter, edit)
                    )
                })
                .collect();
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

fn count_values(v: &Value) -> usize {
    1 + match v {
        Value::Array(items) => items.iter().map(count_values).sum(),
        Value::Object(map) => map.values().map(count_values).sum(),
        _ => 0,
    }
}

fn apply(line: &str, m: &Mutation) -> String {
    let mut bytes = line.as_bytes().to_vec();
    let len = bytes.len().max(1);
    let json = || serde_json::from_str::<Value>(line).ok();
    match m {
        Mutation::Truncate(i) => bytes.truncate(i % len),
        Mutation::Flip(i, b) => {
            if let Some(x) = bytes.get_mut(i % len) {
                *x ^= b | 1;
            }
        }
        Mutation::Insert(i, b) => bytes.insert(i % (bytes.len() + 1), *b),
        Mutation::Delete(i) => {
            if !bytes.is_empty() {
                bytes.remove(i % len);
            }
        }
        Mutation::Retype(i, r) => {
            if let Some(v) = json() {
                let n = count_values(&v);
                return rewrite(&v, i % n, &mut 0, &|_| r.text());
            }
        }
        Mutation::Nest(i, depth) => {
            if let Some(v) = json() {
                let n = count_values(&v);
                return rewrite(&v, i % n, &mut 0, &|inner| {
                    format!("{}{}{}", "[".repeat(*depth), inner, "]".repeat(*depth))
                });
            }
        }
        Mutation::DropKey(i) | Mutation::DuplicateKey(i) => {
            if let Some(v) = json() {
                let objects = count_objects(&v);
                if objects > 0 {
                    let drop = matches!(m, Mutation::DropKey(_));
                    let target = i % objects;
                    let mut seen = 0;
                    return edit_object(&v, target, &mut seen, drop);
                }
            }
        }
    }
    // The adapter reads stdout as bytes and decodes lossily.
    String::from_utf8_lossy(&bytes).into_owned()
}

fn count_objects(v: &Value) -> usize {
    match v {
        Value::Array(items) => items.iter().map(count_objects).sum(),
        Value::Object(map) => 1 + map.values().map(count_objects).sum::<usize>(),
        _ => 0,
    }
}

/// Serializes `v`, dropping the first key of (or duplicating, with another
/// value, the first key of) the `target`-th object.
fn edit_object(v: &Value, target: usize, seen: &mut usize, drop: bool) -> String {
    match v {
        Value::Array(items) => {
            let parts: Vec<String> = items
                .iter()
                .map(|i| edit_object(i, target, seen, drop))
                .collect();
            format!("[{}]", parts.join(","))
        }
        Value::Object(map) => {
            let me = *seen == target;
            *seen += 1;
            let mut parts: Vec<String> = map
                .iter()
                .map(|(k, i)| {
                    format!(
                        "{}:{}",
                        Value::from(k.as_str()),
                        edit_object(i, target, seen, drop)
                    )
                })
                .collect();
            if me && !parts.is_empty() {
                if drop {
                    parts.remove(0);
                } else if let Some((k, _)) = map.iter().next() {
                    parts.push(format!("{}:[null]", Value::from(k.as_str())));
                }
            }
            format!("{{{}}}", parts.join(","))
        }
        other => other.to_string(),
    }
}

/// The normalizer's contract for a line it cannot read: not JSON (at any
/// depth: the normalizer reads lines nested past serde_json's default
/// limit), not an object, or no string `type`.
fn is_unreadable(text: &str) -> bool {
    let text = text.to_owned();
    on_big_stack(move || match parse_any_depth(&text) {
        Some(Value::Object(obj)) => !obj.get("type").is_some_and(Value::is_string),
        _ => true,
    })
}

/// Runs `f` on a thread with stack enough to parse and drop the deepest
/// JSON these tests make (serde_json recurses once per level).
fn on_big_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(512 << 20)
        .spawn(f)
        .expect("spawn a big-stack thread")
        .join()
        .expect("the big-stack thread")
}

/// `text` as JSON at any depth (call it [`on_big_stack`]); `None` if it is
/// not JSON.
fn parse_any_depth(text: &str) -> Option<Value> {
    use serde::Deserialize;
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let v = Value::deserialize(&mut de).ok()?;
    de.end().ok()?;
    Some(v)
}

fn run_error_kind(p: &Payload) -> Option<&str> {
    match p {
        Payload::RunError(e) => Some(e.kind.as_str()),
        _ => None,
    }
}

/// Checks one normalized line against the contract.
fn check_line(text: &str, out: &[(Payload, String)]) -> Result<(), TestCaseError> {
    if text.trim().is_empty() {
        prop_assert!(out.is_empty(), "blank line yielded {out:?}");
        return Ok(());
    }
    if text.len() > DEFAULT_MAX_LINE_BYTES {
        prop_assert_eq!(out.len(), 1);
        prop_assert_eq!(run_error_kind(&out[0].0), Some("line_too_large"));
        return Ok(());
    }
    if is_unreadable(text) {
        prop_assert_eq!(out.len(), 1, "one event for a bad line: {:?}", out);
        prop_assert_eq!(run_error_kind(&out[0].0), Some("bad_line"), "{:?}", out);
        prop_assert_eq!(out[0].1.as_str(), text, "the bad line is kept whole");
    } else {
        for (_, cli_line) in out {
            prop_assert_eq!(cli_line.as_str(), text, "every event keeps its line");
        }
    }
    Ok(())
}

/// Any single line, mutated 1..4 times, fed to a normalizer that has seen
/// a prefix of a real run: no panic, and the contract above.
#[test]
fn mutated_cli_lines_never_panic_and_bad_ones_are_bad_line() {
    let recs = recordings();
    let lines = all_lines(&recs);
    let mut runner = TestRunner::new(config(2000));
    let strategy = (
        0..lines.len(),
        proptest::collection::vec(mutation(), 1..4),
        0..recs.len(),
        0usize..60,
    );
    runner
        .run(&strategy, |(i, muts, rec, prefix)| {
            let mut n = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
            for (input, l) in recs[rec].lines.iter().take(prefix) {
                if *input {
                    n.input_sent();
                }
                let _ = n.line(&StdoutLine::Line(l.clone()));
            }
            let mut text = lines[i].clone();
            for m in &muts {
                text = apply(&text, m);
            }
            let out = n.line(&StdoutLine::Line(text.clone()));
            check_line(&text, &out)
        })
        .unwrap();
}

/// Raw bytes (invalid UTF-8 included, decoded lossily like the adapter
/// does) and oversized heads: never a panic, always a defined outcome.
#[test]
fn random_bytes_and_too_long_heads_never_panic() {
    let mut runner = TestRunner::new(config(1000));
    let strategy = (
        proptest::collection::vec(any::<u8>(), 0..400),
        any::<bool>(),
        0usize..10_000_000,
    );
    runner
        .run(&strategy, |(bytes, too_long, len)| {
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let mut n = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
            if too_long {
                let out = n.line(&StdoutLine::TooLong { head: text, len });
                prop_assert_eq!(out.len(), 1);
                prop_assert_eq!(run_error_kind(&out[0].0), Some("line_too_large"));
            } else {
                let out = n.line(&StdoutLine::Line(text.clone()));
                check_line(&text, &out)?;
            }
            Ok(())
        })
        .unwrap();
}

/// A whole recording with mutated lines slipped in at random places: each
/// unreadable one is one `bad_line` event, and every real line normalizes
/// exactly as it does without them (the run goes on, no state is touched).
#[test]
fn bad_lines_interleaved_into_a_real_run_change_nothing_else() {
    let recs = recordings();
    let lines = all_lines(&recs);
    let mut runner = TestRunner::new(config(600));
    let strategy = (
        0..recs.len(),
        proptest::collection::vec(
            (
                any::<usize>(),
                0..lines.len(),
                proptest::collection::vec(mutation(), 1..3),
            ),
            1..12,
        ),
    );
    runner
        .run(&strategy, |(rec, inserts)| {
            let rec = &recs[rec];
            // Only lines the normalizer must refuse are inserted: a valid
            // mutated line is a legitimate (if odd) CLI message and may
            // change state.
            let mut junk: Vec<(usize, String)> = inserts
                .iter()
                .map(|(at, src, muts)| {
                    let mut t = lines[*src].clone();
                    for m in muts {
                        t = apply(&t, m);
                    }
                    (at % (rec.lines.len() + 1), t)
                })
                .filter(|(_, t)| {
                    !t.trim().is_empty() && t.len() <= DEFAULT_MAX_LINE_BYTES && is_unreadable(t)
                })
                .collect();
            junk.sort_by_key(|(at, _)| *at);

            let mut clean = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
            let mut fuzzed = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
            let mut pending = junk.iter().peekable();
            for (pos, (input, line)) in rec.lines.iter().enumerate() {
                while let Some((_, bad)) = pending.next_if(|(at, _)| *at == pos) {
                    let out = fuzzed.line(&StdoutLine::Line(bad.clone()));
                    check_line(bad, &out)?;
                }
                if *input {
                    clean.input_sent();
                    fuzzed.input_sent();
                }
                let want = clean.line(&StdoutLine::Line(line.clone()));
                let got = fuzzed.line(&StdoutLine::Line(line.clone()));
                prop_assert_eq!(got, want, "{} line {}", &rec.name, pos);
            }
            for (_, bad) in pending {
                let out = fuzzed.line(&StdoutLine::Line(bad.clone()));
                check_line(bad, &out)?;
            }
            Ok(())
        })
        .unwrap();
}

// ---------------------------------------------------------------------------
// Deep, wide and huge JSON: normalizer → store → read
// ---------------------------------------------------------------------------

/// A JSON value shaped by the fuzz: a spine `depth` containers deep (every
/// `list_every`-th level a one-element array, the rest objects), each
/// object with `width` sibling keys, the bottom a string of `huge` bytes
/// and `extra` (any small value). Built from the inside out, so any depth.
fn shaped(depth: usize, width: usize, huge: usize, list_every: usize, extra: Value) -> Value {
    let mut v = serde_json::json!({"bottom": "x".repeat(huge), "extra": extra});
    for level in (1..depth).rev() {
        if list_every > 0 && level % list_every == 0 {
            v = Value::Array(vec![v, Value::Bool(true)]);
            continue;
        }
        let mut m = serde_json::Map::new();
        for w in 0..width {
            m.insert(format!("w{w}"), Value::from(format!("v{w}")));
        }
        m.insert("next".into(), v);
        v = Value::Object(m);
    }
    v
}

/// A CLI line carrying `v` where the normalizer makes a Struct or Value of
/// it: a tool_use input, a tool_use_result, a permission request's input.
fn carrying(kind: usize, v: Value) -> String {
    let line = match kind {
        0 => serde_json::json!({"type": "assistant", "message": {"id": "msg_f", "content": [
            {"type": "tool_use", "id": "toolu_f", "name": "Fuzz", "input": v}]}}),
        1 => serde_json::json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": "toolu_f", "content": "ok"}]},
            "tool_use_result": v}),
        _ => serde_json::json!({"type": "control_request", "request_id": "req-f", "request": {
            "subtype": "can_use_tool", "tool_name": "Fuzz", "tool_use_id": "toolu_f", "input": v}}),
    };
    line.to_string()
}

/// The JSON the event holds where `carrying` put it, every marked string
/// read back as the JSON it keeps (call it on a big stack).
fn carried(kind: usize, e: &pb::Event) -> Option<Value> {
    use agent_harness_server::nesting::DEEP_JSON_MARKER;
    fn restore(v: Value) -> Value {
        match v {
            Value::String(s) => match s.strip_prefix(DEEP_JSON_MARKER) {
                Some(text) => parse_any_depth(text).expect("marked text is JSON"),
                None => Value::String(s),
            },
            Value::Array(a) => Value::Array(a.into_iter().map(restore).collect()),
            Value::Object(o) => {
                Value::Object(o.into_iter().map(|(k, v)| (k, restore(v))).collect())
            }
            other => other,
        }
    }
    let v = match (kind, e.payload.as_ref()?) {
        (0, Payload::Content(c)) => serde_json::to_value(c.blocks[0].input.as_ref()?).ok()?,
        (1, Payload::Result(r)) => serde_json::to_value(r.tool_use_result.as_ref()?).ok()?,
        (2, Payload::PermissionRequested(p)) => serde_json::to_value(p.input.as_ref()?).ok()?,
        _ => return None,
    };
    Some(restore(v))
}

/// JSON nested up to 400 levels (past prost's limit of 100 messages and
/// serde_json's 128), objects up to 64 keys wide, strings up to 1.5 MB (past
/// the per-event budget), through the normalizer, the log and a real redb
/// file: every event is stored and read back decodable (never
/// `unreadable`), its JSON within the nesting bound, and nothing is lost:
/// the whole form, with each marked string read back, is the CLI's JSON.
#[test]
fn deep_wide_and_huge_json_is_stored_decodable_and_whole() {
    use agent_harness_server::log::{Commit, EventLogs, LogOptions, NewEvent};
    use agent_harness_server::nesting::{MAX_JSON_DEPTH, struct_depth};
    use agent_harness_server::store::{RedbStore, Store};
    use prost::Message;
    use std::sync::Arc;

    let dir = tempfile::tempdir().unwrap();
    // A plain #[test] driving its own runtime over a real file: the redb
    // path is what it fuzzes (the store contract covers the other stores).
    let store: Arc<dyn Store> = Arc::new(RedbStore::open(&dir.path().join("fuzz.redb")).unwrap());
    let rt = tokio::runtime::Runtime::new().unwrap();
    let logs = EventLogs::open(store.clone(), LogOptions::default()).unwrap();
    let case = std::sync::atomic::AtomicU32::new(0);
    let mut runner = TestRunner::new(config(40));
    let strategy = (
        0usize..3,
        prop_oneof![0usize..30, 30usize..130, 130usize..400],
        prop_oneof![3 => 0usize..4, 1 => 4usize..64],
        prop_oneof![4 => 0usize..2000, 1 => 900_000usize..1_500_000],
        0usize..5,
        json_value(),
    );
    runner
        .run(
            &strategy,
            |(kind, depth, width, huge, list_every, extra)| {
                let n_case = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let session = format!("fuzz-deep-{n_case}");
                // An object at the top: a tool input is one.
                let json =
                    serde_json::json!({"top": shaped(depth, width, huge, list_every, extra)});
                let line = carrying(kind, json);
                let mut n = Normalizer::new(DEFAULT_MAX_LINE_BYTES);
                let out = n.line(&StdoutLine::Line(line.clone()));
                prop_assert_eq!(out.len(), 1, "one event: {:?}", out.first().map(|o| &o.0));
                let events = out
                    .into_iter()
                    .map(|(payload, cli_line)| NewEvent {
                        run_id: "run-f".into(),
                        payload,
                        cli_line,
                    })
                    .collect();
                let appended = rt
                    .block_on(logs.commit(&session, Commit::events(events)))
                    .expect("append");
                let stored = store.read_range(&session, 0, usize::MAX).unwrap();
                prop_assert_eq!(&stored, &appended, "read back as streamed");
                for e in &stored {
                    prop_assert!(
                        !matches!(e.payload, Some(Payload::Unreadable(_))),
                        "stored unreadable: {:?}",
                        e.payload
                    );
                    // Decodable inside the deepest response that carries it.
                    let resp = pb::SubscribeResponse {
                        kind: Some(Kind::Event(e.clone())),
                    };
                    prop_assert!(
                        pb::SubscribeResponse::decode(resp.encode_to_vec().as_slice()).is_ok()
                    );
                    let whole = store
                        .read_full(&session, e.seq)
                        .unwrap()
                        .expect("whole form");
                    prop_assert!(pb::Event::decode(whole.encode_to_vec().as_slice()).is_ok());
                    if let Some(Payload::Content(c)) = &whole.payload {
                        let s = c.blocks[0].input.as_ref().expect("input");
                        prop_assert!(struct_depth(s) <= MAX_JSON_DEPTH);
                    }
                    // What the CLI's line says (floats as serde_json reads them).
                    let line = line.clone();
                    let same = on_big_stack(move || {
                        let v = parse_any_depth(&line).expect("the line is JSON");
                        let want = match kind {
                            0 => &v["message"]["content"][0]["input"],
                            1 => &v["tool_use_result"],
                            _ => &v["request"]["input"],
                        };
                        carried(kind, &whole).as_ref() == Some(want)
                    });
                    prop_assert!(
                        same,
                        "kind {} depth {} width {}: JSON lost",
                        kind,
                        depth,
                        width
                    );
                }
                Ok(())
            },
        )
        .unwrap();
    rt.block_on(logs.shutdown());
}

// ---------------------------------------------------------------------------
// Requests through the real gRPC service
// ---------------------------------------------------------------------------

/// Ids the fuzz reuses, so calls meet live and finished sessions too.
const KNOWN: &[&str] = &["fuzz-a", "fuzz-b", "fuzz-c"];

fn session_id() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(KNOWN).prop_map(str::to_owned),
        2 => "\\PC{0,300}",
        1 => ".{0,300}",
        1 => proptest::collection::vec(any::<char>(), 0..300).prop_map(|c| c.into_iter().collect()),
        1 => Just(String::new()),
        1 => "-{1,3}[a-z-]{0,20}",
    ]
}

/// Strings a field may hold: short, NUL, `-`-prefixed, unicode, large.
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9 ]{0,12}",
        1 => "\\PC{0,50}",
        1 => "[a-z]{0,5}\\x00[a-z]{0,5}",
        1 => "--?[a-z-]{1,30}(=[a-z]{0,5})?",
        1 => prop_oneof![1usize..70_000, 1_000_000usize..1_100_000].prop_map(|n| "x".repeat(n)),
        1 => Just(String::new()),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        "\\PC{0,20}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::from),
            proptest::collection::btree_map("\\PC{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn blocks() -> impl Strategy<Value = Vec<pbjson_types::Struct>> {
    let block = prop_oneof![
        proptest::collection::btree_map("\\PC{0,8}", json_value(), 0..5)
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ("\\PC{0,20}", "\\PC{0,40}").prop_map(|(t, s)| serde_json::json!({"type": "text", "text": s, "x": t})),
        "\\PC{0,20}".prop_map(|d| serde_json::json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": d}})),
    ]
    .prop_map(|v| serde_json::from_value::<pbjson_types::Struct>(v).expect("an object is a Struct"));
    proptest::collection::vec(block, 0..4)
}

fn start_config() -> impl Strategy<Value = pb::StartConfig> {
    (
        field(),
        field(),
        field(),
        proptest::collection::hash_map(field(), field(), 0..4),
        proptest::collection::vec(field(), 0..5),
        blocks(),
        field(),
        field(),
        proptest::option::of(any::<u32>()),
        proptest::option::of((session_id(), seq(), field())),
        prop_oneof![Just(String::new()), Just("codex".to_owned()), field()],
    )
        .prop_map(
            |(
                prompt,
                cwd,
                resume,
                env,
                args,
                content_blocks,
                model,
                permission_mode,
                max_thinking_tokens,
                fork,
                agent,
            )| pb::StartConfig {
                prompt,
                cwd,
                resume,
                env,
                args,
                content_blocks,
                model,
                permission_mode,
                max_thinking_tokens,
                fork: fork.map(|(from_session_id, at_seq, message_uuid)| pb::Fork {
                    from_session_id,
                    at_seq,
                    message_uuid,
                }),
                agent,
            },
        )
}

fn seq() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..20, any::<u64>(), Just(u64::MAX)]
}

#[derive(Debug, Clone)]
enum Call {
    Start(String, Box<pb::StartConfig>),
    Send(String, String, Vec<pbjson_types::Struct>),
    Stop(String),
    Subscribe(String, u64),
    History(String, u64, u32),
    Respond(String, String, bool, String),
    Get(String),
    List,
    SetModel(String, String),
    SetPermissionMode(String, String),
    SetThinking(String, Option<u32>),
    Rewind(String, u64, bool),
    StopTask(String, String),
    SetTitle(String, String),
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        (session_id(), start_config()).prop_map(|(s, c)| Call::Start(s, Box::new(c))),
        (session_id(), field(), blocks()).prop_map(|(s, i, b)| Call::Send(s, i, b)),
        session_id().prop_map(Call::Stop),
        (session_id(), seq()).prop_map(|(s, a)| Call::Subscribe(s, a)),
        (session_id(), seq(), prop_oneof![0u32..100, any::<u32>()])
            .prop_map(|(s, b, l)| Call::History(s, b, l)),
        (session_id(), field(), any::<bool>(), field())
            .prop_map(|(s, r, a, m)| Call::Respond(s, r, a, m)),
        session_id().prop_map(Call::Get),
        Just(Call::List),
        (session_id(), field()).prop_map(|(s, m)| Call::SetModel(s, m)),
        (session_id(), field()).prop_map(|(s, m)| Call::SetPermissionMode(s, m)),
        (session_id(), proptest::option::of(any::<u32>()))
            .prop_map(|(s, n)| Call::SetThinking(s, n)),
        (session_id(), seq(), any::<bool>()).prop_map(|(s, t, d)| Call::Rewind(s, t, d)),
        (session_id(), field()).prop_map(|(s, t)| Call::StopTask(s, t)),
        (session_id(), field()).prop_map(|(s, t)| Call::SetTitle(s, t)),
    ]
}

/// Codes a client can act on; anything else is a server bug.
const TYPED: &[Code] = &[
    Code::InvalidArgument,
    Code::NotFound,
    Code::FailedPrecondition,
    Code::PermissionDenied,
    Code::ResourceExhausted,
];

/// Every call answers in time with OK or a typed code.
const CALL_LIMIT: Duration = Duration::from_secs(10);

async fn perform(
    client: &mut pb::session_service_client::SessionServiceClient<tonic::transport::Channel>,
    call: Call,
) -> Result<(), tonic::Status> {
    match call {
        Call::Start(session_id, config) => client
            .start(pb::StartRequest {
                session_id,
                config: Some(*config),
                ..Default::default()
            })
            .await
            .map(drop),
        Call::Send(session_id, input, content_blocks) => client
            .send(pb::SendRequest {
                session_id,
                input,
                content_blocks,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::Stop(session_id) => client
            .stop(pb::StopRequest {
                session_id,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::Subscribe(session_id, after_seq) => {
            let mut stream = client
                .subscribe(pb::SubscribeRequest {
                    session_id,
                    after_seq,
                    ..Default::default()
                })
                .await?
                .into_inner();
            // The first message is always the ReplayStart.
            match stream.message().await? {
                Some(pb::SubscribeResponse {
                    kind: Some(Kind::Replay(_)),
                }) => Ok(()),
                other => Err(tonic::Status::internal(format!(
                    "stream opened with {other:?}, not a ReplayStart"
                ))),
            }
        }
        Call::History(session_id, before_seq, limit) => client
            .history(pb::HistoryRequest {
                session_id,
                before_seq,
                limit,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::Respond(session_id, request_id, allow, message) => client
            .respond_permission(pb::RespondPermissionRequest {
                session_id,
                request_id,
                allow,
                message,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::Get(session_id) => client
            .get_session(pb::GetSessionRequest {
                session_id,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::List => client
            .list_sessions(pb::ListSessionsRequest::default())
            .await
            .map(drop),
        Call::SetTitle(session_id, title) => client
            .set_title(pb::SetTitleRequest {
                session_id,
                title,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::SetModel(session_id, model) => client
            .set_model(pb::SetModelRequest {
                session_id,
                model,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::SetPermissionMode(session_id, mode) => client
            .set_permission_mode(pb::SetPermissionModeRequest {
                session_id,
                mode,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::SetThinking(session_id, max_thinking_tokens) => client
            .set_max_thinking_tokens(pb::SetMaxThinkingTokensRequest {
                session_id,
                max_thinking_tokens,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::Rewind(session_id, to_seq, dry_run) => client
            .rewind_files(pb::RewindFilesRequest {
                session_id,
                to_seq,
                dry_run,
                ..Default::default()
            })
            .await
            .map(drop),
        Call::StopTask(session_id, task_id) => client
            .stop_task(pb::StopTaskRequest {
                session_id,
                task_id,
                ..Default::default()
            })
            .await
            .map(drop),
    }
}

/// Random request sequences against one real server: OK or a typed error,
/// in bounded time, and the server keeps serving.
#[test]
fn random_requests_get_ok_or_a_typed_error_and_the_server_keeps_serving() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(TestServer::start());
    let client = rt.block_on(server.client());
    let mut runner = TestRunner::new(config(400));
    runner
        .run(&proptest::collection::vec(call(), 1..8), |calls| {
            let mut client = client.clone();
            rt.block_on(async {
                for call in calls {
                    let desc = call.clone();
                    let what = move || format!("{desc:?}").chars().take(400).collect::<String>();
                    let res = tokio::time::timeout(CALL_LIMIT, perform(&mut client, call)).await;
                    let Ok(res) = res else {
                        return Err(TestCaseError::fail(format!("hung: {}", what())));
                    };
                    if let Err(status) = res {
                        prop_assert!(
                            TYPED.contains(&status.code()),
                            "{:?} ({}) for {}",
                            status.code(),
                            status.message(),
                            what()
                        );
                    }
                }
                Ok(())
            })
        })
        .unwrap();
    // Still serving: a fresh session starts and reads back.
    rt.block_on(async {
        let mut client = server.client().await;
        let started = client
            .start(pb::StartRequest {
                session_id: "after-fuzz".into(),
                config: Some(server::prompt("hello")),
                ..Default::default()
            })
            .await;
        assert!(started.is_ok(), "{started:?}");
        let got = client
            .get_session(pb::GetSessionRequest {
                session_id: "after-fuzz".into(),
                ..Default::default()
            })
            .await
            .unwrap()
            .into_inner();
        assert!(got.session.is_some_and(|s| s.head_seq > 0));
        server.shutdown().await.unwrap();
    });
}
