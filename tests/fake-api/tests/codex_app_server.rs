//! The real `codex` CLI (pinned and newest) driven directly over `codex app-server --listen
//! stdio://` against the scripted Responses API: what the Codex adapter can rely on.
//!
//! Each scenario runs against both releases. A missing binary fails the test binary with
//! one line naming `./tests/setup.sh`; nothing is skipped.
//!
//! With `AGENT_HARNESS_RECORD_CODEX=DIR`, each scenario run with the pinned release writes
//! its transcript to `DIR/<scenario>.jsonl`: one JSON object per line,
//! `{"dir": "in" | "out", "line": <the line as written>}`, in the order the lines were
//! written and read. A scenario with a second process (resume, lost rollout) writes that
//! one's to `DIR/<scenario>.2.jsonl`: one file per process, as a decoder sees one process.
//! `cassettes/codex/` holds them (see its README).

mod common;

use agent_harness_fake_api::cli::{codex_bin, codex_bin_newest};
use common::{Fixture, LinesChild, approved_command_ran, both_releases, responses_carry_history};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long one expected line may take; a turn against the fake takes well under a second.
const LINE_TIMEOUT: Duration = Duration::from_secs(60);

// One scenario's fixture, whose `HOME` is also the `CODEX_HOME` pointing Codex at the
// fake.
common::setup!();

impl Setup {
    fn new(scenario: &'static str, pinned: bool) -> Setup {
        let f = Fixture::new(
            scenario,
            pinned,
            (codex_bin, codex_bin_newest),
            "AGENT_HARNESS_RECORD_CODEX",
        );
        f.api.codex_home(f.home.path()).expect("write config.toml");
        Setup(f)
    }

    fn spawn(&mut self) -> Codex {
        let (mut cmd, rec) = self.0.command();
        cmd.args(["app-server", "--listen", "stdio://"])
            .env("RUST_LOG", "error")
            .envs(self.api.codex_env(self.home.path()));
        Codex {
            io: LinesChild::spawn("codex", cmd, rec, LINE_TIMEOUT),
            next_id: 1,
            cwd: self.cwd_str(),
        }
    }
}

/// One `codex app-server` process speaking JSON lines on stdio.
struct Codex {
    io: LinesChild,
    next_id: u64,
    cwd: String,
}

impl Codex {
    async fn send(&mut self, v: Value) {
        self.io.send(v).await
    }

    /// Reads until a line matches, returning it and the lines before it.
    async fn until(&mut self, what: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        self.io.until(what).await
    }

    /// Sends a request and returns its response (`result` or `error`).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"id": id, "method": method, "params": params}))
            .await;
        let (resp, _) = self
            .until(|v| v["id"] == id && v.get("method").is_none())
            .await;
        resp
    }

    /// `initialize`, then the `initialized` notification.
    async fn initialize(&mut self) {
        let r = self
            .request(
                "initialize",
                json!({"clientInfo": {"name": "agent-harness-test", "version": "0"}}),
            )
            .await;
        assert!(r.get("result").is_some(), "initialize: {r}");
        self.send(json!({"method": "initialized"})).await;
    }

    /// A new thread asking before any command that is not known safe; returns the thread.
    async fn start_thread(&mut self) -> Value {
        let r = self
            .request(
                "thread/start",
                json!({"cwd": self.cwd, "approvalPolicy": "untrusted", "sandbox": "danger-full-access"}),
            )
            .await;
        r.pointer("/result/thread")
            .unwrap_or_else(|| panic!("thread/start: {r}"))
            .clone()
    }

    /// Starts a turn with one text input; returns the turn id.
    async fn start_turn(&mut self, thread: &str, text: &str) -> String {
        let r = self
            .request(
                "turn/start",
                json!({"threadId": thread, "input": [{"type": "text", "text": text, "text_elements": []}]}),
            )
            .await;
        r.pointer("/result/turn/id")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("turn/start: {r}"))
            .to_owned()
    }

    /// Reads to `turn/completed`; returns it and the lines before it.
    async fn turn_completed(&mut self) -> (Value, Vec<Value>) {
        self.until(|v| v["method"] == "turn/completed").await
    }

    /// Closes stdin and waits for the process to exit, as a client that goes away does.
    async fn exit(self) {
        self.io.exit().await
    }
}

