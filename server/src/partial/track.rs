//! [`Tracker`]: what an agent is writing in, [`Change`]s out. Its block
//! methods (`begin_message`, `begin_block`, `append`, `complete_block`,
//! `next_block_done`, `end_message`) are what any agent's decoder drives:
//! the claude CLI's `stream_event` lines in `normalize::typing`, other
//! agents' deltas in their adapters; and `output`/`end_output` for a
//! running tool's output.

use std::collections::HashMap;
use std::sync::Arc;

use super::{BlockKind, Change};

/// Most messages in flight at once (the main thread and its subagents);
/// stream events of further messages are ignored.
const MAX_MESSAGES: usize = 64;

/// One block in flight, without its text.
#[derive(Debug)]
struct Open {
    index: u32,
    bytes: usize,
    /// Past the budget: it takes no more fragments.
    full: bool,
}

/// One message in flight.
#[derive(Debug)]
struct Message {
    id: Arc<str>,
    /// `assistant` lines seen for it (= blocks completed).
    completed: u32,
    blocks: Vec<Open>,
}

/// Reads the CLI's lines and reports what changed in the blocks in flight;
/// see the [module docs](super). Keeps no text.
#[derive(Debug)]
pub struct Tracker {
    /// Messages in flight, in the order they started.
    messages: Vec<Message>,
    /// The message a thread is streaming now: `stream_event` lines other
    /// than `message_start` do not name their message, only their thread
    /// (`parent_tool_use_id`, empty for the main thread).
    streaming: HashMap<Arc<str>, Arc<str>>,
    /// Text held over every block in flight.
    bytes: usize,
    max_bytes: usize,
    changes: Vec<Change>,
    /// Fragments dropped because the budget was reached.
    dropped: u64,
}

impl Tracker {
    /// Holds at most `max_bytes` of partial text; past it a block stops
    /// growing (its `content` event carries the whole text anyway).
    pub fn new(max_bytes: usize) -> Self {
        Self {
            messages: Vec::new(),
            streaming: HashMap::new(),
            bytes: 0,
            max_bytes,
            changes: Vec::new(),
            dropped: 0,
        }
    }

