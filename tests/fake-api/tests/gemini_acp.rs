//! The real `gemini` CLI (pinned and newest) driven directly over `gemini --acp` (the Agent
//! Client Protocol: JSON-RPC 2.0, one message per line on stdio) against the scripted Gemini
//! API: what an ACP adapter can rely on.
//!
//! Each scenario runs against both releases. A missing binary fails the test binary with
//! one line naming `./tests/setup.sh`; nothing is skipped.
//!
//! With `AGENT_HARNESS_RECORD_GEMINI=DIR`, each scenario run with the pinned release writes
//! its transcript to `DIR/<scenario>.jsonl`: one JSON object per line,
//! `{"dir": "in" | "out", "line": <the line as written>}`, in the order the lines were
//! written and read. A scenario with a second process (load, unknown session) writes that
//! one's to `DIR/<scenario>.2.jsonl`. `cassettes/gemini/` holds them (see its README).

mod common;

use agent_harness_fake_api::cli::{gemini_bin, gemini_bin_newest};
use common::acp::{Acp, cancel_mid_answer, chunks, option_of_kind, stop_reason, update};
use common::{Fixture, LinesChild, approved_command_ran, both_releases};
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

/// How long one expected line may take; Gemini CLI starts in a few seconds on a loaded
/// machine, a turn against the fake takes well under one.
const LINE_TIMEOUT: Duration = Duration::from_secs(90);

// One scenario's fixture, whose `HOME` has the settings pointing Gemini at the fake.
common::setup!();

impl Setup {
    fn new(scenario: &'static str, pinned: bool) -> Setup {
        let f = Fixture::new(
            scenario,
            pinned,
            (gemini_bin, gemini_bin_newest),
            "AGENT_HARNESS_RECORD_GEMINI",
        );
        f.api
            .gemini_home(f.home.path())
            .expect("write settings.json");
        Setup(f)
    }

    /// One more `gemini --acp` process.
    fn spawn(&mut self) -> Acp {
        let (mut cmd, rec) = self.0.command();
        cmd.arg("--acp").envs(self.api.gemini_env(self.home.path()));
        let io = LinesChild::spawn("gemini", cmd, rec, LINE_TIMEOUT);
        Acp::new(io, self.cwd_str())
    }
}

both_releases!(
    first_turn,
    follow_up,
    thinking,
    permission_allow,
    permission_reject,
    cancel,
    cancel_pending_permission,
    load,
    unknown_session,
);

/// One text turn: the answer as `agent_message_chunk`s, `stopReason: end_turn`; one model
/// call carrying the prompt, plus Gemini's routing side call.
async fn first_turn(mut s: Setup) {
    let mut gemini = s.spawn();
    let init = gemini.initialize().await;
    assert_eq!(init["protocolVersion"], 1, "{init}");
    assert_eq!(init["agentCapabilities"]["loadSession"], true, "{init}");
    let session = gemini.new_session().await;
    let (done, lines) = gemini.turn(&session, "TEXT hello from gemini").await;
    assert_eq!(stop_reason(&done), "end_turn", "{done}");
    assert_eq!(chunks(&lines, "agent_message_chunk"), "hello from gemini");
    let calls = s.api.gemini_requests();
    assert_eq!(calls.len(), 1, "one model call");
    assert_eq!(calls[0].scenario, "TEXT");
    assert_eq!(calls[0].user_prompts(), ["TEXT hello from gemini"]);
    assert!(
        calls[0].path.ends_with(":streamGenerateContent?alt=sse"),
        "{}",
        calls[0].path
    );
    assert!(
        s.api
            .gemini_side_calls()
            .iter()
            .all(|c| c.scenario == "json_schema"),
        "side calls ask for JSON"
    );
    gemini.exit().await;
}

/// A second prompt on the same process and session carries the first exchange.
async fn follow_up(mut s: Setup) {
    common::acp::follow_up(s.spawn(), || s.api.gemini_requests()).await
}

