//! The wire format without the CLI: SSE framing, non-streaming JSON, the other endpoints,
//! shutdown on drop, and the `fake-messages-api` binary.

use agent_harness_fake_api::FakeApi;
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A minimal HTTP/1.1 exchange: returns the status and the de-chunked body.
fn http(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, rest) = raw.split_once("\r\n\r\n").unwrap();
    let status = head[9..12].parse().unwrap();
    let chunked = head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked");
    (
        status,
        if chunked {
            dechunk(rest)
        } else {
            rest.to_owned()
        },
    )
}

fn dechunk(mut s: &str) -> String {
    let mut out = String::new();
    loop {
        let (size, rest) = s.split_once("\r\n").unwrap();
        let n = usize::from_str_radix(size.trim(), 16).unwrap();
        if n == 0 {
            return out;
        }
        out.push_str(&rest[..n]);
        s = &rest[n + 2..];
    }
}

fn request(content: &str, stream: bool) -> Value {
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 1000,
        "stream": stream,
        "system": [{"type": "text", "text": "You are a test.\n - Primary working directory: /tmp/x"}],
        "messages": [{"role": "user", "content": content}],
    })
}

/// Splits an SSE body into (event name, data) pairs, checking the framing on the way.
fn events(body: &str) -> Vec<(String, Value)> {
    assert!(body.ends_with("\n\n"), "every event ends with a blank line");
    body.trim_end()
        .split("\n\n")
        .map(|ev| {
            let (name, data) = ev.split_once('\n').expect("two lines an event");
            let name = name.strip_prefix("event: ").expect("event line").to_owned();
            let data: Value =
                serde_json::from_str(data.strip_prefix("data: ").expect("data line")).unwrap();
            assert_eq!(data["type"], name.as_str(), "event name matches data.type");
            (name, data)
        })
        .collect()
}

#[tokio::test]
async fn streams_a_tool_call_in_the_real_event_order() {
    let api = FakeApi::start().await;
    let (status, body) = http(
        api.addr(),
        "POST",
        "/v1/messages?beta=true",
        Some(&request("BASH echo hi", true)),
    );
    assert_eq!(status, 200);
    let evs = events(&body);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "message_start",
            "content_block_start",
            "ping",
            "content_block_delta",
            "content_block_delta",
            "content_block_delta",
            "content_block_stop",
            "message_delta",
            "message_stop"
        ]
    );
    let start = &evs[0].1["message"];
    assert_eq!(start["model"], "claude-sonnet-4-5");
    assert!(start["id"].as_str().unwrap().starts_with("msg_"));
    assert_eq!(start["usage"]["output_tokens"], 1);
    assert_eq!(evs[1].1["content_block"]["type"], "tool_use");
    assert_eq!(evs[1].1["content_block"]["name"], "Bash");
    let json: String = evs[3..6]
        .iter()
        .map(|(_, d)| d["delta"]["partial_json"].as_str().unwrap())
        .collect();
    assert_eq!(
        serde_json::from_str::<Value>(&json).unwrap(),
        json!({"command": "echo hi", "description": "Run command"})
    );
    let delta = &evs[7].1;
    assert_eq!(delta["delta"]["stop_reason"], "tool_use");
    assert!(delta["usage"]["output_tokens"].as_u64().unwrap() > 1);
}

