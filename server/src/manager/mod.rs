//! The SessionManager: starts, feeds, stops and answers the agent processes
//! of many sessions at once.
//!
//! # Concurrency (the choice, written down)
//! Each session has one **slot** ([`slot`]) with at most one occupant: the
//! one authority that answers Start, Send, Stop and RespondPermission for
//! it. While a run task exists (an actor owning the process, see [`run`]),
//! it is the occupant: the calls send it commands and wait for its reply,
//! and it alone decides (is a run live, is this request pending, may this
//! input be written). When the slot is free, a call claims it and decides
//! from the fold; to start a run it appends `run_start`, spawns, and hands
//! its claim to the new run task. So at any moment exactly one party
//! appends to a session (start-up recovery runs before the manager
//! exists), and its cached derive fold sees events in seq order. No lock is
//! held across an fsync or a process wait: waiting for a dying process is
//! waiting for its claim to be released, with no lock held.
//!
//! There is no "is running" flag: with no run task, whether a run is live
//! is the derive `StatusFold` over the log, cached per session ([`fold`])
//! and caught up to the log's head before every decision.
//!
//! Every call that may carry an `idempotency_key` takes its request once
//! and goes through one path ([`keyed`], rules in [`receipts`]): it takes
//! its key's gate and looks for its receipt; a new call then goes the usual
//! way and whoever commits its events (this module or the run task) commits
//! its receipt in the same transaction.

mod claim;
mod control;
mod delete;
mod fold;
mod fork;
mod idle;
mod keyed;
mod ladder;
mod list;
mod options;
mod ownership;
pub mod receipts;
mod run;
mod send;
mod slot;
mod spawn;
mod title;

use std::sync::Arc;
use std::time::Duration;

use agent_harness_protocol::pb;
use pbjson_types::Struct;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::adapter::{ProcessAdapter, SpawnConfig};
use crate::error::{Error, Result};
use crate::launch::slash::InputFields;
use crate::log::{Commit, EventLogs};
use crate::store::SessionMeta;
use crate::tasks::Tasks;

pub use self::control::SettingChange;
use self::fold::SessionFold;
pub use self::options::{
    DEFAULT_IDLE_TIMEOUT, DEFAULT_KILL_GRACE, DEFAULT_MAX_IDLE_RUNS, DEFAULT_MAX_LIVE_RUNS,
    DEFAULT_PERMISSION_TIMEOUT, DEFAULT_STOP_GRACE, ManagerFlags, ManagerOptions, RetentionOptions,
};
use self::receipts::{Keyed, KeyedExt, Receipts};
pub use self::run::CONTROL_TIMEOUT;
use self::run::RunCmd;
use self::slot::{Slot, Slots};
use self::spawn::Trigger;

/// Runs sessions. Cheap to clone.
#[derive(Clone)]
pub struct SessionManager {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for SessionManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionManager")
            .field("adapter", &self.inner.adapter.name())
            .finish()
    }
}

struct Inner {
    adapter: Arc<dyn ProcessAdapter>,
    logs: EventLogs,
    opts: ManagerOptions,
    /// The slots in memory: those in use and the recently used idle ones.
    slots: Slots,
    /// Cancelled when shutdown begins: no new runs after that.
    shutting_down: CancellationToken,
    /// One permit per live run (`max_live_runs`); the run task holds it
    /// until its process has exited.
    live_runs: Arc<Semaphore>,
    /// The idle keep-alive processes, capped at `max_idle_runs`.
    idle_runs: idle::IdleRuns,
    /// Receipts of keyed calls, and the gates of those in flight.
    receipts: Receipts,
    /// Held by a Start importing an outside conversation from its check
    /// until its run_start is committed (see [`ownership`]).
    imports: tokio::sync::Mutex<()>,
    /// Every task the runs start (the run tasks, and through the adapter
    /// their processes' reapers and readers); the server spawns its own in
    /// it too and waits for the set at shutdown.
    tasks: Tasks,
}

/// An answer to a permission request.
#[derive(Debug, Clone, Default)]
pub struct PermissionAnswer {
    /// Let the tool run.
    pub allow: bool,
    /// When allowing: the input to run with; `None` = the requested input.
    pub updated_input: Option<Struct>,
    /// When denying: the message for the model.
    pub message: String,
}

