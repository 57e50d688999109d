//! Who may reach the services at all: the browser origin and the Host a
//! request names, checked before anything else sees the request
//! (docs/ARCHITECTURE.md, "Safe by default").
//!
//! - **Origin** (browsers). A request that carries `Origin` is served only
//!   when that origin is allowed: loopback origins (`http`/`https` on
//!   `localhost`, `127.0.0.0/8`, `[::1]`, any port) plus `--allowed-origin`;
//!   `*` (any origin) only together with a token. Others get no CORS allow
//!   headers on a preflight and PERMISSION_DENIED on the call, before the
//!   SessionService, reflection or health see it. Requests without `Origin`
//!   (native gRPC, grpcurl, curl) pass. The `null` origin (file pages,
//!   sandboxed frames of any site) is not a loopback origin and cannot be
//!   listed.
//! - **Host** (DNS rebinding). Without a token, a request whose `Host` /
//!   `:authority` is not a loopback name or address, nor the listen
//!   address, is refused with PERMISSION_DENIED: a page that rebinds its own
//!   name to 127.0.0.1 still names its own host. With a token the page
//!   cannot call anyway; `--allowed-host` then restricts the names to the
//!   loopback ones plus those listed (`*`: any), and without it any host is
//!   accepted.
//! - **Authority syntax.** Whatever the names allowed, a request must name
//!   exactly one authority: one `Host` header or `:authority`, agreeing with
//!   `:authority` (HTTP/2) or an absolute-form target when both are there,
//!   in authority form only (`host[:port]`, an IPv6 address in brackets; no
//!   userinfo, path, query or whitespace; a port 1-65535). Otherwise the
//!   request is refused before the name is even looked at (400 for a plain
//!   GET, PERMISSION_DENIED for a call).
//!
//! [`AccessLayer`] enforces both; [`cors_layer`] answers preflights for the
//! allowed origins only.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::header::{HeaderName, HeaderValue};
use http::{Request, Response};
use tower_http::cors::{AllowOrigin, CorsLayer};

use crate::error::{Error, Result};

/// The operator's origin and Host flags of `serve` (the doc comments are
/// their `--help` text); [`AccessPolicy::new`] checks their syntax. Which
/// of them need `--auth-token-file` is checked with the other flags.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct AccessOptions {
    /// A browser origin allowed to call the API (repeatable; env:
    /// comma-separated), e.g. `https://ui.example:8443`. Default: loopback
    /// origins only (http/https, localhost, 127.0.0.1, [::1], any port).
    /// `*` allows every origin and requires --auth-token-file.
    #[arg(
        long = "allowed-origin",
        env = "AGENT_HARNESS_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,

    /// A Host / :authority name (or address) accepted besides the loopback
    /// names and the listen address (repeatable; env: comma-separated).
    /// Requires --auth-token-file; `*` accepts any host.
    #[arg(
        long = "allowed-host",
        env = "AGENT_HARNESS_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,
}

/// The origin and host rules, built once at start-up. Cheap to clone.
#[derive(Debug, Clone)]
pub struct AccessPolicy {
    inner: Arc<Rules>,
}

#[derive(Debug)]
struct Rules {
    /// Every origin may call (`--allowed-origin '*'`, token required).
    any_origin: bool,
    /// Allowed origins besides the loopback ones, normalized
    /// (`scheme://host[:port]`, lowercase, default port elided).
    origins: Vec<String>,
    /// `None`: any Host. `Some`: loopback names and addresses, the listen
    /// address, and these names (lowercase, no port).
    hosts: Option<Vec<String>>,
    /// The listen address, whose exact `ip:port` authority is accepted.
    listen: Option<SocketAddr>,
}