/// Gemini asks for thoughts, so the fake sends a thought part: an `agent_thought_chunk`
/// before the answer.
async fn thinking(mut s: Setup) {
    let mut gemini = s.spawn();
    let session = gemini.open().await;
    let (done, lines) = gemini.turn(&session, "THINK pondered").await;
    assert_eq!(stop_reason(&done), "end_turn");
    let thought = chunks(&lines, "agent_thought_chunk");
    assert!(thought.contains("I will answer: pondered"), "{lines:#?}");
    assert_eq!(chunks(&lines, "agent_message_chunk"), "pondered");
    gemini.exit().await;
}

/// `BASH <cmd>`: Gemini asks (`session/request_permission`); returns the request.
async fn ask_for_shell(gemini: &mut Acp, session: &str, cmd: &str) -> (u64, Value) {
    let id = gemini.prompt(session, &format!("BASH {cmd}")).await;
    let (ask, _) = gemini
        .until(|v| v["method"] == "session/request_permission")
        .await;
    assert!(ask["id"].is_number(), "{ask}");
    let call = &ask["params"]["toolCall"];
    assert!(call["title"].as_str().unwrap().contains(cmd), "{ask}");
    assert_eq!(call["kind"], "execute", "{ask}");
    (id, ask)
}

/// A shell command Gemini asks about, allowed once (by option kind): it runs and its output
/// reaches the model.
async fn permission_allow(mut s: Setup) {
    let mut gemini = s.spawn();
    let session = gemini.open().await;
    let (id, ask) =
        ask_for_shell(&mut gemini, &session, "touch approved.txt && echo made-it").await;
    gemini
        .answer(&ask, option_of_kind(&ask, "allow_once"))
        .await;
    let (done, lines) = gemini.response(id).await;
    assert_eq!(stop_reason(&done), "end_turn", "{done}");
    let tool_call_id = &ask["params"]["toolCall"]["toolCallId"];
    assert!(
        lines.iter().any(|v| update(v) == "tool_call_update"
            && v["params"]["update"]["toolCallId"] == *tool_call_id
            && v["params"]["update"]["status"] == "completed"),
        "{lines:#?}"
    );
    let text = chunks(&lines, "agent_message_chunk");
    approved_command_ran(s.cwd.path(), &text, &s.api.gemini_requests(), "BASH");
    gemini.exit().await;
}

/// A shell command Gemini asks about, rejected (by option kind): it never runs, no update
/// reports the tool again, and the model is told the user cancelled it; the turn goes on
/// and ends normally.
async fn permission_reject(mut s: Setup) {
    let mut gemini = s.spawn();
    let session = gemini.open().await;
    let (id, ask) = ask_for_shell(&mut gemini, &session, "touch rejected.txt").await;
    gemini
        .answer(&ask, option_of_kind(&ask, "reject_once"))
        .await;
    let (done, lines) = gemini.response(id).await;
    assert_eq!(stop_reason(&done), "end_turn", "{done}");
    assert!(!s.cwd.path().join("rejected.txt").exists());
    assert!(
        !lines.iter().any(|v| update(v).starts_with("tool_call")),
        "{lines:#?}"
    );
    let text = chunks(&lines, "agent_message_chunk");
    assert!(
        text.starts_with("Tool step finished.") && text.contains("canceled by the user"),
        "{text}"
    );
    let calls = s.api.gemini_requests();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].scenario, "BASH+tool_result");
    gemini.answered(&session, "next").await;
    gemini.exit().await;
}

/// `session/cancel` mid-answer: the prompt answers `stopReason: cancelled`, the stream to
/// the model is dropped, and the process takes the next prompt.
async fn cancel(mut s: Setup) {
    cancel_mid_answer(s.spawn(), &s.api).await
}

/// `session/cancel` while a permission request is pending: Gemini does not end the turn
/// until the client answers that request `cancelled`; then the prompt answers `cancelled`
/// and the command never runs.
async fn cancel_pending_permission(mut s: Setup) {
    let mut gemini = s.spawn();
    let session = gemini.open().await;
    let (id, ask) = ask_for_shell(&mut gemini, &session, "touch never.txt").await;
    gemini.cancel(&session).await;
    let early = gemini.drain(Duration::from_secs(2)).await;
    assert!(
        !early.iter().any(|v| v["id"] == id),
        "the turn ended with the permission unanswered: {early:#?}"
    );
    gemini.answer(&ask, json!({"outcome": "cancelled"})).await;
    let (done, _) = gemini.response(id).await;
    assert_eq!(stop_reason(&done), "cancelled", "{done}");
    assert!(!s.cwd.path().join("never.txt").exists());
    let (_, lines) = gemini.turn(&session, "TEXT next").await;
    assert_eq!(chunks(&lines, "agent_message_chunk"), "next");
    gemini.exit().await;
}

