//! The headers every call carries: the bearer token, and the session the
//! call is about, so a balancer in front of several nodes can route every
//! call of one session alike (the server checks it against the request's
//! `session_id`).

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;

use super::SessionError;

/// The request header naming the session of a call.
pub const SESSION_HEADER: &str = "x-session-id";

/// A tonic interceptor adding `authorization: Bearer TOKEN` (when a token
/// is set) and [`SESSION_HEADER`] (when the calls are about one session)
/// to every request. A [`SessionClient`](super::SessionClient) uses one
/// naming its session; a program making calls about no session or many
/// (ListSessions) can put one without a session on the generated client.
#[derive(Clone)]
pub struct CallHeaders {
    auth: Option<MetadataValue<Ascii>>,
    session: Option<MetadataValue<Ascii>>,
}

impl CallHeaders {
    /// The headers for `auth_token` and `session_id`; `Config` when either
    /// cannot be a header value.
    pub fn new(auth_token: Option<&str>, session_id: Option<&str>) -> Result<Self, SessionError> {
        let auth = auth_token
            .map(|token| {
                let mut value =
                    MetadataValue::try_from(format!("Bearer {token}")).map_err(|_| {
                        SessionError::Config("auth token is not a valid header value".to_owned())
                    })?;
                value.set_sensitive(true);
                Ok::<_, SessionError>(value)
            })
            .transpose()?;
        let session = session_id
            .map(|id| {
                MetadataValue::try_from(id).map_err(|_| {
                    SessionError::Config(format!("session id {id:?} is not a valid header value"))
                })
            })
            .transpose()?;
        Ok(Self { auth, session })
    }
}

impl Interceptor for CallHeaders {
    fn call(
        &mut self,
        mut request: tonic::Request<()>,
    ) -> Result<tonic::Request<()>, tonic::Status> {
        if let Some(value) = &self.auth {
            request
                .metadata_mut()
                .insert("authorization", value.clone());
        }
        if let Some(value) = &self.session {
            request.metadata_mut().insert(SESSION_HEADER, value.clone());
        }
        Ok(request)
    }
}

impl std::fmt::Debug for CallHeaders {
    /// Never prints the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallHeaders")
            .field("auth", &self.auth.as_ref().map(|_| "<redacted>"))
            .field("session", &self.session)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_and_the_session_are_added_when_given() {
        let mut both = CallHeaders::new(Some("t0k"), Some("s1")).unwrap();
        let request = both.call(tonic::Request::new(())).unwrap();
        assert_eq!(
            request.metadata().get("authorization").unwrap(),
            "Bearer t0k"
        );
        assert_eq!(request.metadata().get(SESSION_HEADER).unwrap(), "s1");
        assert!(!format!("{both:?}").contains("t0k"), "never printed");

        let mut neither = CallHeaders::new(None, None).unwrap();
        let request = neither.call(tonic::Request::new(())).unwrap();
        assert!(request.metadata().is_empty());

        assert!(CallHeaders::new(Some("bad\ntoken"), None).is_err());
        assert!(CallHeaders::new(None, Some("bad\nid")).is_err());
    }
}
