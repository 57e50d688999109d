//! The codex-acp bridge (`@agentclientprotocol/codex-acp`, pinned and newest: an Agent
//! Client Protocol agent that runs its own `codex app-server`) driven directly over stdio
//! against the scripted Responses API: what an ACP adapter can rely on from an agent that is
//! not Gemini.
//!
//! Each scenario runs against both releases. A missing binary fails the test binary with
//! one line naming `./tests/setup.sh`; nothing is skipped.
//!
//! With `AGENT_HARNESS_RECORD_CODEX_ACP=DIR`, each scenario run with the pinned release
//! writes its transcript to `DIR/<scenario>.jsonl` (a second process's to
//! `DIR/<scenario>.2.jsonl`): one JSON object per line, `{"dir": "in" | "out", "line": <the
//! line as written>}`. `cassettes/codex-acp/` holds them (see its README).

mod common;

use agent_harness_fake_api::FakeApi;
use agent_harness_fake_api::cli::{codex_acp_bin, codex_acp_bin_newest};
use common::acp::{Acp, cancel_mid_answer, chunks, option_of_kind, stop_reason, update};
use common::{Fixture, LinesChild, approved_command_ran, both_releases, responses_carry_history};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one expected line may take: the bridge starts node and then Codex.
const LINE_TIMEOUT: Duration = Duration::from_secs(90);

// One scenario's fixture, whose `HOME/codex/` is the `CODEX_HOME` pointing Codex at the
// fake.
common::setup!();

impl Setup {
    fn new(scenario: &'static str, pinned: bool) -> Setup {
        let f = Fixture::new(
            scenario,
            pinned,
            (codex_acp_bin, codex_acp_bin_newest),
            "AGENT_HARNESS_RECORD_CODEX_ACP",
        );
        f.api
            .codex_home(&f.home.path().join("codex"))
            .expect("write config.toml");
        Setup(f)
    }

    /// One more `codex-acp` process (it starts its own `codex app-server`, which inherits
    /// the environment).
    fn spawn(&mut self) -> Acp {
        let (mut cmd, rec) = self.0.command();
        cmd.env("RUST_LOG", "error")
            .envs(self.api.codex_env(&self.home.path().join("codex")));
        let io = LinesChild::spawn("codex-acp", cmd, rec, LINE_TIMEOUT);
        Acp::new(io, self.cwd_str())
    }
}

both_releases!(
    first_turn,
    follow_up,
    permission_allow,
    permission_reject,
    cancel,
    cancel_pending_permission,
    load,
    unknown_session,
    lost_rollout,
);

/// The prompt of the side call that names a session.
const TITLE_PROMPT: &str = "Your task is to generate a very short title";

/// The model calls of the session's turns: after a session's first turn codex-acp also asks
/// the model for a title, in a thread of its own, at a time of its own.
fn turn_calls(api: &FakeApi) -> Vec<agent_harness_fake_api::RecordedRequest> {
    api.responses_requests()
        .into_iter()
        .filter(|c| {
            !c.user_prompts()
                .first()
                .is_some_and(|p| p.starts_with(TITLE_PROMPT))
        })
        .collect()
}

/// The mode ids codex-acp lists, in its order.
const MODES: [&str; 4] = ["read-only", "workspace-write", "agent", "agent-full-access"];

fn mode_ids(result: &Value) -> Vec<&str> {
    result["modes"]["availableModes"]
        .as_array()
        .unwrap_or_else(|| panic!("no modes in {result}"))
        .iter()
        .filter_map(|m| m["id"].as_str())
        .collect()
}

/// One text turn: `initialize` names the bridge, `session/new` lists modes (current
/// `agent`) and models; the answer comes as `agent_message_chunk`s, `usage_update`s carry
/// the context's size, and the response `{stopReason: end_turn, usage}` the turn's tokens.
async fn first_turn(mut s: Setup) {
    let mut acp = s.spawn();
    let init = acp.initialize().await;
    assert_eq!(init["protocolVersion"], 1, "{init}");
    assert_eq!(init["agentInfo"]["name"], "@agentclientprotocol/codex-acp");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    let new = acp.new_session_result().await;
    assert_eq!(mode_ids(&new), MODES, "{new}");
    assert_eq!(new["modes"]["currentModeId"], "agent", "{new}");
    assert!(new["models"]["currentModelId"].is_string(), "{new}");
    let session = new["sessionId"].as_str().unwrap().to_owned();
    let (done, lines) = acp.turn(&session, "TEXT hello from codex").await;
    assert_eq!(stop_reason(&done), "end_turn", "{done}");
    assert_eq!(chunks(&lines, "agent_message_chunk"), "hello from codex");
    assert!(
        done.pointer("/result/usage/inputTokens")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            > 0,
        "{done}"
    );
    let used = lines
        .iter()
        .rfind(|v| update(v) == "usage_update")
        .unwrap_or_else(|| panic!("no usage_update: {lines:#?}"));
    assert!(used["params"]["update"]["size"].as_u64().unwrap() > 0);
    let calls = turn_calls(&s.api);
    assert_eq!(calls.len(), 1, "one model call");
    assert_eq!(calls[0].user_prompts(), ["TEXT hello from codex"]);
    acp.exit().await;
}