#[tokio::test]
async fn non_streaming_gets_one_json_message() {
    let api = FakeApi::start().await;
    let (status, body) = http(
        api.addr(),
        "POST",
        "/v1/messages",
        Some(&request("THINK yes", false)),
    );
    assert_eq!(status, 200);
    let msg: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(msg["type"], "message");
    assert_eq!(msg["stop_reason"], "end_turn");
    assert_eq!(msg["content"][0]["type"], "thinking");
    assert_eq!(msg["content"][1], json!({"type": "text", "text": "yes"}));
    assert!(
        msg["usage"]["cache_creation_input_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[tokio::test]
async fn errors_use_the_api_error_body() {
    let api = FakeApi::start().await;
    let (status, body) = http(
        api.addr(),
        "POST",
        "/v1/messages",
        Some(&request("ERROR 529", true)),
    );
    assert_eq!(status, 529);
    let err: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(err["type"], "error");
    assert_eq!(err["error"]["type"], "overloaded_error");
    assert_eq!(err["error"]["message"], "fake 529");
}

#[tokio::test]
async fn other_endpoints_answer_harmlessly_and_are_logged() {
    let api = FakeApi::start().await;
    let (s, body) = http(
        api.addr(),
        "POST",
        "/v1/messages/count_tokens",
        Some(&request("TEXT x", false)),
    );
    assert_eq!(s, 200);
    assert!(
        serde_json::from_str::<Value>(&body).unwrap()["input_tokens"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        http(api.addr(), "GET", "/api/oauth/whatever", None),
        (200, "{}".into())
    );
    assert_eq!(http(api.addr(), "HEAD", "/", None).0, 200);
    assert_eq!(http(api.addr(), "GET", "/v1/models", None).0, 200);
    let paths: Vec<String> = api.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/v1/messages/count_tokens",
            "/api/oauth/whatever",
            "/",
            "/v1/models"
        ]
    );
    assert!(api.message_requests().is_empty());
}

#[tokio::test]
async fn drop_closes_the_port_and_open_streams() {
    let api = FakeApi::start().await;
    let addr = api.addr();
    let mut s = TcpStream::connect(addr).unwrap();
    let body = request("HANG", true).to_string();
    write!(
        s,
        "POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut first = [0u8; 64];
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let n = s.read(&mut first).unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while api.active_streams() != 1 {
        assert!(std::time::Instant::now() < deadline, "HANG stream not open");
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(api);
    // The hanging response ends (EOF) instead of blocking forever...
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    // ...and nothing listens any more.
    assert!(TcpStream::connect(addr).is_err());
}

fn spawn_binary(args: &[&str]) -> (std::process::Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-messages-api"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("listening http://")
        .unwrap_or_else(|| panic!("first line: {line:?}"));
    (child, url.parse().unwrap())
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "binary did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn binary_prints_its_url_and_exits_on_sigterm() {
    let (mut child, addr) = spawn_binary(&["--port", "0"]);
    assert!(addr.ip().is_loopback());
    let (status, body) = http(
        addr,
        "POST",
        "/v1/messages",
        Some(&request("TEXT hi", false)),
    );
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["content"][0]["text"],
        "hi"
    );
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(wait_exit(&mut child).success());
}

#[test]
fn binary_exits_on_stdin_eof_when_asked() {
    let (mut child, addr) = spawn_binary(&["--port", "0", "--exit-on-stdin-eof"]);
    assert_eq!(http(addr, "HEAD", "/", None).0, 200);
    drop(child.stdin.take());
    assert!(wait_exit(&mut child).success());
}

fn responses_request(input: Value, stream: bool) -> Value {
    json!({"model": "gpt-fake", "instructions": "", "stream": stream, "tools": [], "input": input})
}

fn user_item(text: &str) -> Value {
    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
}

#[tokio::test]
async fn responses_streams_a_shell_call_then_answers_its_output() {
    let api = FakeApi::start().await;
    let (status, body) = http(
        api.addr(),
        "POST",
        "/v1/responses",
        Some(&responses_request(json!([user_item("BASH echo hi")]), true)),
    );
    assert_eq!(status, 200);
    let evs = events(&body);
    let names: Vec<&str> = evs.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "response.created",
            "response.output_item.added",
            "response.function_call_arguments.delta",
            "response.function_call_arguments.delta",
            "response.output_item.done",
            "response.completed"
        ]
    );
    let call = &evs[4].1["item"];
    assert_eq!(call["type"], "function_call");
    assert_eq!(call["name"], "exec_command");
    assert_eq!(call["arguments"], r#"{"cmd":"echo hi"}"#);
    let completed = &evs[5].1["response"];
    assert_eq!(completed["output"][0], *call);
    assert!(completed["usage"]["input_tokens"].as_u64().unwrap() > 0);
    let seq: Vec<u64> = evs
        .iter()
        .map(|(_, d)| d["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(seq, (0..6).collect::<Vec<_>>());

    // The tool's output comes back as function_call_output: the fake answers with text.
    let input = json!([
        user_item("BASH echo hi"),
        {"type": "function_call", "name": "exec_command", "arguments": call["arguments"], "call_id": call["call_id"]},
        {"type": "function_call_output", "call_id": call["call_id"], "output": "hi\n"},
    ]);
    let (_, body) = http(
        api.addr(),
        "POST",
        "/v1/responses",
        Some(&responses_request(input, true)),
    );
    let evs = events(&body);
    let texts: String = evs
        .iter()
        .filter(|(n, _)| n == "response.output_text.delta")
        .map(|(_, d)| d["delta"].as_str().unwrap())
        .collect();
    assert_eq!(texts, "Tool step finished.\nhi\n");
    let done = &evs[evs.len() - 2].1["item"];
    assert_eq!(done["type"], "message");
    assert_eq!(done["content"][0]["text"], texts.as_str());

    let recorded = api.responses_requests();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].scenario, "BASH");
    assert_eq!(recorded[1].scenario, "BASH+tool_result");
    assert_eq!(recorded[1].user_prompts(), ["BASH echo hi"]);
    assert!(api.message_requests().is_empty());
}

#[tokio::test]
async fn responses_without_stream_and_errors() {
    let api = FakeApi::start().await;
    let (status, body) = http(
        api.addr(),
        "POST",
        "/v1/responses",
        Some(&responses_request(json!([user_item("THINK ok")]), false)),
    );
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["output"][0]["type"], "reasoning");
    assert_eq!(v["output"][1]["content"][0]["text"], "ok");

    let (status, body) = http(
        api.addr(),
        "POST",
        "/v1/responses",
        Some(&responses_request(json!([user_item("ERROR 500")]), true)),
    );
    assert_eq!(status, 500);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["message"], "fake 500");
    assert_eq!(v["error"]["type"], "server_error");
}

