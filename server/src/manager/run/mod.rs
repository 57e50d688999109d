//! The run task: the one owner of a live process, and while it lives the
//! one authority for its session (it holds the session's [`Claim`]).
//!
//! It reads stdout, normalizes lines into events and appends them (lines
//! that arrive together go in one append), executes the commands the manager
//! sends (write, stop, permission answers, shutdown), runs the timers (the
//! stop [`ladder`](super::ladder), idle timeout, permission timeouts) and,
//! when the process has exited, appends the run's one `run_end`.
//!
//! How it ends: only when the process has exited (and been reaped by the
//! adapter). Shutdown is a command that drives the process to exit through
//! the signal ladder, which always ends in SIGKILL; so the task never
//! outlives its process by more than the ladder.

mod control;
mod end;

pub use self::control::CONTROL_TIMEOUT;
pub(crate) use self::control::{Answered, ControlFailure, Record};
use self::control::{ControlReplyTx, PendingControl};
pub(super) use self::end::supervised;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use agent_harness_client::derive::Status;
use agent_harness_client::pb;
use agent_harness_client::pb::event::Payload;
use pbjson_types::Struct;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};
use tokio::time::Instant;

use super::fold::FoldCell;
use super::ladder::{Action, Cause, Input, Ladder};
use super::receipts::{Keyed, KeyedExt};
use super::slot::Claim;
use super::{ManagerOptions, PermissionAnswer};
use crate::adapter::{
    AdapterError, ExitInfo, PermissionDecision, ProcessControl, ProcessHandle, StdoutLine,
    UserInput,
};
use crate::error::{Error, Result};
use crate::log::{EventLogs, LogError, MetaChange, NewEvent, Typing};
use crate::normalize::Normalizer;
use crate::partial::Change;
use crate::store::{ReceiptWrite, SessionMeta};

/// `run_error.kind` of a run ended for running beyond the launch policy.
pub(crate) const POLICY: &str = "policy";

/// Most stdout lines normalized into one append.
const MAX_LINES_PER_BATCH: usize = 256;
/// How long to keep reading stdout after the exit (a grandchild may hold
/// the pipe open; its lines are not worth hanging the run_end for).
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(500);

/// A command from the manager: a call on this session, answered by the
/// session's occupant.
pub(super) enum RunCmd {
    /// A Start while this run lives: replies with the live run's id (the
    /// caller refuses with RunLive).
    Start { reply: oneshot::Sender<String> },
    /// Write a user message to stdin and record input_sent{USER} (with the
    /// receipt of a keyed Send); replies with the run that got it.
    Write {
        input: UserInput,
        keyed: Option<Keyed>,
        reply: oneshot::Sender<Result<String, WriteRefused>>,
    },
    /// Stop the current turn; replies whether a stop is (now) under way.
    /// A keyed Stop's receipt goes with its stop_requested, or alone.
    Stop {
        keyed: Option<Keyed>,
        reply: oneshot::Sender<Result<bool>>,
    },
    /// Answer a pending permission request (the receipt of a keyed answer
    /// goes with its permission_resolved).
    Permission {
        request_id: String,
        answer: PermissionAnswer,
        keyed: Option<Keyed>,
        reply: oneshot::Sender<Result<()>>,
    },
    /// Send a host `control_request` (`request` holds its `subtype`) and
    /// reply with the CLI's answer (see [`ControlFailure`]), after
    /// appending what `record` asks for when the answer is success.
    Control {
        request: serde_json::Value,
        record: Option<Box<Record>>,
        reply: ControlReplyTx,
    },
    /// The server is shutting down: end the process.
    Shutdown,
    /// The session is being deleted: end the process the way shutdown
    /// does; its run_end says STOPPED, source "delete".
    Delete,
}

/// Why a write was not delivered.
#[derive(Debug)]
pub(super) enum WriteRefused {
    /// The process is ending (or already gone): respawn after its run_end.
    Ending,
    /// The process is alive but not reading its input.
    QueueFull(String),
    /// The input was written but its input_sent and receipt could not be
    /// committed (storage failed; the run is being ended): a keyed Send
    /// must not answer as if it had a receipt.
    NotRecorded(String),
    /// A one-shot run takes no input after its prompt.
    OneShotBusy {
        /// The working run.
        run_id: String,
    },
}