impl AccessPolicy {
    /// The policy from the operator's flags. `allowed_origins` and
    /// `allowed_hosts` are the `--allowed-origin` / `--allowed-host` values;
    /// `token` says whether `--auth-token-file` is set. Which of them need
    /// the token is checked with the other flags, at parse time
    /// (`ServeConfig::check`); here only their syntax.
    pub fn new(
        allowed_origins: &[String],
        allowed_hosts: &[String],
        token: bool,
        listen: Option<SocketAddr>,
    ) -> Result<Self> {
        let mut any_origin = false;
        let mut origins = Vec::new();
        for raw in allowed_origins {
            let raw = raw.trim();
            if raw == "*" {
                any_origin = true;
            } else {
                origins
                    .push(normalize_origin(raw).map_err(|why| {
                        Error::Config(format!("--allowed-origin {raw:?}: {why}"))
                    })?);
            }
        }
        let hosts = if allowed_hosts.is_empty() {
            if token { None } else { Some(Vec::new()) }
        } else {
            if allowed_hosts.iter().any(|h| h.trim() == "*") {
                None
            } else {
                let mut names = Vec::new();
                for h in allowed_hosts {
                    let name = host_name(h.trim()).ok_or_else(|| {
                        Error::Config(format!(
                            "--allowed-host {h:?} is not a host name or address"
                        ))
                    })?;
                    names.push(name);
                }
                Some(names)
            }
        };
        Ok(Self {
            inner: Arc::new(Rules {
                any_origin,
                origins,
                hosts,
                listen,
            }),
        })
    }

    /// The default: loopback origins and hosts only, no token.
    pub fn loopback_only() -> Self {
        Self::new(&[], &[], false, None).expect("the default policy is valid")
    }

    /// True when `--allowed-origin '*'` is in force.
    pub fn any_origin(&self) -> bool {
        self.inner.any_origin
    }

    /// Whether a request carrying `Origin: origin` may be served.
    pub fn origin_allowed(&self, origin: &[u8]) -> bool {
        let r = &self.inner;
        if r.any_origin {
            return true;
        }
        let Ok(origin) = std::str::from_utf8(origin) else {
            return false;
        };
        let Ok(norm) = normalize_origin(origin) else {
            return false;
        };
        is_loopback_origin(&norm) || r.origins.contains(&norm)
    }

    /// Whether a request naming `authority` (`Host` / `:authority`) may be
    /// served; `None` when the request names no host. An authority that is
    /// not `host[:port]` is never allowed.
    pub fn host_allowed(&self, authority: Option<&str>) -> bool {
        let r = &self.inner;
        if authority.is_some_and(|a| !is_authority_form(a)) {
            return false;
        }
        let Some(names) = &r.hosts else {
            return true;
        };
        let Some(authority) = authority else {
            return false;
        };
        if let Some(listen) = r.listen
            && authority == listen.to_string()
        {
            return true;
        }
        let Some(name) = host_name(authority) else {
            return false;
        };
        is_loopback_host(&name) || names.contains(&name)
    }

    /// Why `req` may not be served, or `None` when it may.
    fn refusal<B>(&self, req: &Request<B>) -> Option<Refusal> {
        if let Some(origin) = req.headers().get(http::header::ORIGIN)
            && !self.origin_allowed(origin.as_bytes())
        {
            return Some(Refusal::Forbidden(format!(
                "origin {:?} is not allowed: serve the page from a loopback origin or start \
                 the server with --allowed-origin",
                String::from_utf8_lossy(origin.as_bytes())
            )));
        }
        let authority = match request_authority(req) {
            Ok(authority) => authority,
            Err(why) => return Some(Refusal::Malformed(why)),
        };
        if !self.host_allowed(Some(authority)) {
            return Some(Refusal::Forbidden(format!(
                "host {:?} is not allowed: without --auth-token-file only loopback names are \
                 accepted (DNS rebinding); with a token, list it with --allowed-host",
                authority
            )));
        }
        None
    }
}

/// Why a request is refused.
enum Refusal {
    /// Its origin or host is not allowed.
    Forbidden(String),
    /// It names no single well-formed authority.
    Malformed(String),
}

