use pbjson_types::Struct;
use serde_json::{Value, json};
use tokio::time::Instant;

use super::*;

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => panic!("not an object"),
    }
}

/// Feeds `msg` to `c`, returning what it writes.
fn feed(c: &mut Client, msg: Value) -> Vec<Value> {
    let mut out = Vec::new();
    c.observe(&obj(msg), Instant::now(), &mut out);
    out
}

fn answered(c: &mut Client, id: u64, result: Value) -> Vec<Value> {
    feed(c, json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn methods(out: &[Value]) -> Vec<&str> {
    out.iter()
        .map(|m| m["method"].as_str().unwrap_or("<answer>"))
        .collect()
}

/// What Gemini CLI's session/new answers: modes and models listed.
fn gemini_session() -> Value {
    json!({
        "sessionId": "s-1",
        "modes": {"currentModeId": "default", "availableModes": [
            {"id": "default"}, {"id": "autoEdit"}, {"id": "yolo"}, {"id": "plan"}]},
        "models": {"currentModelId": "auto", "availableModels": [
            {"modelId": "auto"}, {"modelId": "gemini-2.5-flash"}]},
    })
}

/// A client whose session exists (a new one, no settings).
fn ready() -> Client {
    let mut c = Client::new("gemini", "/w", "", None, "");
    answered(&mut c, INITIALIZE_ID, json!({"protocolVersion": 1}));
    answered(&mut c, SESSION_ID, gemini_session());
    c
}

fn permission_request(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "session/request_permission", "params": {
        "sessionId": "s-1",
        "toolCall": {"toolCallId": "t1", "title": "touch x", "kind": "execute"},
        "options": [
            {"optionId": "proceed_always", "name": "Always", "kind": "allow_always"},
            {"optionId": "proceed_once", "name": "Once", "kind": "allow_once"},
            {"optionId": "cancel", "name": "No", "kind": "reject_once"},
        ],
    }})
}

fn allow() -> PermissionDecision {
    PermissionDecision::Allow {
        updated_input: Struct::default(),
    }
}

fn deny() -> PermissionDecision {
    PermissionDecision::Deny {
        message: "no".into(),
    }
}

#[test]
fn the_handshake_uses_fixed_ids_and_the_prompt_waits_for_the_session() {
    let mut c = Client::new("gemini", "/w", "", None, "");
    let init = c.initialize();
    assert_eq!(init["id"], 1);
    assert_eq!(init["jsonrpc"], "2.0");
    assert_eq!(init["params"]["protocolVersion"], 1);
    assert_eq!(init["params"]["clientCapabilities"]["terminal"], false);
    assert_eq!(
        init["params"]["clientCapabilities"]["fs"],
        json!({"readTextFile": false, "writeTextFile": false})
    );
    let mut out = Vec::new();
    c.write("TEXT hello", &mut out).unwrap();
    assert!(out.is_empty(), "no session yet: {out:?}");
    let out = answered(
        &mut c,
        INITIALIZE_ID,
        json!({"agentInfo": {"version": "1"}}),
    );
    assert_eq!(
        out,
        [json!({"jsonrpc": "2.0", "id": 2, "method": "session/new",
            "params": {"cwd": "/w", "mcpServers": []}})]
    );
    let out = answered(&mut c, SESSION_ID, gemini_session());
    assert_eq!(
        out,
        [
            json!({"jsonrpc": "2.0", "id": 3, "method": "session/prompt", "params": {
            "sessionId": "s-1", "prompt": [{"type": "text", "text": "TEXT hello"}]}})
        ]
    );
}

