//! The decoder's tests: `recorded` on what Gemini CLI 0.60.0 wrote over ACP
//! (the transcripts in `cassettes/gemini`, see its README; ids and token
//! counts are read from them, so a re-recording keeps these passing),
//! `lines` on hand-made lines for what those runs do not show, `codex_acp`
//! on codex-acp's transcripts (`cassettes/codex-acp`) where it differs.
//! Their helpers here.

mod codex_acp;
mod lines;
mod recorded;

use agent_harness_protocol::pb::event::Payload;
use serde_json::Value;

use super::AcpDecoder;
use crate::adapter::{Decoder, DecoderSetup};
use crate::decoder::testing;
pub(super) use crate::decoder::testing::{content, feed, kinds, result, turn_ends, typed};
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
    transcript_of(AGENT, name)
}

/// A recorded transcript in `cassettes/<agent>`.
pub(super) fn transcript_of(agent: &str, name: &str) -> Vec<(bool, String)> {
    testing::transcript(agent, name)
}

/// The `out` lines of a transcript, parsed.
pub(super) fn out_messages(name: &str) -> Vec<Value> {
    testing::out_messages(AGENT, name)
}

/// Feeds transcript lines as the run task does: each `session/prompt` the
/// harness wrote is an input sent and, when `copies`, the process side's
/// copy of it in the line stream (and of each `session/cancel`); every
/// `out` line as read. Returns the payloads and the live-typing changes.
pub(super) fn feed_with(
    d: &mut AcpDecoder,
    lines: &[(bool, String)],
    copies: bool,
) -> (Vec<Payload>, Vec<Change>) {
    let copied: &[&str] = if copies {
        &["session/prompt", "session/cancel"]
    } else {
        &[]
    };
    testing::feed_transcript(d, lines, "session/prompt", copied)
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

/// The answer to the request with this id.
pub(super) fn answer(name: &str, id: u64) -> Value {
    testing::answer(AGENT, name, id)
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
