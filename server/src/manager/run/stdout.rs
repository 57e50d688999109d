//! The run task's stdout side: lines normalized in batches, appended in
//! one commit per batch, folded and reacted to, and the live-typing changes
//! they carry published around that commit.

use std::sync::atomic::Ordering;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use tokio::time::Instant;

use tokio::sync::mpsc;

use super::super::ladder::Input;
use super::{MAX_BATCH_BYTES, MAX_LINES_PER_BATCH, Run};
use crate::adapter::{ControlReply, Decoder, StdoutLine};
use crate::log::{Commit, MetaChange, NewEvent};
use crate::partial::Change;
use crate::store::{ReceiptWrite, TranscriptEntry};

impl Run {
    /// Appends, folds and reacts to what was appended. A failed append is
    /// logged: the store is failing and the process goes on regardless.
    pub(super) async fn append(&mut self, payloads: Vec<(Payload, String)>) {
        if payloads.is_empty() {
            return;
        }
        let _ = self.commit_events(payloads, None, None).await;
    }

    /// Appends `payload` with the receipt of a keyed call (alone when
    /// `payload` is None); `Err` with what the store said when the commit
    /// failed (the run is then being ended, see [`Run::commit`]).
    pub(super) async fn append_keyed(
        &mut self,
        payload: Option<Payload>,
        receipt: Option<ReceiptWrite>,
    ) -> Result<(), String> {
        let payloads = payload.map(|p| (p, String::new())).into_iter().collect();
        self.commit_events(payloads, None, receipt).await.map(drop)
    }

    /// One commit of events, a meta change and a receipt (any may be
    /// empty); folds and reacts to the events. A failed commit is logged
    /// and, the store failing, the process is ended (its output could not
    /// be recorded any more); the error is returned to the callers that
    /// answer a keyed call.
    pub(super) async fn commit_events(
        &mut self,
        payloads: Vec<(Payload, String)>,
        meta: Option<MetaChange>,
        receipt: Option<ReceiptWrite>,
    ) -> Result<Vec<pb::Event>, String> {
        let events = self.new_events(payloads);
        self.commit(Commit {
            events,
            meta,
            receipt,
            transcript: Vec::new(),
        })
        .await
    }

    /// The run's events of `payloads`.
    fn new_events(&self, payloads: Vec<(Payload, String)>) -> Vec<NewEvent> {
        payloads
            .into_iter()
            .map(|(payload, cli_line)| NewEvent {
                run_id: self.run_id.clone(),
                payload,
                cli_line,
            })
            .collect()
    }

    /// One commit to the session's log (see [`Run::commit_events`]).
    async fn commit(&mut self, commit: Commit) -> Result<Vec<pb::Event>, String> {
        let committed = self.logs.commit(&self.session_id, commit).await;
        self.committed(committed).await
    }

    /// One commit of a batch of lines; while it is under way, and when
    /// `read_ahead`, the lines stdout has and those that come meanwhile are
    /// read and normalized, up to a batch's [`Room`] (the run task's
    /// share of a batch overlaps the writer's, and the stdout reader does
    /// not wait for the commit), and come back as the next batch. They are
    /// the decoder's past from then on, so the caller settles that batch
    /// before anything else reaches the decoder (a command's input, see
    /// [`Run::run`]).
    async fn commit_reading_ahead(
        &mut self,
        commit: Commit,
        read_ahead: bool,
    ) -> (Result<Vec<pb::Event>, String>, Option<Batch>) {
        let mut room = if read_ahead {
            Room::batch()
        } else {
            Room::none()
        };
        let mut ahead: Option<Batch> = None;
        let committed = {
            let commit = self.logs.commit(&self.session_id, commit);
            tokio::pin!(commit);
            loop {
                tokio::select! {
                    biased;
                    done = &mut commit => break done,
                    line = self.stdout.recv(), if room.left() => match line {
                        Some(first) => {
                            let lines = take_lines(&mut self.stdout, first, &mut room);
                            let batch = ahead.get_or_insert_with(Batch::default);
                            normalize_into(self.decoder.as_mut(), lines, batch);
                        }
                        // The end of stdout: the run loop sees it next.
                        None => room = Room::none(),
                    }
                }
            }
        };
        (self.committed(committed).await, ahead)
    }

    /// Folds and reacts to a commit's events, or, when it failed, ends the
    /// process (see [`Run::commit_events`]).
    async fn committed(
        &mut self,
        committed: Result<Vec<pb::Event>, crate::log::LogError>,
    ) -> Result<Vec<pb::Event>, String> {
        match committed {
            Ok(events) => {
                self.fold.applied(&events);
                for e in &events {
                    self.observe(e).await;
                }
                Ok(events)
            }
            Err(e) => {
                tracing::error!(session_id = %self.session_id, run_id = %self.run_id, error = %e, "append failed; ending the process");
                if self.storage_failed.is_none() {
                    // Nothing it writes from now on could be recorded, and a
                    // lost permission_requested would never time out: end it
                    // as the shutdown path does (its signals do not depend
                    // on the log).
                    self.storage_failed = Some(e.to_string());
                    self.step(Input::Shutdown, Instant::now());
                }
                Err(e.to_string())
            }
        }
    }

    pub(super) async fn append_one(&mut self, payload: Payload) {
        self.append(vec![(payload, String::new())]).await;
    }