fn method(v: &Value) -> &str {
    v["method"].as_str().unwrap_or("")
}

/// The `item/completed` items of `lines` of one type.
fn completed_items<'a>(lines: &'a [Value], kind: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|v| method(v) == "item/completed" && v["params"]["item"]["type"] == kind)
        .map(|v| &v["params"]["item"])
        .collect()
}

/// The text of the turn's final agent message.
fn answer(lines: &[Value]) -> String {
    completed_items(lines, "agentMessage")
        .last()
        .and_then(|i| i["text"].as_str())
        .unwrap_or_else(|| panic!("no agentMessage completed in {lines:#?}"))
        .to_owned()
}

both_releases!(
    first_turn,
    follow_up,
    approval_accepted,
    approval_declined,
    interrupt,
    resume,
    lost_rollout,
    thinking,
    api_error,
    interrupt_pending_approval,
    interrupt_running_command,
    command_output,
);

/// One text turn: deltas, the completed message, usage, `turn/completed`.
async fn first_turn(mut s: Setup) {
    let mut codex = s.spawn();
    codex.initialize().await;
    let thread = codex.start_thread().await;
    let thread_id = thread["id"].as_str().unwrap().to_owned();
    codex.start_turn(&thread_id, "TEXT hello from codex").await;
    let (done, lines) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    assert_eq!(answer(&lines), "hello from codex");
    assert!(
        lines.iter().any(|v| method(v) == "item/agentMessage/delta"),
        "live typing: {lines:#?}"
    );
    let usage = lines
        .iter()
        .rfind(|v| method(v) == "thread/tokenUsage/updated")
        .expect("token usage before turn/completed");
    assert!(
        usage
            .pointer("/params/tokenUsage/last/inputTokens")
            .and_then(Value::as_u64)
            .unwrap()
            > 0
    );
    let calls = s.api.responses_requests();
    assert_eq!(calls.len(), 1, "one model call");
    assert_eq!(calls[0].scenario, "TEXT");
    assert_eq!(calls[0].user_prompts(), ["TEXT hello from codex"]);
    codex.exit().await;
}

/// A second turn on the same process and thread carries the first one.
async fn follow_up(mut s: Setup) {
    let mut codex = s.spawn();
    codex.initialize().await;
    let thread = codex.start_thread().await;
    let id = thread["id"].as_str().unwrap().to_owned();
    codex.start_turn(&id, "TEXT one").await;
    let (_, lines) = codex.turn_completed().await;
    assert_eq!(answer(&lines), "one");
    codex.start_turn(&id, "TEXT two").await;
    let (done, lines) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert_eq!(answer(&lines), "two");
    let calls = s.api.responses_requests();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].user_prompts(), ["TEXT one", "TEXT two"]);
    codex.exit().await;
}

/// Runs `BASH <cmd>` under approval policy `untrusted`: Codex asks, the test answers
/// `decision`; returns the approval request and the turn's lines.
async fn shell_with_approval(codex: &mut Codex, cmd: &str, decision: &str) -> (Value, Vec<Value>) {
    codex.initialize().await;
    let thread = codex.start_thread().await;
    let id = thread["id"].as_str().unwrap().to_owned();
    codex.start_turn(&id, &format!("BASH {cmd}")).await;
    let (ask, _) = codex
        .until(|v| method(v) == "item/commandExecution/requestApproval")
        .await;
    assert!(
        ask["id"].is_number(),
        "approval requests carry an id: {ask}"
    );
    assert!(
        ask["params"]["command"].as_str().unwrap().contains(cmd),
        "{ask}"
    );
    codex
        .send(json!({"id": ask["id"], "result": {"decision": decision}}))
        .await;
    let (done, lines) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    assert!(
        lines.iter().any(|v| method(v) == "serverRequest/resolved"
            && v["params"]["requestId"] == ask["id"]),
        "the approval is resolved: {lines:#?}"
    );
    (ask, lines)
}

