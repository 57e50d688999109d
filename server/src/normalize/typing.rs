//! Live typing from the CLI's lines (see [`crate::partial`]): its
//! `stream_event` lines drive the tracker's block methods, an `assistant`
//! line makes the next block of its message durable, a `result` ends the
//! turn's blocks.

use super::read::Line;
use crate::partial::{BlockKind, Tracker};

/// Feeds one typed line of kind `kind` to the tracker.
pub(super) fn track(t: &mut Tracker, kind: &str, l: &Line) {
    match kind {
        "stream_event" => stream_event(t, l),
        "assistant" => t.next_block_done(l.message.id.as_str()),
        "result" => t.clear(),
        _ => {}
    }
}

fn stream_event(t: &mut Tracker, l: &Line) {
    let thread = l.parent_tool_use_id.as_str();
    let event = &l.event;
    match event.kind.as_str() {
        "message_start" => t.begin_message(thread, event.message.id.as_str()),
        "content_block_start" => {
            let Some(index) = event.index.0 else {
                return;
            };
            let block = &event.content_block;
            let kind = match block.kind.as_str() {
                "text" => BlockKind::Text,
                "thinking" => BlockKind::Thinking,
                "tool_use" | "server_tool_use" => BlockKind::ToolInput {
                    tool_name: block.name.owned(),
                    tool_use_id: block.id.owned(),
                },
                _ => return,
            };
            t.begin_block(thread, index, kind);
        }
        "content_block_delta" => {
            let Some(index) = event.index.0 else {
                return;
            };
            let delta = &event.delta;
            let fragment = match delta.kind.as_str() {
                "text_delta" => delta.text.as_str(),
                "thinking_delta" => delta.thinking.as_str(),
                "input_json_delta" => delta.partial_json.as_str(),
                _ => return,
            };
            t.append(thread, index, fragment);
        }
        "message_stop" => t.end_message(thread),
        _ => {}
    }
}

/// Feeds one CLI line to a tracker, as the normalizer does (the tracker's
/// tests).
#[cfg(test)]
pub(crate) fn feed(t: &mut Tracker, text: &str) {
    let l = Line::read(text).expect("a line the typed read takes");
    track(t, l.kind.as_str(), &l);
}