/// A second prompt on the same process and session carries the first exchange.
async fn follow_up(mut s: Setup) {
    common::acp::follow_up(s.spawn(), || turn_calls(&s.api)).await
}

/// A session in mode `workspace-write` (the user reviews what leaves the sandbox) and a
/// command the model asks to run outside it (`ESCBASH <cmd>`): a `tool_call`, then
/// `session/request_permission` for it; returns the prompt's id, the request and the lines
/// before it.
async fn ask_for_shell(acp: &mut Acp, cmd: &str) -> (String, u64, Value, Vec<Value>) {
    let session = acp.open().await;
    let (r, _) = acp
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "workspace-write"}),
        )
        .await;
    assert!(r.get("result").is_some(), "session/set_mode: {r}");
    let id = acp.prompt(&session, &format!("ESCBASH {cmd}")).await;
    let (ask, before) = acp
        .until(|v| v["method"] == "session/request_permission")
        .await;
    assert!(ask["id"].is_number(), "{ask}");
    let call = &ask["params"]["toolCall"];
    assert_eq!(call["kind"], "execute", "{ask}");
    assert_eq!(call["rawInput"]["command"], cmd, "{ask}");
    assert!(
        before.iter().any(|v| update(v) == "tool_call"
            && v["params"]["update"]["toolCallId"] == call["toolCallId"]),
        "a tool_call comes before the request: {before:#?}"
    );
    let kinds: Vec<&str> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|o| o["kind"].as_str())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once"],
        "{ask}"
    );
    (session, id, ask, before)
}

/// The status of the last `tool_call_update` of `tool_call_id` that has one.
fn tool_status<'a>(lines: &'a [Value], tool_call_id: &Value) -> &'a str {
    lines
        .iter()
        .filter(|v| {
            update(v) == "tool_call_update" && v["params"]["update"]["toolCallId"] == *tool_call_id
        })
        .filter_map(|v| v["params"]["update"]["status"].as_str())
        .next_back()
        .unwrap_or_else(|| panic!("no status for {tool_call_id}: {lines:#?}"))
}

/// Allowed once (by option kind): the command runs, `tool_call_update {status: completed}`
/// (its output only in `_meta.terminal_output_delta`), and the model answers with it.
async fn permission_allow(mut s: Setup) {
    let mut acp = s.spawn();
    let (_, id, ask, _) = ask_for_shell(&mut acp, "touch approved.txt && echo made-it").await;
    acp.answer(&ask, option_of_kind(&ask, "allow_once")).await;
    let (done, lines) = acp.response(id).await;
    assert_eq!(stop_reason(&done), "end_turn", "{done}");
    let tool = &ask["params"]["toolCall"]["toolCallId"];
    assert_eq!(tool_status(&lines, tool), "completed");
    let text = chunks(&lines, "agent_message_chunk");
    approved_command_ran(s.cwd.path(), &text, &turn_calls(&s.api), "ESCBASH");
    acp.exit().await;
}

/// Rejected (the only `reject_once` option, `cancel`): the command never runs, the tool
/// ends `failed`, and the whole turn ends `stopReason: cancelled` (Codex aborts the turn;
/// the model is not called again). The next prompt works.
async fn permission_reject(mut s: Setup) {
    let mut acp = s.spawn();
    let (session, id, ask, _) = ask_for_shell(&mut acp, "touch rejected.txt").await;
    acp.answer(&ask, option_of_kind(&ask, "reject_once")).await;
    let (done, lines) = acp.response(id).await;
    assert_eq!(stop_reason(&done), "cancelled", "{done}");
    let tool = &ask["params"]["toolCall"]["toolCallId"];
    assert_eq!(tool_status(&lines, tool), "failed");
    assert!(!s.cwd.path().join("rejected.txt").exists());
    assert_eq!(turn_calls(&s.api).len(), 1);
    acp.answered(&session, "next").await;
    acp.exit().await;
}

/// `session/cancel` mid-answer: the prompt answers `stopReason: cancelled` with `usage:
/// null`, the model stream is dropped, and the process takes the next prompt.
async fn cancel(mut s: Setup) {
    cancel_mid_answer(s.spawn(), &s.api).await
}

