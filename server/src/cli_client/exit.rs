//! The terminal client's exit codes and its one error: what a script
//! branches on. Every failure maps to one code; a gRPC status maps by its
//! code, so the same refusal exits the same way from every command.

use std::process::ExitCode;

use agent_harness_client::session::SessionError;

/// Done.
pub const OK: u8 = 0;
/// Bad flags or arguments, or the server found the request invalid
/// (INVALID_ARGUMENT, OUT_OF_RANGE).
pub const USAGE: u8 = 1;
/// No such session, or no such pending permission request (NOT_FOUND).
pub const NOT_FOUND: u8 = 2;
/// The server could not be reached or the call broke in transit
/// (UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED, UNKNOWN).
pub const UNAVAILABLE: u8 = 3;
/// No or a wrong token, or the server's policy refused the request
/// (UNAUTHENTICATED, PERMISSION_DENIED).
pub const DENIED: u8 = 4;
/// `tail --until-idle`: the turn ended in error (an API error, a crashed
/// run, a run error).
pub const TURN_FAILED: u8 = 5;
/// `tail --until-idle`: the turn was stopped (a Stop request).
pub const TURN_STOPPED: u8 = 6;
/// The session is not in a state that allows it, e.g. Start while a run is
/// live (FAILED_PRECONDITION, ALREADY_EXISTS, ABORTED).
pub const CONFLICT: u8 = 7;
/// A server cap was reached (RESOURCE_EXHAUSTED).
pub const EXHAUSTED: u8 = 8;
/// The server failed or does not implement the call (INTERNAL,
/// UNIMPLEMENTED, DATA_LOSS).
pub const SERVER: u8 = 9;

/// Why a command ends with a code other than 0, and what to tell the user.
#[derive(Debug)]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// Printed on stderr; empty prints nothing (e.g. stdout was closed by
    /// the reader, as `ls | head` does).
    pub message: String,
}

impl Failure {
    /// A usage error.
    pub fn usage(message: impl Into<String>) -> Self {
        Self {
            code: USAGE,
            message: message.into(),
        }
    }

    /// A failure with its own code.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A failed call: the code of its status, the RPC and the server's
    /// message.
    pub fn rpc(rpc: &str, status: &tonic::Status) -> Self {
        Self::new(
            code_for(status.code()),
            format!(
                "{rpc} failed: {}: {}",
                code_name(status.code()),
                status.message()
            ),
        )
    }

    /// The process's exit code, after printing the message.
    pub fn report(self, command: &str) -> ExitCode {
        if !self.message.is_empty() {
            eprintln!("agent-harness {command}: {}", self.message);
        }
        ExitCode::from(self.code)
    }
}

impl From<SessionError> for Failure {
    fn from(e: SessionError) -> Self {
        match &e {
            SessionError::Rpc { rpc, status } => Failure::rpc(rpc, status),
            SessionError::Config(m) => Failure::usage(m.clone()),
            SessionError::Closed => Failure::new(UNAVAILABLE, e.to_string()),
        }
    }
}

/// The exit code of a gRPC status code.
pub fn code_for(code: tonic::Code) -> u8 {
    use tonic::Code as C;
    match code {
        C::Ok => OK,
        C::InvalidArgument | C::OutOfRange => USAGE,
        C::NotFound => NOT_FOUND,
        C::Unavailable | C::DeadlineExceeded | C::Cancelled | C::Unknown => UNAVAILABLE,
        C::Unauthenticated | C::PermissionDenied => DENIED,
        C::FailedPrecondition | C::AlreadyExists | C::Aborted => CONFLICT,
        C::ResourceExhausted => EXHAUSTED,
        C::Internal | C::Unimplemented | C::DataLoss => SERVER,
    }
}

/// The code as the gRPC spec spells it (NOT_FOUND), for messages.
pub fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code as C;
    match code {
        C::Ok => "OK",
        C::Cancelled => "CANCELLED",
        C::Unknown => "UNKNOWN",
        C::InvalidArgument => "INVALID_ARGUMENT",
        C::DeadlineExceeded => "DEADLINE_EXCEEDED",
        C::NotFound => "NOT_FOUND",
        C::AlreadyExists => "ALREADY_EXISTS",
        C::PermissionDenied => "PERMISSION_DENIED",
        C::ResourceExhausted => "RESOURCE_EXHAUSTED",
        C::FailedPrecondition => "FAILED_PRECONDITION",
        C::Aborted => "ABORTED",
        C::OutOfRange => "OUT_OF_RANGE",
        C::Unimplemented => "UNIMPLEMENTED",
        C::Internal => "INTERNAL",
        C::Unavailable => "UNAVAILABLE",
        C::DataLoss => "DATA_LOSS",
        C::Unauthenticated => "UNAUTHENTICATED",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_map_to_their_documented_codes() {
        assert_eq!(code_for(tonic::Code::NotFound), 2);
        assert_eq!(code_for(tonic::Code::Unavailable), 3);
        assert_eq!(code_for(tonic::Code::Unauthenticated), 4);
        assert_eq!(code_for(tonic::Code::PermissionDenied), 4);
        assert_eq!(code_for(tonic::Code::FailedPrecondition), 7);
        let f = Failure::rpc("Send", &tonic::Status::not_found("no session x"));
        assert_eq!(f.code, NOT_FOUND);
        assert_eq!(f.message, "Send failed: NOT_FOUND: no session x");
    }
}