    pub(super) async fn observe(&mut self, e: &pb::Event) {
        self.last_activity = Instant::now();
        match &e.payload {
            Some(Payload::PermissionRequested(p)) => {
                self.permission_deadlines.insert(
                    p.request_id.clone(),
                    Instant::now() + self.opts.permission_timeout,
                );
            }
            Some(Payload::PermissionResolved(p)) => {
                self.permission_deadlines.remove(&p.request_id);
            }
            Some(Payload::TurnEnd(t)) if !t.compact => {
                self.last_turn_error = t.is_error;
                self.step(Input::TurnEnded, Instant::now());
            }
            Some(Payload::RunError(r))
                if r.kind == agent_harness_protocol::vocab::run_error_kind::RESUME_FAILED =>
            {
                self.resume_failed = true;
                // It exits by itself (2.1.197 exits 1 at once); closing its
                // input makes sure it does not wait for more.
                self.control.close_stdin();
                // The CLI lost this conversation: derive's resume id (the
                // one authority for it) drops it with this very event.
                tracing::warn!(session_id = %self.session_id, run_id = %self.run_id, resume_id = %r.resume_id, "the CLI could not resume the conversation; the next run starts a new one");
            }
            _ => {}
        }
    }

    /// Normalizes and appends a batch of lines (see [`Run::settle`]);
    /// returns the batch read ahead meanwhile, if any.
    pub(super) async fn lines(
        &mut self,
        lines: Vec<StdoutLine>,
        read_ahead: bool,
    ) -> Option<Batch> {
        let batch = normalize_batch(self.decoder.as_mut(), lines);
        self.settle(batch, read_ahead).await
    }

    /// Appends a normalized batch, and publishes what its lines changed in
    /// the message being written (live typing, see [`crate::partial`]):
    /// the changes of the lines before the batch's first event at once
    /// (they follow only events already committed, so a block's last
    /// fragments go out before its `content` even when they share a
    /// batch); of the rest, the blocks they complete are closed before the
    /// commit, and everything is applied after it. Then the CLI's answers
    /// to control requests the lines carried. With `read_ahead`, the next
    /// lines are normalized while the commit is under way and returned as
    /// the next batch (see [`Run::commit_reading_ahead`]).
    pub(super) async fn settle(&mut self, batch: Batch, read_ahead: bool) -> Option<Batch> {
        let Batch {
            payloads,
            now,
            later,
            replies,
        } = batch;
        self.count_partial(&now, &later);
        let before = self.typing.as_ref().map(|t| {
            t.publish(&self.run_id, &now);
            t.close(&later)
        });
        let payloads = self.only_pending_cancels(payloads);
        let (payloads, refused) = self.check_permission_mode(payloads);
        // The CLI's transcript lines of the batch go in the same commit as
        // its events: a node that resumes the conversation later has every
        // message the log shows.
        let transcript = self.transcript_entries();
        let mut ahead = None;
        if !payloads.is_empty() || !transcript.is_empty() {
            let events = self.new_events(payloads);
            let commit = Commit {
                events,
                transcript,
                ..Commit::default()
            };
            ahead = self
                .commit_reading_ahead(commit, read_ahead && !refused)
                .await
                .1;
        }
        if refused {
            // Ended at once (SIGINT first): a turn in a mode beyond the
            // policy must not go on.
            self.policy_refused = true;
            self.step(Input::Shutdown, Instant::now());
        }
        if let (Some(t), Some(before)) = (&self.typing, before) {
            t.publish_after(&self.run_id, &later, before);
        }
        self.answered(replies).await;
        ahead
    }

    /// The transcript lines the decoder took aside since the last batch,
    /// as this session's entries.
    fn transcript_entries(&mut self) -> Vec<TranscriptEntry> {
        self.decoder
            .take_transcript()
            .into_iter()
            .map(|(path, line)| TranscriptEntry {
                session_id: self.session_id.clone(),
                path,
                line,
            })
            .collect()
    }

    /// Live-typing counters for `/metrics`.
    pub(super) fn count_partial(&mut self, now: &[Change], later: &[Change]) {
        let m = self.logs.metrics();
        let fragments = now
            .iter()
            .chain(later)
            .filter(|c| matches!(c, Change::Fragment { .. }))
            .count() as u64;
        if fragments > 0 {
            m.partial_fragments.fetch_add(fragments, Ordering::Relaxed);
        }
        let dropped = self.decoder.partial_dropped();
        if dropped > self.partial_dropped {
            m.partial_dropped
                .fetch_add(dropped - self.partial_dropped, Ordering::Relaxed);
            self.partial_dropped = dropped;
        }
    }
}

/// A batch of stdout lines, normalized.
#[derive(Default)]
pub(super) struct Batch {
    /// The events to append.
    payloads: Vec<(Payload, String)>,
    /// Live-typing changes of the lines before the first event: published
    /// at once.
    now: Vec<Change>,
    /// The other changes: removals before the commit, all after it.
    later: Vec<Change>,
    /// The CLI's answers to control requests among the lines: handed on
    /// after the batch is committed.
    replies: Vec<ControlReply>,
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
fn normalize_into(decoder: &mut dyn Decoder, lines: Vec<StdoutLine>, batch: &mut Batch) {
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
