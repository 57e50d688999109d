//! A minimal Agent Client Protocol client (JSON-RPC 2.0, one message per line on stdio) over
//! a [`LinesChild`], and the helpers that read what an ACP agent writes. The client offers
//! no file system and no terminal, so the agent runs its own tools. The scenarios every ACP
//! agent goes through alike are here too.

use super::{LinesChild, streams_closed};
use agent_harness_fake_api::{FakeApi, RecordedRequest};
use serde_json::{Value, json};
use std::time::Duration;

/// One ACP agent process and the client's side of the conversation.
pub struct Acp {
    pub io: LinesChild,
    next_id: u64,
    /// The working directory the agent runs in (sessions are created and loaded there).
    pub cwd: String,
}

impl Acp {
    pub fn new(io: LinesChild, cwd: String) -> Acp {
        Acp {
            io,
            next_id: 1,
            cwd,
        }
    }

    pub async fn send(&mut self, v: Value) {
        self.io.send(v).await
    }

    /// The next line, checked to be JSON-RPC 2.0.
    pub async fn next_within(&mut self, wait: Duration) -> Option<Value> {
        let v = self.io.next_within(wait).await?;
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        Some(v)
    }

    /// Reads until a line matches, returning it and the lines before it.
    pub async fn until(&mut self, what: impl Fn(&Value) -> bool) -> (Value, Vec<Value>) {
        let (v, before) = self.io.until(what).await;
        for l in before.iter().chain([&v]) {
            assert_eq!(l["jsonrpc"], "2.0", "{l}");
        }
        (v, before)
    }

    /// Everything the agent writes until it has been quiet for `quiet`.
    pub async fn drain(&mut self, quiet: Duration) -> Vec<Value> {
        self.io.drain(quiet).await
    }

    /// Sends a request; returns its id.
    pub async fn call(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        id
    }

    /// Sends a notification.
    pub async fn notify(&mut self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}))
            .await;
    }

    /// Sends a request and returns its response (`result` or `error`) and the lines before.
    pub async fn request(&mut self, method: &str, params: Value) -> (Value, Vec<Value>) {
        let id = self.call(method, params).await;
        self.response(id).await
    }

    /// Reads to the response to request `id`.
    pub async fn response(&mut self, id: u64) -> (Value, Vec<Value>) {
        self.until(|v| v["id"] == id && v.get("method").is_none())
            .await
    }

    /// `initialize` with a client that offers no file system and no terminal; returns the
    /// result.
    pub async fn initialize(&mut self) -> Value {
        let (r, _) = self
            .request(
                "initialize",
                json!({"protocolVersion": 1,
                       "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false},
                       "clientInfo": {"name": "agent-harness-test", "version": "0"}}),
            )
            .await;
        r.get("result")
            .unwrap_or_else(|| panic!("initialize: {r}"))
            .clone()
    }

    /// `session/new` in the working directory with no MCP servers; returns the result.
    pub async fn new_session_result(&mut self) -> Value {
        let cwd = self.cwd.clone();
        let (r, _) = self
            .request("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        r.get("result")
            .unwrap_or_else(|| panic!("session/new: {r}"))
            .clone()
    }

    /// `session/new`; returns the session id.
    pub async fn new_session(&mut self) -> String {
        let r = self.new_session_result().await;
        r["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new: {r}"))
            .to_owned()
    }

    /// `initialize` then `session/new`, as every client starts; returns the session id.
    pub async fn open(&mut self) -> String {
        self.initialize().await;
        self.new_session().await
    }

    /// `session/load` of `session` in the working directory; returns the response and the
    /// lines before it.
    pub async fn load(&mut self, session: &str) -> (Value, Vec<Value>) {
        let cwd = self.cwd.clone();
        self.request(
            "session/load",
            json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
        )
        .await
    }

    /// Sends one text prompt; returns the request id (the turn ends at its response).
    pub async fn prompt(&mut self, session: &str, text: &str) -> u64 {
        self.call(
            "session/prompt",
            json!({"sessionId": session, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// One whole turn: the prompt, then everything up to its response.
    pub async fn turn(&mut self, session: &str, text: &str) -> (Value, Vec<Value>) {
        let id = self.prompt(session, text).await;
        self.response(id).await
    }

    /// A `TEXT <text>` turn, which must end `end_turn` with `text` as its answer; returns its
    /// lines.
    pub async fn answered(&mut self, session: &str, text: &str) -> Vec<Value> {
        let (done, lines) = self.turn(session, &format!("TEXT {text}")).await;
        assert_eq!(stop_reason(&done), "end_turn", "{done}");
        assert_eq!(chunks(&lines, "agent_message_chunk"), text);
        lines
    }

    /// `session/cancel`, a notification.
    pub async fn cancel(&mut self, session: &str) {
        self.notify("session/cancel", json!({"sessionId": session}))
            .await
    }

    /// Answers an agent request (`session/request_permission`) with `outcome`.
    pub async fn answer(&mut self, request: &Value, outcome: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": request["id"], "result": {"outcome": outcome}}))
            .await;
    }

    /// Closes stdin and waits for the process to exit.
    pub async fn exit(self) {
        self.io.exit().await
    }
}

/// The `sessionUpdate` kind of a `session/update` notification, else "".
pub fn update(v: &Value) -> &str {
    if v["method"] != "session/update" {
        return "";
    }
    v.pointer("/params/update/sessionUpdate")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// The text of every `kind` chunk in `lines`, joined.
pub fn chunks(lines: &[Value], kind: &str) -> String {
    lines
        .iter()
        .filter(|v| update(v) == kind)
        .filter_map(|v| {
            v.pointer("/params/update/content/text")
                .and_then(Value::as_str)
        })
        .collect()
}

/// The `stopReason` of a `session/prompt` response.
pub fn stop_reason(response: &Value) -> &str {
    response
        .pointer("/result/stopReason")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("not a prompt result: {response}"))
}

/// The outcome choosing the option of a permission request with this `kind` (ids differ
/// between agents).
pub fn option_of_kind(ask: &Value, kind: &str) -> Value {
    let options = ask["params"]["options"].as_array().expect("options");
    let o = options
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} option in {ask}"));
    json!({"outcome": "selected", "optionId": o["optionId"]})
}

/// A second prompt on the same process and session carries the first exchange; `calls` are
/// the model calls of the session's turns.
pub async fn follow_up(mut acp: Acp, calls: impl Fn() -> Vec<RecordedRequest>) {
    let session = acp.open().await;
    let (_, lines) = acp.turn(&session, "TEXT one").await;
    assert_eq!(chunks(&lines, "agent_message_chunk"), "one");
    acp.answered(&session, "two").await;
    let calls = calls();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[1].user_prompts(), ["TEXT one", "TEXT two"]);
    acp.exit().await;
}

/// `session/cancel` mid-answer: the prompt answers `stopReason: cancelled`, the model
/// stream is dropped, and the process takes the next prompt.
pub async fn cancel_mid_answer(mut acp: Acp, api: &FakeApi) {
    let session = acp.open().await;
    let id = acp.prompt(&session, "SLOW 100 100").await;
    for _ in 0..2 {
        acp.until(|v| update(v) == "agent_message_chunk").await;
    }
    acp.cancel(&session).await;
    let (done, _) = acp.response(id).await;
    assert_eq!(stop_reason(&done), "cancelled", "{done}");
    streams_closed(api).await;
    acp.answered(&session, "after the stop").await;
    acp.exit().await;
}
