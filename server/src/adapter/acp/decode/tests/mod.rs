//! The decoder's tests: `recorded` on what Gemini CLI 0.60.0 wrote over ACP
//! (the transcripts in `cassettes/gemini`, see its README; ids and token
//! counts are read from them, so a re-recording keeps these passing),
//! `lines` on hand-made lines for what those runs do not show, `codex_acp`
//! on codex-acp's transcripts (`cassettes/codex-acp`) where it differs.
//! Their helpers here.

mod codex_acp;
mod lines;
mod recorded;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::Value;

use super::AcpDecoder;
use crate::adapter::{Decoder, DecoderSetup, StdoutLine};
use crate::partial::Change;

pub(super) const AGENT: &str = "gemini";

pub(super) fn decoder(resume_id: &str) -> AcpDecoder {
    AcpDecoder::new(
        &DecoderSetup {
            max_line_bytes: 1 << 20,
            max_partial_bytes: 1 << 20,
            pid: Some(4242),
            resume_id: resume_id.into(),
        },
        AGENT,
    )
}

/// A recorded transcript of Gemini CLI: (`out`, the line).
pub(super) fn transcript(name: &str) -> Vec<(bool, String)> {
    transcript_of("gemini", name)
}

/// A recorded transcript in `cassettes/<agent>`.
pub(super) fn transcript_of(agent: &str, name: &str) -> Vec<(bool, String)> {
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
pub(super) fn out_messages(name: &str) -> Vec<Value> {
    transcript(name)
        .into_iter()
        .filter(|(out, _)| *out)
        .map(|(_, l)| serde_json::from_str(&l).unwrap())
        .collect()
}

/// Feeds transcript lines as the run task does: each `session/prompt` the
/// harness wrote is an input sent and, when `copies`, the process side's
/// copy of it in the line stream (and of each `session/cancel`); every
/// `out` line as read. Returns the
/// payloads and the live-typing changes.
pub(super) fn feed_with(
    d: &mut AcpDecoder,
    lines: &[(bool, String)],
    copies: bool,
) -> (Vec<Payload>, Vec<Change>) {
    let mut payloads = Vec::new();
    let mut changes = Vec::new();
    for (out, line) in lines {
        if !out {
            if line.contains("\"session/prompt\"") {
                d.input_sent();
                if !copies {
                    continue;
                }
                let copy = d.line(&StdoutLine::Line(line.clone()));
                assert!(copy.is_empty(), "a prompt's copy makes no event");
            }
            if copies && line.contains("\"session/cancel\"") {
                let copy = d.line(&StdoutLine::Line(line.clone()));
                assert!(copy.is_empty(), "a cancel's copy makes no event");
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

/// Feeds transcript lines with the prompts' copies.
pub(super) fn feed_lines(
    d: &mut AcpDecoder,
    lines: &[(bool, String)],
) -> (Vec<Payload>, Vec<Change>) {
    feed_with(d, lines, true)
}

pub(super) fn replay(d: &mut AcpDecoder, name: &str) -> (Vec<Payload>, Vec<Change>) {
    feed_lines(d, &transcript(name))
}

pub(super) fn feed(d: &mut AcpDecoder, line: Value) -> Vec<Payload> {
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

/// The answer to the request with this id.
pub(super) fn answer(name: &str, id: u64) -> Value {
    out_messages(name)
        .into_iter()
        .find(|m| m["id"] == id && m.get("method").is_none())
        .unwrap()
}

/// The text of every `agent_message_chunk` in the transcript's `out` lines,
/// per prompt answer (the chunks before each answer with a `stopReason`).
pub(super) fn answers_text(name: &str) -> Vec<String> {
    let mut turns = Vec::new();
    let mut cur = String::new();
    for m in out_messages(name) {
        let update = &m["params"]["update"];
        if update["sessionUpdate"] == "agent_message_chunk" {
            cur.push_str(update["content"]["text"].as_str().unwrap_or_default());
        } else if m["result"].get("stopReason").is_some() {
            turns.push(std::mem::take(&mut cur));
        }
    }
    turns
}
