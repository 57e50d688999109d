//! The run task's stdout side: lines normalized in batches, appended in
//! one commit per batch, folded and reacted to, and the live-typing changes
//! they carry published around that commit.

use std::sync::atomic::Ordering;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use tokio::time::Instant;

use super::super::ladder::Input;
use super::Run;
use super::batch::{Batch, Room, normalize_batch, normalize_into, take_lines};
use crate::adapter::{ControlReply, StdoutLine};
use crate::log::{Commit, MetaChange, NewEvent, Submitted};
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

    /// Waits for the commit of a batch of lines (`commit`, of `events`
    /// events) while, when `read_ahead`, the lines stdout has and those
    /// that come meanwhile are read and normalized after those `after`
    /// holds, up to a batch's [`Room`], and returned (the run task's share
    /// of a batch overlaps the writer's, and the stdout reader does not
    /// wait for the commit). They
    /// are the decoder's past from then on, so the caller settles them
    /// before anything else reaches the decoder (a command's input, see
    /// [`Run::run`]).
    ///
    /// When the batch is `plain` (see [`Batch::plain`]: nothing in it is
    /// reacted to around its commit) and the writer has no other session's
    /// commits ([`crate::log::EventLogs::alone`]), a plain batch read ahead
    /// is handed to the writer as soon as it has as many events, without
    /// waiting for this commit: the writer goes from one commit to the
    /// next instead of waiting for the run task to turn around, and the
    /// lines after it are read ahead as its own. The writer takes its queue
    /// in order and nothing of a plain batch is reacted to, so what is
    /// recorded and published comes in the order of the lines, as when
    /// each batch waits for the one before. With other sessions writing,
    /// the writer has their commits to do meanwhile, and a batch handed
    /// over early would only make commits smaller.
    async fn commit_reading_ahead(
        &mut self,
        mut commit: Submitted,
        events: usize,
        after: Option<(Batch, Room)>,
        read_ahead: bool,
        plain: bool,
    ) -> Option<Ahead> {
        let (mut ahead, mut room) = match after {
            Some((batch, room)) => (Some(batch), room),
            None => (None, Room::batch()),
        };
        if !read_ahead {
            room = Room::none();
        }
        let mut sent: Option<(Submitted, usize)> = None;
        let committed = loop {
            tokio::select! {
                biased;
                done = &mut commit => break done,
                line = self.stdout.recv(), if room.left() => match line {
                    Some(first) => {
                        let lines = take_lines(&mut self.stdout, first, &mut room);
                        let batch = ahead.get_or_insert_with(Batch::default);
                        normalize_into(self.decoder.as_mut(), lines, batch);
                        let next = batch.payloads.len();
                        if plain
                            && sent.is_none()
                            && next > 0
                            && next >= events
                            && self.logs.alone(events)
                            && batch.plain()
                        {
                            let batch = ahead.take().expect("just filled");
                            let prepared = self.prepare(batch);
                            debug_assert!(!prepared.refused && prepared.replies.is_empty());
                            let commit = prepared.commit.unwrap_or_default();
                            sent = Some((self.logs.submit(&self.session_id, commit).await, next));
                            let m = self.logs.metrics();
                            m.early_commits.fetch_add(1, Ordering::Relaxed);
                            room = Room::batch();
                        }
                    }
                    // The end of stdout: the run loop sees it next.
                    None => room = Room::none(),
                }
            }
        };
        let ahead = match sent {
            Some((commit, events)) => Some(Ahead::Sent {
                commit,
                events,
                after: ahead.map(|batch| (batch, room)),
            }),
            None => ahead.map(Ahead::Lines),
        };
        // Its answer is folded and reacted to; a failure ends the process
        // (see `committed`), so the caller has nothing more to do with it.
        let _ = self.committed(committed).await;
        ahead
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
    ) -> Option<Ahead> {
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
    pub(super) async fn settle(&mut self, batch: Batch, read_ahead: bool) -> Option<Ahead> {
        let plain = batch.plain();
        let Prepared {
            commit,
            refused,
            before,
            later,
            replies,
        } = self.prepare(batch);
        let mut ahead = None;
        if let Some(commit) = commit {
            let events = commit.events.len();
            let commit = self.logs.submit(&self.session_id, commit).await;
            ahead = self
                .commit_reading_ahead(commit, events, None, read_ahead && !refused, plain)
                .await;
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

    /// Settles what was read ahead: a batch of lines (see
    /// [`Run::settle`]), or a plain batch handed to the writer early (see
    /// [`Run::commit_reading_ahead`]), with the lines read after it.
    pub(super) async fn settle_ahead(&mut self, ahead: Ahead, read_ahead: bool) -> Option<Ahead> {
        match ahead {
            Ahead::Lines(batch) => self.settle(batch, read_ahead).await,
            Ahead::Sent {
                commit,
                events,
                after,
            } => {
                // Plain: nothing to publish or hand on around its commit.
                self.commit_reading_ahead(commit, events, after, read_ahead, true)
                    .await
            }
        }
    }

    /// What comes before a batch's commit: the live-typing changes of the
    /// lines before its first event published, the blocks it completes
    /// closed, withdrawals of requests that are not pending dropped, a
    /// permission mode beyond the policy found; its commit (`None` when it
    /// writes nothing).
    fn prepare(&mut self, batch: Batch) -> Prepared {
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
        let commit = (!payloads.is_empty() || !transcript.is_empty()).then(|| Commit {
            events: self.new_events(payloads),
            transcript,
            ..Commit::default()
        });
        Prepared {
            commit,
            refused,
            before,
            later,
            replies,
        }
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

/// A batch prepared for its commit (see [`Run::prepare`]), with what is
/// left to do around it.
struct Prepared {
    /// What it writes, if anything.
    commit: Option<Commit>,
    /// It reported a permission mode beyond the policy: the run is ended.
    refused: bool,
    /// The log's head before the commit, for the live-typing changes
    /// published after it (when the session has a board).
    before: Option<u64>,
    /// The live-typing changes published after the commit.
    later: Vec<Change>,
    /// The CLI's answers to control requests, handed on after the commit.
    replies: Vec<ControlReply>,
}

/// What the run task has read of stdout beyond the batch it settled.
pub(super) enum Ahead {
    /// Lines normalized, not yet handed to the writer.
    Lines(Batch),
    /// A plain batch handed to the writer while the one before it was
    /// being committed, and the lines normalized after it (with the room
    /// left for more).
    Sent {
        commit: Submitted,
        /// Its events.
        events: usize,
        after: Option<(Batch, Room)>,
    },
}