impl SessionManager {
    /// A manager spawning through `adapter` and recording into `logs`.
    pub fn new(adapter: Arc<dyn ProcessAdapter>, logs: EventLogs, opts: ManagerOptions) -> Self {
        let live_runs = Arc::new(Semaphore::new(
            opts.max_live_runs.min(Semaphore::MAX_PERMITS),
        ));
        let receipts = Receipts::new(logs.clone(), opts.idempotency.clone());
        let idle_runs = idle::IdleRuns::new(opts.max_idle_runs);
        Self {
            inner: Arc::new(Inner {
                adapter,
                logs,
                slots: Slots::new(opts.cache_sessions),
                receipts,
                opts,
                shutting_down: CancellationToken::new(),
                live_runs,
                idle_runs,
                imports: tokio::sync::Mutex::new(()),
                tasks: Tasks::new(),
            }),
        }
    }

    /// CLI processes alive now: the live-run permits taken.
    pub fn live_runs(&self) -> usize {
        self.max_live_runs()
            .saturating_sub(self.inner.live_runs.available_permits())
    }

    /// Most CLI processes alive at once (`--max-live-runs`), as applied.
    pub fn max_live_runs(&self) -> usize {
        self.inner.opts.max_live_runs.min(Semaphore::MAX_PERMITS)
    }

    /// Keep-alive processes idle now (between turns), as the cap on them
    /// counts them.
    pub fn idle_runs(&self) -> usize {
        self.inner.idle_runs.len()
    }

    /// This node, when it shares the store with others.
    pub fn node(&self) -> Option<Arc<crate::node::Node>> {
        self.inner.opts.node.clone()
    }

    /// The agents this manager's adapter runs (ListAgents).
    pub fn agents(&self) -> Vec<pb::AgentInfo> {
        self.inner.adapter.agents()
    }

    /// The event logs this manager writes.
    pub fn logs(&self) -> &EventLogs {
        &self.inner.logs
    }

    /// The set of tasks this manager's runs are spawned in, which the
    /// server shares and waits for at shutdown.
    pub fn tasks(&self) -> &Tasks {
        &self.inner.tasks
    }

    fn slot(&self, session_id: &str) -> Arc<Slot> {
        self.inner.slots.get_or_create(session_id)
    }

    /// The slot of a session that exists (in the log, or being started:
    /// its slot is there); `None` for an unknown id, which allocates
    /// nothing.
    async fn known_slot(&self, session_id: &str) -> Result<Option<Arc<Slot>>> {
        if let Some(slot) = self.inner.slots.get(session_id) {
            return Ok(Some(slot));
        }
        if !self.inner.logs.exists(session_id).await? {
            return Ok(None);
        }
        Ok(Some(self.slot(session_id)))
    }

    /// Sessions with state in memory (a slot and a cached fold).
    pub fn sessions_in_memory(&self) -> usize {
        self.inner.slots.len()
    }

    fn check_open(&self) -> Result<()> {
        if self.inner.shutting_down.is_cancelled() {
            return Err(Error::ShuttingDown);
        }
        Ok(())
    }

    /// Waits (bounded by the stop ladder) for a run task that is ending to
    /// release its claim, so a Send can respawn right after it.
    async fn wait_released(&self, session_id: &str, ended: &CancellationToken) -> Result<()> {
        tokio::time::timeout(self.inner.opts.ladder_bound(), ended.cancelled())
            .await
            .map_err(|_| Error::StillEnding {
                session_id: session_id.to_owned(),
            })
    }

    /// Starts a run. [`Error::RunLive`] when one is already live. A repeat
    /// of a Start this session applied with the same `idempotency_key`
    /// returns its response and does nothing (see [`receipts`]).
    pub async fn start(&self, request: pb::StartRequest) -> Result<pb::StartResponse> {
        let req = &request;
        self.idempotent(req, |keyed| async move {
            let config = req.config.clone().unwrap_or_default();
            self.start_inner(&req.session_id, config, keyed.as_ref())
                .await
        })
        .await
    }

    /// Deletes the receipts older than the idempotency TTL; returns how
    /// many. The server calls it every minute.
    pub async fn prune_receipts(&self) -> Result<usize> {
        self.inner.receipts.prune().await
    }

    /// Keyed calls in flight: the only per-key state held in memory (every
    /// receipt is in the store). Zero when no keyed call is running.
    pub fn idempotency_gates_in_memory(&self) -> usize {
        self.inner.receipts.gates_in_memory()
    }

