//! The manager's options and their defaults.

use std::sync::Arc;
use std::time::Duration;

use super::receipts::IdempotencyOptions;
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
            // One bound for the slots and folds here and the log's resident sessions.
            cache_sessions: crate::log::DEFAULT_CACHE_SESSIONS,
            idempotency: IdempotencyOptions::default(),
            allow_resume_import: false,
            retention: RetentionOptions::default(),
            secrets: SecretsKey::ephemeral(),
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