/// The one authority `req` names: `:authority` (HTTP/2, or an HTTP/1.1
/// absolute-form target) or the `Host` header, which must not disagree
/// when both are there. An error when it names none, `Host` is repeated,
/// they disagree, or the value is not `host[:port]`.
fn request_authority<B>(req: &Request<B>) -> std::result::Result<&str, String> {
    let mut hosts = req.headers().get_all(http::header::HOST).iter();
    let host = hosts.next();
    if hosts.next().is_some() {
        return Err("more than one Host header".into());
    }
    let host = host
        .map(|h| {
            h.to_str()
                .map_err(|_| "the Host header is not ASCII text".to_string())
        })
        .transpose()?;
    let uri = req.uri().authority().map(|a| a.as_str());
    let authority = match (uri, host) {
        (Some(u), Some(h)) if u != h => {
            return Err(format!(
                "the Host header {h:?} differs from the request's authority {u:?}"
            ));
        }
        (u, h) => u.or(h),
    };
    match authority {
        None => Err("the request names no host (Host header or :authority)".into()),
        Some(a) if !is_authority_form(a) => Err(format!(
            "host {a:?} is not host[:port] (no user, path, query or spaces; IPv6 in brackets)"
        )),
        Some(a) => Ok(a),
    }
}

/// `host[:port]`: a name or IPv4 address (letters, digits, `.`, `-`, `_`)
/// or an IPv6 address in brackets, then an optional port 1-65535.
fn is_authority_form(authority: &str) -> bool {
    let (host_ok, port) = if let Some(rest) = authority.strip_prefix('[') {
        let Some((v6, after)) = rest.split_once(']') else {
            return false;
        };
        let port = match after {
            "" => None,
            p => match p.strip_prefix(':') {
                Some(p) => Some(p),
                None => return false,
            },
        };
        (v6.parse::<Ipv6Addr>().is_ok(), port)
    } else {
        let (host, port) = match authority.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        };
        let ok = !host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
        (ok, port)
    };
    let port_ok = port.is_none_or(|p| {
        p.len() <= 5
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u16>().is_ok_and(|n| n > 0)
    });
    host_ok && port_ok
}

/// `scheme://host[:port]` in canonical form: lowercase, no default port, no
/// trailing dot. Anything else (a path, a userinfo, `null`) is an error.
fn normalize_origin(raw: &str) -> std::result::Result<String, &'static str> {
    if raw.eq_ignore_ascii_case("null") {
        return Err("the null origin is sent by file pages and sandboxed frames of any site");
    }
    let (scheme, rest) = raw
        .split_once("://")
        .ok_or("expected scheme://host[:port], e.g. https://ui.example:8443")?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err("the scheme must be http or https"),
    };
    if rest.is_empty() || rest.contains(['/', '?', '#', '@']) {
        return Err("an origin is scheme://host[:port], without path, query or user");
    }
    let authority: http::uri::Authority = rest.parse().map_err(|_| "not a valid host[:port]")?;
    let host = host_name(authority.host()).ok_or("not a valid host")?;
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    Ok(match authority.port_u16() {
        Some(p) if p != default_port => format!("{scheme}://{host}:{p}"),
        _ => format!("{scheme}://{host}"),
    })
}

/// The host of an authority (`name`, `name:port`, `[v6]:port`, `v6`),
/// lowercase, brackets and a trailing dot removed.
fn host_name(authority: &str) -> Option<String> {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        rest.split_once(']')?.0
    } else if authority.matches(':').count() > 1 {
        authority // a bare IPv6 address
    } else {
        authority.split(':').next()?
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'));
    valid.then_some(host)
}