/// What a run task starts from.
pub(super) struct RunSpec {
    pub(super) session_id: String,
    pub(super) run_id: String,
    /// The `--resume` id the process was spawned with ("" when none).
    pub(super) resume: String,
    pub(super) logs: EventLogs,
    pub(super) opts: ManagerOptions,
    /// The spawned process.
    pub(super) handle: ProcessHandle,
    /// The prompt went in with the spawn (input_sent{INITIAL} is logged).
    pub(super) prompt_sent: bool,
    /// This run's place under `--max-live-runs`.
    pub(super) live_permit: OwnedSemaphorePermit,
}

pub(super) struct Run {
    session_id: String,
    run_id: String,
    logs: EventLogs,
    opts: ManagerOptions,
    control: Arc<dyn ProcessControl>,
    stdout: mpsc::Receiver<StdoutLine>,
    exited: oneshot::Receiver<ExitInfo>,
    normalizer: Normalizer,
    /// The session's cached derive fold, shared with the manager. This task
    /// is the session's only writer while it lives and applies every event
    /// it appends, so the fold holds everything up to its last append. It
    /// is the one record of which permission requests are pending.
    fold: Arc<FoldCell>,
    /// When each pending permission request times out (a timer, not a
    /// second record of what is pending: an entry the fold no longer shows
    /// pending is ignored).
    permission_deadlines: HashMap<String, Instant>,
    ladder: Ladder,
    /// The last turn_end was an error (API error, error result).
    last_turn_error: bool,
    /// The CLI could not resume its conversation (run_error resume_failed):
    /// it is exiting, so input is refused and goes to a fresh run instead.
    resume_failed: bool,
    /// An append failed: what the store said. The process is being ended
    /// (what it writes can no longer be recorded) and the run ends ERROR.
    storage_failed: Option<String>,
    /// Last activity (event or input), for the idle timeout.
    last_activity: Instant,
    /// This run's place under `--max-live-runs`: given back once the
    /// process has exited (just before its run_end is appended, so a client
    /// that sees the run_end can start another run), or when the task ends
    /// any other way.
    live_permit: Option<OwnedSemaphorePermit>,
    /// Live typing: the session's board (taken when the task starts; `None`
    /// only when the log is shut down).
    typing: Option<Typing>,
    /// Fragments the normalizer had dropped at the last count.
    partial_dropped: u64,
    /// Control requests sent and not answered yet: their deadline and who
    /// waits for the answer.
    controls: HashMap<String, PendingControl>,
    /// Recorded control requests that timed out: what to record if the CLI
    /// still answers success.
    late_records: HashMap<String, Payload>,
    /// Ended because its session is being deleted (decides the run_end).
    deleting: bool,
    /// The CLI reported a permission mode the launch policy does not allow
    /// (`run_error{policy}` is recorded): the process is being ended and
    /// the run ends ERROR.
    policy_refused: bool,
}

impl Run {
    fn new(spec: RunSpec, fold: Arc<FoldCell>) -> Self {
        let RunSpec {
            session_id,
            run_id,
            resume,
            logs,
            opts,
            handle,
            prompt_sent,
            live_permit,
        } = spec;
        let ladder = Ladder::new(opts.stop_grace, opts.kill_grace);
        let mut normalizer = Normalizer::new(opts.max_line_bytes);
        normalizer.set_pid(handle.pid);
        normalizer.set_resume(&resume);
        normalizer.set_partial_budget(opts.max_partial_bytes);
        if prompt_sent {
            normalizer.input_sent();
        }
        Self {
            session_id,
            run_id,
            logs,
            opts,
            control: handle.control,
            stdout: handle.stdout,
            exited: handle.exited,
            fold,
            normalizer,
            permission_deadlines: HashMap::new(),
            ladder,
            last_turn_error: false,
            resume_failed: false,
            storage_failed: None,
            last_activity: Instant::now(),
            live_permit: Some(live_permit),
            typing: None,
            partial_dropped: 0,
            controls: HashMap::new(),
            late_records: HashMap::new(),
            deleting: false,
            policy_refused: false,
        }
    }

