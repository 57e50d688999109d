//! Live typing: the partial assistant message, folded from a Subscribe
//! stream that asked for `include_deltas`.
//!
//! The server streams the blocks the CLI is still writing as `Delta`s. They
//! are never stored and have no seq: the log stays the truth, and a partial
//! block only lives until the event that makes it redundant. [`Partial`]
//! keeps those blocks, and is pure and synchronous so every port can share
//! the conformance vectors in `tests/vectors/partial/`.
//!
//! Rules (the contract every port obeys):
//! - A block is named by (`message_id`, `index`).
//! - A `delta` with `snapshot: false` appends its `fragment` to its block,
//!   creating the block (text = fragment) when it is not held.
//! - A `delta` with `snapshot: true` replaces its block's text with the
//!   fragment, creating the block when it is not held. The server sends one
//!   per block still being written right after `caught_up`, and when a
//!   stream fell behind.
//! - A delta's non-empty metadata (run id, block type, tool name, tool_use
//!   id, parent tool_use id) overwrites the block's; empty fields keep it.
//! - A `content` event drops every block whose `message_id` equals its own:
//!   the stored event supersedes the partial text.
//! - A `result` event drops every tool-output block whose `tool_use_id` is
//!   one of its tool results' (a running tool's output is keyed by its
//!   tool_use id, as its `message_id`: it belongs to no message).
//! - A `turn_end` (compact boundaries included) or `run_end` event drops
//!   every block.
//! - A `replay` header drops every block: it opens a new stream, whose
//!   snapshot deltas after `caught_up` restore what is still being written.
//! - `heartbeat`, `caught_up` and every other event change nothing.
//! - Order: a block of a message already held goes among that message's
//!   blocks by index; a block of a message not held goes last. So messages
//!   show in order of first appearance, and blocks by index within one.
//!
//! The server writes a later block of a message only after the earlier
//! block's `content`, so in practice a message has one partial block at a
//! time; the fold does not rely on it.

use crate::pb::{self, DeltaBlockType, event::Payload, subscribe_response::Kind};

/// One block of an assistant message the CLI is writing.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartialBlock {
    /// The run writing it.
    pub run_id: String,
    /// The API message id; the `content` event with this id supersedes it.
    pub message_id: String,
    /// The block's index in its message.
    pub index: u32,
    /// Text, thinking, a tool call's input, or a running tool's output.
    pub block_type: DeltaBlockType,
    /// For a tool-input or tool-output block: the tool's name.
    pub tool_name: String,
    /// For a tool-input or tool-output block: the tool_use id.
    pub tool_use_id: String,
    /// Set when a subagent writes it: the Agent tool_use id (empty for the
    /// main thread).
    pub parent_tool_use_id: String,
    /// The text so far (for a tool input, JSON that is not complete yet).
    pub text: String,
}

impl PartialBlock {
    /// Whether the main thread (not a subagent) writes this block.
    pub fn is_main_thread(&self) -> bool {
        self.parent_tool_use_id.is_empty()
    }
}

/// The partial blocks held, in display order. See the module docs for the
/// rules. Cheap when empty; a few blocks at most in practice.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Partial {
    blocks: Vec<PartialBlock>,
}

impl Partial {
    /// An empty fold.
    pub fn new() -> Self {
        Self::default()
    }

    /// Applies one Subscribe message; returns whether the blocks changed.
    pub fn apply(&mut self, kind: &Kind) -> bool {
        match kind {
            Kind::Replay(_) => self.reset(),
            Kind::Event(event) => self.apply_event(event),
            Kind::Delta(delta) => self.apply_delta(delta),
            Kind::CaughtUp(_) | Kind::Heartbeat(_) => false,
        }
    }

    /// Applies a delta: appends its fragment to its block, or replaces the
    /// block's text when it is a snapshot, creating the block if needed.
    /// Always a change (an empty fragment still creates or updates).
    pub fn apply_delta(&mut self, delta: &pb::Delta) -> bool {
        let at = match self.position(&delta.message_id, delta.index) {
            Ok(at) => at,
            Err(at) => {
                self.blocks.insert(
                    at,
                    PartialBlock {
                        message_id: delta.message_id.clone(),
                        index: delta.index,
                        ..Default::default()
                    },
                );
                at
            }
        };
        let block = &mut self.blocks[at];
        if delta.snapshot {
            block.text.clone_from(&delta.fragment);
        } else {
            block.text.push_str(&delta.fragment);
        }
        fill(&mut block.run_id, &delta.run_id);
        fill(&mut block.tool_name, &delta.tool_name);
        fill(&mut block.tool_use_id, &delta.tool_use_id);
        fill(&mut block.parent_tool_use_id, &delta.parent_tool_use_id);
        let block_type = delta.block_type();
        if block_type != DeltaBlockType::Unspecified {
            block.block_type = block_type;
        }
        true
    }

