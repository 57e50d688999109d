//! Whether this node serves, in one switch read two ways: the gRPC health
//! service (`grpc.health.v1`, the SessionService's status, for gRPC
//! clients and probes) and `GET /healthz` on the same port (plain
//! HTTP/1.1 or h2, for a balancer's check: HAProxy `option httpchk`,
//! nginx, a Kubernetes probe). The server turns it off while commits fail
//! (a full disk, the database down) and for good at shutdown.
//!
//! `/healthz` needs no token: a balancer's check carries none, and the
//! answer says only `serving` (200) or `not serving` (503), nothing of the
//! sessions, the store or the version. It sits inside the access layer
//! like the other plain answers, so the check must name a Host the node
//! accepts (its listen address, a loopback name, or `--allowed-host`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agent_harness_protocol::pb::session_service_server::SessionServiceServer;
use http::header::HeaderValue;
use http::{Method, Request, Response, StatusCode};
use tonic_health::server::HealthReporter;

use crate::plain::Responder;
use crate::rpc::Rpc;

/// Where a balancer checks the node.
pub const PATH: &str = "/healthz";

/// The switch: sets the gRPC health service and what `/healthz` answers
/// together. Cheap to clone.
#[derive(Clone)]
pub struct Health {
    reporter: HealthReporter,
    serving: Arc<AtomicBool>,
}

impl std::fmt::Debug for Health {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Health")
            .field("serving", &self.serving.load(Ordering::Relaxed))
            .finish()
    }
}

impl Health {
    /// A switch over `reporter`, off until [`Health::set`] turns it on.
    pub fn new(reporter: HealthReporter) -> Self {
        Self {
            reporter,
            serving: Arc::new(AtomicBool::new(false)),
        }
    }

    /// SERVING (`true`) or NOT_SERVING, on both faces.
    pub async fn set(&self, serving: bool) {
        if serving {
            self.reporter
                .set_serving::<SessionServiceServer<Rpc>>()
                .await;
        } else {
            self.reporter
                .set_not_serving::<SessionServiceServer<Rpc>>()
                .await;
        }
        self.serving.store(serving, Ordering::Relaxed);
    }

    /// The `GET /healthz` responder reading this switch.
    pub fn healthz(&self) -> Healthz {
        Healthz {
            serving: self.serving.clone(),
        }
    }
}

/// Answers `GET` and `HEAD /healthz` (see the module docs).
#[derive(Debug)]
pub struct Healthz {
    serving: Arc<AtomicBool>,
}

impl Responder for Healthz {
    fn respond<B>(&self, req: &Request<B>) -> Option<Response<tonic::body::Body>> {
        if req.uri().path() != PATH {
            return None;
        }
        let (status, text) = if self.serving.load(Ordering::Relaxed) {
            (StatusCode::OK, "serving\n")
        } else {
            (StatusCode::SERVICE_UNAVAILABLE, "not serving\n")
        };
        let (status, body) = match *req.method() {
            Method::GET => (status, text),
            Method::HEAD => (status, ""),
            _ => (StatusCode::METHOD_NOT_ALLOWED, "only GET and HEAD\n"),
        };
        let mut resp = Response::new(tonic::body::Body::new(body.to_owned()));
        *resp.status_mut() = status;
        let headers = resp.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        headers.insert(
            http::header::CACHE_CONTROL,
            HeaderValue::from_static("no-store"),
        );
        if status == StatusCode::METHOD_NOT_ALLOWED {
            headers.insert(http::header::ALLOW, HeaderValue::from_static("GET, HEAD"));
        }
        Some(resp)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(h: &Healthz, method: Method, path: &str) -> Option<StatusCode> {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap();
        h.respond(&req).map(|r| r.status())
    }

    #[tokio::test]
    async fn healthz_follows_the_switch() {
        let (reporter, _service) = tonic_health::server::health_reporter();
        let health = Health::new(reporter);
        let h = health.healthz();
        assert_eq!(
            answer(&h, Method::GET, PATH),
            Some(StatusCode::SERVICE_UNAVAILABLE)
        );
        health.set(true).await;
        assert_eq!(answer(&h, Method::GET, PATH), Some(StatusCode::OK));
        assert_eq!(answer(&h, Method::HEAD, PATH), Some(StatusCode::OK));
        assert_eq!(
            answer(&h, Method::POST, PATH),
            Some(StatusCode::METHOD_NOT_ALLOWED)
        );
        assert_eq!(answer(&h, Method::GET, "/healthzz"), None);
        assert_eq!(answer(&h, Method::GET, "/"), None);
        health.set(false).await;
        assert_eq!(
            answer(&h, Method::GET, PATH),
            Some(StatusCode::SERVICE_UNAVAILABLE)
        );
    }
}
