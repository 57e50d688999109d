//! The built-in web console: a static page at `/` on the serving port,
//! beside gRPC and grpc-web.
//!
//! The page is the React app in `server/web` (built with esbuild on top of
//! `@agent-harness/client`), committed as `server/web/dist` and embedded
//! here with `include_bytes!`, so `cargo build` needs no Node.
//! `tests/browser/run.sh` rebuilds it and fails when the bytes differ.
//!
//! [`Console`] answers through a [`crate::plain::PlainLayer`] inside the
//! access layer, like `GET /metrics`: a foreign `Origin` or (without a
//! token) a non-loopback `Host` is refused before it. The files hold no data, so they are served without the token
//! (a browser cannot put a bearer token on a navigation); every call the
//! page makes is a grpc-web RPC and needs the token like any other.
//!
//! Rules, each so that a page or a network peer gains nothing:
//! - only the embedded files, by exact path (no file system, no traversal);
//! - only GET and HEAD on those paths (405 otherwise); a GET or HEAD of any
//!   other path is 404, and with `--no-ui` every GET and HEAD is 404;
//! - every answer carries a strict Content-Security-Policy (scripts,
//!   styles and calls to this origin only, no frames, no plugins, no
//!   forms posting elsewhere), `X-Content-Type-Options: nosniff`,
//!   `X-Frame-Options: DENY`, `Referrer-Policy: no-referrer` and the exact
//!   content type of the file.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};

use crate::plain::Responder;

/// One embedded file of the console.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// The request path that serves it.
    pub path: &'static str,
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes, from `server/web/dist`.
    pub body: &'static [u8],
}

/// Every file of the console. The page is one HTML file, one script, one
/// stylesheet and an icon; the app routes in the URL fragment, so no other
/// path is ever needed.
pub const ASSETS: &[Asset] = &[
    Asset {
        path: "/",
        content_type: "text/html; charset=utf-8",
        body: include_bytes!("../web/dist/index.html"),
    },
    Asset {
        path: "/console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../web/dist/console.js"),
    },
    Asset {
        path: "/console.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../web/dist/console.css"),
    },
    Asset {
        path: "/favicon.svg",
        content_type: "image/svg+xml",
        body: include_bytes!("../web/dist/favicon.svg"),
    },
];

/// The Content-Security-Policy of every console answer. `img-src blob:`
/// shows image attachments before they are sent; `connect-src 'self'` is
/// the grpc-web API on this same origin; Trusted Types with no policy: no
/// string ever reaches an HTML or script sink (`innerHTML`, `eval`).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self' blob:; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'; require-trusted-types-for 'script'; \
     trusted-types 'none'";

/// The headers every console answer carries, found or not.
const SECURITY_HEADERS: &[(&str, &str)] = &[
    ("content-security-policy", CONTENT_SECURITY_POLICY),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "no-referrer"),
    ("cross-origin-opener-policy", "same-origin"),
    ("cross-origin-resource-policy", "same-origin"),
    (
        "permissions-policy",
        "camera=(), microphone=(), geolocation=()",
    ),
    // Small files; a new binary must never meet an old cached script.
    ("cache-control", "no-cache"),
];

/// The embedded file served at `path`, if any.
pub fn asset(path: &str) -> Option<&'static Asset> {
    ASSETS.iter().find(|a| a.path == path)
}

/// Answers the console's requests (see [`crate::plain`]); every other
/// request goes on to the services.
#[derive(Debug, Clone, Copy)]
pub struct Console {
    /// False with `--no-ui`: every GET and HEAD is 404.
    enabled: bool,
}

impl Console {
    /// Serves the console when `enabled`.
    pub fn new(enabled: bool) -> Self {
        Self { enabled }
    }
}

impl Responder for Console {
    fn respond<B>(&self, req: &Request<B>) -> Option<Response<tonic::body::Body>> {
        answer(self.enabled, req.method(), req.uri().path())
    }
}

/// The console's answer to `method path`, or `None` for a request that is
/// not the console's (an RPC: gRPC and grpc-web never use GET or HEAD).
fn answer(enabled: bool, method: &Method, path: &str) -> Option<Response<tonic::body::Body>> {
    let read = method == Method::GET || method == Method::HEAD;
    let found = asset(path).filter(|_| enabled);
    match (read, found) {
        (true, Some(a)) => {
            let body = if method == Method::HEAD {
                &[][..]
            } else {
                a.body
            };
            let mut resp = respond(StatusCode::OK, a.content_type, body);
            resp.headers_mut()
                .insert(header::CONTENT_LENGTH, HeaderValue::from(a.body.len()));
            Some(resp)
        }
        (true, None) => Some(respond(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            b"not found\n",
        )),
        (false, Some(_)) => {
            let mut resp = respond(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain; charset=utf-8",
                b"only GET and HEAD\n",
            );
            resp.headers_mut()
                .insert(header::ALLOW, HeaderValue::from_static("GET, HEAD"));
            Some(resp)
        }
        (false, None) => None,
    }
}

fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: &'static [u8],
) -> Response<tonic::body::Body> {
    let mut resp = Response::new(tonic::body::Body::new(StaticBody(Some(
        Bytes::from_static(body),
    ))));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    for (name, value) in SECURITY_HEADERS {
        h.insert(
            HeaderName::from_static(name),
            HeaderValue::from_static(value),
        );
    }
    resp
}

/// A body of one static chunk: the embedded files are never copied.
struct StaticBody(Option<Bytes>);

impl http_body::Body for StaticBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(
            self.0
                .take()
                .filter(|b| !b.is_empty())
                .map(|b| Ok(http_body::Frame::data(b))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.0.as_ref().is_none_or(Bytes::is_empty)
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.0.as_ref().map_or(0, |b| b.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_paths_only() {
        for path in [
            "/index.html",
            "//",
            "/console.js/",
            "/../Cargo.toml",
            "/%2e%2e/Cargo.toml",
            "/web/dist/console.js",
            "/console.JS",
        ] {
            assert!(asset(path).is_none(), "{path}");
            let resp = answer(true, &Method::GET, path).unwrap();
            assert_eq!(resp.status(), StatusCode::NOT_FOUND, "{path}");
        }
    }

    #[test]
    fn rpcs_pass_and_assets_take_get_and_head_only() {
        assert!(answer(true, &Method::POST, "/agentharness.v1.SessionService/Start").is_none());
        let resp = answer(true, &Method::POST, "/").unwrap();
        assert_eq!(resp.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(resp.headers()[header::ALLOW], "GET, HEAD");
        let resp = answer(false, &Method::GET, "/").unwrap();
        assert_eq!(resp.status(), StatusCode::NOT_FOUND);
        assert!(answer(false, &Method::POST, "/").is_none());
    }

    #[test]
    fn the_page_loads_only_embedded_files() {
        let page = std::str::from_utf8(asset("/").unwrap().body).unwrap();
        for reference in page.split(['"', '\'']).filter(|s| s.starts_with('/')) {
            assert!(asset(reference).is_some(), "{reference} is not embedded");
        }
        assert!(!page.contains("http://") && !page.contains("https://"));
        assert!(!page.contains("<script>"), "no inline script (CSP)");
    }
}
