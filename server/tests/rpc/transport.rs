//! The one port: grpc-web over HTTP/1.1 with CORS, reflection v1 and
//! v1alpha, health, bearer-token auth, the request size limit, the origin
//! and host checks, TLS, and the stream cap.

use crate::support::server;

use std::time::Duration;

use crate::support::scripted::ScriptedBehavior;
use agent_harness_protocol::pb;
use agent_harness_server::ServeOptions;
use agent_harness_server::access::AccessPolicy;
use agent_harness_server::config::ServeConfig;
use agent_harness_server::launch::LaunchPolicy;
use agent_harness_server::manager::ManagerOptions;
use prost::Message;
use server::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::metadata::MetadataValue;

/// One HTTP/1.1 exchange on a fresh connection; returns the raw response.
pub(crate) async fn http1(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> Vec<u8> {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = head.as_bytes().to_vec();
    req.extend_from_slice(body);
    tcp.write_all(&req).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(WAIT, tcp.read_to_end(&mut out))
        .await
        .expect("response in time")
        .unwrap();
    out
}

/// The origin of a page served from this machine (allowed by default).
pub(crate) const PAGE: &str = "http://localhost:5173";

/// A grpc-web (binary) POST of `msg` to `method`, from a loopback page.
pub(crate) async fn grpc_web(
    addr: std::net::SocketAddr,
    method: &str,
    msg: &[u8],
    extra: &str,
) -> String {
    let head = grpc_web_head(
        &addr.to_string(),
        PAGE,
        &format!("agentharness.v1.SessionService/{method}"),
        msg.len(),
        extra,
    );
    String::from_utf8_lossy(&http1(addr, &head, &grpc_frame(msg)).await).into_owned()
}

/// `msg` in a gRPC frame.
pub(crate) fn grpc_frame(msg: &[u8]) -> Vec<u8> {
    let mut body = vec![0u8];
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(msg);
    body
}

/// The head of a grpc-web POST to `path` naming `host` and `origin`.
pub(crate) fn grpc_web_head(
    host: &str,
    origin: &str,
    path: &str,
    msg_len: usize,
    extra: &str,
) -> String {
    format!(
        "POST /{path} HTTP/1.1\r\nHost: {host}\r\n\
         Content-Type: application/grpc-web+proto\r\nX-Grpc-Web: 1\r\nX-User-Agent: grpc-web-javascript/0.1\r\n\
         Origin: {origin}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        msg_len + 5
    )
}

#[tokio::test]
async fn grpc_web_over_http1_with_cors() {
    let server = TestServer::start().await;
    let mut c = server.client().await;
    start(&mut c, "web", "hello").await.unwrap();
    wait_idle(&mut c, "web").await;

    // A successful unary call: HTTP 200, the message, grpc-status 0 in the trailer frame.
    let req = pb::GetSessionRequest {
        session_id: "web".into(),
    }
    .encode_to_vec();
    let resp = grpc_web(server.addr, "GetSession", &req, "").await;
    let lower = resp.to_ascii_lowercase();
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(
        lower.contains("content-type: application/grpc-web"),
        "{resp}"
    );
    assert!(lower.contains("access-control-allow-origin: "), "{resp}");
    assert!(lower.contains("access-control-expose-headers: "), "{resp}");
    for h in ["grpc-status", "grpc-message", "grpc-status-details-bin"] {
        assert!(lower.contains(h), "{h} exposed: {resp}");
    }
    assert!(resp.contains("grpc-status:0"), "{resp}");
    assert!(resp.contains("web"), "the session message: {resp}");

    let req = pb::GetSessionRequest {
        session_id: "ghost".into(),
    }
    .encode_to_vec();
    let resp = grpc_web(server.addr, "GetSession", &req, "").await;
    // An error travels as a trailers-only response (status in the headers).
    let lower = resp.to_ascii_lowercase();
    assert!(
        lower.contains("grpc-status: 5") || lower.contains("grpc-status:5"),
        "NOT_FOUND: {resp}"
    );
    assert!(lower.contains("grpc-message: "), "{resp}");

    // The CORS preflight a browser sends first.
    let head = format!(
        "OPTIONS /agentharness.v1.SessionService/GetSession HTTP/1.1\r\nHost: {}\r\n\
         Origin: http://localhost:5173\r\nAccess-Control-Request-Method: POST\r\n\
         Access-Control-Request-Headers: content-type,x-grpc-web,x-user-agent,authorization,grpc-timeout\r\n\
         Connection: close\r\n\r\n",
        server.addr
    );
    let pre = String::from_utf8_lossy(&http1(server.addr, &head, &[]).await).to_ascii_lowercase();
    assert!(pre.starts_with("http/1.1 200"), "{pre}");
    let allow = pre
        .lines()
        .find(|l| l.starts_with("access-control-allow-headers:"))
        .unwrap_or_else(|| panic!("allow-headers in {pre}"));
    for h in [
        "x-grpc-web",
        "x-user-agent",
        "content-type",
        "authorization",
        "grpc-timeout",
    ] {
        assert!(allow.contains(h), "{h} allowed: {allow}");
    }
}

/// One reflection request on a fresh stream of `$client`; its first answer.
/// A macro because v1 and v1alpha are separate generated types of the same
/// shape: `$v` names the module, `$request` the `MessageRequest` variant.
macro_rules! reflect {
    ($client:expr, $v:ident, $request:expr) => {{
        use $v::server_reflection_request::MessageRequest;
        let req = $v::ServerReflectionRequest {
            host: String::new(),
            message_request: Some($request),
        };
        $client
            .server_reflection_info(tokio_stream::iter([req]))
            .await
            .unwrap()
            .into_inner()
            .message()
            .await
            .unwrap()
            .unwrap()
    }};
}

#[tokio::test]
async fn reflection_v1_and_v1alpha_list_the_service() {
    use tonic_reflection::pb::{v1, v1alpha};
    let server = TestServer::start().await;
    let channel = server.channel().await;

    let mut v1c = v1::server_reflection_client::ServerReflectionClient::new(channel.clone());
    let resp = reflect!(v1c, v1, MessageRequest::ListServices(String::new()));
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        resp.message_response
    else {
        panic!("unexpected {resp:?}")
    };
    let names: Vec<_> = list.service.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names.contains(&"agentharness.v1.SessionService"),
        "{names:?}"
    );

    // describe: the file containing the service symbol resolves.
    let symbol = "agentharness.v1.SessionService".to_string();
    let resp = reflect!(v1c, v1, MessageRequest::FileContainingSymbol(symbol));
    assert!(
        matches!(
            resp.message_response,
            Some(v1::server_reflection_response::MessageResponse::FileDescriptorResponse(ref f)) if !f.file_descriptor_proto.is_empty()
        ),
        "{resp:?}"
    );

    let mut alpha = v1alpha::server_reflection_client::ServerReflectionClient::new(channel);
    let resp = reflect!(alpha, v1alpha, MessageRequest::ListServices(String::new()));
    let Some(v1alpha::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        resp.message_response
    else {
        panic!("unexpected {resp:?}")
    };
    assert!(
        list.service
            .iter()
            .any(|s| s.name == "agentharness.v1.SessionService")
    );
}

#[tokio::test]
async fn health_reports_serving() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::health_client::HealthClient;
    let server = TestServer::start().await;
    let mut h = HealthClient::new(server.channel().await);
    let resp = h
        .check(tonic_health::pb::HealthCheckRequest {
            service: "agentharness.v1.SessionService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(resp.status, ServingStatus::Serving as i32);
}

#[tokio::test]
async fn bearer_token_is_required_on_grpc_and_grpc_web() {
    let server = TestServer::serving(ServeOptions {
        auth_token: Some("s3cret-token".into()),
        ..ServeOptions::default()
    })
    .await;
    let mut c = server.client().await;
    let list = || tonic::Request::new(pb::ListSessionsRequest::default());
    assert_eq!(
        c.list_sessions(list()).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    let mut wrong = list();
    wrong
        .metadata_mut()
        .insert("authorization", MetadataValue::from_static("Bearer nope"));
    assert_eq!(
        c.list_sessions(wrong).await.unwrap_err().code(),
        Code::Unauthenticated
    );
    let mut right = list();
    right.metadata_mut().insert(
        "authorization",
        MetadataValue::from_static("Bearer s3cret-token"),
    );
    c.list_sessions(right).await.unwrap();

    // Reflection and health too.
    let mut h = tonic_health::pb::health_client::HealthClient::new(server.channel().await);
    let err = h
        .check(tonic_health::pb::HealthCheckRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);

    // grpc-web: trailer carries 16; with the header it passes.
    let req = pb::ListSessionsRequest::default().encode_to_vec();
    let resp = grpc_web(server.addr, "ListSessions", &req, "").await;
    assert!(
        resp.contains("grpc-status:16") || resp.to_ascii_lowercase().contains("grpc-status: 16"),
        "{resp}"
    );
    let resp = grpc_web(
        server.addr,
        "ListSessions",
        &req,
        "Authorization: Bearer s3cret-token\r\n",
    )
    .await;
    assert!(resp.contains("grpc-status:0"), "{resp}");
}

#[tokio::test]
async fn non_loopback_bind_without_token_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let config = ServeConfig {
        listen: "0.0.0.0:0".parse().unwrap(),
        data_dir: dir.path().join("data"),
        ..ServeConfig::default()
    };
    let err = tokio::time::timeout(
        Duration::from_secs(5),
        agent_harness_server::run(config, std::future::pending()),
    )
    .await
    .expect("refuses at once")
    .unwrap_err();
    assert!(err.to_string().contains("--auth-token-file"), "{err}");
    assert!(
        !dir.path().join("data").exists(),
        "refused before touching the data dir"
    );
}

#[tokio::test]
async fn oversized_request_is_resource_exhausted() {
    let server = TestServer::serving(ServeOptions {
        max_request_bytes: 1024,
        ..ServeOptions::default()
    })
    .await;
    let mut c = server.client().await;
    let err = start(&mut c, "big", &"x".repeat(4096)).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    // Under the limit still works on the same connection.
    start(&mut c, "big", "small").await.unwrap();
}

/// The exploit the security model exists to stop, as a web page sends it: a
/// grpc-web Start from a foreign origin whose args turn permissions off and
/// whose env points the CLI at a model server the page controls.
fn exploit_start(session: &str) -> Vec<u8> {
    pb::StartRequest {
        idempotency_key: String::new(),
        session_id: session.into(),
        config: Some(pb::StartConfig {
            prompt: "run my command".into(),
            args: vec!["--dangerously-skip-permissions".into()],
            env: [
                ("IS_SANDBOX".to_string(), "1".to_string()),
                (
                    "ANTHROPIC_BASE_URL".to_string(),
                    "http://model.evil.example".to_string(),
                ),
            ]
            .into(),
            ..Default::default()
        }),
    }
    .encode_to_vec()
}

/// The `grpc-status` a raw HTTP/1.1 response carries, in its headers or its
/// trailer frame.
pub(crate) fn grpc_status(resp: &str) -> Option<i32> {
    let lower = resp.to_ascii_lowercase();
    let at = lower.find("grpc-status:")? + "grpc-status:".len();
    let digits: String = lower[at..]
        .trim_start()
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// A server whose launch policy trusts every client (the args and env
/// checks off), so only the origin and host checks stand in the way.
async fn trusting_server(sopts: ServeOptions) -> TestServer {
    let mopts = ManagerOptions {
        launch: LaunchPolicy::trust_clients().into(),
        ..fast_opts()
    };
    TestServer::with(ScriptedBehavior::default(), mopts, sopts).await
}

#[tokio::test]
async fn foreign_origin_is_refused_before_any_service() {
    let server = trusting_server(ServeOptions::default()).await;
    let host = server.addr.to_string();
    let start_path = "agentharness.v1.SessionService/Start";
    let msg = exploit_start("evil");

    // From a foreign page: PERMISSION_DENIED, no CORS allow header, nothing appended.
    for origin in [
        "http://evil.example",
        "null",
        "http://localhost.evil.example",
    ] {
        let head = grpc_web_head(&host, origin, start_path, msg.len(), "");
        let resp = String::from_utf8_lossy(&http1(server.addr, &head, &grpc_frame(&msg)).await)
            .into_owned();
        assert_eq!(
            grpc_status(&resp),
            Some(Code::PermissionDenied as i32),
            "{origin}: {resp}"
        );
        assert!(
            !resp
                .to_ascii_lowercase()
                .contains("access-control-allow-origin"),
            "{origin}: {resp}"
        );
    }
    assert!(server.adapter.record().spawns.is_empty(), "nothing spawned");
    let mut c = server.client().await;
    assert!(list(&mut c).await.is_empty(), "nothing appended");

    // Health and reflection are behind the same check.
    for path in [
        "grpc.health.v1.Health/Check",
        "grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
    ] {
        let head = grpc_web_head(&host, "http://evil.example", path, 0, "");
        let resp = String::from_utf8_lossy(&http1(server.addr, &head, &grpc_frame(&[])).await)
            .into_owned();
        assert_eq!(
            grpc_status(&resp),
            Some(Code::PermissionDenied as i32),
            "{path}: {resp}"
        );
    }

    // The preflight gets no allow headers.
    let head = format!(
        "OPTIONS /{start_path} HTTP/1.1\r\nHost: {host}\r\nOrigin: http://evil.example\r\n\
         Access-Control-Request-Method: POST\r\nAccess-Control-Request-Headers: content-type,x-grpc-web\r\n\
         Connection: close\r\n\r\n"
    );
    let pre = String::from_utf8_lossy(&http1(server.addr, &head, &[]).await).to_ascii_lowercase();
    assert!(!pre.contains("access-control-allow-origin"), "{pre}");
    assert!(pre.starts_with("http/1.1 403"), "{pre}");

    // The control: the same request from a loopback page gets through this
    // server (whose launch policy trusts clients), so the refusal above was
    // the origin check's alone.
    let head = grpc_web_head(&host, PAGE, start_path, msg.len(), "");
    let resp =
        String::from_utf8_lossy(&http1(server.addr, &head, &grpc_frame(&msg)).await).into_owned();
    assert_eq!(grpc_status(&resp), Some(0), "{resp}");
    assert!(
        resp.to_ascii_lowercase()
            .contains(&format!("access-control-allow-origin: {PAGE}")),
        "{resp}"
    );
    let spawns = server.adapter.record().spawns;
    assert_eq!(spawns.len(), 1);
    assert_eq!(spawns[0].config.args, ["--dangerously-skip-permissions"]);
}

#[tokio::test]
async fn allowed_origin_flag_admits_that_origin_only() {
    let access = AccessPolicy::new(&["https://ui.example:8443".into()], &[], false, None).unwrap();
    let server = trusting_server(ServeOptions {
        access,
        ..ServeOptions::default()
    })
    .await;
    let host = server.addr.to_string();
    let req = pb::ListSessionsRequest::default().encode_to_vec();
    let path = "agentharness.v1.SessionService/ListSessions";
    for (origin, ok) in [
        ("https://ui.example:8443", true),
        ("http://127.0.0.1:3000", true),
        ("https://ui.example", false),
        ("http://ui.example:8443", false),
    ] {
        let head = grpc_web_head(&host, origin, path, req.len(), "");
        let resp = String::from_utf8_lossy(&http1(server.addr, &head, &grpc_frame(&req)).await)
            .into_owned();
        let want = if ok { 0 } else { Code::PermissionDenied as i32 };
        assert_eq!(grpc_status(&resp), Some(want), "{origin}: {resp}");
    }
}

#[tokio::test]
async fn foreign_host_is_refused_without_a_token() {
    let server = trusting_server(ServeOptions::default()).await;
    let msg = exploit_start("rebound");
    // DNS rebinding: the page's own name now resolves to 127.0.0.1, and the
    // page is same-origin with it (so no Origin check can help).
    let head = grpc_web_head(
        "rebind.evil.example:50051",
        "http://rebind.evil.example:50051",
        "agentharness.v1.SessionService/Start",
        msg.len(),
        "",
    );
    let access = AccessPolicy::new(
        &["http://rebind.evil.example:50051".into()],
        &[],
        false,
        None,
    )
    .unwrap();
    let server2 = trusting_server(ServeOptions {
        access,
        ..ServeOptions::default()
    })
    .await;
    // The first server refuses the origin already; the second allows it, so
    // only the Host check stands in the way.
    for (s, why) in [(&server, "origin"), (&server2, "host")] {
        let resp =
            String::from_utf8_lossy(&http1(s.addr, &head, &grpc_frame(&msg)).await).into_owned();
        assert_eq!(
            grpc_status(&resp),
            Some(Code::PermissionDenied as i32),
            "{resp}"
        );
        assert!(resp.contains(&format!("grpc-message: {why}")), "{resp}");
        assert!(s.adapter.record().spawns.is_empty());
    }

    // Native gRPC naming a foreign :authority is refused too; loopback names pass.
    let endpoint = |authority: &str| {
        tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr))
            .unwrap()
            .origin(format!("http://{authority}").parse().unwrap())
    };
    let mut foreign = pb::session_service_client::SessionServiceClient::new(
        endpoint("rebind.evil.example:50051")
            .connect()
            .await
            .unwrap(),
    );
    let err = foreign
        .list_sessions(pb::ListSessionsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::PermissionDenied, "{err:?}");
    let mut local = pb::session_service_client::SessionServiceClient::new(
        endpoint(&format!("localhost:{}", server.addr.port()))
            .connect()
            .await
            .unwrap(),
    );
    local
        .list_sessions(pb::ListSessionsRequest::default())
        .await
        .unwrap();

    // With a token, the operator may widen the host names.
    let access = AccessPolicy::new(
        &[],
        &["box.tailnet.example".into()],
        true,
        Some(server.addr),
    )
    .unwrap();
    let tokened = trusting_server(ServeOptions {
        access,
        auth_token: Some("t0ken".into()),
        ..ServeOptions::default()
    })
    .await;
    let req = pb::ListSessionsRequest::default().encode_to_vec();
    let path = "agentharness.v1.SessionService/ListSessions";
    for (host, want) in [
        ("box.tailnet.example:50051", 0),
        ("other.example:50051", Code::PermissionDenied as i32),
    ] {
        let head = grpc_web_head(
            host,
            PAGE,
            path,
            req.len(),
            "Authorization: Bearer t0ken\r\n",
        );
        let resp = String::from_utf8_lossy(&http1(tokened.addr, &head, &grpc_frame(&req)).await)
            .into_owned();
        assert_eq!(grpc_status(&resp), Some(want), "{host}: {resp}");
    }
}

#[tokio::test]
async fn streams_are_capped() {
    let server = TestServer::serving(ServeOptions {
        max_streams: 2,
        ..ServeOptions::default()
    })
    .await;
    let mut c = server.client().await;
    let open = |c: &mut pb::session_service_client::SessionServiceClient<_>| {
        let mut c = c.clone();
        async move {
            c.subscribe(pb::SubscribeRequest {
                session_id: "capped".into(),
                after_seq: 0,
                include_deltas: false,
            })
            .await
        }
    };
    let first = open(&mut c).await.unwrap().into_inner();
    let _second = open(&mut c).await.unwrap().into_inner();
    let err = open(&mut c).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert!(err.message().contains("--max-streams"), "{err:?}");
    // ReadFullEvent holds a whole event while it streams: it counts too.
    server::start(&mut c, "full", "hi").await.unwrap();
    let err = c
        .read_full_event(pb::ReadFullEventRequest {
            session_id: "full".into(),
            seq: 1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    // Closing one frees its slot (the server notices the reset, then the
    // permit is dropped with the stream).
    drop(first);
    let reopened = tokio::time::timeout(WAIT, async {
        loop {
            match open(&mut c).await {
                Ok(s) => break s,
                Err(e) => assert_eq!(e.code(), Code::ResourceExhausted),
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("a slot is freed when a stream closes");
    drop(reopened);
}

/// A self-signed certificate for localhost and 127.0.0.1, as PEM files in
/// `dir`: (cert, key, cert PEM).
pub(crate) fn self_signed(
    dir: &std::path::Path,
) -> (std::path::PathBuf, std::path::PathBuf, String) {
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let pem = cert.cert.pem();
    let (c, k) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&c, &pem).unwrap();
    std::fs::write(&k, cert.signing_key.serialize_pem()).unwrap();
    (c, k, pem)
}

#[tokio::test]
async fn tls_serves_grpc_and_grpc_web_over_http1() {
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, pem) = self_signed(dir.path());
    let acceptor = agent_harness_server::listen::tls_acceptor(&cert, &key).unwrap();
    let server = TestServer::serving(ServeOptions {
        tls: Some(acceptor),
        ..ServeOptions::default()
    })
    .await;

    // Native gRPC over TLS (h2 by ALPN), trusting the test's certificate.
    let tls = tonic::transport::ClientTlsConfig::new()
        .ca_certificate(tonic::transport::Certificate::from_pem(&pem))
        .domain_name("localhost");
    let channel = tonic::transport::Endpoint::from_shared(format!("https://{}", server.addr))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut c = pb::session_service_client::SessionServiceClient::new(channel);
    start(&mut c, "tls", "hello").await.unwrap();
    wait_idle(&mut c, "tls").await;

    // grpc-web over HTTP/1.1 over TLS (ALPN http/1.1).
    use tokio_rustls::rustls;
    let mut roots = rustls::RootCertStore::empty();
    {
        use rustls::pki_types::pem::PemObject as _;
        for c in rustls::pki_types::CertificateDer::pem_slice_iter(pem.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    let mut tls = connector
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .unwrap();
    let req = pb::GetSessionRequest {
        session_id: "tls".into(),
    }
    .encode_to_vec();
    let mut raw = grpc_web_head(
        &format!("localhost:{}", server.addr.port()),
        PAGE,
        "agentharness.v1.SessionService/GetSession",
        req.len(),
        "",
    )
    .into_bytes();
    raw.extend(grpc_frame(&req));
    tls.write_all(&raw).await.unwrap();
    let mut out = Vec::new();
    // The server closes after the response (Connection: close); a TLS
    // close_notify may or may not precede the TCP close.
    let _ = tokio::time::timeout(WAIT, tls.read_to_end(&mut out))
        .await
        .expect("in time");
    let resp = String::from_utf8_lossy(&out);
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert_eq!(grpc_status(&resp), Some(0), "{resp}");

    // A plain-text client gets nothing served.
    let mut plain = pb::session_service_client::SessionServiceClient::new(
        tonic::transport::Endpoint::from_shared(format!("http://{}", server.addr))
            .unwrap()
            .connect_timeout(WAIT)
            .connect()
            .await
            .unwrap(),
    );
    assert!(
        plain
            .list_sessions(pb::ListSessionsRequest::default())
            .await
            .is_err()
    );
}

/// The exploit over grpc-web from an allowed page, against a server whose
/// launch policy is `policy`: the status it gets, and whether anything was
/// appended or spawned.
async fn exploit_from_allowed_page(policy: LaunchPolicy) -> (String, bool) {
    let server = TestServer::with(
        ScriptedBehavior::default(),
        ManagerOptions {
            launch: policy.into(),
            ..fast_opts()
        },
        ServeOptions::default(),
    )
    .await;
    let msg = exploit_start("layer");
    let head = grpc_web_head(
        &server.addr.to_string(),
        PAGE,
        "agentharness.v1.SessionService/Start",
        msg.len(),
        "",
    );
    let resp =
        String::from_utf8_lossy(&http1(server.addr, &head, &grpc_frame(&msg)).await).into_owned();
    let mut c = server.client().await;
    let touched = !list(&mut c).await.is_empty() || !server.adapter.record().spawns.is_empty();
    (resp, touched)
}

#[tokio::test]
async fn the_args_and_env_checks_each_stop_the_exploit_alone() {
    // The origin is allowed (a loopback page), so only the launch policy
    // stands in the way; each check runs with the other one trusting clients.
    let (resp, touched) =
        exploit_from_allowed_page(LaunchPolicy::default().trusting_client_env()).await;
    assert_eq!(
        grpc_status(&resp),
        Some(Code::InvalidArgument as i32),
        "{resp}"
    );
    assert!(resp.contains("config.args[0]"), "{resp}");
    assert!(!touched, "nothing appended or spawned");

    let (resp, touched) =
        exploit_from_allowed_page(LaunchPolicy::default().trusting_client_args()).await;
    assert_eq!(
        grpc_status(&resp),
        Some(Code::InvalidArgument as i32),
        "{resp}"
    );
    assert!(
        resp.contains("config.env.ANTHROPIC_BASE_URL") || resp.contains("config.env.IS_SANDBOX"),
        "{resp}"
    );
    assert!(!touched, "nothing appended or spawned");

    // With both trusting clients the same request goes through.
    let (resp, touched) = exploit_from_allowed_page(LaunchPolicy::trust_clients()).await;
    assert_eq!(grpc_status(&resp), Some(0), "{resp}");
    assert!(touched);
}
