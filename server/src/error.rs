//! The server's one error enum: what went wrong, in the domain's words.
//!
//! Every layer below the RPC edge returns [`Error`]; how the wire says it
//! (a gRPC status code) is decided once, by `From<Error> for Status` in
//! [`crate::rpc`], so a client always gets the same code for the same
//! failure and no layer below picks codes.

use std::borrow::Cow;

/// Everything that can go wrong behind the API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request field (or a command-line value) is invalid; `field` names
    /// it for the caller.
    #[error("invalid {field}: {reason}")]
    InvalidField {
        /// The offending field ("session_id", "config.cwd", "config.args[2]",
        /// "config.env.KEY", ...).
        field: Cow<'static, str>,
        /// Why it was refused.
        reason: String,
    },
    /// No session with this id has any event or meta.
    #[error("session {session_id:?} not found")]
    UnknownSession {
        /// The id asked for.
        session_id: String,
    },
    /// The session has no event with this seq (ReadFullEvent).
    #[error("session {session_id:?} has no event {seq}")]
    UnknownEvent {
        /// The session.
        session_id: String,
        /// The seq asked for.
        seq: u64,
    },
    /// The permission request is not waiting for an answer: unknown,
    /// already answered, timed out, withdrawn, or its run has ended.
    #[error("no pending permission request {request_id:?} in session {session_id:?}")]
    PermissionRequestNotPending {
        /// The session.
        session_id: String,
        /// The request id given.
        request_id: String,
    },
    /// An `idempotency_key` this session already applied, sent with a
    /// different request (another RPC, or other fields).
    #[error(
        "invalid idempotency_key: session {session_id:?} already applied this key to a \
         different request ({first_rpc}) within the last {}s; use a new key for each \
         logical call, and the same key only to retry that call",
        ttl.as_secs()
    )]
    IdempotencyKeyReused {
        /// The session.
        session_id: String,
        /// The RPC the key was first applied by.
        first_rpc: String,
        /// How long a key is kept.
        ttl: std::time::Duration,
    },
    /// A write to a session that another node of the cluster owns (its
    /// lease is live there), or that this node may no longer write to (its
    /// own lease lapsed or another node took the session over); retrying
    /// on the owner, or a little later, may work.
    #[error("{}", not_owner_message(session_id, owner.as_ref()))]
    NotOwner {
        /// The session.
        session_id: String,
        /// The owner's node id and address, when another node owns it.
        owner: Option<(String, String)>,
    },
    /// Start while the session has a live run.
    #[error(
        "session {session_id:?} already has a live run ({run_id}); use Send to talk to it, \
         or Stop it first"
    )]
    RunLive {
        /// The session.
        session_id: String,
        /// The live run.
        run_id: String,
    },
    /// The log shows a live run but no process of this server belongs to it
    /// (its run task failed before recording the end); Stop closes it.
    #[error("session {session_id:?} has a live run this server does not own; Stop it first")]
    RunNotOwned {
        /// The session.
        session_id: String,
    },
    /// Send while a one-shot run (which takes no input after its prompt)
    /// is still working.
    #[error(
        "run {run_id} of session {session_id:?} is a one-shot run still working; wait for its \
         run_end or Stop it, then Send"
    )]
    OneShotBusy {
        /// The session.
        session_id: String,
        /// The working run.
        run_id: String,
    },
    /// A Send would respawn the session, but its last config cannot be
    /// used again (a value the meta lost, or the launch policy narrowed
    /// since); a Start with a full config fixes it.
    #[error("session {session_id:?} cannot be respawned: {reason}; Start it again with its config")]
    RespawnImpossible {
        /// The session.
        session_id: String,
        /// What is missing or refused.
        reason: String,
    },
    /// The process a call needed has exited (its run_end is on the way):
    /// retrying the same call cannot help.
    #[error("the process has exited: {0}")]
    ProcessExited(String),
    /// A control call (StopTask, GetContextUsage, ...) needs the session's
    /// live CLI process, and it has none.
    #[error(
        "session {session_id:?} has no live process; this call talks to a running CLI (Send \
         starts one)"
    )]
    NoLiveProcess {
        /// The session.
        session_id: String,
    },
    /// A fork's source has nothing to fork yet.
    #[error("cannot fork: {0}")]
    NotForkable(String),
    /// The CLI answered a control request with an error.
    #[error("the CLI refused: {0}")]
    CliRefused(String),
    /// The CLI did not answer a control request in time.
    #[error("the CLI did not answer within {0:?}")]
    CliTimeout(std::time::Duration),
    /// The operator's policy does not allow this (e.g. a `config.cwd`
    /// outside every `--allowed-cwd`).
    #[error("{0}")]
    PolicyDenied(String),
    /// The agent binary is missing; the message says how to fix it.
    #[error("{0}")]
    BinaryNotFound(String),
    /// The adapter cannot do this (e.g. content blocks on a one-shot run).
    #[error("not supported by this adapter: {0}")]
    Unsupported(String),
    /// The server's own configuration (a flag, a file it names) is
    /// unusable; found at start-up.
    #[error("{0}")]
    Config(String),
    /// A cap was reached (live runs, streams, a size).
    #[error("{0}")]
    ResourceLimit(String),
    /// This peer created sessions faster than `--max-sessions-per-minute`.
    #[error(
        "this client created {per_minute} sessions within a minute, the most this server allows \
         (--max-sessions-per-minute); retry in {}s", retry_after.as_secs().max(1)
    )]
    RateLimited {
        /// The limit.
        per_minute: u32,
        /// When the next Start of a new session will be taken.
        retry_after: std::time::Duration,
    },
    /// The server is shutting down: no new work.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// The session's process is still ending after its whole stop ladder;
    /// retrying shortly may work.
    #[error("the process of session {session_id:?} is still ending; retry")]
    StillEnding {
        /// The session.
        session_id: String,
    },
    /// The event store failed.
    #[error("storage: {0}")]
    Storage(String),
    /// Spawning the agent process failed.
    #[error("spawn failed: {0}")]
    Spawn(String),
    /// A bug or an unexpected failure inside the server.
    #[error("{0}")]
    Internal(String),
}

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An invalid `field`.
    pub fn invalid(field: impl Into<Cow<'static, str>>, reason: impl Into<String>) -> Self {
        Error::InvalidField {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// This error, naming `field` if it is an [`Error::InvalidField`] (a
    /// check shared by two requests that call the field differently).
    pub fn renamed(self, field: &'static str) -> Self {
        match self {
            Error::InvalidField { reason, .. } => Error::invalid(field, reason),
            other => other,
        }
    }

    /// An unknown session.
    pub fn unknown_session(session_id: &str) -> Self {
        Error::UnknownSession {
            session_id: session_id.to_owned(),
        }
    }
}

impl From<crate::private_files::Refused> for Error {
    fn from(e: crate::private_files::Refused) -> Self {
        Error::Config(e.to_string())
    }
}

fn not_owner_message(session_id: &str, owner: Option<&(String, String)>) -> String {
    match owner {
        Some((node, addr)) if addr.is_empty() => {
            format!("session {session_id:?} is owned by node {node:?}; call that node")
        }
        Some((node, addr)) => {
            format!("session {session_id:?} is owned by node {node:?} at {addr}; call that node")
        }
        None => format!(
            "this node may not write to session {session_id:?} now (its lease lapsed or \
             another node took the session over); retry"
        ),
    }
}

/// A store's refusal of a fenced write, as the error a client gets.
fn fenced(e: &crate::store::StoreError) -> Option<Error> {
    match e {
        crate::store::StoreError::Fenced { sessions } => Some(Error::NotOwner {
            session_id: sessions.first().cloned().unwrap_or_default(),
            owner: None,
        }),
        _ => None,
    }
}

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Self {
        fenced(&e).unwrap_or_else(|| Error::Storage(e.to_string()))
    }
}

