//! [`Board`]: the text of the blocks in flight, per session; [`Cursor`]:
//! one subscriber's view of it.

use std::collections::VecDeque;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use agent_harness_protocol::pb;
use tokio::sync::watch;
use tokio::time::{Duration, Instant};

use super::{BlockKind, Change};

/// One block in flight, with its text so far.
#[derive(Debug)]
struct Block {
    /// Unique on this board: how a [`Cursor`] names it.
    serial: u64,
    message_id: Arc<str>,
    parent_tool_use_id: Arc<str>,
    index: u32,
    kind: BlockKind,
    text: String,
    /// How long the text was at each log head it was published after,
    /// oldest first (one entry per head: a block is rarely written across
    /// an event). A stream that has sent the events up to `s` may send the
    /// text up to the last mark at or below `s`, and no further: the rest
    /// was written after an event it has not sent yet.
    marks: Vec<(u64, usize)>,
    /// Set when the block is done (its `content` event, the message's or
    /// the turn's end): the log head before that commit. A stream that has
    /// sent events past it has the `content` and must not get more of the
    /// block; one that has not may still get the text up to it (so a
    /// block's last fragments go out before its `content`).
    closed_after: Option<u64>,
    /// When it was done: kept [`KEEP_DONE`] longer, for the streams that
    /// have not sent its `content` yet.
    closed_at: Option<Instant>,
}

/// How long a done block stays on the board: a stream that is behind
/// still sends its last fragments before its `content` (see `Cursor`).
pub const KEEP_DONE: Duration = Duration::from_secs(1);

impl Block {
    fn close(&mut self, after: u64, now: Instant) {
        if self.closed_after.is_none() {
            self.closed_after = Some(after);
            self.closed_at = Some(now);
        }
    }

    /// The text a stream that has sent events up to `sent_seq` may have;
    /// and whether that is all of it.
    fn visible(&self, sent_seq: u64) -> (usize, bool) {
        let len = self
            .marks
            .iter()
            .rev()
            .find(|(after, _)| *after <= sent_seq)
            .map_or(0, |(_, len)| *len);
        (len, len == self.text.len())
    }
}

/// What a board holds; read under its lock by [`Cursor::diff`].
#[derive(Debug, Default)]
pub struct State {
    /// The run writing.
    run_id: String,
    /// In the order they started.
    blocks: Vec<Block>,
    next_serial: u64,
}

impl State {
    /// Bytes of partial text held.
    pub fn bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.text.len()).sum()
    }

    /// Blocks held that are still being written.
    pub fn open(&self) -> usize {
        self.blocks
            .iter()
            .filter(|b| b.closed_after.is_none())
            .count()
    }

    /// Applies one change (text added after log head `head`; blocks done
    /// are closed after `close_after`); true when text was added.
    fn apply(&mut self, change: &Change, head: u64, close_after: u64) -> bool {
        match change {
            Change::Started {
                message_id,
                parent_tool_use_id,
                index,
                kind,
            } => {
                if self.find(message_id, *index).is_none() {
                    self.next_serial += 1;
                    self.blocks.push(Block {
                        serial: self.next_serial,
                        message_id: message_id.clone(),
                        parent_tool_use_id: parent_tool_use_id.clone(),
                        index: *index,
                        kind: kind.clone(),
                        text: String::new(),
                        marks: Vec::new(),
                        closed_after: None,
                        closed_at: None,
                    });
                }
                false
            }
            Change::Fragment {
                message_id,
                index,
                fragment,
            } => match self.find(message_id, *index) {
                Some(b) if b.closed_after.is_none() => {
                    b.text.push_str(fragment);
                    let len = b.text.len();
                    match b.marks.last_mut() {
                        Some((after, l)) if *after == head => *l = len,
                        _ => b.marks.push((head, len)),
                    }
                    true
                }
                _ => false,
            },
            Change::Done { message_id, index } => {
                for b in self
                    .blocks
                    .iter_mut()
                    .filter(|b| b.message_id == *message_id && index.is_none_or(|i| i == b.index))
                {
                    b.close(close_after, Instant::now());
                }
                false
            }
            Change::Cleared => {
                let now = Instant::now();
                for b in &mut self.blocks {
                    b.close(close_after, now);
                }
                false
            }
        }
    }

    fn find(&mut self, message_id: &str, index: u32) -> Option<&mut Block> {
        self.blocks
            .iter_mut()
            .find(|b| &*b.message_id == message_id && b.index == index)
    }

    /// Forgets blocks done more than [`KEEP_DONE`] before `now`: a stream
    /// that far behind gets their `content` without their last fragments.
    fn forget_done(&mut self, now: Instant) {
        self.blocks.retain(|b| {
            b.closed_at
                .is_none_or(|at| now.saturating_duration_since(at) < KEEP_DONE)
        });
    }
}

