//! What the harness knows of an agent process, in the words both the
//! supervisor ([`crate::supervise`]) and the adapters ([`crate::adapter`])
//! use: the signals it may get, a line of its stdout, how it ended, and
//! what can go wrong. Kept apart from both so the supervisor, which sits
//! below the adapters, needs nothing of theirs.

/// A signal the harness may send to a process group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// Ask to stop (the CLI flushes and exits 0).
    Int,
    /// Terminate.
    Term,
    /// Kill.
    Kill,
}

/// How a process ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExitInfo {
    /// Exit code, when it exited normally.
    pub code: Option<i32>,
    /// Signal name ("SIGKILL"), when a signal ended it.
    pub signal: Option<String>,
    /// The last lines of stderr (bounded).
    pub stderr_tail: String,
}

/// One line read from the process's stdout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StdoutLine {
    /// A complete line, without its newline.
    Line(String),
    /// A line longer than the adapter's limit: its first bytes and its full length.
    TooLong {
        /// The first bytes of the line (bounded).
        head: String,
        /// The line's full length in bytes.
        len: usize,
    },
}

/// Errors an adapter reports.
#[derive(Debug, thiserror::Error)]
pub enum AdapterError {
    /// The agent binary could not be found; the message says how to fix it.
    #[error("{0}")]
    BinaryNotFound(String),
    /// Spawning failed.
    #[error("spawn failed: {0}")]
    Spawn(String),
    /// Writing to the process failed (it is probably gone).
    #[error("write failed: {0}")]
    Write(String),
    /// The process is not running.
    #[error("process is not running")]
    NotRunning,
    /// The process is alive but not reading its input: its stdin queue is
    /// full. The input was not queued; retrying later may work.
    #[error("{0}")]
    InputQueueFull(String),
    /// The adapter does not support this operation.
    #[error("not supported by this adapter: {0}")]
    Unsupported(&'static str),
    /// The agent cannot do what the config asks (a setting it has no
    /// equivalent of); the message says what.
    #[error("{0}")]
    Unable(String),
    /// The config cannot be run by this adapter (found by
    /// [`ProcessAdapter::check`](crate::adapter::ProcessAdapter::check), before anything is recorded).
    #[error("invalid {field}: {reason}")]
    InvalidConfig {
        /// The request field at fault ("config.prompt").
        field: &'static str,
        /// Why.
        reason: String,
    },
}
