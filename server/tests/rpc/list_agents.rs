//! ListAgents: the agents a server runs, in the router's order (claude,
//! codex, then the ACP agents as configured), each with its kind, claude
//! the default; an adapter that is not the router stands for claude alone;
//! the call needs the token like every other, on gRPC and grpc-web.

use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server;
use crate::transport::grpc_web;

use std::sync::Arc;

use agent_harness_protocol::pb;
use agent_harness_protocol::vocab::agent_kind;
use agent_harness_server::ServeOptions;
use agent_harness_server::adapter::agents::Agents;
use prost::Message;
use server::*;
use tonic::Code;
use tonic::metadata::MetadataValue;

fn info(name: &str, kind: &str, is_default: bool) -> pb::AgentInfo {
    pb::AgentInfo {
        name: name.into(),
        kind: kind.into(),
        is_default,
    }
}

async fn listed(server: &TestServer) -> Vec<pb::AgentInfo> {
    server
        .client()
        .await
        .list_agents(pb::ListAgentsRequest {})
        .await
        .expect("ListAgents")
        .into_inner()
        .agents
}

#[tokio::test]
async fn list_agents_names_every_enabled_agent_with_its_kind_claude_the_default() {
    let claude = ScriptedAdapter::new(ScriptedBehavior::default());
    let other = || Arc::new(ScriptedAdapter::new(ScriptedBehavior::default()));
    let agents = Agents::new(Arc::new(claude.clone()))
        .with_acp("gemini", other())
        .with_codex(other())
        .with_acp("qwen", other());
    let server = TestServer::with_adapter(
        test_store(),
        Arc::new(agents),
        claude,
        fast_opts(),
        ServeOptions::default(),
    )
    .await;
    assert_eq!(
        listed(&server).await,
        vec![
            info("claude", agent_kind::CLAUDE, true),
            info("codex", agent_kind::CODEX, false),
            info("gemini", agent_kind::ACP, false),
            info("qwen", agent_kind::ACP, false),
        ]
    );
    server.shutdown().await.unwrap();

    // Claude alone: a server whose adapter is not the router.
    let server = TestServer::start().await;
    assert_eq!(
        listed(&server).await,
        vec![info("claude", agent_kind::CLAUDE, true)]
    );
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn list_agents_needs_the_token_on_grpc_and_grpc_web() {
    let server = TestServer::serving(ServeOptions {
        auth_token: Some("s3cret-token".into()),
        ..ServeOptions::default()
    })
    .await;
    let mut c = server.client().await;
    let err = c
        .list_agents(pb::ListAgentsRequest {})
        .await
        .expect_err("no token");
    assert_eq!(err.code(), Code::Unauthenticated);
    let mut right = tonic::Request::new(pb::ListAgentsRequest {});
    right.metadata_mut().insert(
        "authorization",
        MetadataValue::from_static("Bearer s3cret-token"),
    );
    let agents = c
        .list_agents(right)
        .await
        .expect("token")
        .into_inner()
        .agents;
    assert_eq!(agents.len(), 1, "{agents:?}");

    // The console's transport: refused without the token, served with it.
    let req = pb::ListAgentsRequest {}.encode_to_vec();
    let resp = grpc_web(server.addr, "ListAgents", &req, "").await;
    assert!(
        resp.contains("grpc-status:16") || resp.to_ascii_lowercase().contains("grpc-status: 16"),
        "{resp}"
    );
    let auth = "Authorization: Bearer s3cret-token\r\n";
    let resp = grpc_web(server.addr, "ListAgents", &req, auth).await;
    assert!(resp.contains("grpc-status:0"), "{resp}");
    assert!(resp.contains("claude"), "{resp}");
    server.shutdown().await.unwrap();
}