    /// Runs the process to its end, answering the commands sent to `claim`.
    async fn run(mut self, claim: &mut Claim) {
        self.typing = self.logs.typing(&self.session_id).await.ok();
        let mut stdout_open = true;
        let mut cmds_open = true;
        let exit = loop {
            let deadline = self.next_deadline();
            tokio::select! {
                biased;
                cmd = claim.cmds.recv(), if cmds_open => match cmd {
                    Some(cmd) => self.command(cmd).await,
                    // Cannot happen while the claim is held; keep running to
                    // the exit regardless.
                    None => cmds_open = false,
                },
                line = self.stdout.recv(), if stdout_open => match line {
                    Some(first) => {
                        let mut lines = vec![first];
                        while lines.len() < MAX_LINES_PER_BATCH {
                            match self.stdout.try_recv() {
                                Ok(l) => lines.push(l),
                                Err(_) => break,
                            }
                        }
                        self.lines(lines).await;
                    }
                    None => stdout_open = false,
                },
                exit = &mut self.exited => {
                    // A dropped sender means the adapter lost the child; we
                    // still owe the run its run_end.
                    break exit.unwrap_or_else(|_| ExitInfo {
                        stderr_tail: "exit status lost by the adapter".into(),
                        ..ExitInfo::default()
                    });
                }
                _ = sleep_until(deadline), if deadline.is_some() => self.timers().await,
            }
        };
        self.ladder.step(Input::Exited, Instant::now());
        // Lines written just before the exit are still in the pipe.
        while stdout_open {
            match tokio::time::timeout(DRAIN_AFTER_EXIT, self.stdout.recv()).await {
                Ok(Some(first)) => {
                    let mut lines = vec![first];
                    while let Ok(l) = self.stdout.try_recv() {
                        lines.push(l);
                    }
                    self.lines(lines).await;
                }
                Ok(None) | Err(_) => stdout_open = false,
            }
        }
        self.finish(exit).await;
    }

