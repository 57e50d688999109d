//! [`Board`]: the text of the blocks in flight, per session; [`Cursor`]:
//! one subscriber's view of it.

use std::collections::VecDeque;
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use agent_harness_client::pb;
use tokio::sync::watch;

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
}

/// What a board holds; read under its lock by [`Cursor::diff`].
#[derive(Debug, Default)]
pub struct State {
    /// The run writing.
    run_id: String,
    /// The log head when the board last changed: a subscriber sends its
    /// deltas only once it has sent every event up to here, so no fragment
    /// overtakes an event the CLI wrote before it.
    after_seq: u64,
    /// In the order they started.
    blocks: Vec<Block>,
    next_serial: u64,
}

impl State {
    /// See the field.
    pub fn after_seq(&self) -> u64 {
        self.after_seq
    }

    /// Bytes of partial text held.
    pub fn bytes(&self) -> usize {
        self.blocks.iter().map(|b| b.text.len()).sum()
    }

    /// Blocks in flight.
    pub fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// Applies one change; true when text was added.
    fn apply(&mut self, change: &Change) -> bool {
        match change {
            Change::Started {
                message_id,
                parent_tool_use_id,
                index,
                kind,
            } => {
                if !self.has(message_id, *index) {
                    self.next_serial += 1;
                    self.blocks.push(Block {
                        serial: self.next_serial,
                        message_id: message_id.clone(),
                        parent_tool_use_id: parent_tool_use_id.clone(),
                        index: *index,
                        kind: kind.clone(),
                        text: String::new(),
                    });
                }
                false
            }
            Change::Fragment {
                message_id,
                index,
                fragment,
            } => match self
                .blocks
                .iter_mut()
                .find(|b| b.message_id == *message_id && b.index == *index)
            {
                Some(b) => {
                    b.text.push_str(fragment);
                    true
                }
                // Done before the commit (see `Board::remove`).
                None => false,
            },
            Change::Done { message_id, index } => {
                self.blocks.retain(|b| {
                    !(b.message_id == *message_id && index.is_none_or(|i| i == b.index))
                });
                false
            }
            Change::Cleared => {
                self.blocks.clear();
                false
            }
        }
    }

    fn has(&self, message_id: &str, index: u32) -> bool {
        self.blocks
            .iter()
            .any(|b| &*b.message_id == message_id && b.index == index)
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

    /// Before a batch's events are committed: applies its removals only, so
    /// that no subscriber that gets a block's `content` event can still find
    /// the block here. (A subscriber that joins in between misses its text
    /// for that moment; the `content` event follows.)
    pub fn remove(&self, changes: &[Change]) {
        if changes.iter().any(Change::removes) {
            let mut state = self.write();
            for c in changes.iter().filter(|c| c.removes()) {
                state.apply(c);
            }
        }
    }

    /// After a batch's events are committed (`head` is the log head now):
    /// applies all its changes, in order, and wakes the subscribers.
    pub fn publish(&self, run_id: &str, changes: &[Change], head: u64) {
        if changes.is_empty() {
            return;
        }
        let added = {
            let mut state = self.write();
            if state.run_id != run_id {
                // A run that died without a result left its blocks behind.
                state.blocks.clear();
                state.run_id = run_id.to_owned();
            }
            state.after_seq = head;
            let mut added = false;
            for c in changes {
                added |= state.apply(c);
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
    /// was sent to `state`: the whole text of each block it has not seen
    /// (`snapshot` on the first diff), then only what was appended since.
    /// `after_seq` is the last event this stream sent.
    pub fn diff(&mut self, state: &State, after_seq: u64, out: &mut VecDeque<pb::Delta>) {
        let first = std::mem::take(&mut self.first);
        self.sent
            .retain(|(serial, _)| state.blocks.iter().any(|b| b.serial == *serial));
        for b in &state.blocks {
            let entry = self.sent.iter_mut().find(|(s, _)| *s == b.serial);
            let (from, snapshot) = match entry.as_deref() {
                Some(&(_, n)) if n <= b.text.len() => (n, false),
                // Cannot happen (text only grows); resend it whole.
                Some(_) => (0, true),
                None => (0, first),
            };
            if from == b.text.len() {
                continue;
            }
            match entry {
                Some(e) => e.1 = b.text.len(),
                None => self.sent.push((b.serial, b.text.len())),
            }
            out.push_back(delta(state, b, after_seq, &b.text[from..], snapshot));
        }
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

    fn diff(c: &mut Cursor, b: &Board, after: u64) -> Vec<(u32, String, bool)> {
        let mut out = VecDeque::new();
        c.diff(&b.read(), after, &mut out);
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

    #[test]
    fn removals_apply_before_the_commit_and_fragments_after() {
        let board = Board::default();
        board.publish("r", &[started("m", 0), frag("m", 0, "abc")], 1);
        // One batch: the end of block 0 and the start of block 1.
        let batch = [
            frag("m", 0, "d"),
            done("m", 0),
            started("m", 1),
            frag("m", 1, "x"),
        ];
        board.remove(&batch);
        assert!(
            board.read().is_empty(),
            "block 0 goes before its content is committed"
        );
        let mut c = Cursor::default();
        assert_eq!(diff(&mut c, &board, 1), vec![]);
        board.publish("r", &batch, 2);
        assert_eq!(board.read().after_seq(), 2);
        assert_eq!(diff(&mut c, &board, 2), vec![(1, "x".into(), false)]);
        assert_eq!(board.read().bytes(), 1);
    }

    #[test]
    fn a_turn_that_ends_in_the_same_batch_leaves_nothing() {
        let board = Board::default();
        let batch = [started("m", 0), frag("m", 0, "cut"), Change::Cleared];
        board.remove(&batch);
        board.publish("r", &batch, 5);
        assert!(board.read().is_empty());
    }

    #[test]
    fn a_new_run_drops_what_an_old_one_left_and_clear_is_per_run() {
        let board = Board::default();
        board.publish("r1", &[started("m", 0), frag("m", 0, "stale")], 1);
        board.clear("other");
        assert_eq!(board.read().len(), 1, "another run's end clears nothing");
        board.publish("r2", &[started("n", 0), frag("n", 0, "new")], 2);
        let mut c = Cursor::default();
        assert_eq!(diff(&mut c, &board, 2), vec![(0, "new".into(), true)]);
        board.clear("r2");
        assert!(board.read().is_empty());
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
        board.publish("r", &[done("m", 0)], 2);
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
}