impl From<crate::log::LogError> for Error {
    fn from(e: crate::log::LogError) -> Self {
        match e {
            crate::log::LogError::Closed => Error::ShuttingDown,
            crate::log::LogError::Store(s) => {
                fenced(&s).unwrap_or_else(|| Error::Storage(s.to_string()))
            }
        }
    }
}

impl From<crate::adapter::AdapterError> for Error {
    fn from(e: crate::adapter::AdapterError) -> Self {
        use crate::adapter::AdapterError as A;
        match e {
            A::BinaryNotFound(msg) => Error::BinaryNotFound(msg),
            A::Unsupported(what) => Error::Unsupported(what.to_owned()),
            A::Unable(what) => Error::Unsupported(what),
            A::InvalidConfig { field, reason } => Error::invalid(field, reason),
            A::Spawn(msg) => Error::Spawn(msg),
            A::InputQueueFull(msg) => Error::ResourceLimit(msg),
            // Writing to, signalling or answering a process that is gone.
            A::NotRunning | A::Write(_) => Error::ProcessExited(e.to_string()),
        }
    }
}

/// Longest status message sent, in bytes. Messages quote what the client
/// sent (a refused argument, an env name); an unbounded quote of a 1 MB
/// argument would not fit in an HTTP/2 header block and the client would
/// see a connection error instead of the status.
pub const MAX_STATUS_MESSAGE: usize = 1024;

/// `msg` cut to at most [`MAX_STATUS_MESSAGE`] bytes at a char boundary,
/// marked with how much was left out.
pub(crate) fn bounded(mut msg: String) -> String {
    if msg.len() <= MAX_STATUS_MESSAGE {
        return msg;
    }
    let total = msg.len();
    let mut cut = MAX_STATUS_MESSAGE - 64;
    while !msg.is_char_boundary(cut) {
        cut -= 1;
    }
    msg.truncate(cut);
    msg.push_str(&format!("... ({} more bytes)", total - cut));
    msg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_messages_are_bounded() {
        let huge = "é".repeat(1 << 20);
        let msg = bounded(format!("invalid config.args[0]: {huge}"));
        assert!(msg.len() <= MAX_STATUS_MESSAGE);
        assert!(msg.starts_with("invalid config.args[0]: "));
        assert!(msg.ends_with("more bytes)"));
        assert_eq!(bounded("no".into()), "no");
    }
}