#[test]
fn a_message_mid_prompt_is_queued_until_the_answer() {
    let mut c = ready();
    let mut out = Vec::new();
    c.write("one", &mut out).unwrap();
    c.write("two", &mut out).unwrap();
    assert_eq!(methods(&out), ["session/prompt"]);
    assert_eq!(out[0]["id"], 3);
    let out = answered(&mut c, 3, json!({"stopReason": "end_turn"}));
    assert_eq!(methods(&out), ["session/prompt"]);
    assert_eq!(out[0]["id"], 4);
    assert_eq!(out[0]["params"]["prompt"][0]["text"], "two");
    assert!(answered(&mut c, 4, json!({"stopReason": "end_turn"})).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_load_held_back_is_sent_when_its_time_comes() {
    let mut c = Client::new("gemini", "/w", "s-old", None, "");
    let at = Instant::now() + Duration::from_secs(20);
    c.load_not_before(at);
    let mut out = Vec::new();
    c.observe(
        &obj(json!({"id": 1, "result": {}})),
        Instant::now(),
        &mut out,
    );
    assert!(out.is_empty(), "held back: {out:?}");
    assert_eq!(c.wait_deadline(), Some(at));
    assert!(!c.wait_over(at - Duration::from_secs(1), &mut out));
    assert!(c.wait_over(at, &mut out));
    assert_eq!(methods(&out), ["session/load"]);
    // Its time already past when initialize is answered: sent at once.
    let mut late = Client::new("gemini", "/w", "s-old", None, "");
    late.load_not_before(Instant::now());
    late.observe(
        &obj(json!({"id": 1, "result": {}})),
        Instant::now(),
        &mut out,
    );
    assert_eq!(late.wait_deadline(), None);
    assert_eq!(methods(&out), ["session/load", "session/load"]);
}

#[tokio::test(start_paused = true)]
async fn a_held_back_load_whose_time_passes_before_initialize_is_answered_waits_for_it() {
    let mut c = Client::new("codex-acp", "/w", "s-old", None, "");
    let t0 = Instant::now();
    c.load_not_before(t0 + Duration::from_millis(200));
    let mut out = Vec::new();
    // Nothing to wake for until the agent answers initialize.
    assert_eq!(c.wait_deadline(), None);
    assert!(c.wait_over(t0 + Duration::from_secs(1), &mut out));
    assert!(
        out.is_empty(),
        "nothing goes out before initialize: {out:?}"
    );
    c.observe(
        &obj(json!({"id": 1, "result": {}})),
        t0 + Duration::from_secs(1),
        &mut out,
    );
    assert_eq!(methods(&out), ["session/load"]);
    assert_eq!(c.wait_deadline(), None);
}

#[test]
fn permissions_are_answered_by_option_kind_never_by_a_guessed_id() {
    let mut c = ready();
    let mut out = Vec::new();
    c.write("BASH touch x", &mut out).unwrap();
    assert!(feed(&mut c, permission_request(json!(0))).is_empty());
    assert!(feed(&mut c, permission_request(json!("abc"))).is_empty());
    let mut out = Vec::new();
    c.respond("0", &allow(), &mut out).unwrap();
    assert_eq!(
        out,
        [json!({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {
            "outcome": "selected", "optionId": "proceed_once"}}})]
    );
    let mut out = Vec::new();
    c.respond("\"abc\"", &deny(), &mut out).unwrap();
    assert_eq!(out[0]["id"], "abc");
    assert_eq!(out[0]["result"]["outcome"]["optionId"], "cancel");
    // Answered: no longer pending.
    let mut out = Vec::new();
    assert!(c.respond("0", &allow(), &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn no_option_of_the_kind_is_an_error_and_nothing_is_written() {
    let mut c = ready();
    feed(
        &mut c,
        json!({"jsonrpc": "2.0", "id": 7, "method": "session/request_permission", "params": {
            "options": [{"optionId": "always", "kind": "allow_always"},
                        {"optionId": "never", "kind": "reject_always"}]}}),
    );
    let mut out = Vec::new();
    let err = c.respond("7", &allow(), &mut out).unwrap_err();
    assert!(err.to_string().contains("allow_once"), "{err}");
    assert!(out.is_empty());
    c.respond("7", &deny(), &mut out).unwrap();
    assert_eq!(out[0]["result"]["outcome"]["optionId"], "never");
}

#[test]
fn stop_cancels_the_prompt_and_answers_pending_permissions_cancelled() {
    let mut c = ready();
    let mut out = Vec::new();
    assert!(!c.interrupt(&mut out), "no prompt: signals instead");
    assert!(out.is_empty());
    c.write("BASH touch x", &mut out).unwrap();
    c.write("queued", &mut out).unwrap();
    feed(&mut c, permission_request(json!(0)));
    let mut out = Vec::new();
    assert!(c.interrupt(&mut out));
    assert_eq!(
        out,
        [
            json!({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s-1"}}),
            json!({"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}}),
        ]
    );
    // The queued message was dropped with the stop.
    assert!(answered(&mut c, 3, json!({"stopReason": "cancelled"})).is_empty());
}

#[test]
fn requests_we_do_not_offer_are_refused_at_once() {
    let mut c = ready();
    let out = feed(
        &mut c,
        json!({"jsonrpc": "2.0", "id": 5, "method": "fs/read_text_file", "params": {}}),
    );
    assert_eq!(out[0]["id"], 5);
    assert_eq!(out[0]["error"]["code"], -32601);
    assert_eq!(out[0]["jsonrpc"], "2.0");
}

#[tokio::test(start_paused = true)]
async fn a_load_waits_for_the_replay_to_go_quiet_before_the_first_prompt() {
    let mut c = Client::new("gemini", "/w", "s-old", None, "");
    let out = answered(&mut c, INITIALIZE_ID, json!({}));
    assert_eq!(
        out,
        [json!({"jsonrpc": "2.0", "id": 2, "method": "session/load",
            "params": {"sessionId": "s-old", "cwd": "/w", "mcpServers": []}})]
    );
    let mut out = Vec::new();
    c.write("TEXT again", &mut out).unwrap();
    let mut out = Vec::new();
    let t0 = Instant::now();
    c.observe(
        &obj(json!({"jsonrpc": "2.0", "id": 2, "result": {"modes": null}})),
        t0,
        &mut out,
    );
    assert!(out.is_empty(), "the replay may still come: {out:?}");
    assert_eq!(c.wait_deadline(), Some(t0 + REPLAY_QUIET));
    tokio::time::advance(REPLAY_QUIET / 2).await;
    let update = json!({"jsonrpc": "2.0", "method": "session/update", "params": {}});
    let mut out = Vec::new();
    c.observe(&obj(update), Instant::now(), &mut out);
    assert!(!c.wait_over(t0 + REPLAY_QUIET, &mut out), "an update came");
    let deadline = c.wait_deadline().unwrap();
    assert_eq!(deadline, t0 + REPLAY_QUIET / 2 + REPLAY_QUIET);
    assert!(c.wait_over(deadline, &mut out));
    assert_eq!(methods(&out), ["session/prompt"]);
    assert_eq!(out[0]["params"]["sessionId"], "s-old", "the loaded session");
    assert_eq!(c.wait_deadline(), None);
}

#[test]
fn a_replay_that_never_goes_quiet_is_capped() {
    let mut c = Client::new("gemini", "/w", "s-old", None, "");
    answered(&mut c, INITIALIZE_ID, json!({}));
    let t0 = Instant::now();
    let mut out = Vec::new();
    c.observe(&obj(json!({"id": 2, "result": {}})), t0, &mut out);
    for i in 1..100 {
        let update = json!({"method": "session/update", "params": {}});
        c.observe(&obj(update), t0 + REPLAY_QUIET / 3 * i, &mut out);
    }
    assert_eq!(c.wait_deadline(), Some(t0 + REPLAY_CAP));
}

#[test]
fn a_failed_session_refuses_input() {
    let mut c = Client::new("gemini", "/w", "gone", None, "");
    answered(&mut c, INITIALIZE_ID, json!({}));
    let out = feed(
        &mut c,
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "Internal error"}}),
    );
    assert!(out.is_empty());
    let mut out = Vec::new();
    assert!(c.write("TEXT x", &mut out).is_err());
    assert!(out.is_empty());
}

#[test]
fn settings_map_onto_the_listed_modes_and_models_or_are_refused() {
    let mut c = ready();
    let mut out = Vec::new();
    c.set_mode("acceptEdits", &mut out).unwrap();
    c.set_mode("bypassPermissions", &mut out).unwrap();
    c.set_model("gemini-2.5-flash", &mut out).unwrap();
    assert_eq!(
        methods(&out),
        ["session/set_mode", "session/set_mode", "session/set_model"]
    );
    assert_eq!(
        out[0]["params"],
        json!({"sessionId": "s-1", "modeId": "autoEdit"})
    );
    assert_eq!(out[1]["params"]["modeId"], "yolo");
    assert_eq!(
        out[2]["params"],
        json!({"sessionId": "s-1", "modelId": "gemini-2.5-flash"})
    );
    assert!(
        (3..6).all(|i| out[i - 3]["id"] == i as u64),
        "ids count up from 3"
    );
    let mut out = Vec::new();
    assert!(c.set_mode("dontAsk", &mut out).is_err());
    assert!(c.set_model("", &mut out).is_err());
    assert!(out.is_empty());
    // An agent that lists neither.
    let mut bare = Client::new("other", "/w", "", None, "");
    answered(&mut bare, INITIALIZE_ID, json!({}));
    answered(&mut bare, SESSION_ID, json!({"sessionId": "b"}));
    assert!(
        bare.set_mode("plan", &mut out)
            .unwrap_err()
            .contains("lists no")
    );
    assert!(bare.set_model("m", &mut out).is_err());
    // A mode the agent lists none of ours for.
    let mut odd = Client::new("odd", "/w", "", None, "");
    answered(&mut odd, INITIALIZE_ID, json!({}));
    answered(
        &mut odd,
        SESSION_ID,
        json!({"sessionId": "o", "modes": {"availableModes": [{"id": "ask"}]}}),
    );
    let why = odd.set_mode("plan", &mut out).unwrap_err();
    assert!(why.contains("ask"), "{why}");
    assert!(out.is_empty());
}

#[test]
fn the_start_settings_go_right_after_the_session_is_created() {
    let mut c = Client::new(
        "gemini",
        "/w",
        "",
        Some("bypassPermissions".into()),
        "gemini-2.5-flash",
    );
    let mut out = Vec::new();
    c.write("TEXT hi", &mut out).unwrap();
    answered(&mut c, INITIALIZE_ID, json!({}));
    let out = answered(&mut c, SESSION_ID, gemini_session());
    assert_eq!(
        methods(&out),
        ["session/set_mode", "session/set_model", "session/prompt"]
    );
    assert_eq!(out[0]["params"]["modeId"], "yolo");
    assert_eq!(out[1]["params"]["modelId"], "gemini-2.5-flash");
}

#[test]
fn a_run_the_agent_cannot_serve_as_asked_is_refused_before_any_prompt() {
    // codex-acp's modes: none is Gemini's or ours for plan.
    let codex = json!({"sessionId": "c-1",
        "modes": {"currentModeId": "agent", "availableModes": [
            {"id": "read-only"}, {"id": "workspace-write"}, {"id": "agent"},
            {"id": "agent-full-access"}]},
        "models": {"currentModelId": "m[low]", "availableModels": [{"modelId": "m[low]"}]}});
    for (mode, model, says) in [
        (
            Some("plan"),
            "",
            "read-only, workspace-write, agent, agent-full-access",
        ),
        (None, "gpt-unknown", "m[low]"),
    ] {
        let mut c = Client::with_mode("codex-acp", "/w", "", mode.map(Into::into), true, model);
        let mut out = Vec::new();
        c.write("TEXT hi", &mut out).unwrap();
        answered(&mut c, INITIALIZE_ID, json!({}));
        let out = answered(&mut c, SESSION_ID, codex.clone());
        assert_eq!(methods(&out), [REFUSED], "nothing goes to the agent");
        let why = out[0]["params"]["message"].as_str().unwrap();
        assert!(why.contains(says), "{why}");
        assert!(why.contains(mode.unwrap_or(model)), "{why}");
        let mut out = Vec::new();
        let again = c.write("TEXT again", &mut out).unwrap_err();
        assert!(again.to_string().contains(says), "{again}");
        assert!(out.is_empty());
    }
    // The same mode only the operator's default implies: a warning, the
    // agent's own default asks.
    let mut c = Client::with_mode("odd", "/w", "", Some("plan".into()), false, "");
    let mut out = Vec::new();
    c.write("TEXT hi", &mut out).unwrap();
    answered(&mut c, INITIALIZE_ID, json!({}));
    let out = answered(&mut c, SESSION_ID, codex);
    assert_eq!(methods(&out), ["session/prompt"]);
}
