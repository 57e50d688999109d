//! Agents as a choice (`StartConfig.agent`): the router picks the adapter,
//! run_start and Session say which agent runs, a session keeps its agent
//! across respawns, and the refusals: an unknown agent (INVALID_ARGUMENT),
//! one the operator did not enable (FAILED_PRECONDITION naming the flag),
//! another agent for a session that has one (INVALID_ARGUMENT), and what
//! Codex cannot honour (a permission mode, a thinking budget:
//! FAILED_PRECONDITION; client args: INVALID_ARGUMENT). Each refusal
//! leaves no session behind.

use crate::support::scripted::{ScriptedAdapter, ScriptedBehavior};
use crate::support::server;

use std::sync::Arc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::ProcessAdapter;
use agent_harness_server::adapter::agents::Agents;
use agent_harness_server::adapter::claude::PermissionMode;
use agent_harness_server::adapter::codex::{CodexAdapter, CodexOptions};
use agent_harness_server::launch::LaunchPolicy;
use agent_harness_server::manager::ManagerOptions;
use agent_harness_server::server::ServeOptions;
use server::*;
use tonic::Code;

fn codex_config(prompt: &str) -> pb::StartConfig {
    pb::StartConfig {
        prompt: prompt.into(),
        agent: "codex".into(),
        ..Default::default()
    }
}

/// A server whose claude adapter is `claude` and, when given, whose codex
/// adapter is `codex`.
async fn server_with(
    claude: ScriptedAdapter,
    codex: Option<Arc<dyn ProcessAdapter>>,
    mopts: ManagerOptions,
) -> TestServer {
    let mut agents = Agents::new(Arc::new(claude.clone()));
    if let Some(codex) = codex {
        agents = agents.with_codex(codex);
    }
    TestServer::with_adapter(
        test_store(),
        Arc::new(agents),
        claude,
        mopts,
        ServeOptions::default(),
    )
    .await
}

async fn refused(server: &TestServer, session: &str, config: pb::StartConfig) -> tonic::Status {
    let mut client = server.client().await;
    let status = client
        .start(start_request(session, config))
        .await
        .expect_err("refused");
    assert!(
        list(&mut client)
            .await
            .iter()
            .all(|s| s.session_id != session),
        "a refused Start leaves no session"
    );
    status
}

#[tokio::test]
async fn an_agent_not_enabled_or_unknown_is_refused_before_anything_exists() {
    let claude = ScriptedAdapter::new(ScriptedBehavior::default());
    let server = server_with(claude.clone(), None, fast_opts()).await;
    let status = refused(&server, "s-codex-off", codex_config("hi")).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("--codex-bin"), "{status:?}");
    let unknown = pb::StartConfig {
        agent: "gemini".into(),
        ..prompt("hi")
    };
    let status = refused(&server, "s-unknown", unknown).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("config.agent"), "{status:?}");
    assert!(claude.record().spawns.is_empty());
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_router_runs_codex_sessions_on_the_codex_adapter_and_a_session_keeps_its_agent() {
    // One-shot stand-ins: each run ends after its turn, so a Send respawns.
    let one_shot = ScriptedBehavior {
        keep_alive: false,
        ..ScriptedBehavior::default()
    };
    let claude = ScriptedAdapter::new(one_shot.clone());
    let codex = ScriptedAdapter::new(one_shot);
    let server = server_with(claude.clone(), Some(Arc::new(codex.clone())), fast_opts()).await;
    let mut client = server.client().await;
    client
        .start(start_request("s-codex", codex_config("hello")))
        .await
        .expect("codex start");
    wait_idle(&mut client, "s-codex").await;
    let session = get(&mut client, "s-codex").await;
    assert_eq!(session.agent, "codex");
    // A claude session beside it.
    start(&mut client, "s-claude", "hello")
        .await
        .expect("claude start");
    wait_idle(&mut client, "s-claude").await;
    assert_eq!(get(&mut client, "s-claude").await.agent, "claude");
    // Another agent for the codex session: refused, nothing appended.
    let head = get(&mut client, "s-codex").await.head_seq;
    let other = pb::StartConfig {
        agent: "claude".into(),
        ..prompt("again")
    };
    let status = client
        .start(start_request("s-codex", other))
        .await
        .expect_err("another agent");
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert_eq!(get(&mut client, "s-codex").await.head_seq, head);
    // A Send respawns with the session's agent; so does a Start naming none.
    send(&mut client, "s-codex", "more").await.expect("send");
    wait_idle(&mut client, "s-codex").await;
    start(&mut client, "s-codex", "and more")
        .await
        .expect("start naming no agent");
    wait_idle(&mut client, "s-codex").await;
    assert_eq!(codex.record().spawns.len(), 3, "every codex run on codex");
    assert_eq!(claude.record().spawns.len(), 1, "only the claude session's");
    let starts: Vec<pb::RunStart> = server
        .stored_events("s-codex")
        .into_iter()
        .filter_map(|e| match e.payload {
            Some(Payload::RunStart(rs)) => Some(rs),
            _ => None,
        })
        .collect();
    assert_eq!(starts.len(), 3);
    assert!(starts.iter().all(|rs| rs.agent == "codex"), "{starts:?}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn what_codex_cannot_honour_is_refused() {
    let claude = ScriptedAdapter::new(ScriptedBehavior::default());
    // Never spawned: every case is refused before.
    let codex = CodexAdapter::new(CodexOptions::new("/nonexistent/codex"));
    let policy = LaunchPolicy::default()
        .with_permission_modes(PermissionMode::Relay, &["acceptEdits".into()])
        .expect("policy");
    let mopts = ManagerOptions {
        launch: Arc::new(policy),
        ..fast_opts()
    };
    let server = server_with(claude.clone(), Some(Arc::new(codex)), mopts).await;
    let edits = pb::StartConfig {
        permission_mode: "acceptEdits".into(),
        ..codex_config("hi")
    };
    let status = refused(&server, "s-edits", edits).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("acceptEdits"), "{status:?}");
    let thinking = pb::StartConfig {
        max_thinking_tokens: Some(1024),
        ..codex_config("hi")
    };
    let status = refused(&server, "s-thinking", thinking).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    let args = pb::StartConfig {
        args: vec!["--verbose".into()],
        ..codex_config("hi")
    };
    let status = refused(&server, "s-args", args).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    // The operator's ceiling applies as for claude: a mode not allowed is
    // PERMISSION_DENIED whatever the agent.
    let bypass = pb::StartConfig {
        permission_mode: "bypassPermissions".into(),
        ..codex_config("hi")
    };
    let status = refused(&server, "s-bypass", bypass).await;
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(claude.record().spawns.is_empty());
    server.shutdown().await.unwrap();
}