/// A shell command Codex asks about, approved: it runs, its output reaches the model.
async fn approval_accepted(mut s: Setup) {
    let mut codex = s.spawn();
    let (ask, lines) =
        shell_with_approval(&mut codex, "touch approved.txt && echo made-it", "accept").await;
    let cmd = completed_items(&lines, "commandExecution");
    assert_eq!(cmd.len(), 1, "{lines:#?}");
    assert_eq!(cmd[0]["id"], ask["params"]["itemId"]);
    assert_eq!(cmd[0]["status"], "completed");
    assert_eq!(cmd[0]["exitCode"], 0);
    assert!(
        cmd[0]["aggregatedOutput"]
            .as_str()
            .unwrap()
            .contains("made-it")
    );
    approved_command_ran(
        s.cwd.path(),
        &answer(&lines),
        &s.api.responses_requests(),
        "BASH",
    );
    codex.exit().await;
}

/// A command that prints a line at a time, approved: its output streams as
/// `item/commandExecution/outputDelta` (`itemId` = the item's id) between
/// the approval's resolution and the item's completion. Only what it prints
/// after its first moments streams (Codex waits that long for a command to
/// finish before it treats it as running; here `line1` comes only in the
/// completed item's `aggregatedOutput`), so the deltas join to the end of
/// the output, not to all of it.
async fn command_output(mut s: Setup) {
    let mut codex = s.spawn();
    let (ask, lines) = shell_with_approval(
        &mut codex,
        "for i in 1 2 3; do echo line$i; sleep 0.3; done",
        "accept",
    )
    .await;
    let item = ask["params"]["itemId"].as_str().unwrap();
    let deltas: Vec<&Value> = lines
        .iter()
        .filter(|v| method(v) == "item/commandExecution/outputDelta")
        .collect();
    assert!(
        deltas.iter().all(|v| v["params"]["itemId"] == item),
        "{deltas:#?}"
    );
    let streamed: String = deltas
        .iter()
        .map(|v| v["params"]["delta"].as_str().unwrap())
        .collect();
    let cmd = completed_items(&lines, "commandExecution");
    assert_eq!(cmd.len(), 1, "{lines:#?}");
    let output = cmd[0]["aggregatedOutput"].as_str().unwrap();
    assert_eq!(output, "line1\nline2\nline3\n");
    let completed_at = lines
        .iter()
        .position(|v| method(v) == "item/completed" && v["params"]["item"]["id"] == item)
        .unwrap();
    let last_delta = lines
        .iter()
        .rposition(|v| method(v) == "item/commandExecution/outputDelta");
    assert!(last_delta.is_some_and(|d| d < completed_at), "{lines:#?}");
    assert!(
        streamed.contains("line3") && output.ends_with(&streamed),
        "the deltas are the output's end: {streamed:?}"
    );
    codex.exit().await;
}

/// A shell command Codex asks about, declined: it never runs; the model hears so.
async fn approval_declined(mut s: Setup) {
    let mut codex = s.spawn();
    let (ask, lines) = shell_with_approval(&mut codex, "touch declined.txt", "decline").await;
    let cmd = completed_items(&lines, "commandExecution");
    assert_eq!(cmd.len(), 1, "{lines:#?}");
    assert_eq!(cmd[0]["id"], ask["params"]["itemId"]);
    assert_eq!(cmd[0]["status"], "declined");
    assert!(!s.cwd.path().join("declined.txt").exists());
    assert!(answer(&lines).starts_with("Tool step finished."));
    let calls = s.api.responses_requests();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].scenario, "BASH+tool_result");
    codex.exit().await;
}

