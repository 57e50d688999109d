//! Bearer-token authentication and the loopback-only default.
//!
//! When a token is configured every RPC — native gRPC and grpc-web, the
//! SessionService, reflection and health alike — must carry
//! `authorization: Bearer TOKEN`; anything else is UNAUTHENTICATED (and
//! `GET /metrics` gets 401, see [`crate::scrape`]). Without
//! a token the server only binds loopback
//! (docs/ARCHITECTURE.md, "Safe by default").

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use tonic::service::Interceptor;
use tonic::{Request, Status};

use crate::error::{Error, Result};

/// Checks the `authorization` metadata of every request. Cheap to clone.
#[derive(Clone, Default)]
pub struct AuthInterceptor {
    /// The expected token; `None` lets every request through.
    token: Option<Arc<[u8]>>,
}

impl std::fmt::Debug for AuthInterceptor {
    // Never print the token.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthInterceptor")
            .field("required", &self.token.is_some())
            .finish()
    }
}

impl AuthInterceptor {
    /// Requires `token` (when `Some`) on every request.
    pub fn new(token: Option<String>) -> Self {
        Self {
            token: token.map(|t| Arc::from(t.into_bytes().into_boxed_slice())),
        }
    }

    /// True when requests must carry the token.
    pub fn required(&self) -> bool {
        self.token.is_some()
    }
}

impl AuthInterceptor {
    /// Checks an `authorization` header value (`None`: the request has
    /// none): every request passes without a token; with one, only
    /// `Bearer TOKEN`. The error says what was wrong. The one rule for RPCs
    /// and `GET /metrics` alike.
    pub fn check(&self, authorization: Option<&[u8]>) -> Result<(), &'static str> {
        let Some(expected) = &self.token else {
            return Ok(());
        };
        let Some(value) = authorization else {
            return Err("missing authorization: Bearer token");
        };
        let presented = value
            .strip_prefix(b"Bearer ")
            .or_else(|| value.strip_prefix(b"bearer "));
        match presented {
            Some(p) if constant_time_eq(p, expected) => Ok(()),
            _ => Err("invalid bearer token"),
        }
    }
}

impl Interceptor for AuthInterceptor {
    fn call(&mut self, req: Request<()>) -> Result<Request<()>, Status> {
        let value = req.metadata().get("authorization").map(|v| v.as_bytes());
        match self.check(value) {
            Ok(()) => Ok(req),
            Err(why) => Err(Status::unauthenticated(why)),
        }
    }
}

/// Compares without an early exit, so the time taken says nothing about
/// how many leading bytes matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads the token file: its content, trimmed. An empty file is an error
/// (it would silently accept `Bearer `), and so is one that group or
/// others may read or write (anyone who reads it can call the API).
pub fn load_token(path: &Path) -> Result<String> {
    crate::private_files::check_owner_only(path, "--auth-token-file")?;
    let raw = std::fs::read_to_string(path).map_err(|e| {
        Error::Config(format!(
            "cannot read --auth-token-file {}: {e}",
            path.display()
        ))
    })?;
    let token = raw.trim().to_owned();
    if token.is_empty() {
        return Err(Error::Config(format!(
            "--auth-token-file {} is empty",
            path.display()
        )));
    }
    Ok(token)
}

/// Refuses a non-loopback listen address without a token.
pub fn check_bind(addr: &SocketAddr, has_token: bool) -> Result<()> {
    if addr.ip().is_loopback() || has_token {
        return Ok(());
    }
    Err(Error::Config(format!(
        "refusing to listen on non-loopback address {addr} without authentication: \
         pass --auth-token-file FILE (every RPC then needs `authorization: Bearer TOKEN`), \
         or listen on 127.0.0.1"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(auth: &mut AuthInterceptor, header: Option<&str>) -> Result<(), Status> {
        let mut req = Request::new(());
        if let Some(h) = header {
            req.metadata_mut()
                .insert("authorization", h.parse().unwrap());
        }
        auth.call(req).map(|_| ())
    }

    #[test]
    fn token_checks() {
        let mut open = AuthInterceptor::new(None);
        assert!(call(&mut open, None).is_ok());
        let mut auth = AuthInterceptor::new(Some("s3cret".into()));
        assert_eq!(
            call(&mut auth, None).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert_eq!(
            call(&mut auth, Some("Bearer nope")).unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert!(call(&mut auth, Some("Bearer s3cret")).is_ok());
    }

    #[test]
    fn bind_rules() {
        assert!(check_bind(&"127.0.0.1:1".parse().unwrap(), false).is_ok());
        assert!(check_bind(&"[::1]:1".parse().unwrap(), false).is_ok());
        assert!(check_bind(&"0.0.0.0:1".parse().unwrap(), false).is_err());
        assert!(check_bind(&"0.0.0.0:1".parse().unwrap(), true).is_ok());
    }
}