/// `session/cancel` while a permission request is pending: codex-acp withdraws the request
/// itself (`$/cancel_request {requestId}`) and the prompt answers `cancelled` without the
/// client answering it. A client that answers the request `cancelled` anyway (as one that
/// cancels every pending request on stop does) breaks nothing; the command never runs.
async fn cancel_pending_permission(mut s: Setup) {
    let mut acp = s.spawn();
    let (session, id, ask, _) = ask_for_shell(&mut acp, "touch never.txt").await;
    acp.cancel(&session).await;
    let (done, before) = acp.response(id).await;
    assert_eq!(stop_reason(&done), "cancelled", "{done}");
    assert!(
        before
            .iter()
            .any(|v| v["method"] == "$/cancel_request" && v["params"]["requestId"] == ask["id"]),
        "{before:#?}"
    );
    acp.answer(&ask, json!({"outcome": "cancelled"})).await;
    assert!(!s.cwd.path().join("never.txt").exists());
    acp.answered(&session, "next").await;
    acp.exit().await;
}

/// A first turn in one process (mode set to `workspace-write`); `session/load` in a new one
/// replays the history as updates (all before its response, with a configuration warning as
/// an `agent_message_chunk`), answers the mode `agent` again (the mode is not kept), and the
/// model receives the earlier messages.
async fn load(mut s: Setup) {
    let mut first = s.spawn();
    let session = first.open().await;
    let (r, _) = first
        .request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "workspace-write"}),
        )
        .await;
    assert!(r.get("result").is_some(), "session/set_mode: {r}");
    first.turn(&session, "TEXT remember me").await;
    first.exit().await;

    let mut second = s.spawn();
    second.initialize().await;
    let (r, replayed) = second.load(&session).await;
    let result = r
        .get("result")
        .unwrap_or_else(|| panic!("session/load: {r}"));
    assert_eq!(result["modes"]["currentModeId"], "agent", "{r}");
    assert!(
        chunks(&replayed, "user_message_chunk").contains("TEXT remember me"),
        "{replayed:#?}"
    );
    assert!(
        chunks(&replayed, "agent_message_chunk").contains("remember me"),
        "{replayed:#?}"
    );
    // What follows the response until the next prompt: status and usage, no history.
    let after = second.drain(Duration::from_millis(500)).await;
    assert!(
        after.iter().all(|v| !update(v).ends_with("message_chunk")),
        "{after:#?}"
    );
    second.answered(&session, "again").await;
    responses_carry_history(&turn_calls(&s.api));
    second.exit().await;
}

/// `session/load` (and `session/resume`) of an id Codex never saw: JSON-RPC `-32603`, the
/// reason in `data.details` ("no rollout found for thread id …"); no model call.
async fn unknown_session(mut s: Setup) {
    let mut acp = s.spawn();
    acp.initialize().await;
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (r, _) = acp.load(unknown).await;
    let error = r
        .get("error")
        .unwrap_or_else(|| panic!("session/load of an unknown id answered {r}"));
    assert_eq!(error["code"], -32603, "{r}");
    let details = error["data"]["details"].as_str().unwrap_or_default();
    assert!(
        details.contains("no rollout found") && details.contains(unknown),
        "{r}"
    );
    let cwd = acp.cwd.clone();
    let (r, _) = acp
        .request(
            "session/resume",
            json!({"sessionId": unknown, "cwd": cwd, "mcpServers": []}),
        )
        .await;
    assert_eq!(r["error"]["code"], -32603, "{r}");
    assert!(turn_calls(&s.api).is_empty(), "no model call");
    acp.exit().await;
}

/// Every file under `dir`, recursively.
fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The session's rollout files deleted (`$CODEX_HOME/sessions`), Codex's
/// databases kept: `session/load` still succeeds, replaying nothing but the
/// title, and the first prompt answers JSON-RPC `-32603` "thread not found:
/// <id>". The session is lost, but only the prompt says so.
async fn lost_rollout(mut s: Setup) {
    let mut first = s.spawn();
    let session = first.open().await;
    first.turn(&session, "TEXT kept").await;
    first.exit().await;
    let rollouts = files_under(&s.home.path().join("codex/sessions"));
    assert!(!rollouts.is_empty(), "Codex wrote its rollout");
    for f in rollouts {
        std::fs::remove_file(f).expect("delete the rollout");
    }

    let mut second = s.spawn();
    second.initialize().await;
    let (r, replayed) = second.load(&session).await;
    assert!(r.get("result").is_some(), "session/load: {r}");
    assert!(
        !chunks(&replayed, "user_message_chunk").contains("TEXT kept"),
        "{replayed:#?}"
    );
    let calls = turn_calls(&s.api).len();
    let (r, _) = second.turn(&session, "TEXT after the loss").await;
    let error = r
        .get("error")
        .unwrap_or_else(|| panic!("a prompt on a lost thread answered {r}"));
    assert_eq!(error["code"], -32603, "{r}");
    let details = error["data"]["details"].as_str().unwrap_or_default();
    assert!(
        details.contains("thread not found") && details.contains(&session),
        "{r}"
    );
    assert_eq!(turn_calls(&s.api).len(), calls, "no model call");
    second.exit().await;
}