/// `turn/interrupt` mid-answer: `{}`, then `turn/completed{interrupted}`; the stream to the
/// model is dropped and the process takes the next turn.
async fn interrupt(mut s: Setup) {
    let mut codex = s.spawn();
    codex.initialize().await;
    let thread = codex.start_thread().await;
    let id = thread["id"].as_str().unwrap().to_owned();
    let turn = codex.start_turn(&id, "SLOW 100 100").await;
    for _ in 0..2 {
        codex
            .until(|v| method(v) == "item/agentMessage/delta")
            .await;
    }
    let r = codex
        .request("turn/interrupt", json!({"threadId": id, "turnId": turn}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    let (done, _) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "interrupted", "{done}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while s.api.active_streams() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the model stream stays open"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    codex.start_turn(&id, "TEXT after the stop").await;
    let (done, lines) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert_eq!(answer(&lines), "after the stop");
    codex.exit().await;
}

/// A first turn in one process; `thread/resume` in a new one continues the thread, and the
/// model receives the earlier messages.
async fn resume(mut s: Setup) {
    let mut first = s.spawn();
    first.initialize().await;
    let thread = first.start_thread().await;
    let id = thread["id"].as_str().unwrap().to_owned();
    first.start_turn(&id, "TEXT remember me").await;
    first.turn_completed().await;
    first.exit().await;

    let mut second = s.spawn();
    second.initialize().await;
    let r = second
        .request("thread/resume", json!({"threadId": id}))
        .await;
    assert_eq!(r.pointer("/result/thread/id"), Some(&json!(id)), "{r}");
    second.start_turn(&id, "TEXT again").await;
    let (done, lines) = second.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert_eq!(answer(&lines), "again");
    responses_carry_history(&s.api.responses_requests());
    second.exit().await;
}

/// The rollout file deleted between processes: `thread/resume` answers the error the
/// adapter maps to a lost conversation.
async fn lost_rollout(mut s: Setup) {
    let mut first = s.spawn();
    first.initialize().await;
    let thread = first.start_thread().await;
    let id = thread["id"].as_str().unwrap().to_owned();
    first.start_turn(&id, "TEXT soon forgotten").await;
    first.turn_completed().await;
    first.exit().await;
    let rollout = rollout_of(s.home.path(), &id);
    std::fs::remove_file(&rollout).expect("delete the rollout");

    let mut second = s.spawn();
    second.initialize().await;
    let r = second
        .request("thread/resume", json!({"threadId": id}))
        .await;
    let message = r
        .pointer("/error/message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("thread/resume of a lost rollout answered {r}"));
    assert!(
        message.contains(&format!("no rollout found for thread id {id}")),
        "{r}"
    );
    assert_eq!(r["error"]["code"], -32600);
    second.exit().await;
}

/// A reasoning summary before the answer: a `reasoning` item, then the agentMessage.
async fn thinking(mut s: Setup) {
    let mut codex = s.spawn();
    codex.initialize().await;
    let thread = codex.start_thread().await;
    let id = thread["id"].as_str().unwrap().to_owned();
    codex.start_turn(&id, "THINK pondered").await;
    let (done, lines) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "completed", "{done}");
    let reasoning = completed_items(&lines, "reasoning");
    assert_eq!(reasoning.len(), 1, "{lines:#?}");
    assert!(
        reasoning[0].to_string().contains("I will answer: pondered"),
        "{}",
        reasoning[0]
    );
    assert_eq!(answer(&lines), "pondered");
    codex.exit().await;
}

/// The model call fails (HTTP 500, no retries): an `error` notification and
/// `turn/completed{failed}`; the process takes the next turn.
async fn api_error(mut s: Setup) {
    let mut codex = s.spawn();
    codex.initialize().await;
    let thread = codex.start_thread().await;
    let id = thread["id"].as_str().unwrap().to_owned();
    codex.start_turn(&id, "ERROR 500").await;
    let (done, lines) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "failed", "{done}");
    assert!(
        lines.iter().any(|v| method(v) == "error"),
        "an error notification: {lines:#?}"
    );
    codex.start_turn(&id, "TEXT recovered").await;
    let (done, lines) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "completed");
    assert_eq!(answer(&lines), "recovered");
    codex.exit().await;
}