#[test]
fn codex_home_writes_the_provider_block() {
    let api = FakeApi::start_blocking();
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("codex-home");
    api.codex_home(&home).unwrap();
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(config.contains(&format!("base_url = \"{}/v1\"", api.base_url())));
    assert!(config.contains("wire_api = \"responses\""));
    let env = api.codex_env(&home);
    assert_eq!(env[0], ("CODEX_HOME", home.display().to_string()));
}

#[tokio::test]
async fn responses_hang_sends_created_and_holds_the_stream() {
    let api = FakeApi::start().await;
    let addr = api.addr();
    let body = responses_request(json!([user_item("HANG")]), true).to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /v1/responses HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut seen = String::new();
    while !seen.contains("response.created") {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "stream ended early");
        seen.push_str(&line);
    }
    assert_eq!(api.active_streams(), 1);
    drop(r);
    drop(s);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while api.active_streams() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the stream outlives its client"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(api.responses_requests()[0].scenario, "HANG");
}

fn gemini_request(contents: Value) -> Value {
    json!({
        "contents": contents,
        "systemInstruction": {"parts": [{"text": "You are a test."}]},
        "generationConfig": {"thinkingConfig": {"includeThoughts": true}},
        "tools": [{"functionDeclarations": [
            {"name": "run_shell_command", "parametersJsonSchema": {"type": "object",
             "properties": {"command": {"type": "string"}, "description": {"type": "string"}, "dir_path": {"type": "string"}}}},
        ]}],
    })
}

fn gemini_user(text: &str) -> Value {
    json!({"role": "user", "parts": [{"text": text}]})
}

/// Splits a Gemini SSE body (`data: <json>` and a blank line, CRLF as the real API) into
/// its response objects.
fn gemini_events(body: &str) -> Vec<Value> {
    assert!(
        body.ends_with("\r\n\r\n"),
        "every event ends with a blank line"
    );
    body.trim_end()
        .split("\r\n\r\n")
        .map(|ev| serde_json::from_str(ev.strip_prefix("data: ").expect("data line")).unwrap())
        .collect()
}

const GEMINI_STREAM: &str = "/v1beta/models/gemini-fake:streamGenerateContent?alt=sse";