fn acp_config(agent: &str, prompt_text: &str) -> pb::StartConfig {
    pb::StartConfig {
        agent: agent.into(),
        ..prompt(prompt_text)
    }
}

/// A server whose ACP agent `gemini` is `acp`.
async fn server_with_acp(
    claude: ScriptedAdapter,
    acp: Arc<dyn ProcessAdapter>,
    mopts: ManagerOptions,
) -> TestServer {
    let agents = Agents::new(Arc::new(claude.clone())).with_acp("gemini", acp);
    TestServer::with_adapter(
        test_store(),
        Arc::new(agents),
        claude,
        mopts,
        ServeOptions::default(),
    )
    .await
}

#[tokio::test]
async fn a_configured_acp_agent_is_chosen_by_its_name_and_an_unknown_name_lists_the_agents() {
    let claude = ScriptedAdapter::new(ScriptedBehavior::default());
    let acp = ScriptedAdapter::new(ScriptedBehavior::default());
    let server = server_with_acp(claude.clone(), Arc::new(acp.clone()), fast_opts()).await;
    let mut client = server.client().await;
    client
        .start(start_request("s-acp", acp_config("gemini", "hello")))
        .await
        .expect("acp start");
    wait_idle(&mut client, "s-acp").await;
    assert_eq!(get(&mut client, "s-acp").await.agent, "gemini");
    assert_eq!(acp.record().spawns.len(), 1);
    assert!(claude.record().spawns.is_empty());
    let starts: Vec<pb::RunStart> = server
        .stored_events("s-acp")
        .into_iter()
        .filter_map(|e| match e.payload {
            Some(Payload::RunStart(rs)) => Some(rs),
            _ => None,
        })
        .collect();
    assert_eq!(starts[0].agent, "gemini");
    let status = refused(&server, "s-nope", acp_config("qwen", "hi")).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(
        status.message().contains("claude, gemini"),
        "the enabled agents: {status:?}"
    );
    let status = refused(&server, "s-bad", acp_config("Not A Name", "hi")).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    server.shutdown().await.unwrap();
}

#[tokio::test]
async fn what_an_acp_agent_cannot_honour_is_refused() {
    use agent_harness_server::adapter::acp::{AcpAdapter, AcpAgentSpec, AcpOptions};
    let claude = ScriptedAdapter::new(ScriptedBehavior::default());
    // Never spawned: every case is refused before.
    let acp = AcpAdapter::new(AcpOptions::new(AcpAgentSpec {
        name: "gemini".into(),
        program: "/nonexistent/gemini".into(),
        args: vec!["--acp".into()],
    }));
    let mopts = ManagerOptions {
        launch: Arc::new(LaunchPolicy::default().trusting_client_env()),
        ..fast_opts()
    };
    let server = server_with_acp(claude.clone(), Arc::new(acp), mopts).await;
    let dont_ask = pb::StartConfig {
        permission_mode: "dontAsk".into(),
        ..acp_config("gemini", "hi")
    };
    let status = refused(&server, "s-dontask", dont_ask).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    assert!(status.message().contains("dontAsk"), "{status:?}");
    let thinking = pb::StartConfig {
        max_thinking_tokens: Some(1024),
        ..acp_config("gemini", "hi")
    };
    let status = refused(&server, "s-thinking", thinking).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    let block: pbjson_types::Struct =
        serde_json::from_value(serde_json::json!({"type": "text", "text": "x"})).unwrap();
    let blocks = pb::StartConfig {
        content_blocks: vec![block],
        ..acp_config("gemini", "hi")
    };
    let status = refused(&server, "s-blocks", blocks).await;
    assert_eq!(status.code(), Code::FailedPrecondition, "{status:?}");
    let args = pb::StartConfig {
        args: vec!["--verbose".into()],
        ..acp_config("gemini", "hi")
    };
    let status = refused(&server, "s-args", args).await;
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    // Allowed by the operator's policy, still never a client's for an ACP
    // agent: they move its home and credentials.
    for key in ["HOME", "GEMINI_API_KEY"] {
        let env = pb::StartConfig {
            env: [(key.to_owned(), "x".to_owned())].into(),
            ..acp_config("gemini", "hi")
        };
        let status = refused(&server, "s-env", env).await;
        assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
        assert!(status.message().contains(key), "{status:?}");
    }
    let bypass = pb::StartConfig {
        permission_mode: "bypassPermissions".into(),
        ..acp_config("gemini", "hi")
    };
    let status = refused(&server, "s-bypass", bypass).await;
    assert_eq!(status.code(), Code::PermissionDenied, "{status:?}");
    assert!(claude.record().spawns.is_empty());
    server.shutdown().await.unwrap();
}
