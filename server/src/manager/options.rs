//! The manager's options and their defaults.

use std::sync::Arc;
use std::time::Duration;

use super::receipts::{self, IdempotencyOptions};
use crate::duration::{duration_default, parse_duration};
use crate::launch::LaunchPolicy;
use crate::secrets::SecretsKey;

/// Default of [`ManagerOptions::idle_timeout`] (`--idle-timeout`).
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Default of [`ManagerOptions::permission_timeout`] (`--permission-timeout`).
pub const DEFAULT_PERMISSION_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Default of [`ManagerOptions::stop_grace`] (`--stop-grace`).
pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(5);
/// Default of [`ManagerOptions::kill_grace`] (`--kill-grace`).
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(2);
/// Default of [`ManagerOptions::max_live_runs`] (`--max-live-runs`): each
/// CLI process holds a few hundred MB.
pub const DEFAULT_MAX_LIVE_RUNS: usize = 32;
/// Default of [`ManagerOptions::max_idle_runs`] (`--max-idle-runs`): a
/// few warm processes answer the sessions in use at once, the rest resume
/// on their next Send.
pub const DEFAULT_MAX_IDLE_RUNS: usize = 4;

/// Timeouts and limits of the manager.
#[derive(Debug, Clone)]
pub struct ManagerOptions {
    /// A keep-alive process with no turn in progress this long is ended
    /// (`IDLE_TIMEOUT`), unless its log shows background tasks running: then
    /// the idle clock restarts. Zero: never.
    pub idle_timeout: Duration,
    /// An unanswered permission request is denied after this long.
    pub permission_timeout: Duration,
    /// After a Stop's interrupt, how long to wait for the turn to end before
    /// signalling.
    pub stop_grace: Duration,
    /// Between SIGINT, SIGTERM and SIGKILL.
    pub kill_grace: Duration,
    /// Longest stdout line the normalizer accepts.
    pub max_line_bytes: usize,
    /// Most bytes of partial text (live typing) held per session.
    pub max_partial_bytes: usize,
    /// What a client may put into the CLI's argv, env and cwd; checked for
    /// every config that reaches a process (a Start's, a respawning Send's).
    pub launch: Arc<LaunchPolicy>,
    /// Most runs live at once (`--max-live-runs`): a Start or a respawning
    /// Send beyond it gets RESOURCE_EXHAUSTED and appends nothing.
    pub max_live_runs: usize,
    /// Most keep-alive processes kept idle between turns
    /// (`--max-idle-runs`): past it the least recently active is ended
    /// (`IDLE_EVICTED`) and its session resumes on its next Send. 0: none
    /// outlives its turn.
    pub max_idle_runs: usize,
    /// Most idle sessions whose state (slot and cached fold) stays in
    /// memory (`--cache-sessions`); past it the least recently used go.
    pub cache_sessions: usize,
    /// How long the receipts of keyed calls are kept, and the clock they
    /// are stamped with (`--idempotency-ttl`).
    pub idempotency: IdempotencyOptions,
    /// Seals a run's env values in the session's meta (`--secrets-key-file`;
    /// by default a key of this process only).
    pub secrets: Arc<SecretsKey>,
    /// A Start may resume a conversation no session of this server has
    /// (`--allow-resume-import`); one another session has stays refused.
    pub allow_resume_import: bool,
    /// Which idle sessions are deleted (`--retention-days`, `--max-sessions`).
    pub retention: RetentionOptions,
    /// This node, when it shares the store with others: every write RPC
    /// then claims its session first ([`crate::node`]). `None` (a store
    /// only this process writes): every session is this server's.
    pub node: Option<Arc<crate::node::Node>>,
}

/// Which sessions the retention pass deletes ([`SessionManager::retain`]).
/// It never deletes a session with a live run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionOptions {
    /// Delete sessions whose last event (or meta change) is older than
    /// this; `None`: keep them however old.
    pub max_age: Option<Duration>,
    /// Keep at most this many sessions: past it, the least recently active
    /// idle ones go; `None`: no cap.
    pub max_sessions: Option<usize>,
}

impl Default for ManagerOptions {
    fn default() -> Self {
        Self {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            permission_timeout: DEFAULT_PERMISSION_TIMEOUT,
            stop_grace: DEFAULT_STOP_GRACE,
            kill_grace: DEFAULT_KILL_GRACE,
            max_line_bytes: crate::supervise::DEFAULT_MAX_LINE_BYTES,
            max_partial_bytes: crate::partial::DEFAULT_MAX_PARTIAL_BYTES,
            launch: Arc::new(LaunchPolicy::default()),
            max_live_runs: DEFAULT_MAX_LIVE_RUNS,
            max_idle_runs: DEFAULT_MAX_IDLE_RUNS,
            // One bound for the slots and folds here and the log's resident sessions.
            cache_sessions: crate::log::DEFAULT_CACHE_SESSIONS,
            idempotency: IdempotencyOptions::default(),
            allow_resume_import: false,
            retention: RetentionOptions::default(),
            secrets: SecretsKey::ephemeral(),
            node: None,
        }
    }
}

impl ManagerOptions {
    /// The longest a stop ladder can take: interrupt grace plus three signal
    /// graces, plus a second of slack for the reaping.
    pub(super) fn ladder_bound(&self) -> Duration {
        self.stop_grace + self.kill_grace * 3 + Duration::from_secs(1)
    }
}