#[tokio::test]
async fn gemini_streams_the_declared_shell_call_then_answers_its_output() {
    let api = FakeApi::start().await;
    let (status, body) = http(
        api.addr(),
        "POST",
        GEMINI_STREAM,
        Some(&gemini_request(json!([gemini_user("BASH echo hi")]))),
    );
    assert_eq!(status, 200);
    let events = gemini_events(&body);
    assert_eq!(events.len(), 1, "{body}");
    let c = &events[0]["candidates"][0];
    assert_eq!(c["finishReason"], "STOP");
    assert_eq!(
        c["content"]["parts"][0]["functionCall"],
        json!({"name": "run_shell_command", "args": {"command": "echo hi", "description": "Run command"}})
    );
    assert_eq!(events[0]["modelVersion"], "gemini-fake");
    assert!(
        events[0]["usageMetadata"]["promptTokenCount"]
            .as_u64()
            .unwrap()
            > 0
    );

    let (_, body) = http(
        api.addr(),
        "POST",
        GEMINI_STREAM,
        Some(&gemini_request(json!([
            gemini_user("BASH echo hi"),
            {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "echo hi"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": "Output: hi"}}}]},
        ]))),
    );
    let events = gemini_events(&body);
    let text = &events.last().unwrap()["candidates"][0]["content"]["parts"][0]["text"];
    assert_eq!(text, "Tool step finished.\nOutput: hi");
    let calls = api.gemini_requests();
    assert_eq!(calls[1].scenario, "BASH+tool_result");
    assert_eq!(calls[1].user_prompts(), ["BASH echo hi"]);
}

#[tokio::test]
async fn gemini_text_thoughts_side_calls_errors_and_tokens() {
    let api = FakeApi::start().await;
    // Text in chunks, one event each; the thought first, as asked for.
    let (_, body) = http(
        api.addr(),
        "POST",
        GEMINI_STREAM,
        Some(&gemini_request(json!([gemini_user("THINK ok")]))),
    );
    let events = gemini_events(&body);
    assert_eq!(events.len(), 2, "{body}");
    assert_eq!(
        events[0]["candidates"][0]["content"]["parts"][0]["thought"],
        true
    );
    assert!(events[0]["candidates"][0].get("finishReason").is_none());
    assert_eq!(
        events[1]["candidates"][0]["content"]["parts"][0]["text"],
        "ok"
    );
    assert_eq!(events[1]["candidates"][0]["finishReason"], "STOP");

    // A side call with a schema in Gemini's upper-case types gets JSON that fits it.
    let mut side = gemini_request(json!([gemini_user("TEXT hi")]));
    side["generationConfig"] = json!({"responseMimeType": "application/json", "responseJsonSchema": {
        "type": "OBJECT", "required": ["reasoning", "next_speaker"],
        "properties": {"reasoning": {"type": "STRING"}, "next_speaker": {"type": "STRING", "enum": ["user", "model"]},
                       "complexity_score": {"type": "INTEGER"}}}});
    let (status, body) = http(
        api.addr(),
        "POST",
        "/v1beta/models/gemini-lite:generateContent",
        Some(&side),
    );
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    let answer: Value = serde_json::from_str(
        v["candidates"][0]["content"]["parts"][0]["text"]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        answer,
        json!({"reasoning": "fake", "next_speaker": "user", "complexity_score": 1})
    );
    assert_eq!(api.gemini_side_calls()[0].scenario, "json_schema");

    let (status, body) = http(
        api.addr(),
        "POST",
        GEMINI_STREAM,
        Some(&gemini_request(json!([gemini_user("ERROR 503")]))),
    );
    assert_eq!(status, 503);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        v,
        json!({"error": {"code": 503, "message": "fake 503", "status": "UNAVAILABLE"}})
    );

    let (status, body) = http(
        api.addr(),
        "POST",
        "/v1beta/models/gemini-fake:countTokens",
        Some(&gemini_request(json!([gemini_user("TEXT hi")]))),
    );
    assert_eq!(status, 200);
    let v: Value = serde_json::from_str(&body).unwrap();
    assert!(v["totalTokens"].as_u64().unwrap() > 0);
}

#[test]
fn gemini_home_writes_the_settings() {
    let api = FakeApi::start_blocking();
    let dir = tempfile::tempdir().unwrap();
    api.gemini_home(dir.path()).unwrap();
    let settings: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join(".gemini/settings.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        settings["security"]["auth"]["selectedType"],
        "gemini-api-key"
    );
    let env = api.gemini_env(dir.path());
    assert!(env.contains(&("GOOGLE_GEMINI_BASE_URL", api.base_url())));
}

#[tokio::test]
async fn gemini_hang_holds_the_stream_until_the_client_leaves() {
    let api = FakeApi::start().await;
    let addr = api.addr();
    let body = gemini_request(json!([gemini_user("HANG")])).to_string();
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST {GEMINI_STREAM} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    // The headers come; no event follows.
    let mut head = String::new();
    while !head.ends_with("\r\n\r\n") {
        let mut line = String::new();
        assert!(r.read_line(&mut line).unwrap() > 0, "stream ended early");
        head.push_str(&line);
    }
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(api.active_streams(), 1);
    drop(r);
    drop(s);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while api.active_streams() > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the stream outlives its client"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(api.gemini_requests()[0].scenario, "HANG");
}

#[test]
fn binary_writes_a_gemini_home_and_prints_the_gemini_environment() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("gemini home");
    let mut child = Command::new(env!("CARGO_BIN_EXE_fake-messages-api"))
        .args(["--gemini-home", home.to_str().unwrap()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let (mut first, mut second) = (String::new(), String::new());
    out.read_line(&mut first).unwrap();
    out.read_line(&mut second).unwrap();
    let url = first.trim().strip_prefix("listening ").expect("first line");
    let settings: Value =
        serde_json::from_str(&std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap())
            .unwrap();
    assert_eq!(
        settings["security"]["auth"]["selectedType"],
        "gemini-api-key"
    );
    // Every value a shell word: the path with a space is quoted.
    assert_eq!(
        second.trim(),
        format!(
            "gemini-env HOME='{}' GEMINI_API_KEY=test GOOGLE_GEMINI_BASE_URL={url} \
             GEMINI_CLI_NO_RELAUNCH=true",
            home.display()
        )
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