    async fn start_inner(
        &self,
        session_id: &str,
        mut config: pb::StartConfig,
        keyed: Option<&Keyed>,
    ) -> Result<pb::StartResponse> {
        // A config the policy or the adapter refuses leaves no state behind
        // (checked again, with the session's resume id, when spawning).
        self.check_input(START_FIELDS, &config.prompt, &config.content_blocks)?;
        fork::check_fork(session_id, &config)?;
        self.admit(session_id, &mut config, Trigger::Start)?;
        self.inner.adapter.check(&SpawnConfig {
            session_id: session_id.to_owned(),
            run_id: String::new(),
            config: config.clone(),
            ..Default::default()
        })?;
        // All live-run permits taken: refused before any state exists (the
        // permit itself is taken when spawning).
        if self.inner.live_runs.available_permits() == 0 {
            drop(self.live_run_permit()?);
        }
        let slot = self.slot(session_id);
        self.check_open()?;
        let run_id = match slot.ask_or_claim(|reply| RunCmd::Start { reply }).await {
            Ok(live) => live,
            Err(claim) => {
                self.check_open()?;
                let status = self
                    .current(&slot, session_id, |d| d.fold.status_fold().clone())
                    .await?;
                if !status.run_live() {
                    let agent = self
                        .current(&slot, session_id, |d| d.fold.agent().map(str::to_owned))
                        .await?;
                    keep_agent(&mut config, agent.as_deref(), "this session")?;
                    self.resolve_fork(session_id, &slot.fold, &mut config)
                        .await?;
                    if status.head_seq() == 0 && !self.inner.logs.exists(session_id).await? {
                        // A new session: within --max-sessions first.
                        self.make_room().await?;
                    }
                    return self
                        .spawn_run(session_id, claim, config, Trigger::Start, keyed)
                        .await;
                }
                status.current_run_id().unwrap_or("?").to_owned()
            }
        };
        Err(Error::RunLive {
            session_id: session_id.to_owned(),
            run_id,
        })
    }

    /// Every user message passes here before anything of it is recorded or
    /// written to a process: the launch policy refuses one the CLI would
    /// run as a slash command it does not allow.
    fn check_input(
        &self,
        fields: InputFields,
        text: &str,
        content_blocks: &[Struct],
    ) -> Result<()> {
        self.inner
            .opts
            .launch
            .check_input(fields, text, content_blocks)
    }

    /// The session's cached derived state, caught up to the log's head.
    async fn current<R>(
        &self,
        slot: &Slot,
        session_id: &str,
        f: impl FnOnce(&SessionFold) -> R,
    ) -> Result<R> {
        Ok(slot.fold.current(&self.inner.logs, session_id, f).await?)
    }

    /// Stops the current turn (interrupt, then the signal ladder). Answers
    /// `stopping: false` when nothing was running. Idempotent; and a repeat
    /// of a Stop this session applied with the same `idempotency_key`
    /// returns its answer and stops nothing (a later turn is not stopped by
    /// a retry of an earlier Stop).
    pub async fn stop(&self, request: pb::StopRequest) -> Result<pb::StopResponse> {
        let session_id = request.session_id.as_str();
        let Some(slot) = self.known_slot(session_id).await? else {
            return Err(Error::unknown_session(session_id));
        };
        self.idempotent(&request, |keyed| async move {
            let stopping = self.stop_inner(session_id, &slot, keyed.as_ref()).await?;
            Ok(pb::StopResponse { stopping })
        })
        .await
    }

    async fn stop_inner(
        &self,
        session_id: &str,
        slot: &Arc<Slot>,
        keyed: Option<&Keyed>,
    ) -> Result<bool> {
        let cmd = |reply| RunCmd::Stop {
            keyed: keyed.cloned(),
            reply,
        };
        let _claim = match slot.ask_or_claim(cmd).await {
            Ok(stopping) => return stopping,
            Err(claim) => claim,
        };
        if !self.inner.logs.exists(session_id).await? {
            return Err(Error::unknown_session(session_id));
        }
        // Safety net: a log that shows a live run with no run task (its task
        // failed to record the end; it cannot happen after recovery) is
        // closed, so Stop always works.
        let status = self
            .current(slot, session_id, |d| d.fold.status_fold().clone())
            .await?;
        let stopping = status.run_live();
        let commit = if stopping {
            let run_id = status.current_run_id().unwrap_or_default().to_owned();
            Commit::events(vec![crate::recovery::inferred_run_end(run_id)])
                .with_meta(SessionMeta::forget_process)
        } else {
            Commit::default()
        };
        let receipt = keyed.put(|| pb::StopResponse { stopping });
        let appended = self
            .inner
            .logs
            .commit(session_id, commit.with_receipt(receipt))
            .await?;
        slot.fold.applied(&appended);
        Ok(stopping)
    }

