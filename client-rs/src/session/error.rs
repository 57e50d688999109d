//! The session client's one error type.

/// Why a [`SessionClient`](super::SessionClient) call failed.
///
/// Cloneable so that one History answer can be handed to every caller a
/// coalesced [`fetch_history`](super::SessionClient::fetch_history) served.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SessionError {
    /// The server (or the transport under it) answered with a gRPC status.
    /// The status is kept whole so callers can act on its code and details.
    #[error("{rpc} failed: {}: {}", .status.code(), .status.message())]
    Rpc {
        /// The RPC that failed, e.g. "Send".
        rpc: &'static str,
        /// The status as received.
        status: tonic::Status,
    },
    /// The endpoint address or the options could not be used.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The client was closed (or its task ended) before the call finished.
    #[error("session client closed")]
    Closed,
}

impl SessionError {
    /// The gRPC code: the status's code for [`SessionError::Rpc`],
    /// `InvalidArgument` for a bad configuration, `Cancelled` once closed.
    pub fn code(&self) -> tonic::Code {
        match self {
            SessionError::Rpc { status, .. } => status.code(),
            SessionError::Config(_) => tonic::Code::InvalidArgument,
            SessionError::Closed => tonic::Code::Cancelled,
        }
    }
}
