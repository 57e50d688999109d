//! A batch of stdout lines: what it may take (lines and bytes), the lines
//! normalized into its events and live-typing changes, and whether it is
//! plain (nothing in it is reacted to around its commit).

use agent_harness_protocol::pb::event::Payload;
use tokio::sync::mpsc;

use super::{MAX_BATCH_BYTES, MAX_LINES_PER_BATCH};
use crate::adapter::{ControlReply, Decoder, StdoutLine};
use crate::partial::Change;

/// A batch of stdout lines, normalized.
#[derive(Default)]
pub(super) struct Batch {
    /// The events to append.
    pub(super) payloads: Vec<(Payload, String)>,
    /// Live-typing changes of the lines before the first event: published
    /// at once.
    pub(super) now: Vec<Change>,
    /// The other changes: removals before the commit, all after it.
    pub(super) later: Vec<Change>,
    /// The CLI's answers to control requests among the lines: handed on
    /// after the batch is committed.
    pub(super) replies: Vec<ControlReply>,
}

impl Batch {
    /// Nothing but content and tool results, with no live-typing change
    /// and no control reply: nothing in it is reacted to after its commit
    /// (see [`Run::observe`]) or before it (withdrawals, permission modes),
    /// so the next batch may be committed before it is answered.
    pub(super) fn plain(&self) -> bool {
        self.now.is_empty()
            && self.later.is_empty()
            && self.replies.is_empty()
            && self
                .payloads
                .iter()
                .all(|(p, _)| matches!(p, Payload::Content(_) | Payload::Result(_)))
    }
}

/// What a batch may still take: lines, and their bytes (a batch of long
/// lines is cut short by the bytes, so what a batch holds, read ahead or
/// not, is bounded by both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Room {
    lines: usize,
    bytes: usize,
}

impl Room {
    /// A new batch's room.
    pub(super) fn batch() -> Room {
        Room {
            lines: MAX_LINES_PER_BATCH,
            bytes: MAX_BATCH_BYTES,
        }
    }

    /// No room: nothing is taken.
    pub(super) fn none() -> Room {
        Room { lines: 0, bytes: 0 }
    }

    /// No limit (the lines left after the exit).
    pub(super) fn unbounded() -> Room {
        Room {
            lines: usize::MAX,
            bytes: usize::MAX,
        }
    }

    /// Whether another line may be taken.
    pub(super) fn left(&self) -> bool {
        self.lines > 0 && self.bytes > 0
    }

    fn take(&mut self, line: &StdoutLine) {
        let bytes = match line {
            StdoutLine::Line(l) => l.len(),
            StdoutLine::TooLong { head, .. } => head.len(),
        };
        self.lines = self.lines.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(bytes);
    }
}

/// `first` and the lines after it that stdout already has, while `room`
/// is left (`first` whatever it is); `room` is what is left after them.
pub(super) fn take_lines(
    stdout: &mut mpsc::Receiver<StdoutLine>,
    first: StdoutLine,
    room: &mut Room,
) -> Vec<StdoutLine> {
    room.take(&first);
    let mut lines = vec![first];
    while room.left() {
        match stdout.try_recv() {
            Ok(l) => {
                room.take(&l);
                lines.push(l);
            }
            Err(_) => break,
        }
    }
    lines
}

/// Each line is handed over, so an event keeps it as its `cli_line`
/// without a copy.
pub(super) fn normalize_batch(decoder: &mut dyn Decoder, lines: Vec<StdoutLine>) -> Batch {
    let mut batch = Batch::default();
    normalize_into(decoder, lines, &mut batch);
    batch
}

