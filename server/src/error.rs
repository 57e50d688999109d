//! The server's one error enum, and its one mapping to a gRPC status.
//!
//! Every layer below the RPC edge returns [`Error`]; `rpc` converts it with
//! `From<Error> for tonic::Status` and nowhere else, so a client always gets
//! the same code for the same failure.

use std::borrow::Cow;

use tonic::Status;

/// Everything that can go wrong behind the API.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A request field is invalid; `field` names it for the client.
    #[error("invalid {field}: {reason}")]
    InvalidArgument {
        /// The offending field ("session_id", "config.cwd", "config.args[2]",
        /// "config.env.KEY", ...).
        field: Cow<'static, str>,
        /// Why it was refused.
        reason: String,
    },
    /// No such session (or permission request).
    #[error("{0}")]
    NotFound(String),
    /// The session is not in a state that allows this call.
    #[error("{0}")]
    FailedPrecondition(String),
    /// The operator's policy does not allow this (e.g. a `config.cwd`
    /// outside every `--allowed-cwd`).
    #[error("{0}")]
    PermissionDenied(String),
    /// A size limit was exceeded.
    #[error("{0}")]
    ResourceExhausted(String),
    /// The call could not be completed now; retrying may help.
    #[error("{0}")]
    Unavailable(String),
    /// A bug or an I/O failure inside the server.
    #[error("{0}")]
    Internal(String),
}

/// Shorthand for results in this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An INVALID_ARGUMENT naming `field`.
    pub fn invalid(field: impl Into<Cow<'static, str>>, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// An unknown session.
    pub fn unknown_session(session_id: &str) -> Self {
        Error::NotFound(format!("session {session_id:?} not found"))
    }
}

impl From<crate::store::StoreError> for Error {
    fn from(e: crate::store::StoreError) -> Self {
        Error::Internal(e.to_string())
    }
}

impl From<crate::log::LogError> for Error {
    fn from(e: crate::log::LogError) -> Self {
        match e {
            crate::log::LogError::Closed => {
                Error::Unavailable("the server is shutting down".into())
            }
            other => Error::Internal(other.to_string()),
        }
    }
}

impl From<crate::adapter::AdapterError> for Error {
    fn from(e: crate::adapter::AdapterError) -> Self {
        use crate::adapter::AdapterError as A;
        match e {
            // The message already says how to fix it (install, --claude-bin).
            A::BinaryNotFound(msg) => Error::FailedPrecondition(msg),
            A::Unsupported(what) => {
                Error::FailedPrecondition(format!("not supported by this adapter: {what}"))
            }
            A::NotRunning => Error::Unavailable("the process is not running".into()),
            other => Error::Internal(other.to_string()),
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

impl From<Error> for Status {
    fn from(e: Error) -> Self {
        let msg = bounded(e.to_string());
        match e {
            Error::InvalidArgument { .. } => Status::invalid_argument(msg),
            Error::NotFound(_) => Status::not_found(msg),
            Error::FailedPrecondition(_) => Status::failed_precondition(msg),
            Error::PermissionDenied(_) => Status::permission_denied(msg),
            Error::ResourceExhausted(_) => Status::resource_exhausted(msg),
            Error::Unavailable(_) => Status::unavailable(msg),
            Error::Internal(_) => Status::internal(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_messages_are_bounded() {
        let huge = "é".repeat(1 << 20);
        let status = Status::from(Error::invalid("config.args[0]", huge));
        assert!(status.message().len() <= MAX_STATUS_MESSAGE);
        assert!(status.message().starts_with("invalid config.args[0]: "));
        assert!(status.message().ends_with("more bytes)"));
        assert_eq!(status.code(), tonic::Code::InvalidArgument);
        let short = Status::from(Error::NotFound("no".into()));
        assert_eq!(short.message(), "no");
    }
}
