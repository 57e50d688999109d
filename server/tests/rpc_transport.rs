//! The one port: grpc-web over HTTP/1.1 with CORS, reflection v1 and
//! v1alpha, health, bearer-token auth, and the request size limit.

mod common;
mod support;

use std::time::Duration;

use agent_harness_client::pb;
use agent_harness_server::ServeOptions;
use agent_harness_server::adapter::scripted::ScriptedBehavior;
use agent_harness_server::config::ServeConfig;
use prost::Message;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::metadata::MetadataValue;

/// One HTTP/1.1 exchange on a fresh connection; returns the raw response.
async fn http1(addr: std::net::SocketAddr, head: &str, body: &[u8]) -> Vec<u8> {
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

/// A grpc-web (binary) POST of `msg` to `method`.
async fn grpc_web(addr: std::net::SocketAddr, method: &str, msg: &[u8], extra: &str) -> String {
    let mut body = vec![0u8];
    body.extend_from_slice(&(msg.len() as u32).to_be_bytes());
    body.extend_from_slice(msg);
    let head = format!(
        "POST /agentharness.v1.SessionService/{method} HTTP/1.1\r\nHost: {addr}\r\n\
         Content-Type: application/grpc-web+proto\r\nX-Grpc-Web: 1\r\nX-User-Agent: grpc-web-javascript/0.1\r\n\
         Origin: http://ui.example\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    String::from_utf8_lossy(&http1(addr, &head, &body).await).into_owned()
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
         Origin: http://ui.example\r\nAccess-Control-Request-Method: POST\r\n\
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
    let server = TestServer::with(
        ScriptedBehavior::default(),
        fast_opts(),
        ServeOptions {
            auth_token: Some("s3cret-token".into()),
            ..ServeOptions::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let list = || tonic::Request::new(pb::ListSessionsRequest {});
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
    let req = pb::ListSessionsRequest {}.encode_to_vec();
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
    let server = TestServer::with(
        ScriptedBehavior::default(),
        fast_opts(),
        ServeOptions {
            max_request_bytes: 1024,
            ..ServeOptions::default()
        },
    )
    .await;
    let mut c = server.client().await;
    let err = start(&mut c, "big", &"x".repeat(4096)).await.unwrap_err();
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    // Under the limit still works on the same connection.
    start(&mut c, "big", "small").await.unwrap();
}
