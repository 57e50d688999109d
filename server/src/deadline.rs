//! The deadline a gRPC client sends (`grpc-timeout`), honoured the way
//! tonic's own server honours it: a call whose response has not started
//! when the deadline passes is dropped and answered CANCELLED ("Timeout
//! expired"). A stream that has started (Subscribe) is not bounded by it.
//!
//! The server serves connections itself ([`crate::connections`]), so this
//! layer stands in for the one tonic's serve loop used to add.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{HeaderMap, Request};

/// Applies the client's `grpc-timeout` to every request.
#[derive(Debug, Clone, Default)]
pub struct DeadlineLayer;

impl<S> tower::Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Deadline { inner }
    }
}

/// See [`DeadlineLayer`].
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
}

impl<S, B> tower::Service<Request<B>> for Deadline<S>
where
    S: tower::Service<Request<B>>,
    S::Error: Into<tower::BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, tower::BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let deadline = grpc_timeout(req.headers());
        let call = self.inner.call(req);
        Box::pin(async move {
            let Some(deadline) = deadline else {
                return call.await.map_err(Into::into);
            };
            match tokio::time::timeout(deadline, call).await {
                Ok(answer) => answer.map_err(Into::into),
                Err(_) => Err(tonic::TimeoutExpired(()).into()),
            }
        })
    }
}

/// The `grpc-timeout` header: at most 8 digits and a unit (`H`, `M`, `S`,
/// `m`, `u`, `n`); `None` when absent or malformed (then no deadline).
fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    if value.len() < 2 {
        return None;
    }
    let (digits, unit) = value.split_at(value.len() - 1);
    if digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_values() {
        let parse = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert("grpc-timeout", v.parse().unwrap());
            grpc_timeout(&h)
        };
        assert_eq!(parse("3H"), Some(Duration::from_secs(3 * 3600)));
        assert_eq!(parse("2M"), Some(Duration::from_secs(120)));
        assert_eq!(parse("99999999S"), Some(Duration::from_secs(99_999_999)));
        assert_eq!(parse("100m"), Some(Duration::from_millis(100)));
        assert_eq!(parse("7u"), Some(Duration::from_micros(7)));
        assert_eq!(parse("1n"), Some(Duration::from_nanos(1)));
        for bad in ["", "S", "100", "123456789S", "-1S", "+1S", "1x", "1.5S"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }
}