    /// The changes since the last call.
    pub fn take(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    /// Fragments dropped so far because the budget was reached.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Forgets everything in flight (the turn or the run ended).
    pub fn clear(&mut self) {
        if !self.messages.is_empty() || !self.streaming.is_empty() {
            self.messages.clear();
            self.streaming.clear();
            self.bytes = 0;
            self.changes.push(Change::Cleared);
        }
    }

    /// Message `id` began on `thread` (the subagent's tool_use id, "" for
    /// the main thread); the thread's previous message, if any, is over (a
    /// thread streams one message at a time).
    pub fn begin_message(&mut self, thread: &str, id: &str) {
        if id.is_empty() {
            return;
        }
        if let Some(old) = self.streaming.remove(thread) {
            self.drop_message(&old);
        }
        if self.messages.len() >= MAX_MESSAGES {
            return;
        }
        let id: Arc<str> = id.into();
        self.messages.push(Message {
            id: id.clone(),
            completed: 0,
            blocks: Vec::new(),
        });
        self.streaming.insert(thread.into(), id);
    }

    /// Block `index` of the message `thread` is streaming began.
    pub fn begin_block(&mut self, thread: &str, index: u32, kind: BlockKind) {
        let Some(msg) = self.message_of(thread) else {
            return;
        };
        if index < msg.completed || msg.blocks.iter().any(|b| b.index == index) {
            return;
        }
        msg.blocks.push(Open {
            index,
            bytes: 0,
            full: false,
        });
        let message_id = msg.id.clone();
        self.changes.push(Change::Started {
            message_id,
            parent_tool_use_id: thread.into(),
            index,
            kind,
        });
    }

    /// `fragment` was appended to block `index` of the message `thread` is
    /// streaming (dropped, and counted, past the budget).
    pub fn append(&mut self, thread: &str, index: u32, fragment: &str) {
        if let Some(id) = self.streaming.get(thread).cloned() {
            self.append_to(&id, index, fragment);
        }
    }

    /// Tool `tool_use_id` (named `tool_name`) printed `fragment` while it
    /// runs. Its output is a block of its own, keyed by the tool_use id (it
    /// belongs to no message, and several tools may run at once), begun by
    /// its first fragment and bounded by the same budget.
    pub fn output(&mut self, tool_use_id: &str, tool_name: &str, fragment: &str) {
        if tool_use_id.is_empty() || fragment.is_empty() {
            return;
        }
        if !self.messages.iter().any(|m| &*m.id == tool_use_id) {
            if self.messages.len() >= MAX_MESSAGES {
                return;
            }
            let id: Arc<str> = tool_use_id.into();
            self.messages.push(Message {
                id: id.clone(),
                completed: 0,
                blocks: vec![Open {
                    index: 0,
                    bytes: 0,
                    full: false,
                }],
            });
            self.changes.push(Change::Started {
                message_id: id,
                parent_tool_use_id: "".into(),
                index: 0,
                kind: BlockKind::ToolOutput {
                    tool_name: tool_name.to_owned(),
                    tool_use_id: tool_use_id.to_owned(),
                },
            });
        }
        self.append_to(tool_use_id, 0, fragment);
    }

    /// Tool `tool_use_id`'s `result` is in the same batch: its output so far
    /// leaves the board (nothing when it printed nothing live).
    pub fn end_output(&mut self, tool_use_id: &str) {
        let Some(pos) = self.messages.iter().position(|m| &*m.id == tool_use_id) else {
            return;
        };
        let out = self.messages.remove(pos);
        self.bytes -= out.blocks.iter().map(|b| b.bytes).sum::<usize>();
        self.changes.push(Change::Done {
            message_id: out.id,
            index: None,
        });
    }

    /// `fragment` was appended to block `index` of message `id`.
    fn append_to(&mut self, id: &str, index: u32, fragment: &str) {
        if fragment.is_empty() {
            return;
        }
        let over = self.bytes + fragment.len() > self.max_bytes;
        let Some(msg) = self.messages.iter_mut().find(|m| &*m.id == id) else {
            return;
        };
        let message_id = msg.id.clone();
        let Some(block) = msg.blocks.iter_mut().find(|b| b.index == index) else {
            return;
        };
        if block.full || over {
            block.full = true;
            self.dropped += 1;
            return;
        }
        block.bytes += fragment.len();
        self.bytes += fragment.len();
        self.changes.push(Change::Fragment {
            message_id,
            index,
            fragment: fragment.to_owned(),
        });
    }

    /// The message `thread` is streaming is over: whatever of it is still
    /// open goes.
    pub fn end_message(&mut self, thread: &str) {
        if let Some(id) = self.streaming.remove(thread) {
            self.drop_message(&id);
        }
    }

    /// The id of the message `thread` is streaming, if any.
    pub fn streaming(&self, thread: &str) -> Option<&str> {
        self.streaming.get(thread).map(|id| &**id)
    }

    /// A complete `assistant` line of message `id`: the next block of that
    /// message is durable.
    pub fn next_block_done(&mut self, id: &str) {
        let Some(msg) = self.messages.iter().find(|m| &*m.id == id) else {
            return;
        };
        let index = msg.completed;
        self.complete_block(id, index);
    }

    /// Block `index` of message `id` is durable now (its `content` event is
    /// in the same batch): its text leaves the board.
    pub fn complete_block(&mut self, id: &str, index: u32) {
        let Some(msg) = self.messages.iter_mut().find(|m| &*m.id == id) else {
            return;
        };
        msg.completed = msg.completed.max(index + 1);
        if let Some(pos) = msg.blocks.iter().position(|b| b.index == index) {
            let block = msg.blocks.remove(pos);
            self.bytes -= block.bytes;
        }
        let message_id = msg.id.clone();
        self.changes.push(Change::Done {
            message_id,
            index: Some(index),
        });
    }

    /// Message `id` is over: whatever of it is still open goes.
    fn drop_message(&mut self, id: &Arc<str>) {
        let Some(pos) = self.messages.iter().position(|m| &m.id == id) else {
            return;
        };
        let msg = self.messages.remove(pos);
        self.bytes -= msg.blocks.iter().map(|b| b.bytes).sum::<usize>();
        if !msg.blocks.is_empty() {
            self.changes.push(Change::Done {
                message_id: msg.id,
                index: None,
            });
        }
    }

    fn message_of(&mut self, thread: &str) -> Option<&mut Message> {
        let id = self.streaming.get(thread)?;
        self.messages.iter_mut().find(|m| &m.id == id)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    /// Feeds a claude CLI line as its normalizer does.
    fn feed(t: &mut Tracker, line: Value) {
        crate::normalize::feed_tracker(t, &line.to_string());
    }

    fn ev(event: Value) -> Value {
        json!({"type": "stream_event", "event": event, "parent_tool_use_id": null})
    }

    fn sub(mut line: Value, parent: &str) -> Value {
        line["parent_tool_use_id"] = json!(parent);
        line
    }

    fn start(id: &str) -> Value {
        ev(json!({"type": "message_start", "message": {"id": id, "content": []}}))
    }

    fn block(index: u32, block: Value) -> Value {
        ev(json!({"type": "content_block_start", "index": index, "content_block": block}))
    }

    fn delta(index: u32, delta: Value) -> Value {
        ev(json!({"type": "content_block_delta", "index": index, "delta": delta}))
    }

    fn text(index: u32, t: &str) -> Value {
        delta(index, json!({"type": "text_delta", "text": t}))
    }

    fn assistant(id: &str) -> Value {
        json!({"type": "assistant", "message": {"id": id, "content": [{"type": "text", "text": "x"}]}})
    }

    fn frag(id: &str, index: u32, f: &str) -> Change {
        Change::Fragment {
            message_id: id.into(),
            index,
            fragment: f.into(),
        }
    }

    fn started(id: &str, index: u32, kind: BlockKind) -> Change {
        Change::Started {
            message_id: id.into(),
            parent_tool_use_id: "".into(),
            index,
            kind,
        }
    }

    fn done(id: &str, index: u32) -> Change {
        Change::Done {
            message_id: id.into(),
            index: Some(index),
        }
    }

    /// The lines the real CLI 2.1.197 wrote in `partial_messages` (one text
    /// block), in their recorded order.
    #[test]
    fn recorded_transcript_text_block() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../cassettes/transcripts/partial_messages.transcript.jsonl"
        );
        let mut t = Tracker::new(1 << 20);
        let raw = std::fs::read_to_string(path).expect("the recorded transcript");
        for l in raw.lines() {
            let rec: Value = serde_json::from_str(l).unwrap();
            if rec["dir"] != "out" {
                continue;
            }
            if let Some(line) = rec.get("line").or(rec.get("msg")) {
                let line = match line {
                    Value::String(s) => serde_json::from_str(s).unwrap(),
                    v => v.clone(),
                };
                feed(&mut t, line);
            }
        }
        let changes = t.take();
        let texts: String = changes
            .iter()
            .filter_map(|c| match c {
                Change::Fragment { fragment, .. } => Some(fragment.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(texts, "Hello from fake model.");
        assert!(matches!(
            changes.first(),
            Some(Change::Started {
                index: 0,
                kind: BlockKind::Text,
                ..
            })
        ));
        assert!(
            changes
                .iter()
                .any(|c| matches!(c, Change::Done { index: Some(0), .. })),
            "the assistant line completes block 0: {changes:?}"
        );
        assert!(
            t.messages.is_empty() && t.bytes == 0,
            "nothing in flight after message_stop"
        );
    }

    #[test]
    fn thinking_then_text_completes_block_by_block() {
        let mut t = Tracker::new(1 << 20);
        feed(&mut t, start("m"));
        feed(
            &mut t,
            block(
                0,
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            ),
        );
        feed(
            &mut t,
            delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
        );
        feed(
            &mut t,
            delta(0, json!({"type": "signature_delta", "signature": "abc"})),
        );
        feed(
            &mut t,
            delta(0, json!({"type": "thinking_delta", "thinking": "think."})),
        );
        feed(&mut t, assistant("m"));
        feed(
            &mut t,
            ev(json!({"type": "content_block_stop", "index": 0})),
        );
        feed(&mut t, block(1, json!({"type": "text", "text": ""})));
        feed(&mut t, text(1, "Hel"));
        feed(&mut t, text(1, "lo"));
        feed(&mut t, assistant("m"));
        feed(&mut t, ev(json!({"type": "message_stop"})));
        assert_eq!(
            t.take(),
            vec![
                started("m", 0, BlockKind::Thinking),
                frag("m", 0, "Let me "),
                frag("m", 0, "think."),
                done("m", 0),
                started("m", 1, BlockKind::Text),
                frag("m", 1, "Hel"),
                frag("m", 1, "lo"),
                done("m", 1),
            ]
        );
        assert_eq!(t.bytes, 0);
    }

    #[test]
    fn tool_input_names_its_tool() {
        let mut t = Tracker::new(1 << 20);
        feed(&mut t, start("m"));
        feed(
            &mut t,
            block(
                0,
                json!({"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {}}),
            ),
        );
        feed(
            &mut t,
            delta(
                0,
                json!({"type": "input_json_delta", "partial_json": "{\"command\":"}),
            ),
        );
        feed(
            &mut t,
            delta(
                0,
                json!({"type": "input_json_delta", "partial_json": "\"ls\"}"}),
            ),
        );
        assert_eq!(
            t.take(),
            vec![
                started(
                    "m",
                    0,
                    BlockKind::ToolInput {
                        tool_name: "Bash".into(),
                        tool_use_id: "toolu_1".into()
                    }
                ),
                frag("m", 0, "{\"command\":"),
                frag("m", 0, "\"ls\"}"),
            ]
        );
    }

    /// Newer CLIs stream subagents too: their lines interleave with the
    /// main thread's and are told apart by `parent_tool_use_id`.
    #[test]
    fn a_subagent_streams_beside_the_main_thread() {
        let mut t = Tracker::new(1 << 20);
        feed(&mut t, start("main"));
        feed(&mut t, block(0, json!({"type": "text", "text": ""})));
        feed(&mut t, sub(start("child"), "toolu_agent"));
        feed(
            &mut t,
            sub(block(0, json!({"type": "text", "text": ""})), "toolu_agent"),
        );
        feed(&mut t, sub(text(0, "child "), "toolu_agent"));
        feed(&mut t, text(0, "main "));
        feed(&mut t, assistant("child"));
        feed(&mut t, text(0, "more"));
        let changes = t.take();
        assert_eq!(
            changes,
            vec![
                started("main", 0, BlockKind::Text),
                Change::Started {
                    message_id: "child".into(),
                    parent_tool_use_id: "toolu_agent".into(),
                    index: 0,
                    kind: BlockKind::Text
                },
                frag("child", 0, "child "),
                frag("main", 0, "main "),
                done("child", 0),
                frag("main", 0, "more"),
            ]
        );
    }

    #[test]
    fn bounded_by_bytes_and_cleared_at_the_turn_end() {
        let mut t = Tracker::new(10);
        feed(&mut t, start("m"));
        feed(&mut t, block(0, json!({"type": "text", "text": ""})));
        feed(&mut t, text(0, "0123456789"));
        feed(&mut t, text(0, "x"));
        assert_eq!(t.dropped(), 1);
        feed(&mut t, block(1, json!({"type": "text", "text": ""})));
        feed(&mut t, text(1, "y"));
        assert_eq!(t.dropped(), 2, "the budget is per session, not per block");
        let changes = t.take();
        assert_eq!(changes.len(), 3, "{changes:?}");
        feed(&mut t, json!({"type": "result", "subtype": "success"}));
        assert_eq!(t.take(), vec![Change::Cleared]);
        // A new message starts from nothing.
        feed(&mut t, start("n"));
        feed(&mut t, block(0, json!({"type": "text", "text": ""})));
        feed(&mut t, text(0, "fresh"));
        assert_eq!(t.take().last(), Some(&frag("n", 0, "fresh")));
    }

    #[test]
    fn lines_of_unknown_messages_and_blocks_change_nothing() {
        let mut t = Tracker::new(1 << 20);
        feed(&mut t, text(0, "no message yet"));
        feed(&mut t, assistant("never-streamed"));
        feed(&mut t, start("m"));
        feed(&mut t, text(5, "no such block"));
        feed(&mut t, block(0, json!({"type": "image"})));
        assert_eq!(t.take(), vec![]);
        // Without stream events (--deltas off) a result changes nothing either.
        let mut quiet = Tracker::new(1 << 20);
        feed(&mut quiet, assistant("a"));
        feed(&mut quiet, json!({"type": "result"}));
        assert_eq!(quiet.take(), vec![]);
    }

    #[test]
    fn a_message_that_stops_with_open_blocks_drops_them() {
        let mut t = Tracker::new(1 << 20);
        feed(&mut t, start("m"));
        feed(&mut t, block(0, json!({"type": "text", "text": ""})));
        feed(&mut t, text(0, "cut"));
        feed(&mut t, ev(json!({"type": "message_stop"})));
        let changes = t.take();
        assert_eq!(
            changes.last(),
            Some(&Change::Done {
                message_id: "m".into(),
                index: None
            })
        );
        assert_eq!(t.bytes, 0);
    }

    fn output_started(id: &str) -> Change {
        Change::Started {
            message_id: id.into(),
            parent_tool_use_id: "".into(),
            index: 0,
            kind: BlockKind::ToolOutput {
                tool_name: "Bash".into(),
                tool_use_id: id.into(),
            },
        }
    }

    /// Two commands print at once, beside the message being written: each
    /// output is a block of its own, keyed by its tool_use id, and ends
    /// with its tool's result, leaving the others as they are.
    #[test]
    fn tool_outputs_stream_side_by_side_and_end_with_their_result() {
        let mut t = Tracker::new(1 << 20);
        t.begin_message("", "m");
        t.begin_block("", 0, BlockKind::Text);
        t.output("call_a", "Bash", "line1\n");
        t.output("call_b", "Bash", "other\n");
        t.append("", 0, "Running");
        t.output("call_a", "Bash", "line2\n");
        t.end_output("call_a");
        t.output("call_a", "Bash", "");
        t.end_output("call_never_printed");
        assert_eq!(
            t.take(),
            vec![
                started("m", 0, BlockKind::Text),
                output_started("call_a"),
                frag("call_a", 0, "line1\n"),
                output_started("call_b"),
                frag("call_b", 0, "other\n"),
                frag("m", 0, "Running"),
                frag("call_a", 0, "line2\n"),
                Change::Done {
                    message_id: "call_a".into(),
                    index: None
                },
            ]
        );
        assert_eq!(t.bytes, "other\n".len() + "Running".len());
        // A new message on the main thread leaves a running tool's output.
        t.begin_message("", "n");
        t.output("call_b", "Bash", "more");
        assert_eq!(t.take().last(), Some(&frag("call_b", 0, "more")));
    }

    #[test]
    fn tool_output_shares_the_budget_and_is_cleared_at_the_turn_end() {
        let mut t = Tracker::new(8);
        t.output("call_a", "Bash", "12345");
        t.output("call_b", "Bash", "6789");
        t.output("call_b", "Bash", "y");
        t.output("call_a", "Bash", "x");
        assert_eq!(
            t.dropped(),
            2,
            "the budget is the session's; a full block stays full"
        );
        assert_eq!(t.take().len(), 4, "two starts and two fragments of call_a");
        t.clear();
        assert_eq!(t.take(), vec![Change::Cleared]);
        assert_eq!(t.bytes, 0);
        t.output("call_a", "Bash", "again");
        assert_eq!(
            t.take(),
            vec![output_started("call_a"), frag("call_a", 0, "again")]
        );
    }
}