    /// Applies a log event: `content` drops its message's blocks, `result`
    /// its tools' outputs, `turn_end` and `run_end` drop all. Returns
    /// whether anything was dropped.
    pub fn apply_event(&mut self, event: &pb::Event) -> bool {
        let before = self.blocks.len();
        match &event.payload {
            Some(Payload::Content(content)) => {
                self.blocks.retain(|b| b.message_id != content.message_id);
                self.blocks.len() != before
            }
            Some(Payload::Result(result)) => {
                self.blocks.retain(|b| {
                    b.block_type != DeltaBlockType::ToolOutput
                        || !result
                            .tool_results
                            .iter()
                            .any(|r| r.tool_use_id == b.tool_use_id)
                });
                self.blocks.len() != before
            }
            Some(Payload::TurnEnd(_) | Payload::RunEnd(_)) => self.reset(),
            _ => false,
        }
    }

    /// Drops every block (a new stream); returns whether any was held.
    pub fn reset(&mut self) -> bool {
        let had = !self.blocks.is_empty();
        self.blocks.clear();
        had
    }

    /// The blocks, in display order.
    pub fn blocks(&self) -> &[PartialBlock] {
        &self.blocks
    }

    /// Whether no block is being written.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The block (`message_id`, `index`), if held.
    pub fn get(&self, message_id: &str, index: u32) -> Option<&PartialBlock> {
        self.position(message_id, index)
            .ok()
            .map(|at| &self.blocks[at])
    }

    /// The main thread's blocks (no subagent's), in display order.
    pub fn main_thread(&self) -> impl Iterator<Item = &PartialBlock> {
        self.blocks.iter().filter(|b| b.is_main_thread())
    }

    /// The answer text the main thread is writing: its text blocks, joined.
    /// Empty when it is writing none (thinking, a tool input, or nothing).
    pub fn main_text(&self) -> String {
        self.main_thread()
            .filter(|b| b.block_type == DeltaBlockType::Text)
            .map(|b| b.text.as_str())
            .collect()
    }

    /// What tool `tool_use_id` has printed so far while it runs (`None`
    /// when nothing is streaming for it): shown under the tool until its
    /// `result` arrives.
    pub fn tool_output(&self, tool_use_id: &str) -> Option<&str> {
        self.blocks
            .iter()
            .find(|b| b.block_type == DeltaBlockType::ToolOutput && b.tool_use_id == tool_use_id)
            .map(|b| b.text.as_str())
    }

    /// `Ok(position)` of the block, or `Err(where it would go)`.
    fn position(&self, message_id: &str, index: u32) -> Result<usize, usize> {
        let mut insert_at = self.blocks.len();
        let mut seen_message = false;
        for (at, b) in self.blocks.iter().enumerate() {
            if b.message_id != message_id {
                if seen_message {
                    // Past the message's blocks: the new one goes last
                    // among them.
                    return Err(at);
                }
                continue;
            }
            seen_message = true;
            if b.index == index {
                return Ok(at);
            }
            if b.index > index {
                return Err(at);
            }
            insert_at = at + 1;
        }
        Err(insert_at)
    }
}

