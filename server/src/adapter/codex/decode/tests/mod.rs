//! The decoder's tests: `recorded` on what codex-cli 0.169.0 wrote (the
//! transcripts in `cassettes/codex`, see its README; ids and token counts
//! are read from them, so a re-recording keeps these passing), `lines` on
//! hand-made lines for what those runs do not show. Their helpers here.

mod lines;
mod recorded;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::Value;

use super::CodexDecoder;
use crate::adapter::{Decoder, DecoderSetup, StdoutLine};
use crate::partial::Change;

pub(super) fn setup(max_line_bytes: usize, pid: Option<u32>, resume_id: &str) -> DecoderSetup {
    DecoderSetup {
        max_line_bytes,
        max_partial_bytes: 1 << 20,
        pid,
        resume_id: resume_id.into(),
    }
}

pub(super) fn decoder() -> CodexDecoder {
    CodexDecoder::new(&setup(1 << 20, Some(4242), ""))
}

/// A recorded transcript: (`in` or `out`, the line).
pub(super) fn transcript(name: &str) -> Vec<(bool, String)> {
    let path = format!(
        "{}/../cassettes/codex/{name}.jsonl",
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
pub(super) fn out_messages(name: &str) -> Vec<Value> {
    transcript(name)
        .into_iter()
        .filter(|(out, _)| *out)
        .map(|(_, l)| serde_json::from_str(&l).unwrap())
        .collect()
}

/// Feeds a transcript's `out` lines, telling the decoder of the harness's
/// input where the transcript wrote a `turn/start`; returns the payloads
/// and the live-typing changes.
pub(super) fn replay(d: &mut CodexDecoder, name: &str) -> (Vec<Payload>, Vec<Change>) {
    let mut payloads = Vec::new();
    let mut changes = Vec::new();
    for (out, line) in transcript(name) {
        if !out {
            if line.contains("\"turn/start\"") {
                d.input_sent();
            }
            continue;
        }
        for (p, cli_line) in d.line(&StdoutLine::Line(line.clone())) {
            assert_eq!(cli_line, line, "every event keeps its raw line");
            payloads.push(p);
        }
        changes.extend(d.take_partial());
    }
    (payloads, changes)
}

pub(super) fn feed(d: &mut CodexDecoder, line: Value) -> Vec<Payload> {
    d.line(&StdoutLine::Line(line.to_string()))
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// A short name per payload, to compare sequences.
pub(super) fn kinds(payloads: &[Payload]) -> Vec<&'static str> {
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

pub(super) fn turn_ends(payloads: &[Payload]) -> Vec<&pb::TurnEnd> {
    payloads
        .iter()
        .filter_map(|p| match p {
            Payload::TurnEnd(t) => Some(t),
            _ => None,
        })
        .collect()
}

pub(super) fn content(p: &Payload) -> &pb::Content {
    match p {
        Payload::Content(c) => c,
        other => panic!("not content: {other:?}"),
    }
}

pub(super) fn result(p: &Payload) -> &pb::Result {
    match p {
        Payload::Result(r) => r,
        other => panic!("not a result: {other:?}"),
    }
}

/// The fragments of the live-typing changes, joined.
pub(super) fn typed(changes: &[Change]) -> String {
    changes
        .iter()
        .filter_map(|c| match c {
            Change::Fragment { fragment, .. } => Some(fragment.as_str()),
            _ => None,
        })
        .collect()
}

/// Each turn's usage as the transcript reports it: the sum of its model
/// calls' `last` tokens, cached input apart.
pub(super) fn recorded_usage(name: &str) -> Vec<pb::Usage> {
    let mut turns = Vec::new();
    let mut cur: Option<pb::Usage> = None;
    for m in out_messages(name) {
        match m["method"].as_str() {
            Some("turn/started") => cur = Some(pb::Usage::default()),
            Some("thread/tokenUsage/updated") => {
                let last = &m["params"]["tokenUsage"]["last"];
                let n = |k: &str| last[k].as_u64().unwrap();
                // A resumed thread reports its earlier usage before any turn.
                let Some(u) = cur.as_mut() else { continue };
                u.input_tokens += n("inputTokens") - n("cachedInputTokens");
                u.cache_read_input_tokens += n("cachedInputTokens");
                u.output_tokens += n("outputTokens");
            }
            Some("turn/completed") => turns.push(cur.take().unwrap()),
            _ => {}
        }
    }
    turns
}

/// The answer to the harness's request with this id.
pub(super) fn answer(name: &str, id: u64) -> Value {
    out_messages(name)
        .into_iter()
        .find(|m| m["id"] == id && m.get("method").is_none())
        .unwrap()
}