/// `turn/interrupt` while Codex waits for an approval: the turn ends `interrupted`, and the
/// pending request is resolved (`serverRequest/resolved`), possibly after `turn/completed`.
async fn interrupt_pending_approval(mut s: Setup) {
    let mut codex = s.spawn();
    codex.initialize().await;
    let thread = codex.start_thread().await;
    let id = thread["id"].as_str().unwrap().to_owned();
    let turn = codex.start_turn(&id, "BASH touch never.txt").await;
    let (ask, _) = codex
        .until(|v| method(v) == "item/commandExecution/requestApproval")
        .await;
    let r = codex
        .request("turn/interrupt", json!({"threadId": id, "turnId": turn}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    let (done, mut lines) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "interrupted", "{done}");
    let resolved =
        |v: &Value| method(v) == "serverRequest/resolved" && v["params"]["requestId"] == ask["id"];
    if !lines.iter().any(resolved) {
        let (_, more) = codex.until(resolved).await;
        lines.extend(more);
    }
    assert!(completed_items(&lines, "commandExecution").is_empty());
    assert!(!s.cwd.path().join("never.txt").exists());
    codex.start_turn(&id, "TEXT next").await;
    let (_, lines) = codex.turn_completed().await;
    assert_eq!(answer(&lines), "next");
    codex.exit().await;
}

/// `turn/interrupt` while an approved command runs: the turn ends `interrupted` and the
/// commandExecution that started is never completed.
async fn interrupt_running_command(mut s: Setup) {
    let mut codex = s.spawn();
    codex.initialize().await;
    let thread = codex.start_thread().await;
    let id = thread["id"].as_str().unwrap().to_owned();
    let turn = codex.start_turn(&id, "BASH sleep 30 && echo late").await;
    let (ask, _) = codex
        .until(|v| method(v) == "item/commandExecution/requestApproval")
        .await;
    codex
        .send(json!({"id": ask["id"], "result": {"decision": "accept"}}))
        .await;
    codex.until(|v| method(v) == "serverRequest/resolved").await;
    // Give the command a moment to start.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let started = std::time::Instant::now();
    let r = codex
        .request("turn/interrupt", json!({"threadId": id, "turnId": turn}))
        .await;
    assert_eq!(r["result"], json!({}), "{r}");
    let (done, lines) = codex.turn_completed().await;
    assert_eq!(done["params"]["turn"]["status"], "interrupted", "{done}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the stop waited for the command"
    );
    let cmd = completed_items(&lines, "commandExecution");
    assert!(
        cmd.iter()
            .all(|c| c["id"] != ask["params"]["itemId"] || c["status"] != "completed"),
        "{cmd:#?}"
    );
    codex.start_turn(&id, "TEXT next").await;
    let (_, lines) = codex.turn_completed().await;
    assert_eq!(answer(&lines), "next");
    codex.exit().await;
}

/// `$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<ts>-<thread>.jsonl`.
fn rollout_of(home: &Path, thread: &str) -> PathBuf {
    fn walk(dir: &Path, thread: &str) -> Option<PathBuf> {
        for e in std::fs::read_dir(dir).ok()?.flatten() {
            let p = e.path();
            if p.is_dir() {
                if let Some(f) = walk(&p, thread) {
                    return Some(f);
                }
            } else if p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                n.starts_with("rollout-") && n.ends_with(&format!("{thread}.jsonl"))
            }) {
                return Some(p);
            }
        }
        None
    }
    walk(&home.join("sessions"), thread)
        .unwrap_or_else(|| panic!("no rollout for {thread} under {}", home.display()))
}
