//! The run task: the one owner of a live process, and while it lives the
//! one authority for its session (it holds the session's [`Claim`]).
//!
//! It reads stdout, decodes lines into events (the adapter's [`Decoder`]) and appends them (lines
//! that arrive together go in one append), executes the commands the manager
//! sends (write, stop, permission answers, shutdown), runs the timers (the
//! stop [`ladder`](super::ladder), idle timeout, permission timeouts),
//! reports whether it is idle to the cap on idle processes ([`super::idle`])
//! and ends it when told, and, when the process has exited, appends the
//! run's one `run_end`.
//!
//! How it ends: only when the process has exited (and been reaped by the
//! adapter). Shutdown is a command that drives the process to exit through
//! the signal ladder, which always ends in SIGKILL; so the task never
//! outlives its process by more than the ladder.

mod batch;
mod control;
mod end;
mod permissions;
mod stdout;

use self::batch::{Room, take_lines};
pub use self::control::CONTROL_TIMEOUT;
use self::control::PendingControl;
pub(crate) use self::control::{Answered, ControlFailure, ControlReplyTx, Record};
pub(super) use self::end::supervised;
use self::stdout::Ahead;
use agent_harness_protocol::vocab::stop_source;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::derive::Status;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use tokio::sync::{OwnedSemaphorePermit, mpsc, oneshot};
use tokio::time::Instant;

use super::fold::FoldCell;
use super::idle::IdleEntry;
use super::ladder::{Action, Cause, Input, Ladder};
use super::receipts::{Keyed, KeyedExt};
use super::slot::Claim;
use super::{ManagerOptions, PermissionAnswer};
use crate::adapter::{
    AdapterError, Decoder, ExitInfo, ProcessControl, ProcessHandle, StdoutLine, UserInput,
};
use crate::error::{Error, Result};
use crate::log::{EventLogs, LogError, NewEvent, Typing};
use crate::store::SessionMeta;

/// Most stdout lines normalized into one append. A batch read ahead takes
/// what comes while the commit before it is under way, up to this: at full
/// speed a batch is this long, which is what a commit's fixed costs (its
/// sync, the writer's and the run task's turnarounds) are shared by.
const MAX_LINES_PER_BATCH: usize = 1024;
/// Most bytes of stdout lines in one batch (a batch's lines stop at the
/// first that reaches it): with `--max-line-bytes`, what bounds the
/// memory a batch holds.
const MAX_BATCH_BYTES: usize = 4 * 1024 * 1024;
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
    /// Append an event the CLI has no part in (a `title_set`), with its
    /// keyed call's receipt, in order with the run's own events; replies
    /// as [`RunCmd::Control`] does (Ended: record it once the run is gone).
    Record {
        record: Box<Record>,
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
    /// The agent cannot take this input (content blocks Codex has no
    /// place for): nothing was written.
    Unable(String),
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
    pub(super) logs: EventLogs,
    pub(super) opts: ManagerOptions,
    /// The spawned process.
    pub(super) handle: ProcessHandle,
    /// Its stdout's decoder, from the adapter that spawned it.
    pub(super) decoder: Box<dyn Decoder>,
    /// The prompt went in with the spawn (input_sent{INITIAL} is logged).
    pub(super) prompt_sent: bool,
    /// This run's place under `--max-live-runs`.
    pub(super) live_permit: OwnedSemaphorePermit,
    /// This run's place among the idle processes (`--max-idle-runs`).
    pub(super) idle: IdleEntry,
}

pub(super) struct Run {
    session_id: String,
    run_id: String,
    logs: EventLogs,
    opts: ManagerOptions,
    control: Arc<dyn ProcessControl>,
    stdout: mpsc::Receiver<StdoutLine>,
    exited: oneshot::Receiver<ExitInfo>,
    decoder: Box<dyn Decoder>,
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
    /// Fragments the decoder had dropped at the last count.
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
    /// Where this run reports itself idle, and hears that it must go.
    idle: IdleEntry,
    /// Lines normalized while the last batch was being committed (or a
    /// batch of them already handed to the writer): the decoder has seen
    /// them, so they are committed before anything else reaches it.
    ahead: Option<Ahead>,
    /// Ended to keep the idle processes under `--max-idle-runs` (decides
    /// the run_end: IDLE_EVICTED rather than IDLE_TIMEOUT).
    evicted: bool,
    /// The last activity at which an eviction was refused for running
    /// background tasks: not offered again until there is activity.
    evict_refused_at: Option<Instant>,
}

impl Run {
    fn new(spec: RunSpec, fold: Arc<FoldCell>) -> Self {
        let RunSpec {
            session_id,
            run_id,
            logs,
            opts,
            handle,
            mut decoder,
            prompt_sent,
            live_permit,
            idle,
        } = spec;
        let ladder = Ladder::new(opts.stop_grace, opts.kill_grace);
        if prompt_sent {
            decoder.input_sent();
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
            decoder,
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
            idle,
            ahead: None,
            evicted: false,
            evict_refused_at: None,
        }
    }