    fn next_deadline(&self) -> Option<Instant> {
        let ladder = self.ladder.deadline();
        let permission = self.permission_deadlines.values().copied().min();
        let control = self.controls.values().map(|c| c.deadline).min();
        [ladder, permission, control, self.idle_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// A keep-alive process with no turn, no pending question and no stop
    /// under way ends `idle_timeout` after its last activity (unless
    /// background tasks are running then; see `timers`).
    fn idle_deadline(&self) -> Option<Instant> {
        if self.opts.idle_timeout.is_zero()
            || !self.control.keep_alive()
            || self.ladder.stopping()
            || self.pending_permissions() > 0
            || self
                .fold
                .with(|d| d.fold.status_fold().turn_in_progress())
                .unwrap_or(false)
        {
            return None;
        }
        Some(self.last_activity + self.opts.idle_timeout)
    }

    /// How many permission requests the log shows pending.
    fn pending_permissions(&self) -> usize {
        self.fold
            .with(|d| d.fold.pending_permission_count())
            .unwrap_or(0)
    }

    /// Whether `request_id` is pending, and the input it asked with.
    fn pending_input(&self, request_id: &str) -> Option<Option<Struct>> {
        self.fold
            .with(|d| {
                d.fold
                    .pending_permission(request_id)
                    .map(|p| p.input.clone())
            })
            .flatten()
    }

    /// The input a pending request asked with, whole: the fold holds the
    /// streamed form of its event, which is cut down when it was over the
    /// per-event budget (a Write of a large file), and the CLI must run the
    /// tool with what it asked for, not a shortened copy.
    async fn whole_requested_input(
        &self,
        request_id: &str,
        folded: Option<Struct>,
    ) -> Option<Struct> {
        let seq = self
            .fold
            .with(|d| d.fold.pending_permission(request_id).map(|p| p.seq))
            .flatten()?;
        match self.logs.full_event(&self.session_id, seq).await {
            Ok(Some(pb::Event {
                payload: Some(Payload::PermissionRequested(p)),
                ..
            })) if p.request_id == request_id => p.input,
            Ok(_) => folded,
            Err(e) => {
                tracing::warn!(session_id = %self.session_id, error = %e, "cannot read the whole permission request; answering with its streamed input");
                folded
            }
        }
    }

    /// Whether the log shows background tasks still running (derive's
    /// `has_running_background_tasks`). Takes a snapshot of the fold, so it
    /// is asked only when the idle deadline has passed.
    fn background_tasks_running(&self) -> bool {
        self.fold
            .with(|d| d.fold.snapshot().has_running_background_tasks)
            .unwrap_or(false)
    }

    /// Appends, folds and reacts to what was appended. A failed append is
    /// logged: the store is failing and the process goes on regardless.
    async fn append(&mut self, payloads: Vec<(Payload, String)>) {
        if payloads.is_empty() {
            return;
        }
        let _ = self.commit_events(payloads, None, None).await;
    }

    /// Appends `payload` with the receipt of a keyed call (alone when
    /// `payload` is None); `Err` with what the store said when the commit
    /// failed (the run is then being ended, see [`Run::commit`]).
    async fn append_keyed(
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
    async fn commit_events(
        &mut self,
        payloads: Vec<(Payload, String)>,
        meta: Option<MetaChange>,
        receipt: Option<ReceiptWrite>,
    ) -> Result<Vec<pb::Event>, String> {
        let events = payloads
            .into_iter()
            .map(|(payload, cli_line)| NewEvent {
                run_id: self.run_id.clone(),
                payload,
                cli_line,
            })
            .collect();
        match self
            .logs
            .commit(&self.session_id, events, meta, receipt)
            .await
        {
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

    async fn append_one(&mut self, payload: Payload) {
        self.append(vec![(payload, String::new())]).await;
    }

    async fn observe(&mut self, e: &pb::Event) {
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
            Some(Payload::RunError(r)) if r.kind == crate::normalize::RESUME_FAILED => {
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

    /// Normalizes and appends a batch of lines, and publishes what they
    /// changed in the message being written (live typing, see
    /// [`crate::partial`]): the changes of the lines before the batch's
    /// first event at once (they follow only events already committed, so a
    /// block's last fragments go out before its `content` even when they
    /// share a batch); of the rest, the blocks they complete are closed
    /// before the commit, and everything is applied after it.
    async fn lines(&mut self, lines: Vec<StdoutLine>) {
        let Batch {
            payloads,
            now,
            later,
        } = normalize_batch(&mut self.normalizer, &lines);
        self.count_partial(&now, &later);
        let before = self.typing.as_ref().map(|t| {
            t.publish(&self.run_id, &now);
            t.close(&later)
        });
        let payloads = self.only_pending_cancels(payloads);
        let (payloads, refused) = self.check_permission_mode(payloads);
        self.append(payloads).await;
        if refused {
            // Ended at once (SIGINT first): a turn in a mode beyond the
            // policy must not go on.
            self.policy_refused = true;
            self.step(Input::Shutdown, Instant::now());
        }
        if let (Some(t), Some(before)) = (&self.typing, before) {
            t.publish_after(&self.run_id, &later, before);
        }
        self.control_replies().await;
    }

    /// Checks each `run_ready`'s permission mode against the launch policy
    /// (the ceiling a client's own choice is held to): a mode beyond it got
    /// there around the policy, through the CLI's settings, so a
    /// `run_error{policy}` follows the `run_ready` and the caller ends the
    /// run (`true`).
    fn check_permission_mode(
        &self,
        payloads: Vec<(Payload, String)>,
    ) -> (Vec<(Payload, String)>, bool) {
        let mut refused = false;
        let mut out = Vec::with_capacity(payloads.len());
        for (payload, line) in payloads {
            let beyond = match &payload {
                Payload::RunReady(r)
                    if !self.opts.launch.permission_mode_allowed(&r.permission_mode) =>
                {
                    Some(r.permission_mode.clone())
                }
                _ => None,
            };
            out.push((payload, line));
            if let Some(mode) = beyond {
                tracing::warn!(session_id = %self.session_id, run_id = %self.run_id, %mode, "the CLI runs in a permission mode the policy does not allow; ending the run");
                refused = true;
                out.push((
                    Payload::RunError(pb::RunError {
                        message: format!(
                            "the CLI reported permission mode {mode}, which this server does not \
                             allow (allowed: {}); the run is ended",
                            self.opts
                                .launch
                                .allowed_permission_modes()
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        kind: POLICY.into(),
                        ..Default::default()
                    }),
                    String::new(),
                ));
            }
        }
        (out, refused)
    }

    /// Live-typing counters for `/metrics`.
    fn count_partial(&mut self, now: &[Change], later: &[Change]) {
        let m = self.logs.metrics();
        let fragments = now
            .iter()
            .chain(later)
            .filter(|c| matches!(c, Change::Fragment { .. }))
            .count() as u64;
        if fragments > 0 {
            m.partial_fragments.fetch_add(fragments, Ordering::Relaxed);
        }
        let dropped = self.normalizer.partial_dropped();
        if dropped > self.partial_dropped {
            m.partial_dropped
                .fetch_add(dropped - self.partial_dropped, Ordering::Relaxed);
            self.partial_dropped = dropped;
        }
    }

    /// Drops the CLI's withdrawals (`permission_resolved{cancelled}`) of
    /// requests that are not pending: never asked, or already answered or
    /// timed out. Pending means: in the fold, or asked earlier in the same
    /// batch and not resolved since.
    fn only_pending_cancels(&self, payloads: Vec<(Payload, String)>) -> Vec<(Payload, String)> {
        let mut asked: HashSet<String> = HashSet::new();
        let mut resolved: HashSet<String> = HashSet::new();
        payloads
            .into_iter()
            .filter(|(payload, _)| match payload {
                Payload::PermissionRequested(p) => {
                    asked.insert(p.request_id.clone());
                    resolved.remove(&p.request_id);
                    true
                }
                Payload::PermissionResolved(p) => {
                    let id = &p.request_id;
                    let pending = !resolved.contains(id)
                        && (asked.contains(id) || self.pending_input(id).is_some());
                    if !pending {
                        tracing::debug!(request_id = %id, "withdrawal of a request that is not pending");
                        return false;
                    }
                    resolved.insert(id.clone());
                    true
                }
                _ => true,
            })
            .collect()
    }

    async fn command(&mut self, cmd: RunCmd) {
        match cmd {
            RunCmd::Start { reply } => {
                let _ = reply.send(self.run_id.clone());
            }
            RunCmd::Write {
                input,
                keyed,
                reply,
            } => {
                let _ = reply.send(self.write(input, keyed.as_ref()).await);
            }
            RunCmd::Stop { keyed, reply } => {
                let stopping = self.stop(keyed.as_ref()).await;
                let _ = reply.send(stopping);
            }
            RunCmd::Permission {
                request_id,
                answer,
                keyed,
                reply,
            } => {
                let answered = self.answer(request_id, answer, keyed.as_ref()).await;
                let _ = reply.send(answered);
            }
            RunCmd::Control {
                request,
                record,
                reply,
            } => self.send_control(request, record, reply).await,
            RunCmd::Shutdown => self.shutdown("shutdown").await,
            RunCmd::Delete => {
                self.deleting = true;
                self.shutdown("delete").await;
            }
        }
    }

    async fn write(
        &mut self,
        input: UserInput,
        keyed: Option<&Keyed>,
    ) -> Result<String, WriteRefused> {
        // A process we are signalling, or ending for idle or shutdown, will
        // not take another turn.
        // A CLI that failed to resume exits on its own: a Send now waits for
        // its run_end and starts the new conversation.
        if self.ladder.ending() || !self.control.alive() || self.resume_failed {
            return Err(WriteRefused::Ending);
        }
        if !self.control.keep_alive() {
            return Err(WriteRefused::OneShotBusy {
                run_id: self.run_id.clone(),
            });
        }
        // Written before it is recorded: this task handles the process's
        // answer only after this returns, so the log order stays right, and
        // the log never claims an input the process did not get.
        if let Err(e) = self.control.write(&input) {
            if let AdapterError::InputQueueFull(why) = &e {
                return Err(WriteRefused::QueueFull(why.clone()));
            }
            tracing::warn!(session_id = %self.session_id, error = %e, "write to the process failed");
            return Err(WriteRefused::Ending);
        }
        self.normalizer.input_sent();
        let run_id = self.run_id.clone();
        let receipt = keyed.put(|| pb::SendResponse {
            run_id: run_id.clone(),
        });
        let event = Payload::InputSent(pb::InputSent {
            text: input.text,
            source: pb::InputSource::User as i32,
            content_blocks: input.content_blocks,
            message_uuid: input.uuid,
        });
        match self.append_keyed(Some(event), receipt).await {
            Err(why) if keyed.is_some() => Err(WriteRefused::NotRecorded(why)),
            _ => Ok(run_id),
        }
    }

    /// Starts the stop ladder, once per turn. Returns whether a stop is
    /// under way: false for a keep-alive process with no turn in progress
    /// (nothing to stop; Stop twice must equal Stop once, so an idle
    /// process is never killed by a second click). A keyed Stop's receipt
    /// is committed with its stop_requested, or alone when it appends
    /// nothing; an error only when that commit failed.
    async fn stop(&mut self, keyed: Option<&Keyed>) -> Result<bool> {
        let status = self.fold.status();
        let busy = status.turn_in_progress()
            || matches!(status.status(), Status::Starting | Status::Streaming);
        // Already stopping: idempotent, no second event.
        let (stopping, event) = if self.ladder.stopping() {
            (true, None)
        } else if !busy && self.control.keep_alive() {
            (false, None)
        } else {
            let event = Payload::StopRequested(pb::StopRequested {
                source: "user".into(),
            });
            (true, Some(event))
        };
        let start_ladder = event.is_some();
        let receipt = keyed.put(|| pb::StopResponse { stopping });
        let committed = if event.is_some() || receipt.is_some() {
            self.append_keyed(event, receipt).await
        } else {
            Ok(())
        };
        if start_ladder {
            self.step(Input::Stop, Instant::now());
        }
        match committed {
            Err(why) if keyed.is_some() => Err(Error::Storage(why)),
            _ => Ok(stopping),
        }
    }

    /// Ends the process (SIGINT, then the rest of the ladder), after a
    /// stop_requested naming `source`.
    async fn shutdown(&mut self, source: &str) {
        if self.ladder.cause() == Some(Cause::Shutdown) {
            return;
        }
        self.append_one(Payload::StopRequested(pb::StopRequested {
            source: source.into(),
        }))
        .await;
        self.step(Input::Shutdown, Instant::now());
    }

    /// Feeds the ladder and does what it says.
    fn step(&mut self, input: Input, now: Instant) {
        let Some(action) = self.ladder.step(input, now) else {
            return;
        };
        match action {
            Action::Interrupt => {
                if !matches!(self.control.interrupt(), Ok(true)) {
                    // One-shot runs (no interrupt) and failed interrupts: signals.
                    self.step(Input::InterruptFailed, now);
                }
            }
            Action::Signal(sig) => {
                tracing::debug!(session_id = %self.session_id, run_id = %self.run_id, signal = ?sig, "signalling process group");
                if let Err(e) = self.control.signal(sig) {
                    tracing::debug!(error = %e, "signal failed (process probably gone)");
                }
            }
            Action::CloseStdin => self.control.close_stdin(),
        }
    }

    async fn timers(&mut self) {
        let now = Instant::now();
        self.step(Input::TimerFired, now);
        self.control_timeouts(now);
        let expired: Vec<String> = self
            .permission_deadlines
            .iter()
            .filter(|(_, deadline)| **deadline <= now)
            .map(|(id, _)| id.clone())
            .collect();
        for request_id in expired {
            self.permission_deadlines.remove(&request_id);
            if self.pending_input(&request_id).is_none() {
                continue;
            }
            let message = format!(
                "Permission request timed out after {:?} with no answer; denied.",
                self.opts.permission_timeout
            );
            let _ = self.control.respond_permission(
                &request_id,
                &PermissionDecision::Deny {
                    message: message.clone(),
                },
            );
            self.append_one(Payload::PermissionResolved(pb::PermissionResolved {
                request_id,
                allow: false,
                by: "timeout".into(),
                message,
                updated_input: None,
            }))
            .await;
        }
        if self.idle_deadline().is_some_and(|d| d <= now) && self.background_tasks_running() {
            // The log shows background work (a backgrounded Bash, a
            // subagent) the process must live for: its result comes back
            // as a new turn. Restart the idle clock instead of ending it.
            tracing::debug!(session_id = %self.session_id, run_id = %self.run_id, "idle timeout deferred: background tasks running");
            self.last_activity = now;
        }
        if self.idle_deadline().is_some_and(|d| d <= now) {
            tracing::info!(session_id = %self.session_id, run_id = %self.run_id, "idle timeout");
            self.append_one(Payload::StopRequested(pb::StopRequested {
                source: "idle".into(),
            }))
            .await;
            self.step(Input::Idle, now);
        }
    }

    async fn answer(
        &mut self,
        request_id: String,
        answer: PermissionAnswer,
        keyed: Option<&Keyed>,
    ) -> Result<()> {
        let Some(requested_input) = self.pending_input(&request_id) else {
            return Err(Error::PermissionRequestNotPending {
                session_id: self.session_id.clone(),
                request_id,
            });
        };
        let requested_input = match answer.updated_input {
            None if answer.allow => {
                self.whole_requested_input(&request_id, requested_input)
                    .await
            }
            _ => requested_input,
        };
        let decision = if answer.allow {
            PermissionDecision::Allow {
                updated_input: answer
                    .updated_input
                    .clone()
                    .or(requested_input)
                    .unwrap_or_default(),
            }
        } else {
            PermissionDecision::Deny {
                message: if answer.message.is_empty() {
                    "The user denied this tool use.".into()
                } else {
                    answer.message.clone()
                },
            }
        };
        self.control.respond_permission(&request_id, &decision)?;
        let message = match &decision {
            PermissionDecision::Deny { message } => message.clone(),
            PermissionDecision::Allow { .. } => String::new(),
        };
        let event = Payload::PermissionResolved(pb::PermissionResolved {
            request_id,
            allow: answer.allow,
            by: "user".into(),
            message,
            updated_input: if answer.allow {
                answer.updated_input
            } else {
                None
            },
        });
        let receipt = keyed.put(|| pb::RespondPermissionResponse {});
        match self.append_keyed(Some(event), receipt).await {
            Err(why) if keyed.is_some() => Err(Error::Storage(why)),
            _ => Ok(()),
        }
    }
}

/// A batch of stdout lines, normalized.
struct Batch {
    /// The events to append.
    payloads: Vec<(Payload, String)>,
    /// Live-typing changes of the lines before the first event: published
    /// at once.
    now: Vec<Change>,
    /// The other changes: removals before the commit, all after it.
    later: Vec<Change>,
}

fn normalize_batch(normalizer: &mut Normalizer, lines: &[StdoutLine]) -> Batch {
    let mut batch = Batch {
        payloads: Vec::new(),
        now: Vec::new(),
        later: Vec::new(),
    };
    for l in lines {
        batch.payloads.extend(normalizer.line(l));
        let changes = normalizer.take_partial();
        if batch.payloads.is_empty() {
            batch.now.extend(changes);
        } else {
            batch.later.extend(changes);
        }
    }
    batch
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
            text(1, "next"),
        ];
        let b = normalize_batch(&mut n, &lines);
        assert_eq!(b.payloads.len(), 1, "one content event");
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
}
