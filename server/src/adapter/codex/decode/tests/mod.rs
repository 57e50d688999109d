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
use crate::adapter::DecoderSetup;
use crate::decoder::testing;
pub(super) use crate::decoder::testing::{content, feed, kinds, result, turn_ends, typed};
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

const AGENT: &str = "codex";

/// A recorded transcript: (`in` or `out`, the line).
pub(super) fn transcript(name: &str) -> Vec<(bool, String)> {
    testing::transcript(AGENT, name)
}

/// The `out` lines of a transcript, parsed.
pub(super) fn out_messages(name: &str) -> Vec<Value> {
    testing::out_messages(AGENT, name)
}

/// Feeds a transcript's `out` lines, telling the decoder of the harness's
/// input where the transcript wrote a `turn/start`; returns the payloads
/// and the live-typing changes.
pub(super) fn replay(d: &mut CodexDecoder, name: &str) -> (Vec<Payload>, Vec<Change>) {
    testing::feed_transcript(d, &transcript(name), "turn/start", &[])
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
    testing::answer(AGENT, name, id)
}