    /// Runs the process to its end, answering the commands sent to `claim`.
    async fn run(mut self, claim: &mut Claim) {
        self.typing = self.logs.typing(&self.session_id).await.ok();
        let mut stdout_open = true;
        let mut cmds_open = true;
        let exit = loop {
            if let Some(ahead) = self.ahead.take() {
                // Before any command: the decoder is past these lines.
                self.ahead = self.settle_ahead(ahead, claim.cmds.is_empty()).await;
                continue;
            }
            let evictable = self.evictable_since();
            self.idle.set(evictable);
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
                        let lines = take_lines(&mut self.stdout, first, &mut Room::batch());
                        self.ahead = self.lines(lines, claim.cmds.is_empty()).await;
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
                since = self.idle.told() => self.evict(since).await,
            }
        };
        // The loop settles a batch read ahead before it selects again, so
        // none is left when it sees the exit.
        debug_assert!(self.ahead.is_none());
        self.idle.set(None);
        self.ladder.step(Input::Exited, Instant::now());
        // Lines written just before the exit are still in the pipe.
        while stdout_open {
            match tokio::time::timeout(DRAIN_AFTER_EXIT, self.stdout.recv()).await {
                Ok(Some(first)) => {
                    // Everything stdout has; without reading ahead: nothing
                    // comes back.
                    let lines = take_lines(&mut self.stdout, first, &mut Room::unbounded());
                    self.lines(lines, false).await;
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

    /// A keep-alive process with no turn, no pending question, no control
    /// request awaiting its answer and no stop under way is idle: the idle
    /// timeout and the cap on idle processes may end it (unless background
    /// tasks are running then; see `timers` and `evict`). A control request
    /// has its own deadline: a process spawned to answer one (RewindFiles
    /// after the idle timeout) and slow to start must not be ended for
    /// idleness before it answers.
    fn idle(&self) -> bool {
        self.control.keep_alive()
            && !self.ladder.stopping()
            && self.pending_permissions() == 0
            && self.controls.is_empty()
            && !self
                .fold
                .with(|d| d.fold.status_fold().turn_in_progress())
                .unwrap_or(false)
    }

    /// An idle process ends `idle_timeout` after its last activity.
    fn idle_deadline(&self) -> Option<Instant> {
        if self.opts.idle_timeout.is_zero() || !self.idle() {
            return None;
        }
        Some(self.last_activity + self.opts.idle_timeout)
    }

    /// What this run reports to the cap on idle processes: idle since its
    /// last activity, or not idle (`None`); also `None` while an eviction
    /// it refused for running background tasks still holds.
    fn evictable_since(&self) -> Option<Instant> {
        if !self.idle() || self.evict_refused_at == Some(self.last_activity) {
            return None;
        }
        Some(self.last_activity)
    }

    /// Whether the log shows background tasks still running (derive's
    /// `has_running_background_tasks`). Takes a snapshot of the fold, so it
    /// is asked only when the idle deadline has passed or the cap on idle
    /// processes tells this one to go.
    fn background_tasks_running(&self) -> bool {
        self.fold
            .with(|d| d.fold.snapshot().has_running_background_tasks)
            .unwrap_or(false)
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
            RunCmd::Record { record, reply } => self.record(*record, reply).await,
            RunCmd::Shutdown => self.shutdown(stop_source::SHUTDOWN).await,
            RunCmd::Delete => {
                self.deleting = true;
                self.shutdown(stop_source::DELETE).await;
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
            match e {
                AdapterError::InputQueueFull(why) => return Err(WriteRefused::QueueFull(why)),
                AdapterError::Unable(why) => return Err(WriteRefused::Unable(why)),
                _ => {}
            }
            tracing::warn!(session_id = %self.session_id, error = %e, "write to the process failed");
            return Err(WriteRefused::Ending);
        }
        self.decoder.input_sent();
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
                source: stop_source::USER.into(),
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
        self.permission_timeouts(now).await;
        if self.idle_deadline().is_some_and(|d| d <= now) && self.background_tasks_running() {
            // The log shows background work (a backgrounded Bash, a
            // subagent) the process must live for: its result comes back
            // as a new turn. Restart the idle clock instead of ending it.
            tracing::debug!(session_id = %self.session_id, run_id = %self.run_id, "idle timeout deferred: background tasks running");
            self.last_activity = now;
        }
        if self.idle_deadline().is_some_and(|d| d <= now) {
            tracing::info!(session_id = %self.session_id, run_id = %self.run_id, "idle timeout");
            self.end_idle(now).await;
        }
    }

    /// Told by the cap on idle processes to go, for its idle stretch since
    /// `since`. Commands are handled in order, so a Send that came first
    /// has made the process busy, or active after that stretch: it stays
    /// (and is judged again by its new stretch). A Send that comes after
    /// finds it ending and respawns.
    async fn evict(&mut self, since: Option<Instant>) {
        self.idle.evicted();
        if !self.idle() || since != Some(self.last_activity) {
            return;
        }
        if self.background_tasks_running() {
            // As for the idle timeout: the process must live for them.
            tracing::debug!(session_id = %self.session_id, run_id = %self.run_id, "idle eviction refused: background tasks running");
            self.evict_refused_at = Some(self.last_activity);
            return;
        }
        tracing::info!(session_id = %self.session_id, run_id = %self.run_id, "idle eviction");
        self.evicted = true;
        self.end_idle(Instant::now()).await;
    }

    /// Ends an idle process the way the idle timeout does: stop_requested
    /// (source idle), then stdin closed and the rest of the ladder.
    async fn end_idle(&mut self, now: Instant) {
        self.append_one(Payload::StopRequested(pb::StopRequested {
            source: stop_source::IDLE.into(),
        }))
        .await;
        self.step(Input::Idle, now);
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}