fn is_loopback_host(name: &str) -> bool {
    name == "localhost" || name.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// A normalized origin on a loopback host, http or https.
fn is_loopback_origin(norm: &str) -> bool {
    let Some((_, rest)) = norm.split_once("://") else {
        return false;
    };
    host_name(rest).is_some_and(|h| is_loopback_host(&h))
}

/// Applies an [`AccessPolicy`] to every request, outermost.
#[derive(Debug, Clone)]
pub struct AccessLayer {
    policy: AccessPolicy,
}

impl AccessLayer {
    /// A layer enforcing `policy`.
    pub fn new(policy: AccessPolicy) -> Self {
        Self { policy }
    }
}

impl<S> tower::Layer<S> for AccessLayer {
    type Service = Access<S>;
    fn layer(&self, inner: S) -> Self::Service {
        Access {
            inner,
            policy: self.policy.clone(),
        }
    }
}

/// See [`AccessLayer`].
#[derive(Debug, Clone)]
pub struct Access<S> {
    inner: S,
    policy: AccessPolicy,
}

impl<S, B, R> tower::Service<Request<B>> for Access<S>
where
    S: tower::Service<Request<B>, Response = Response<R>>,
    S::Future: Send + 'static,
    R: Default + Send + 'static,
{
    type Response = Response<R>;
    type Error = S::Error;
    type Future = futures::future::Either<
        S::Future,
        std::future::Ready<std::result::Result<Response<R>, S::Error>>,
    >;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        match self.policy.refusal(&req) {
            None => futures::future::Either::Left(self.inner.call(req)),
            Some(refusal) => {
                let (status, why) = match refusal {
                    Refusal::Forbidden(why) => (http::StatusCode::FORBIDDEN, why),
                    Refusal::Malformed(why) => (http::StatusCode::BAD_REQUEST, why),
                };
                tracing::warn!(
                    method = %req.method(),
                    path = req.uri().path(),
                    reason = %why,
                    "request refused"
                );
                futures::future::Either::Right(std::future::ready(Ok(refuse(&req, status, &why))))
            }
        }
    }
}

/// The refusal: a preflight or a plain GET or HEAD (`/metrics`, the web
/// console) gets `status` (403, or 400 for a malformed Host; no CORS
/// headers); any other request a trailers-only gRPC PERMISSION_DENIED
/// (HTTP 200 with `grpc-status: 7`), which native gRPC and grpc-web
/// clients both read from the headers.
fn refuse<B, R: Default>(req: &Request<B>, status: http::StatusCode, why: &str) -> Response<R> {
    let mut resp = Response::new(R::default());
    let plain = matches!(
        *req.method(),
        http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
    );
    if plain {
        *resp.status_mut() = status;
        return resp;
    }
    let content_type = req
        .headers()
        .get(http::header::CONTENT_TYPE)
        .filter(|v| v.as_bytes().starts_with(b"application/grpc"))
        .cloned()
        .unwrap_or(HeaderValue::from_static("application/grpc"));
    let h = resp.headers_mut();
    h.insert(http::header::CONTENT_TYPE, content_type);
    h.insert(
        "grpc-status",
        HeaderValue::from(tonic::Code::PermissionDenied as i32),
    );
    let msg = percent_encode(&crate::error::bounded(why.to_owned()));
    if let Ok(v) = HeaderValue::from_str(&msg) {
        h.insert("grpc-message", v);
    }
    resp
}

