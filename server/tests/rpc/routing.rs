//! Routing by session and the node that served: the `x-session-id` header
//! checked against the request's `session_id` (agreeing or absent passes,
//! disagreeing is INVALID_ARGUMENT naming both), allowed by CORS; the
//! `x-agent-harness-node` header on every answer (unary, streaming, errors,
//! grpc-web, plain HTTP), exposed to browsers; and `GET /healthz`, without a
//! token, over HTTP/1.1 and h2, and 503 from the start of shutdown.

use crate::support::server;

use agent_harness_protocol::pb;
use agent_harness_server::ServeOptions;
use agent_harness_server::node::NodeId;
use prost::Message;
use server::*;
use tonic::Code;

use crate::transport::{PAGE, grpc_frame, grpc_web_head, http1};

const NODE: &str = "node-a:50051";

async fn on_node() -> TestServer {
    TestServer::serving(ServeOptions {
        node: Some(NodeId::parse(NODE).unwrap()),
        ..ServeOptions::default()
    })
    .await
}

/// `msg` with an `x-session-id` header.
fn routed<T>(msg: T, header: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(msg);
    request
        .metadata_mut()
        .insert("x-session-id", header.parse().unwrap());
    request
}

fn node_of(metadata: &tonic::metadata::MetadataMap) -> Option<&str> {
    metadata
        .get("x-agent-harness-node")
        .and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn a_session_header_must_agree_with_the_request() {
    let server = on_node().await;
    let mut c = server.client().await;
    // Agreeing: served.
    c.start(routed(start_request("r1", prompt("hi")), "r1"))
        .await
        .unwrap();
    let get = |id: &str| pb::GetSessionRequest {
        session_id: id.into(),
    };
    c.get_session(routed(get("r1"), "r1")).await.unwrap();
    // Absent (a client older than routing): served.
    c.get_session(get("r1")).await.unwrap();
    // Disagreeing: refused, naming both, on unary and streaming calls.
    let err = c.get_session(routed(get("r1"), "r2")).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument);
    assert!(
        err.message().contains("\"r1\"") && err.message().contains("\"r2\""),
        "{err:?}"
    );
    assert!(err.message().contains("x-session-id"), "{err:?}");
    let err = c
        .send(routed(send_request("r1", "more", ""), "other"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let sub = pb::SubscribeRequest {
        session_id: "r1".into(),
        ..Default::default()
    };
    let err = c.subscribe(routed(sub, "r9")).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    let history = pb::HistoryRequest {
        session_id: "r1".into(),
        ..Default::default()
    };
    let err = c.history(routed(history, "r9")).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    // Nothing was sent for the refused Send.
    let s = wait_idle(&mut c, "r1").await;
    assert_eq!(s.session_id, "r1");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn every_answer_names_the_node() {
    let server = on_node().await;
    let mut c = server.client().await;
    // Unary.
    let started = c
        .start(routed(start_request("n1", prompt("hi")), "n1"))
        .await
        .unwrap();
    assert_eq!(node_of(started.metadata()), Some(NODE));
    // Errors.
    let err = c
        .get_session(pb::GetSessionRequest {
            session_id: "ghost".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(node_of(err.metadata()), Some(NODE), "{err:?}");
    let err = c
        .get_session(pb::GetSessionRequest {
            session_id: "bad id".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(node_of(err.metadata()), Some(NODE), "{err:?}");
    // Streaming.
    let stream = c
        .subscribe(pb::SubscribeRequest {
            session_id: "n1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(node_of(stream.metadata()), Some(NODE));
    drop(stream);

    // grpc-web over HTTP/1.1, answer and error, and the CORS preflight
    // allows the session header and exposes the node header.
    for (id, status) in [("n1", "grpc-status:0"), ("ghost", "grpc-status:5")] {
        let msg = pb::GetSessionRequest {
            session_id: id.into(),
        }
        .encode_to_vec();
        let head = grpc_web_head(
            &server.addr.to_string(),
            PAGE,
            "agentharness.v1.SessionService/GetSession",
            msg.len(),
            &format!("X-Session-Id: {id}\r\n"),
        );
        let resp = String::from_utf8_lossy(&http1(server.addr, &head, &grpc_frame(&msg)).await)
            .to_ascii_lowercase();
        assert!(
            resp.contains(&format!("x-agent-harness-node: {NODE}")),
            "{resp}"
        );
        assert!(resp.replace(' ', "").contains(status), "{status}: {resp}");
        let expose = resp
            .lines()
            .find(|l| l.starts_with("access-control-expose-headers:"))
            .unwrap_or_else(|| panic!("expose-headers in {resp}"));
        assert!(expose.contains("x-agent-harness-node"), "{expose}");
    }
    let head = format!(
        "OPTIONS /agentharness.v1.SessionService/GetSession HTTP/1.1\r\nHost: {}\r\n\
         Origin: {PAGE}\r\nAccess-Control-Request-Method: POST\r\n\
         Access-Control-Request-Headers: content-type,x-grpc-web,x-session-id\r\n\
         Connection: close\r\n\r\n",
        server.addr
    );
    let pre = String::from_utf8_lossy(&http1(server.addr, &head, &[]).await).to_ascii_lowercase();
    assert!(pre.starts_with("http/1.1 200"), "{pre}");
    let allow = pre
        .lines()
        .find(|l| l.starts_with("access-control-allow-headers:"))
        .unwrap_or_else(|| panic!("allow-headers in {pre}"));
    assert!(allow.contains("x-session-id"), "{allow}");
    assert!(
        pre.contains(&format!("x-agent-harness-node: {NODE}")),
        "{pre}"
    );
    server.shutdown().await.unwrap();
}

/// The status line and body of `GET /healthz` over HTTP/1.1.
pub(crate) async fn healthz(addr: std::net::SocketAddr) -> (u16, String) {
    let head = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let resp = String::from_utf8_lossy(&http1(addr, &head, &[]).await).into_owned();
    let code = resp
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("status line: {resp}"));
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
    (code, body)
}

#[tokio::test]
async fn healthz_answers_balancers_without_a_token() {
    let server = TestServer::serving(ServeOptions {
        auth_token: Some("s3cret-token".into()),
        node: Some(NodeId::parse(NODE).unwrap()),
        ..ServeOptions::default()
    })
    .await;
    // HTTP/1.1, no token: only whether the node serves.
    let (code, body) = healthz(server.addr).await;
    assert_eq!((code, body.as_str()), (200, "serving\n"));
    let head = format!(
        "GET /healthz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
        server.addr
    );
    let resp = String::from_utf8_lossy(&http1(server.addr, &head, &[]).await).to_ascii_lowercase();
    assert!(
        resp.contains(&format!("x-agent-harness-node: {NODE}")),
        "{resp}"
    );
    // h2 (prior knowledge, as a balancer's h2 check).
    let channel = server.channel().await;
    let req = http::Request::builder()
        .method("GET")
        .uri(format!("http://{}/healthz", server.addr))
        .body(tonic::body::Body::empty())
        .unwrap();
    let resp = tower::ServiceExt::oneshot(channel, req).await.unwrap();
    assert_eq!(resp.status(), http::StatusCode::OK);
    assert_eq!(resp.version(), http::Version::HTTP_2);
    // The RPCs still want the token.
    let err = server
        .client()
        .await
        .list_sessions(pb::ListSessionsRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::Unauthenticated);
    server.shutdown().await.unwrap();
}

/// Shutdown turns the switch off before it stops the live runs: while a
/// run is still being stopped the node answers `/healthz` with 503, so a
/// balancer sends it nothing new.
#[tokio::test]
async fn healthz_says_not_serving_from_the_start_of_shutdown() {
    use crate::support::scripted::ScriptedBehavior;
    use agent_harness_server::manager::ManagerOptions;
    use std::time::Duration;
    // The process ignores SIGINT: it is stopped only at SIGTERM,
    // `kill_grace` later, which keeps the shutdown going that long.
    let server = TestServer::with(
        ScriptedBehavior {
            ignore_sigint: true,
            ..ScriptedBehavior::default()
        },
        ManagerOptions {
            kill_grace: Duration::from_secs(2),
            ..fast_opts()
        },
        ServeOptions::default(),
    )
    .await;
    let mut c = server.client().await;
    let (_sub, _started) = first_turn(&mut c, "down", "hello").await;
    let addr = server.addr;
    assert_eq!(healthz(addr).await, (200, "serving\n".to_owned()));
    let adapter = server.adapter.clone();
    let shutdown = tokio::spawn(server.shutdown());
    adapter.wait_for(|_, c| c == "signal:Int").await;
    assert_eq!(healthz(addr).await, (503, "not serving\n".to_owned()));
    shutdown.await.unwrap().unwrap();
}
