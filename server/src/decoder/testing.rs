//! What the decoders' tests share: reading a recorded transcript
//! (`cassettes/<agent>/<name>.jsonl`, one `{"dir", "line"}` object a line),
//! feeding it to a decoder as the run task does, naming the payloads that
//! come out, and checking them against the stored conformance vectors.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::{Value, json};

use super::Decoder;
use crate::partial::Change;
use crate::process::StdoutLine;

/// A recorded transcript of `cassettes/<agent>/`: (`out`, the line).
pub(crate) fn transcript(agent: &str, name: &str) -> Vec<(bool, String)> {
    let path = format!(
        "{}/../cassettes/{agent}/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    raw.lines()
        .map(|l| {
            let rec: Value = serde_json::from_str(l).unwrap();
            (
                rec["dir"] == "out",
                rec["line"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// The `out` lines of a transcript, parsed.
pub(crate) fn out_messages(agent: &str, name: &str) -> Vec<Value> {
    transcript(agent, name)
        .into_iter()
        .filter(|(out, _)| *out)
        .map(|(_, l)| serde_json::from_str(&l).unwrap())
        .collect()
}

/// The answer to the harness's request with this id.
pub(crate) fn answer(agent: &str, name: &str, id: u64) -> Value {
    out_messages(agent, name)
        .into_iter()
        .find(|m| m["id"] == id && m.get("method").is_none())
        .unwrap()
}

/// Feeds transcript lines as the run task does: each `in` line holding
/// `input` (the method the harness writes a user message with) is an input
/// sent; each `in` line holding one of `copied` (the methods whose lines
/// the process side copies into the line stream) is read too, and makes no
/// event; every `out` line as read. Returns the payloads and the
/// live-typing changes.
pub(crate) fn feed_transcript(
    d: &mut impl Decoder,
    lines: &[(bool, String)],
    input: &str,
    copied: &[&str],
) -> (Vec<Payload>, Vec<Change>) {
    let holds = |line: &str, method: &str| line.contains(&format!("\"{method}\""));
    let mut payloads = Vec::new();
    let mut changes = Vec::new();
    for (out, line) in lines {
        if !out {
            if holds(line, input) {
                d.input_sent();
            }
            if let Some(method) = copied.iter().find(|m| holds(line, m)) {
                let copy = d.line(&StdoutLine::Line(line.clone()));
                assert!(copy.is_empty(), "a {method} copy makes no event");
            }
            continue;
        }
        for (p, cli_line) in d.line(&StdoutLine::Line(line.clone())) {
            assert_eq!(&cli_line, line, "every event keeps its raw line");
            payloads.push(p);
        }
        changes.extend(d.take_partial());
    }
    (payloads, changes)
}

/// The payloads of one hand-made line.
pub(crate) fn feed(d: &mut impl Decoder, line: Value) -> Vec<Payload> {
    d.line(&StdoutLine::Line(line.to_string()))
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// A short name per payload, to compare sequences.
pub(crate) fn kinds(payloads: &[Payload]) -> Vec<&'static str> {
    payloads
        .iter()
        .map(|p| match p {
            Payload::RunReady(_) => "run_ready",
            Payload::TurnStart(_) => "turn_start",
            Payload::Content(c) => match c.blocks.first().map(|b| b.r#type.as_str()) {
                Some("text") => "text",
                Some("thinking") => "thinking",
                Some("tool_use") => "tool_use",
                _ => "content",
            },
            Payload::Result(_) => "result",
            Payload::TurnEnd(t) if t.compact => "compact",
            Payload::TurnEnd(_) => "turn_end",
            Payload::PermissionRequested(_) => "permission_requested",
            Payload::PermissionResolved(_) => "permission_resolved",
            Payload::RunError(_) => "run_error",
            _ => "other",
        })
        .collect()
}

pub(crate) fn turn_ends(payloads: &[Payload]) -> Vec<&pb::TurnEnd> {
    payloads
        .iter()
        .filter_map(|p| match p {
            Payload::TurnEnd(t) => Some(t),
            _ => None,
        })
        .collect()
}

pub(crate) fn content(p: &Payload) -> &pb::Content {
    match p {
        Payload::Content(c) => c,
        other => panic!("not content: {other:?}"),
    }
}

pub(crate) fn result(p: &Payload) -> &pb::Result {
    match p {
        Payload::Result(r) => r,
        other => panic!("not a result: {other:?}"),
    }
}

/// The fragments of the live-typing changes, joined.
pub(crate) fn typed(changes: &[Change]) -> String {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::Fragment { fragment, .. } => Some(fragment.as_str()),
            _ => None,
        })
        .collect()
}

/// Checks the payloads a decoder made of `cassettes/<agent>/<cassette>.jsonl`
/// against the conformance vector `tests/vectors/<vectors>/<name>.json`
/// (the cassette's path and the payloads as Event JSON), or rewrites the
/// vector when the variable `write_var` is set.
pub(crate) fn check_vector(
    vectors: &str,
    write_var: &str,
    name: &str,
    cassette: &str,
    payloads: Vec<Payload>,
) {
    let dir = format!("{}/../tests/vectors/{vectors}", env!("CARGO_MANIFEST_DIR"));
    let payloads: Vec<Value> = payloads
        .into_iter()
        .map(|p| {
            let event = pb::Event {
                payload: Some(p),
                ..Default::default()
            };
            serde_json::to_value(&event).unwrap()
        })
        .collect();
    let doc = json!({"cassette": format!("cassettes/{cassette}.jsonl"), "payloads": payloads});
    let path = format!("{dir}/{name}.json");
    if std::env::var_os(write_var).is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        let text = serde_json::to_string_pretty(&doc).unwrap();
        std::fs::write(&path, text + "\n").unwrap();
        return;
    }
    let stored: Value = serde_json::from_str(
        &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}")),
    )
    .unwrap();
    assert_eq!(
        stored, doc,
        "{path} is not what the decoder makes of cassettes/{cassette}.jsonl: rerun with \
         {write_var}=1 and check the vectors"
    );
}