/// The blocks in flight of one session, shared by its run task (writer)
/// and its subscribers (readers); see the [module docs](super).
#[derive(Debug)]
pub struct Board {
    state: RwLock<State>,
    /// Bumped whenever text is added; subscribers that asked for deltas wait on it.
    version: watch::Sender<u64>,
}

impl Default for Board {
    fn default() -> Self {
        Self {
            state: RwLock::new(State::default()),
            version: watch::Sender::new(0),
        }
    }
}

impl Board {
    /// Wakes on every addition of text.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.version.subscribe()
    }

    /// The state, for a subscriber's diff.
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    /// Changes that follow every event up to `head` and no later one (the
    /// CLI wrote them before anything not yet committed): applied at once.
    pub fn publish(&self, run_id: &str, changes: &[Change], head: u64) {
        if changes.is_empty() {
            return;
        }
        let added = {
            let mut state = self.write();
            state.forget_done(Instant::now());
            if state.run_id != run_id {
                // A run that died without a result left its blocks behind.
                state.blocks.clear();
                state.run_id = run_id.to_owned();
            }
            let mut added = false;
            for c in changes {
                added |= state.apply(c, head, head);
            }
            added
        };
        if added {
            self.version.send_modify(|v| *v += 1);
        }
    }

    /// Before a batch's events are committed (`head` is the log head
    /// before the commit): closes the blocks the batch completes, so no
    /// stream that gets their `content` event gets more of them.
    pub fn close(&self, changes: &[Change], head: u64) {
        if changes.iter().any(Change::removes) {
            let mut state = self.write();
            state.forget_done(Instant::now());
            for c in changes.iter().filter(|c| c.removes()) {
                state.apply(c, head, head);
            }
        }
    }

    /// After the batch's events are committed (`head` is the log head now,
    /// `before` the one [`Board::close`] was given): all its changes, in
    /// order; blocks done in it are closed after `before`.
    pub fn publish_after(&self, run_id: &str, changes: &[Change], before: u64, head: u64) {
        if changes.is_empty() {
            return;
        }
        let added = {
            let mut state = self.write();
            if state.run_id != run_id {
                state.blocks.clear();
                state.run_id = run_id.to_owned();
            }
            let mut added = false;
            for c in changes {
                added |= state.apply(c, head, before);
            }
            added
        };
        if added {
            self.version.send_modify(|v| *v += 1);
        }
    }

    /// The run ended: nothing of it is in flight any more.
    pub fn clear(&self, run_id: &str) {
        let mut state = self.write();
        if state.run_id == run_id {
            state.blocks.clear();
        }
    }
}

/// One subscriber's position on a [`Board`]: how much of each block it has
/// sent. Small (one entry per block in flight) and holds no text.
#[derive(Debug)]
pub struct Cursor {
    sent: Vec<(u64, usize)>,
    /// The next diff is the snapshot after `caught_up`.
    first: bool,
}

impl Default for Cursor {
    fn default() -> Self {
        Self {
            sent: Vec::new(),
            first: true,
        }
    }
}

impl Cursor {
    /// Appends to `out` the deltas that bring this subscriber from what it
    /// was sent to `state`, as far as a stream that has sent the events up
    /// to `sent_seq` may go: the whole text of each block it has not seen
    /// (`snapshot` on the first diff), then only what was appended since;
    /// nothing of a block whose `content` it may already have. Returns
    /// false when the board holds text this stream may send only after
    /// later events (diff again once they are sent).
    pub fn diff(&mut self, state: &State, sent_seq: u64, out: &mut VecDeque<pb::Delta>) -> bool {
        let first = std::mem::take(&mut self.first);
        let mut complete = true;
        let live = |b: &Block| b.closed_after.is_none_or(|after| sent_seq <= after);
        self.sent
            .retain(|(serial, _)| state.blocks.iter().any(|b| b.serial == *serial && live(b)));
        for b in state.blocks.iter().filter(|b| live(b)) {
            let (upto, all) = b.visible(sent_seq);
            complete &= all;
            let entry = self.sent.iter_mut().find(|(s, _)| *s == b.serial);
            let (from, snapshot) = match entry.as_deref() {
                Some(&(_, n)) if n <= upto => (n, false),
                // Cannot happen (text only grows); resend it whole.
                Some(_) => (0, true),
                None => (0, first),
            };
            if from >= upto {
                continue;
            }
            match entry {
                Some(e) => e.1 = upto,
                None => self.sent.push((b.serial, upto)),
            }
            out.push_back(delta(state, b, sent_seq, &b.text[from..upto], snapshot));
        }
        complete
    }
}