/// grpc-message encoding: printable ASCII except `%` as is, the rest `%XX`.
fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..0x7f).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// CORS for grpc-web: allowed origins only (echoed, with `Vary: Origin`),
/// the headers grpc-web clients send (`x-session-id` among them, for the
/// balancer), and the response headers their code must read: the grpc-*
/// ones and the node that served the call. Auth is a bearer token, never a cookie: no credentials.
pub fn cors_layer(policy: AccessPolicy) -> CorsLayer {
    const ALLOW: [&str; 8] = [
        "content-type",
        crate::routing::SESSION_HEADER,
        "x-grpc-web",
        "x-user-agent",
        "authorization",
        "grpc-timeout",
        "grpc-accept-encoding",
        "grpc-encoding",
    ];
    const EXPOSE: [&str; 4] = [
        "grpc-status",
        "grpc-message",
        "grpc-status-details-bin",
        crate::node::HEADER,
    ];
    CorsLayer::new()
        .allow_origin(AllowOrigin::predicate(move |origin, _| {
            policy.origin_allowed(origin.as_bytes())
        }))
        .allow_methods([http::Method::POST, http::Method::OPTIONS])
        .allow_headers(ALLOW.map(HeaderName::from_static))
        .expose_headers(EXPOSE.map(HeaderName::from_static))
        .max_age(Duration::from_secs(24 * 60 * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The serve flags' check of these origin and host flags with no
    /// `--auth-token-file`: the rules that need the token are checked there.
    fn without_token(origins: &[&str], hosts: &[&str]) -> Result<()> {
        crate::config::ServeConfig {
            access: AccessOptions {
                allowed_origins: origins.iter().map(|s| s.to_string()).collect(),
                allowed_hosts: hosts.iter().map(|s| s.to_string()).collect(),
            },
            ..Default::default()
        }
        .check()
    }

    fn policy(origins: &[&str], hosts: &[&str], token: bool) -> AccessPolicy {
        let o: Vec<String> = origins.iter().map(|s| s.to_string()).collect();
        let h: Vec<String> = hosts.iter().map(|s| s.to_string()).collect();
        AccessPolicy::new(&o, &h, token, Some("127.0.0.1:50051".parse().unwrap())).unwrap()
    }

    #[test]
    fn loopback_origins_by_default() {
        let p = AccessPolicy::loopback_only();
        for ok in [
            "http://localhost",
            "http://localhost:5173",
            "https://127.0.0.1:8443",
            "http://127.0.0.2",
            "http://[::1]:3000",
            "HTTP://LOCALHOST:80",
        ] {
            assert!(p.origin_allowed(ok.as_bytes()), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "null",
            "http://localhost.evil.example",
            "http://127.0.0.1.evil.example",
            "file://",
            "ftp://localhost",
            "http://localhost/path",
            "http://user@localhost",
            "",
            "http://",
        ] {
            assert!(!p.origin_allowed(bad.as_bytes()), "{bad}");
        }
        assert!(!p.origin_allowed(b"http://\xff"));
    }

    #[test]
    fn listed_origins_add_to_loopback() {
        let p = policy(&["https://ui.example:8443", "http://App.Test"], &[], false);
        assert!(p.origin_allowed(b"https://ui.example:8443"));
        assert!(p.origin_allowed(b"http://app.test"));
        assert!(p.origin_allowed(b"http://app.test:80"));
        assert!(p.origin_allowed(b"http://localhost:1"));
        assert!(!p.origin_allowed(b"https://ui.example"));
        assert!(!p.origin_allowed(b"http://ui.example:8443"));
        assert!(!p.origin_allowed(b"https://app.test"));
    }

    #[test]
    fn bad_origin_flags_are_start_up_errors() {
        for bad in ["null", "ui.example", "https://ui.example/", "ws://x"] {
            let err = AccessPolicy::new(&[bad.into()], &[], false, None).unwrap_err();
            assert!(err.to_string().contains("--allowed-origin"), "{bad}: {err}");
        }
        let err = without_token(&["*"], &[]).unwrap_err();
        assert!(err.to_string().contains("--allowed-origin"), "*: {err}");
        // `*` with a token is accepted and allows anything.
        let p = policy(&["*"], &[], true);
        assert!(p.any_origin());
        assert!(p.origin_allowed(b"http://evil.example"));
        assert!(p.origin_allowed(b"null"));
    }

    #[test]
    fn hosts_without_token_are_loopback_only() {
        let p =
            AccessPolicy::new(&[], &[], false, Some("127.0.0.1:50051".parse().unwrap())).unwrap();
        for ok in [
            "localhost",
            "localhost:50051",
            "LOCALHOST.",
            "127.0.0.1",
            "127.0.0.1:50051",
            "[::1]:50051",
            "[::1]",
        ] {
            assert!(p.host_allowed(Some(ok)), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:50051",
            "localhost.evil.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:50051",
            "",
        ] {
            assert!(!p.host_allowed(Some(bad)), "{bad}");
        }
        assert!(!p.host_allowed(None));
        assert!(without_token(&[], &["ui.example"]).is_err());
    }

    /// Only `host[:port]`, however open the host names are.
    #[test]
    fn hosts_must_be_authority_form() {
        let open = policy(&[], &["*"], true);
        let loopback = policy(&[], &[], false);
        for bad in [
            "127.0.0.1:50051@evil.example",
            "user@localhost",
            "127.0.0.1/x",
            "localhost:50051/",
            "localhost?x",
            "localhost#x",
            "local host",
            " localhost",
            "localhost:",
            "localhost:0",
            "localhost:65536",
            "localhost:+80",
            "localhost:80:80",
            "::1",
            "[::1",
            "[::1]x",
            "[::1]:",
            "[evil.example]",
            "[fe80::1%25eth0]",
            "",
        ] {
            assert!(!is_authority_form(bad), "{bad:?}");
            assert!(!open.host_allowed(Some(bad)), "{bad:?}");
            assert!(!loopback.host_allowed(Some(bad)), "{bad:?}");
        }
        for ok in [
            "localhost",
            "a-b_c.example:443",
            "127.0.0.1:65535",
            "[::1]:1",
        ] {
            assert!(is_authority_form(ok), "{ok:?}");
            assert!(open.host_allowed(Some(ok)), "{ok:?}");
        }
    }

    #[test]
    fn one_authority_per_request() {
        let req = |uri: &str, hosts: &[&str]| {
            let mut b = Request::builder().uri(uri);
            for h in hosts {
                b = b.header(http::header::HOST, *h);
            }
            b.body(()).unwrap()
        };
        let p = policy(&[], &[], false);
        assert!(p.refusal(&req("/x", &["localhost:1"])).is_none());
        assert!(
            p.refusal(&req("http://localhost:1/x", &["localhost:1"]))
                .is_none()
        );
        for (uri, hosts) in [
            ("/x", &[][..]),
            ("/x", &["localhost:1", "localhost:1"][..]),
            ("/x", &["localhost:1", "evil.example"][..]),
            ("http://localhost:1/x", &["evil.example"][..]),
            ("/x", &["127.0.0.1:50051@evil.example"][..]),
            ("/x", &["127.0.0.1/x"][..]),
        ] {
            assert!(
                matches!(p.refusal(&req(uri, hosts)), Some(Refusal::Malformed(_))),
                "{uri} {hosts:?}"
            );
        }
    }

    #[test]
    fn hosts_with_token() {
        let open = policy(&[], &[], true);
        assert!(open.host_allowed(Some("anything.example:1")));
        let listed = policy(&[], &["Box.Tailnet.ts.net"], true);
        assert!(listed.host_allowed(Some("box.tailnet.ts.net:50051")));
        assert!(listed.host_allowed(Some("localhost")));
        assert!(!listed.host_allowed(Some("evil.example")));
        assert!(policy(&[], &["*"], true).host_allowed(Some("x")));
    }

    #[test]
    fn listen_address_is_accepted_exactly() {
        let p = AccessPolicy::new(&[], &[], false, Some("127.0.0.5:7".parse().unwrap())).unwrap();
        assert!(p.host_allowed(Some("127.0.0.5:7")));
    }

    #[test]
    fn grpc_message_is_percent_encoded() {
        assert_eq!(percent_encode("a b%\"é"), "a b%25\"%C3%A9");
    }
}