    /// Answers a pending permission request.
    /// [`Error::PermissionRequestNotPending`] when it is not pending
    /// (unknown, already answered, timed out or withdrawn). A repeat of an
    /// answer this session applied with the same `idempotency_key` succeeds
    /// again and writes nothing (instead of NOT_FOUND: the request is no
    /// longer pending because this very call answered it).
    pub async fn respond_permission(
        &self,
        request: pb::RespondPermissionRequest,
    ) -> Result<pb::RespondPermissionResponse> {
        let session_id = request.session_id.as_str();
        let Some(slot) = self.known_slot(session_id).await? else {
            return Err(Error::unknown_session(session_id));
        };
        let req = &request;
        self.idempotent(req, |keyed| async move {
            self.respond_permission_inner(&slot, req, keyed.as_ref())
                .await?;
            Ok(pb::RespondPermissionResponse {})
        })
        .await
    }

    async fn respond_permission_inner(
        &self,
        slot: &Arc<Slot>,
        request: &pb::RespondPermissionRequest,
        keyed: Option<&Keyed>,
    ) -> Result<()> {
        let (session_id, request_id) = (&request.session_id, &request.request_id);
        let answer = PermissionAnswer {
            allow: request.allow,
            updated_input: request.updated_input.clone(),
            message: request.message.clone(),
        };
        let cmd = |reply| RunCmd::Permission {
            request_id: request_id.to_owned(),
            answer: answer.clone(),
            keyed: keyed.cloned(),
            reply,
        };
        let _claim = match slot.ask_or_claim(cmd).await {
            Ok(answered) => return answered,
            Err(claim) => claim,
        };
        // No run task: no process to answer.
        if !self.inner.logs.exists(session_id).await? {
            return Err(Error::unknown_session(session_id));
        }
        Err(Error::PermissionRequestNotPending {
            session_id: session_id.to_owned(),
            request_id: request_id.to_owned(),
        })
    }

    /// One session's derived state.
    pub async fn get(&self, session_id: &str) -> Result<pb::Session> {
        // The log, not the slot: a Start being refused may hold a slot for
        // a session that does not exist.
        if !self.inner.logs.exists(session_id).await? {
            return Err(Error::unknown_session(session_id));
        }
        let slot = self.slot(session_id);
        self.current(&slot, session_id, |d| d.fold.session(session_id))
            .await
    }

    /// Stops every live run (run_end SERVER_RESTART, source "shutdown") and
    /// waits for their run_end, bounded by the stop ladder. New calls get
    /// [`Error::ShuttingDown`] from now on. Does not close the logs.
    pub async fn shutdown(&self) {
        self.inner.shutting_down.cancel();
        self.stop_all_runs().await;
    }

    /// Stops every live run (run_end SERVER_RESTART, source "shutdown",
    /// when the log still takes it) and waits for their ends, bounded by
    /// the stop ladder; new calls are not refused here.
    pub async fn stop_all_runs(&self) {
        let slots = self.inner.slots.all();
        let mut waiting = Vec::new();
        for slot in slots {
            if let Some(run) = slot.occupant()
                && run.tell(RunCmd::Shutdown).await
            {
                waiting.push(run.ended.clone());
            }
        }
        let bound = self.inner.opts.kill_grace * 3 + Duration::from_secs(1);
        for ended in waiting {
            if tokio::time::timeout(bound, ended.cancelled())
                .await
                .is_err()
            {
                tracing::warn!("a run did not end within the shutdown bound");
            }
        }
    }
}

/// Where a Start's message is.
const START_FIELDS: InputFields = InputFields {
    text: "config.prompt",
    blocks: "config.content_blocks",
};
/// Where a Send's message is.
const SEND_FIELDS: InputFields = InputFields {
    text: "input",
    blocks: "content_blocks",
};

/// A session keeps the agent of its first run: a config naming no agent
/// gets `agent` (the session's, or a fork's source's: `whose`), and one
/// naming another is INVALID_ARGUMENT (its conversation is the other
/// agent's). `None`: no run yet, any agent.
pub(super) fn keep_agent(
    config: &mut pb::StartConfig,
    agent: Option<&str>,
    whose: &str,
) -> Result<()> {
    let Some(agent) = agent else {
        return Ok(());
    };
    if config.agent.is_empty() {
        // Claude's run_start configs keep the empty name they always had.
        if agent != agent_harness_protocol::vocab::agent::CLAUDE {
            config.agent = agent.to_owned();
        }
        return Ok(());
    }
    if agent_harness_protocol::vocab::agent::of_run(&config.agent) != agent {
        return Err(Error::invalid(
            "config.agent",
            format!(
                "{whose} runs {agent}; its conversation cannot go on with {:?} (leave agent \
                 empty, or start a new session)",
                config.agent.chars().take(64).collect::<String>()
            ),
        ));
    }
    Ok(())
}