/// Overwrites `field` with `value` unless `value` is empty.
fn fill(field: &mut String, value: &str) {
    if !value.is_empty() && field != value {
        value.clone_into(field);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delta(message_id: &str, index: u32, fragment: &str) -> pb::Delta {
        pb::Delta {
            run_id: "run-1".to_owned(),
            message_id: message_id.to_owned(),
            index,
            block_type: DeltaBlockType::Text as i32,
            fragment: fragment.to_owned(),
            ..Default::default()
        }
    }

    fn snapshot(message_id: &str, index: u32, fragment: &str) -> pb::Delta {
        pb::Delta {
            snapshot: true,
            ..delta(message_id, index, fragment)
        }
    }

    fn event(payload: Payload) -> pb::Event {
        pb::Event {
            seq: 1,
            run_id: "run-1".to_owned(),
            payload: Some(payload),
            ..Default::default()
        }
    }

    fn content(message_id: &str) -> pb::Event {
        event(Payload::Content(pb::Content {
            message_id: message_id.to_owned(),
            ..Default::default()
        }))
    }

    fn keys(p: &Partial) -> Vec<(&str, u32, &str)> {
        p.blocks()
            .iter()
            .map(|b| (b.message_id.as_str(), b.index, b.text.as_str()))
            .collect()
    }

    #[test]
    fn fragments_append_and_content_supersedes() {
        let mut p = Partial::new();
        assert!(p.apply_delta(&delta("m1", 0, "Hel")));
        assert!(p.apply_delta(&delta("m1", 0, "lo")));
        assert_eq!(keys(&p), [("m1", 0, "Hello")]);
        assert_eq!(p.main_text(), "Hello");
        let b = p.get("m1", 0).unwrap();
        assert_eq!(b.block_type, DeltaBlockType::Text);
        assert_eq!(b.run_id, "run-1");
        assert!(!p.apply_event(&content("m0")), "another message's content");
        assert!(p.apply_event(&content("m1")));
        assert!(p.is_empty());
        assert!(!p.apply_event(&content("m1")), "nothing left to drop");
    }

    #[test]
    fn snapshot_replaces_or_creates() {
        let mut p = Partial::new();
        p.apply_delta(&delta("m1", 0, "stale"));
        p.apply_delta(&snapshot("m1", 0, "fresh text"));
        p.apply_delta(&snapshot("m2", 0, "new"));
        assert_eq!(keys(&p), [("m1", 0, "fresh text"), ("m2", 0, "new")]);
    }

    #[test]
    fn turn_end_run_end_and_replay_drop_everything() {
        let ends = [
            Kind::Event(event(Payload::TurnEnd(pb::TurnEnd::default()))),
            Kind::Event(event(Payload::RunEnd(pb::RunEnd::default()))),
            Kind::Replay(pb::ReplayStart::default()),
        ];
        for end in ends {
            let mut p = Partial::new();
            p.apply_delta(&delta("m1", 0, "a"));
            p.apply_delta(&delta("m2", 0, "b"));
            assert!(!p.apply(&Kind::Heartbeat(pb::Heartbeat::default())));
            assert!(!p.apply(&Kind::CaughtUp(pb::CaughtUp::default())));
            assert!(!p.apply(&Kind::Event(event(Payload::InputSent(
                pb::InputSent::default()
            )))));
            assert_eq!(p.blocks().len(), 2);
            assert!(p.apply(&end), "{end:?}");
            assert!(p.is_empty());
            assert!(!p.apply(&end), "already empty: no change");
        }
    }

    #[test]
    fn order_is_first_appearance_then_index() {
        let mut p = Partial::new();
        p.apply_delta(&delta("a", 2, "a2"));
        p.apply_delta(&delta("b", 0, "b0"));
        p.apply_delta(&delta("a", 0, "a0"));
        p.apply_delta(&delta("a", 3, "a3"));
        p.apply_delta(&delta("c", 1, "c1"));
        p.apply_delta(&delta("b", 1, "b1"));
        assert_eq!(
            keys(&p),
            [
                ("a", 0, "a0"),
                ("a", 2, "a2"),
                ("a", 3, "a3"),
                ("b", 0, "b0"),
                ("b", 1, "b1"),
                ("c", 1, "c1"),
            ]
        );
        // A message dropped and written again counts as new: it goes last.
        p.apply_event(&content("a"));
        p.apply_delta(&delta("a", 4, "a4"));
        assert_eq!(p.blocks().last().unwrap().text, "a4");
        assert_eq!(p.blocks().first().unwrap().text, "b0");
    }

    #[test]
    fn metadata_fills_from_any_delta_and_main_text_skips_the_rest() {
        let mut p = Partial::new();
        p.apply_delta(&pb::Delta {
            message_id: "m1".to_owned(),
            index: 1,
            block_type: DeltaBlockType::ToolInput as i32,
            tool_name: "Bash".to_owned(),
            tool_use_id: "toolu_1".to_owned(),
            fragment: "{\"command\":".to_owned(),
            ..Default::default()
        });
        // A later fragment without metadata keeps it.
        p.apply_delta(&pb::Delta {
            message_id: "m1".to_owned(),
            index: 1,
            fragment: " \"ls\"}".to_owned(),
            ..Default::default()
        });
        let b = p.get("m1", 1).unwrap();
        assert_eq!(b.block_type, DeltaBlockType::ToolInput);
        assert_eq!(
            (b.tool_name.as_str(), b.tool_use_id.as_str()),
            ("Bash", "toolu_1")
        );
        assert_eq!(b.text, "{\"command\": \"ls\"}");
        // A subagent writing text is not the main thread's text.
        p.apply_delta(&pb::Delta {
            parent_tool_use_id: "toolu_agent".to_owned(),
            ..delta("m2", 0, "sub")
        });
        assert_eq!(p.main_text(), "");
        assert_eq!(p.main_thread().count(), 1);
        p.apply_delta(&delta("m3", 0, "main"));
        assert_eq!(p.main_text(), "main");
    }

    /// A running tool's output, keyed by its tool_use id: its `result`
    /// drops it, another tool's result does not, and nor does a text block
    /// that happens to share the id.
    #[test]
    fn a_tool_output_goes_with_its_result() {
        let mut p = Partial::new();
        let output = |id: &str, fragment: &str| pb::Delta {
            block_type: DeltaBlockType::ToolOutput as i32,
            tool_name: "Bash".to_owned(),
            tool_use_id: id.to_owned(),
            ..delta(id, 0, fragment)
        };
        p.apply_delta(&output("call_a", "line2\n"));
        p.apply_delta(&output("call_a", "line3\n"));
        p.apply_delta(&output("call_b", "b"));
        assert_eq!(p.tool_output("call_a"), Some("line2\nline3\n"));
        assert_eq!(p.main_text(), "", "output is not answer text");
        let result = |id: &str| {
            event(Payload::Result(pb::Result {
                tool_results: vec![pb::ToolResult {
                    tool_use_id: id.to_owned(),
                    ..Default::default()
                }],
                ..Default::default()
            }))
        };
        assert!(!p.apply_event(&result("call_z")));
        assert!(p.apply_event(&result("call_a")));
        assert_eq!(p.tool_output("call_a"), None);
        assert_eq!(p.tool_output("call_b"), Some("b"));
    }
}
