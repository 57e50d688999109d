//! Routing by session: a client names the session of every call that has
//! one in the `x-session-id` request header, so a balancer can send all of
//! a session's calls to the same node by hashing a header instead of
//! decoding the request. The header is a copy of the request's
//! `session_id`: a call whose header disagrees with its field is refused
//! (INVALID_ARGUMENT naming both), since the balancer routed it by one and
//! the server would serve the other. A call without the header (a client
//! older than routing) is served as before.

use agent_harness_protocol::pb;
use tonic::Request;

use crate::error::{Error, Result};

/// The request header a client puts the session id in.
pub const SESSION_HEADER: &str = "x-session-id";

/// A request that names one session.
pub trait SessionScoped {
    /// The session the request names.
    fn session_id(&self) -> &str;
}

macro_rules! session_scoped {
    ($($request:ty),* $(,)?) => {
        $(impl SessionScoped for $request {
            fn session_id(&self) -> &str {
                &self.session_id
            }
        })*
    };
}

session_scoped!(
    pb::StartRequest,
    pb::SendRequest,
    pb::StopRequest,
    pb::SubscribeRequest,
    pb::HistoryRequest,
    pb::StopTaskRequest,
    pb::SetModelRequest,
    pb::SetPermissionModeRequest,
    pb::SetMaxThinkingTokensRequest,
    pb::RewindFilesRequest,
    pb::GetContextUsageRequest,
    pb::ReadFullEventRequest,
    pb::RespondPermissionRequest,
    pb::DeleteSessionRequest,
    pb::GetSessionRequest,
    pb::SetTitleRequest,
);

/// The request's message once its `x-session-id` header, when present,
/// agrees with its `session_id`.
pub fn routed<T: SessionScoped>(request: Request<T>) -> Result<T> {
    let Some(header) = request.metadata().get(SESSION_HEADER) else {
        return Ok(request.into_inner());
    };
    let session_id = request.get_ref().session_id();
    if header.as_bytes() == session_id.as_bytes() {
        return Ok(request.into_inner());
    }
    let seen = String::from_utf8_lossy(header.as_bytes());
    Err(Error::invalid(
        "session_id",
        crate::error::bounded(format!(
            "the {SESSION_HEADER} header {seen:?} disagrees with session_id {session_id:?}: \
             send the same id in both (the balancer routes by the header)"
        )),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(session_id: &str, header: Option<&str>) -> Request<pb::GetSessionRequest> {
        let mut request = Request::new(pb::GetSessionRequest {
            session_id: session_id.into(),
        });
        if let Some(h) = header {
            request
                .metadata_mut()
                .insert(SESSION_HEADER, h.parse().unwrap());
        }
        request
    }

    #[test]
    fn an_agreeing_or_absent_header_passes() {
        assert_eq!(routed(get("s1", Some("s1"))).unwrap().session_id, "s1");
        assert_eq!(routed(get("s1", None)).unwrap().session_id, "s1");
    }

    #[test]
    fn a_disagreeing_header_is_refused_naming_both() {
        let err = routed(get("s1", Some("s2"))).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::InvalidField { .. }), "{err:?}");
        assert!(text.contains("\"s1\"") && text.contains("\"s2\""), "{text}");
        assert!(text.contains(SESSION_HEADER), "{text}");
    }
}