fn delta(state: &State, b: &Block, after_seq: u64, fragment: &str, snapshot: bool) -> pb::Delta {
    let (block_type, tool_name, tool_use_id) = match &b.kind {
        BlockKind::Text => (pb::DeltaBlockType::Text, "", ""),
        BlockKind::Thinking => (pb::DeltaBlockType::Thinking, "", ""),
        BlockKind::ToolInput {
            tool_name,
            tool_use_id,
        } => (
            pb::DeltaBlockType::ToolInput,
            tool_name.as_str(),
            tool_use_id.as_str(),
        ),
        BlockKind::ToolOutput {
            tool_name,
            tool_use_id,
        } => (
            pb::DeltaBlockType::ToolOutput,
            tool_name.as_str(),
            tool_use_id.as_str(),
        ),
    };
    pb::Delta {
        run_id: state.run_id.clone(),
        after_seq,
        message_id: b.message_id.to_string(),
        index: b.index,
        block_type: block_type as i32,
        tool_name: tool_name.to_owned(),
        tool_use_id: tool_use_id.to_owned(),
        parent_tool_use_id: b.parent_tool_use_id.to_string(),
        fragment: fragment.to_owned(),
        snapshot,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn started(id: &str, index: u32) -> Change {
        Change::Started {
            message_id: id.into(),
            parent_tool_use_id: "".into(),
            index,
            kind: BlockKind::Text,
        }
    }

    fn frag(id: &str, index: u32, f: &str) -> Change {
        Change::Fragment {
            message_id: id.into(),
            index,
            fragment: f.into(),
        }
    }

    fn done(id: &str, index: u32) -> Change {
        Change::Done {
            message_id: id.into(),
            index: Some(index),
        }
    }

    fn diff(c: &mut Cursor, b: &Board, sent_seq: u64) -> Vec<(u32, String, bool)> {
        let mut out = VecDeque::new();
        c.diff(&b.read(), sent_seq, &mut out);
        out.into_iter()
            .map(|d| (d.index, d.fragment, d.snapshot))
            .collect()
    }

    #[test]
    fn a_late_subscriber_gets_a_snapshot_then_only_what_is_new() {
        let board = Board::default();
        board.publish(
            "r",
            &[started("m", 0), frag("m", 0, "Hel"), frag("m", 0, "lo")],
            3,
        );
        let mut early = Cursor {
            first: false,
            ..Default::default()
        };
        let mut late = Cursor::default();
        assert_eq!(diff(&mut late, &board, 3), vec![(0, "Hello".into(), true)]);
        assert_eq!(
            diff(&mut early, &board, 3),
            vec![(0, "Hello".into(), false)]
        );
        board.publish("r", &[frag("m", 0, ", "), frag("m", 0, "world")], 3);
        // Coalesced: two fragments, one delta.
        assert_eq!(
            diff(&mut late, &board, 3),
            vec![(0, ", world".into(), false)]
        );
        assert_eq!(
            diff(&mut late, &board, 3),
            vec![],
            "nothing new, nothing sent"
        );
    }

    /// One batch: block 0's last fragment, its `assistant` line (its
    /// `content` event), then block 1. The fragment goes out at once; block
    /// 0 is closed before the commit; block 1 comes after it.
    #[test]
    fn a_blocks_last_fragments_go_before_its_content_and_nothing_after() {
        let board = Board::default();
        board.publish("r", &[started("m", 0), frag("m", 0, "abc")], 1);
        let mut behind = Cursor::default();
        let mut ahead = Cursor::default();
        assert_eq!(diff(&mut behind, &board, 1), vec![(0, "abc".into(), true)]);
        assert_eq!(diff(&mut ahead, &board, 1), vec![(0, "abc".into(), true)]);
        // The lines before the batch's first event.
        board.publish("r", &[frag("m", 0, "d")], 1);
        let later = [done("m", 0), started("m", 1), frag("m", 1, "x")];
        board.close(&later, 1);
        // Committed: block 0's content is seq 2. Then the rest.
        board.publish_after("r", &later, 1, 2);
        // A stream still at seq 1 gets block 0's last fragment (before the
        // content), and nothing of block 1 (written after the content).
        let mut out = VecDeque::new();
        assert!(
            !behind.diff(&board.read(), 1, &mut out),
            "block 1 waits for seq 2"
        );
        let got: Vec<_> = out.iter().map(|d| (d.index, d.fragment.as_str())).collect();
        assert_eq!(got, vec![(0, "d")]);
        assert_eq!(diff(&mut behind, &board, 2), vec![(1, "x".into(), false)]);
        // A stream that already sent the content gets nothing more of block 0.
        assert_eq!(diff(&mut ahead, &board, 2), vec![(1, "x".into(), false)]);
        // A stream joining now: only block 1.
        assert_eq!(
            diff(&mut Cursor::default(), &board, 2),
            vec![(1, "x".into(), true)]
        );
        // Block 0 stays a while for the streams still behind its content,
        // and goes after KEEP_DONE.
        board.publish("r", &[frag("m", 1, "y")], 2);
        assert_eq!(board.read().blocks.len(), 2);
        assert_eq!(
            diff(&mut Cursor::default(), &board, 1),
            vec![(0, "abcd".into(), true)],
            "a stream a batch behind still gets block 0 before its content"
        );
        let later = Instant::now() + KEEP_DONE;
        board.write().forget_done(later);
        assert_eq!(board.read().blocks.len(), 1);
        assert_eq!(board.read().bytes(), 2);
    }

    #[test]
    fn a_turn_that_ends_in_the_same_batch_leaves_nothing_open() {
        let board = Board::default();
        let later = [started("m", 0), frag("m", 0, "cut"), Change::Cleared];
        board.close(&later, 4);
        board.publish_after("r", &later, 4, 5);
        assert_eq!(board.read().open(), 0);
        assert_eq!(diff(&mut Cursor::default(), &board, 5), vec![]);
    }

    #[test]
    fn a_new_run_drops_what_an_old_one_left_and_clear_is_per_run() {
        let board = Board::default();
        board.publish("r1", &[started("m", 0), frag("m", 0, "stale")], 1);
        board.clear("other");
        assert_eq!(board.read().open(), 1, "another run's end clears nothing");
        board.publish("r2", &[started("n", 0), frag("n", 0, "new")], 2);
        let mut c = Cursor::default();
        assert_eq!(diff(&mut c, &board, 2), vec![(0, "new".into(), true)]);
        board.clear("r2");
        assert_eq!(board.read().open(), 0);
    }

    #[test]
    fn wakes_only_when_text_is_added() {
        let board = Board::default();
        let mut rx = board.watch();
        board.publish("r", &[started("m", 0)], 1);
        assert!(!rx.has_changed().unwrap());
        board.publish("r", &[frag("m", 0, "a")], 1);
        assert!(rx.has_changed().unwrap());
        rx.borrow_and_update();
        board.close(&[done("m", 0)], 1);
        board.publish_after("r", &[done("m", 0)], 1, 2);
        assert!(!rx.has_changed().unwrap());
    }

    #[test]
    fn deltas_carry_the_block_and_the_head_they_follow() {
        let board = Board::default();
        board.publish(
            "run-1",
            &[
                Change::Started {
                    message_id: "m".into(),
                    parent_tool_use_id: "toolu_agent".into(),
                    index: 2,
                    kind: BlockKind::ToolInput {
                        tool_name: "Bash".into(),
                        tool_use_id: "toolu_1".into(),
                    },
                },
                frag("m", 2, "{\"command\":"),
            ],
            7,
        );
        let mut out = VecDeque::new();
        Cursor::default().diff(&board.read(), 9, &mut out);
        assert_eq!(
            out.pop_front().unwrap(),
            pb::Delta {
                run_id: "run-1".into(),
                after_seq: 9,
                message_id: "m".into(),
                index: 2,
                block_type: pb::DeltaBlockType::ToolInput as i32,
                tool_name: "Bash".into(),
                tool_use_id: "toolu_1".into(),
                parent_tool_use_id: "toolu_agent".into(),
                fragment: "{\"command\":".into(),
                snapshot: true,
            }
        );
    }

    /// A running tool's output: keyed by its tool_use id, gone for a
    /// stream once it has sent the tool's `result`.
    #[test]
    fn a_tool_output_delta_names_its_tool_and_ends_with_its_result() {
        let board = Board::default();
        let kind = BlockKind::ToolOutput {
            tool_name: "Bash".into(),
            tool_use_id: "call_1".into(),
        };
        let started = Change::Started {
            message_id: "call_1".into(),
            parent_tool_use_id: "".into(),
            index: 0,
            kind,
        };
        board.publish("r", &[started, frag("call_1", 0, "line1\n")], 4);
        let mut cursor = Cursor::default();
        let mut out = VecDeque::new();
        cursor.diff(&board.read(), 4, &mut out);
        let d = out.pop_front().unwrap();
        assert_eq!(
            (d.block_type, d.message_id.as_str(), d.tool_use_id.as_str()),
            (pb::DeltaBlockType::ToolOutput as i32, "call_1", "call_1")
        );
        assert_eq!(
            (d.tool_name.as_str(), d.fragment.as_str()),
            ("Bash", "line1\n")
        );
        // The result's batch: closed before its commit (head 4 → 5).
        let end = [Change::Done {
            message_id: "call_1".into(),
            index: None,
        }];
        board.close(&end, 4);
        board.publish_after("r", &end, 4, 5);
        assert_eq!(diff(&mut cursor, &board, 5), vec![]);
    }
}