/// A first turn in one process; `session/load` in a new one restores the session (Gemini
/// replays its history as updates), and the model receives the earlier messages.
async fn load(mut s: Setup) {
    let mut first = s.spawn();
    let session = first.open().await;
    first.turn(&session, "TEXT remember me").await;
    first.exit().await;
    backdate(s.home.path(), &session);

    let mut second = s.spawn();
    second.initialize().await;
    let (r, replayed) = second.load(&session).await;
    assert!(r.get("result").is_some(), "session/load: {r}");
    // The replay may go on after the response: read what comes within a moment.
    let after = second.drain(Duration::from_millis(500)).await;
    let all: Vec<Value> = replayed.iter().chain(&after).cloned().collect();
    // Gemini replays its own context block too, as a user message.
    assert!(
        chunks(&all, "user_message_chunk").starts_with("<session_context>"),
        "{all:#?}"
    );
    assert!(
        chunks(&all, "user_message_chunk").contains("TEXT remember me"),
        "{all:#?}"
    );
    assert!(
        chunks(&all, "agent_message_chunk").contains("remember me"),
        "{all:#?}"
    );
    second.answered(&session, "again").await;
    let calls = s.api.gemini_requests();
    let last = calls.last().unwrap();
    assert_eq!(last.user_prompts(), ["TEXT remember me", "TEXT again"]);
    let contents = last.body.as_ref().unwrap()["contents"].to_string();
    assert!(
        contents.contains("\"role\":\"model\""),
        "the earlier answer is sent too: {contents}"
    );
    second.exit().await;
}

/// Renames the session's file under `$HOME/.gemini/tmp/<project>/chats/` as if it had
/// been written a while ago. Gemini names the file `session-<start minute>-<first 8 of the
/// id>.jsonl`, and a process that loads the session starts its own record under the same
/// name: in the same minute it appends to the very file it is about to read and replaces
/// the messages with its fresh context, so the load finds no conversation ("No previous
/// sessions found for this project.") and the session is lost. A real respawn comes later
/// than a test's; this makes the test see what a respawn a minute on sees.
fn backdate(home: &Path, session: &str) {
    let tmp = home.join(".gemini/tmp");
    let short = &session[..8];
    for project in std::fs::read_dir(&tmp).expect("~/.gemini/tmp").flatten() {
        let chats = project.path().join("chats");
        for f in std::fs::read_dir(&chats).into_iter().flatten().flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.starts_with("session-") && name.ends_with(&format!("-{short}.jsonl")) {
                let old = chats.join(format!("session-2000-01-01T00-00-{short}.jsonl"));
                std::fs::rename(f.path(), old).expect("backdate the session file");
                return;
            }
        }
    }
    panic!("no session file for {session} under {}", tmp.display());
}

/// `session/load` of an id Gemini never saw, in a project that has a session: an error
/// (JSON-RPC `-32603`, the reason in `data.details`) the adapter maps to a lost
/// conversation. A project with no session at all answers the same way, with
/// "No previous sessions found for this project.".
async fn unknown_session(mut s: Setup) {
    let mut first = s.spawn();
    let session = first.open().await;
    first.turn(&session, "TEXT kept").await;
    first.exit().await;
    backdate(s.home.path(), &session);

    let mut gemini = s.spawn();
    gemini.initialize().await;
    let unknown = "00000000-0000-4000-8000-000000000000";
    let (r, _) = gemini.load(unknown).await;
    let error = r
        .get("error")
        .unwrap_or_else(|| panic!("session/load of an unknown id answered {r}"));
    assert_eq!(error["code"], -32603, "{r}");
    let details = error["data"]["details"].as_str().unwrap_or_default();
    assert!(details.contains(unknown), "{r}");
    let calls = s.api.gemini_requests().len();
    assert_eq!(calls, 1, "no model call for the failed load");
    gemini.exit().await;
}