/// `lines` normalized onto the end of `batch` (as one batch with the
/// lines it has).
pub(super) fn normalize_into(decoder: &mut dyn Decoder, lines: Vec<StdoutLine>, batch: &mut Batch) {
    // Most lines are one event each: the batch does not regrow (each
    // regrowth would copy every event in it).
    batch.payloads.reserve(lines.len());
    for l in lines {
        batch.payloads.extend(decoder.line_owned(l));
        let changes = decoder.take_partial();
        if batch.payloads.is_empty() {
            batch.now.extend(changes);
        } else {
            batch.later.extend(changes);
        }
    }
    batch.replies.extend(decoder.take_control_replies());
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::normalize::Normalizer;

    fn line(v: serde_json::Value) -> StdoutLine {
        StdoutLine::Line(v.to_string())
    }

    fn ev(event: serde_json::Value) -> StdoutLine {
        line(json!({"type": "stream_event", "event": event, "parent_tool_use_id": null}))
    }

    /// A block's last fragments and its `assistant` line in one batch: the
    /// fragments are published before the commit, so a subscriber gets
    /// them before the `content` event; the block's end waits for it.
    #[test]
    fn fragments_before_the_first_event_of_a_batch_go_out_at_once() {
        let mut n = Normalizer::new(1 << 20);
        let b = normalize_batch(&mut n, typed_lines());
        assert_eq!(b.payloads.len(), 1, "one content event");
        check_fragments_split(&b);
    }

    /// A block typed and written, with the CLI's answer to a control
    /// request among its lines.
    fn typed_lines() -> Vec<StdoutLine> {
        let text = |index: u32, t: &str| {
            ev(
                json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": t}}),
            )
        };
        let lines = [
            ev(json!({"type": "message_start", "message": {"id": "m"}})),
            ev(
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            text(0, "Hel"),
            text(0, "lo"),
            line(
                json!({"type": "assistant", "message": {"id": "m", "content": [{"type": "text", "text": "Hello"}]}}),
            ),
            ev(json!({"type": "content_block_stop", "index": 0})),
            ev(
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}}),
            ),
            line(
                json!({"type": "control_response", "response": {"subtype": "success", "request_id": "r1", "response": {}}}),
            ),
            text(1, "next"),
        ];
        lines.to_vec()
    }

    fn check_fragments_split(b: &Batch) {
        let fragments = |cs: &[Change]| -> Vec<String> {
            cs.iter()
                .filter_map(|c| match c {
                    Change::Fragment { fragment, .. } => Some(fragment.clone()),
                    _ => None,
                })
                .collect()
        };
        assert_eq!(fragments(&b.now), ["Hel", "lo"]);
        assert!(!b.now.iter().any(Change::removes));
        assert_eq!(fragments(&b.later), ["next"]);
        assert!(matches!(
            b.later.first(),
            Some(Change::Done { index: Some(0), .. })
        ));
    }

    /// A batch read ahead is read in pieces, as lines come while a commit
    /// is under way: wherever it is cut, it is the batch read at once
    /// (the same events, the same changes before and after its first
    /// event, the same control answers).
    #[test]
    fn a_batch_read_in_pieces_is_the_batch_read_at_once() {
        let lines = typed_lines();
        let whole = normalize_batch(&mut Normalizer::new(1 << 20), lines.clone());
        assert_eq!(whole.replies.len(), 1, "the control answer");
        for cut in 0..=lines.len() {
            for second in cut..=lines.len() {
                let mut n = Normalizer::new(1 << 20);
                let mut b = Batch::default();
                normalize_into(&mut n, lines[..cut].to_vec(), &mut b);
                normalize_into(&mut n, lines[cut..second].to_vec(), &mut b);
                normalize_into(&mut n, lines[second..].to_vec(), &mut b);
                assert_eq!(b.payloads, whole.payloads, "cut at {cut} and {second}");
                assert_eq!(b.now, whole.now, "cut at {cut} and {second}");
                assert_eq!(b.later, whole.later, "cut at {cut} and {second}");
                assert_eq!(b.replies, whole.replies, "cut at {cut} and {second}");
            }
        }
        check_fragments_split(&whole);
    }

    /// Only a batch of content and tool results with nothing else to do
    /// around its commit may be committed before the one before it is
    /// answered: a live-typing change, a control answer, a turn's end, a
    /// permission request or the CLI's start each make it not plain.
    #[test]
    fn only_content_and_tool_results_are_plain() {
        let plain =
            |lines: Vec<StdoutLine>| normalize_batch(&mut Normalizer::new(1 << 20), lines).plain();
        let assistant = line(
            json!({"type": "assistant", "message": {"id": "m", "content": [{"type": "text", "text": "Hi"}]}}),
        );
        let tool_result = line(
            json!({"type": "user", "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]}}),
        );
        assert!(plain(vec![assistant.clone(), tool_result.clone()]));
        assert!(plain(Vec::new()), "nothing to react to");

        let result = line(
            json!({"type": "result", "subtype": "success", "is_error": false, "result": "Hi"}),
        );
        let asks = line(
            json!({"type": "control_request", "request_id": "r1", "request": {"subtype": "can_use_tool", "tool_name": "Bash", "input": {}, "tool_use_id": "t2"}}),
        );
        let init = line(
            json!({"type": "system", "subtype": "init", "session_id": "s", "model": "m", "permissionMode": "default", "tools": []}),
        );
        for other in [result, asks, init] {
            assert!(!plain(vec![assistant.clone(), other.clone()]), "{other:?}");
        }
        // Live typing and a control answer (typed_lines has both).
        assert!(!plain(typed_lines()));
        assert!(!plain(typed_lines()[..4].to_vec()), "fragments alone");
        assert!(
            !plain(vec![typed_lines()[7].clone()]),
            "a control answer alone"
        );
    }

    fn queued(lines: impl IntoIterator<Item = StdoutLine>) -> mpsc::Receiver<StdoutLine> {
        let lines: Vec<_> = lines.into_iter().collect();
        let (tx, rx) = mpsc::channel(lines.len().max(1));
        for l in lines {
            tx.try_send(l).unwrap();
        }
        rx
    }

    fn short(i: usize) -> StdoutLine {
        StdoutLine::Line(format!("line {i}"))
    }

    /// A batch stops at its number of lines; what is left stays queued for
    /// the next, in order.
    #[test]
    fn a_batch_takes_at_most_its_lines() {
        let mut rx = queued((0..MAX_LINES_PER_BATCH + 77).map(short));
        let first = rx.try_recv().unwrap();
        let mut room = Room::batch();
        let lines = take_lines(&mut rx, first, &mut room);
        assert_eq!(lines.len(), MAX_LINES_PER_BATCH);
        assert_eq!(lines.last(), Some(&short(MAX_LINES_PER_BATCH - 1)));
        assert!(!room.left());
        assert_eq!(rx.try_recv().ok(), Some(short(MAX_LINES_PER_BATCH)));
        assert_eq!(rx.len(), 76);
    }

    /// A batch stops at the line that reaches its bytes (long lines make
    /// short batches), and always takes its first line, however long.
    #[test]
    fn a_batch_takes_lines_up_to_its_bytes() {
        let long = |c: char, n: usize| StdoutLine::Line(c.to_string().repeat(n));
        let third = MAX_BATCH_BYTES / 3 + 1;
        let mut rx = queued([
            long('a', third),
            long('b', third),
            long('c', third),
            short(0),
        ]);
        let first = rx.try_recv().unwrap();
        let mut room = Room::batch();
        let lines = take_lines(&mut rx, first, &mut room);
        assert_eq!(lines.len(), 3, "the third line reaches the bytes");
        assert!(!room.left());
        assert_eq!(rx.try_recv().ok(), Some(short(0)));

        let mut rx = queued([long('a', 2 * MAX_BATCH_BYTES), short(1)]);
        let first = rx.try_recv().unwrap();
        let lines = take_lines(&mut rx, first, &mut Room::batch());
        assert_eq!(lines.len(), 1, "a line over the bytes is a batch alone");
        assert_eq!(rx.try_recv().ok(), Some(short(1)));

        // A line cut to its head counts what is kept of it.
        let too_long = StdoutLine::TooLong {
            head: "h".into(),
            len: 10 * MAX_BATCH_BYTES,
        };
        let mut rx = queued([too_long, short(2)]);
        let first = rx.try_recv().unwrap();
        assert_eq!(take_lines(&mut rx, first, &mut Room::batch()).len(), 2);
    }

    /// After the exit, everything stdout still has is taken; with no room,
    /// nothing is (a batch is not read ahead).
    #[test]
    fn unbounded_takes_everything_and_none_takes_nothing() {
        let mut rx = queued((0..3 * MAX_LINES_PER_BATCH).map(short));
        let first = rx.try_recv().unwrap();
        let lines = take_lines(&mut rx, first, &mut Room::unbounded());
        assert_eq!(lines.len(), 3 * MAX_LINES_PER_BATCH);
        assert!(!Room::none().left());
        assert!(Room::batch().left());
    }
}