/// The manager's flags of `serve` (the doc comments are their `--help`
/// text); [`ManagerFlags::options`] turns them into [`ManagerOptions`].
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct ManagerFlags {
    /// End a keep-alive process that has had no turn in progress for this
    /// long (run_end IDLE_TIMEOUT). 0 = never.
    #[arg(long, env = "AGENT_HARNESS_IDLE_TIMEOUT", default_value = duration_default!(DEFAULT_IDLE_TIMEOUT), value_parser = parse_duration)]
    pub idle_timeout: Duration,

    /// Deny a relayed permission request nobody answered within this time.
    #[arg(long, env = "AGENT_HARNESS_PERMISSION_TIMEOUT", default_value = duration_default!(DEFAULT_PERMISSION_TIMEOUT), value_parser = parse_duration)]
    pub permission_timeout: Duration,

    /// After a Stop's interrupt, how long to wait for the turn to end before
    /// signalling the process group (SIGINT).
    #[arg(long, env = "AGENT_HARNESS_STOP_GRACE", default_value = duration_default!(DEFAULT_STOP_GRACE), value_parser = parse_duration)]
    pub stop_grace: Duration,

    /// Time between SIGINT, SIGTERM and SIGKILL while stopping a process.
    #[arg(long, env = "AGENT_HARNESS_KILL_GRACE", default_value = duration_default!(DEFAULT_KILL_GRACE), value_parser = parse_duration)]
    pub kill_grace: Duration,

    /// Most CLI processes alive at once; a Start or a respawning Send beyond
    /// it gets RESOURCE_EXHAUSTED and appends nothing.
    #[arg(long, env = "AGENT_HARNESS_MAX_LIVE_RUNS", default_value_t = DEFAULT_MAX_LIVE_RUNS)]
    pub max_live_runs: usize,

    /// Most keep-alive processes left idle between turns on this node:
    /// past it the least recently active is ended (run_end IDLE_EVICTED)
    /// and its next Send resumes the conversation. 0 = none outlives its
    /// turn; at or above --max-live-runs = no cap.
    #[arg(long, env = "AGENT_HARNESS_MAX_IDLE_RUNS", default_value_t = DEFAULT_MAX_IDLE_RUNS)]
    pub max_idle_runs: usize,

    /// Delete sessions with no live run whose last event is older than this
    /// many days (checked every minute). 0 = keep sessions however old.
    #[arg(long, env = "AGENT_HARNESS_RETENTION_DAYS", default_value_t = 0)]
    pub retention_days: u32,

    /// Most sessions stored: a Start that creates one more first deletes the
    /// least recently active sessions with no live run (down to nine tenths
    /// of the cap); RESOURCE_EXHAUSTED when none can go. 0 = no cap.
    #[arg(long, env = "AGENT_HARNESS_MAX_SESSIONS", default_value_t = 0)]
    pub max_sessions: usize,

    /// Let a Start resume (`config.resume`) a CLI conversation that no
    /// session of this server has recorded (one made by a CLI outside it).
    /// A conversation another session of this server has stays refused.
    #[arg(long, env = "AGENT_HARNESS_ALLOW_RESUME_IMPORT")]
    pub allow_resume_import: bool,

    /// How long the receipt of a call carrying an `idempotency_key` is kept
    /// (on disk, across restarts): a repeat within it returns the first
    /// response and does nothing. At least 10m.
    #[arg(long, env = "AGENT_HARNESS_IDEMPOTENCY_TTL", default_value = duration_default!(receipts::DEFAULT_IDEMPOTENCY_TTL), value_parser = receipts::parse_idempotency_ttl)]
    pub idempotency_ttl: Duration,
}

impl Default for ManagerFlags {
    fn default() -> Self {
        Self {
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            permission_timeout: DEFAULT_PERMISSION_TIMEOUT,
            stop_grace: DEFAULT_STOP_GRACE,
            kill_grace: DEFAULT_KILL_GRACE,
            max_live_runs: DEFAULT_MAX_LIVE_RUNS,
            max_idle_runs: DEFAULT_MAX_IDLE_RUNS,
            retention_days: 0,
            max_sessions: 0,
            allow_resume_import: false,
            idempotency_ttl: receipts::DEFAULT_IDEMPOTENCY_TTL,
        }
    }
}

impl ManagerFlags {
    /// The options these flags set; the others (the launch policy, the
    /// secrets key, the line and partial-text limits, the session cache)
    /// are their defaults, for `serve` to set from the flags of their owners.
    pub fn options(&self) -> ManagerOptions {
        ManagerOptions {
            idle_timeout: self.idle_timeout,
            permission_timeout: self.permission_timeout,
            stop_grace: self.stop_grace,
            kill_grace: self.kill_grace,
            max_live_runs: self.max_live_runs,
            max_idle_runs: self.max_idle_runs,
            idempotency: IdempotencyOptions {
                ttl: self.idempotency_ttl,
                ..IdempotencyOptions::default()
            },
            allow_resume_import: self.allow_resume_import,
            retention: RetentionOptions {
                max_age: (self.retention_days > 0)
                    .then(|| Duration::from_secs(u64::from(self.retention_days) * 24 * 60 * 60)),
                max_sessions: (self.max_sessions > 0).then_some(self.max_sessions),
            },
            ..ManagerOptions::default()
        }
    }
}
