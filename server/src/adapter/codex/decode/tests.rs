//! The decoder on what codex-cli 0.169.0 wrote (see `recorded/README.md`)
//! and on hand-made lines for what those runs do not show.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::{resolved_by, run_error_kind};
use serde_json::{Value, json};

use super::CodexDecoder;
use crate::adapter::{Decoder, DecoderSetup, StdoutLine};
use crate::partial::{BlockKind, Change};

const THREAD: &str = "01a233f0-3c1a-7cd0-816f-8e18ddba056e";

fn setup(max_line_bytes: usize, pid: Option<u32>, resume_id: &str) -> DecoderSetup {
    DecoderSetup {
        max_line_bytes,
        max_partial_bytes: 1 << 20,
        pid,
        resume_id: resume_id.into(),
    }
}

fn decoder() -> CodexDecoder {
    CodexDecoder::new(&setup(1 << 20, Some(4242), ""))
}

/// The `out` lines of a recording, in order.
fn recorded(name: &str) -> Vec<String> {
    let path = format!(
        "{}/src/adapter/codex/decode/recorded/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    raw.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["dir"] == "out")
        .map(|r| r["line"].as_str().unwrap().to_owned())
        .collect()
}

/// Feeds every line, the harness's input marked where the recording wrote
/// a `turn/start`; returns the payloads and the partial changes.
fn replay(d: &mut CodexDecoder, name: &str) -> (Vec<Payload>, Vec<Change>) {
    let path = format!(
        "{}/src/adapter/codex/decode/recorded/{name}.jsonl",
        env!("CARGO_MANIFEST_DIR")
    );
    let raw = std::fs::read_to_string(&path).unwrap();
    let mut payloads = Vec::new();
    let mut changes = Vec::new();
    for l in raw.lines() {
        let rec: Value = serde_json::from_str(l).unwrap();
        let line = rec["line"].as_str().unwrap();
        if rec["dir"] == "in" {
            if line.contains("\"turn/start\"") {
                d.input_sent();
            }
            continue;
        }
        for (p, cli_line) in d.line(&StdoutLine::Line(line.to_owned())) {
            assert_eq!(cli_line, line, "every event keeps its raw line");
            payloads.push(p);
        }
        changes.extend(d.take_partial());
    }
    (payloads, changes)
}

fn feed(d: &mut CodexDecoder, line: Value) -> Vec<Payload> {
    d.line(&StdoutLine::Line(line.to_string()))
        .into_iter()
        .map(|(p, _)| p)
        .collect()
}

/// A short name per payload, to compare sequences.
fn kinds(payloads: &[Payload]) -> Vec<&'static str> {
    payloads
        .iter()
        .map(|p| match p {
            Payload::RunReady(_) => "run_ready",
            Payload::TurnStart(_) => "turn_start",
            Payload::Content(c) => match c.blocks.first().map(|b| b.r#type.as_str()) {
                Some("text") => "text",
                Some("thinking") => "thinking",
                Some("tool_use") => "tool_use",
                _ => "content",
            },
            Payload::Result(_) => "result",
            Payload::TurnEnd(t) if t.compact => "compact",
            Payload::TurnEnd(_) => "turn_end",
            Payload::PermissionRequested(_) => "permission_requested",
            Payload::PermissionResolved(_) => "permission_resolved",
            Payload::RunError(_) => "run_error",
            _ => "other",
        })
        .collect()
}

fn turn_end(p: &Payload) -> &pb::TurnEnd {
    match p {
        Payload::TurnEnd(t) => t,
        other => panic!("not a turn_end: {other:?}"),
    }
}

fn content(p: &Payload) -> &pb::Content {
    match p {
        Payload::Content(c) => c,
        other => panic!("not content: {other:?}"),
    }
}

fn result(p: &Payload) -> &pb::Result {
    match p {
        Payload::Result(r) => r,
        other => panic!("not a result: {other:?}"),
    }
}

#[test]
fn plain_turn() {
    let mut d = decoder();
    d.input_sent();
    let (payloads, changes) = replay(&mut d, "plain");
    assert_eq!(kinds(&payloads), ["run_ready", "text", "turn_end"]);
    let Payload::RunReady(r) = &payloads[0] else {
        unreachable!()
    };
    assert_eq!(r.resume_id, THREAD);
    assert_eq!((r.model.as_str(), r.cwd.as_str()), ("gpt-fake", "/tmp"));
    assert_eq!((r.cli_version.as_str(), r.pid), ("0.169.0", 4242));
    assert!(r.permission_mode.is_empty());
    let c = content(&payloads[1]);
    assert_eq!(c.blocks[0].text, "Hello from fake.");
    assert_eq!(
        (c.message_id.as_str(), c.model.as_str()),
        ("msg_resp_1", "gpt-fake")
    );
    let t = turn_end(&payloads[2]);
    assert_eq!((t.subtype.as_str(), t.is_error), ("success", false));
    assert_eq!(t.result, "Hello from fake.");
    assert_eq!(
        t.usage,
        Some(pb::Usage {
            input_tokens: 40,
            output_tokens: 5,
            cache_read_input_tokens: 10,
            cache_creation_input_tokens: 0,
        })
    );
    assert_eq!(t.model_usage[0].context_window, 258400);
    assert_eq!(t.duration_ms, 136);
    // Live typing: the deltas join to exactly the content's text, and the
    // block is done with its content.
    let fragments: String = changes
        .iter()
        .filter_map(|c| match c {
            Change::Fragment { fragment, .. } => Some(fragment.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(fragments, "Hello from fake.");
    assert!(matches!(
        changes.first(),
        Some(Change::Started {
            index: 0,
            kind: BlockKind::Text,
            ..
        })
    ));
    assert!(changes.contains(&Change::Done {
        message_id: "msg_resp_1".into(),
        index: Some(0)
    }));
}

#[test]
fn follow_up_on_the_same_process() {
    let mut d = decoder();
    d.input_sent();
    let (payloads, _) = replay(&mut d, "follow_up");
    assert_eq!(
        kinds(&payloads),
        ["run_ready", "text", "turn_end", "text", "turn_end"],
        "one run_ready, no turn_start for the harness's own turns"
    );
    // Each turn has its own usage, not the thread's running total.
    assert_eq!(turn_end(&payloads[4]).usage.unwrap().output_tokens, 5);
}

#[test]
fn a_turn_nobody_sent_is_a_turn_start() {
    let mut d = decoder();
    d.input_sent();
    let (first, _) = replay(&mut d, "plain");
    assert_eq!(kinds(&first), ["run_ready", "text", "turn_end"]);
    // The same turn again without input: Codex began it by itself.
    let lines = recorded("plain");
    let started = lines
        .iter()
        .find(|l| l.contains("\"turn/started\""))
        .unwrap();
    let out = d.line(&StdoutLine::Line(started.clone()));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].0, Payload::TurnStart(pb::TurnStart::default()));
}

#[test]
fn command_approved() {
    let mut d = decoder();
    d.input_sent();
    let (payloads, _) = replay(&mut d, "approve");
    assert_eq!(
        kinds(&payloads),
        [
            "run_ready",
            "tool_use",
            "permission_requested",
            "permission_resolved",
            "result",
            "text",
            "turn_end"
        ]
    );
    let b = &content(&payloads[1]).blocks[0];
    assert_eq!(
        (b.tool_name.as_str(), b.tool_use_id.as_str()),
        ("Bash", "call_resp_4")
    );
    let input = serde_json::to_value(b.input.as_ref().unwrap()).unwrap();
    assert_eq!(
        input,
        json!({"command": "/bin/bash -lc 'echo hi-from-tool'", "cwd": "/tmp"})
    );
    let Payload::PermissionRequested(p) = &payloads[2] else {
        unreachable!()
    };
    assert_eq!(p.request_id, "0");
    assert_eq!(
        (p.tool_name.as_str(), p.tool_use_id.as_str()),
        ("Bash", "call_resp_4")
    );
    assert_eq!(p.input, b.input);
    // Codex's word that the request is settled: a withdrawal the run task
    // keeps only if the log still has it pending (here the harness's own
    // answer resolved it first).
    let Payload::PermissionResolved(r) = &payloads[3] else {
        unreachable!()
    };
    assert_eq!(
        (r.request_id.as_str(), r.by.as_str()),
        ("0", resolved_by::CANCELLED)
    );
    let res = result(&payloads[4]);
    assert_eq!(res.tool_results[0].tool_use_id, "call_resp_4");
    assert_eq!(res.tool_results[0].text, "hi-from-tool\n");
    assert!(!res.is_error);
    // Two model calls: the turn's usage is both.
    let t = turn_end(&payloads[6]);
    assert_eq!(t.usage.unwrap().input_tokens, 80 + 40);
    assert_eq!(t.usage.unwrap().cache_read_input_tokens, 30);
}

#[test]
fn command_declined() {
    let mut d = decoder();
    d.input_sent();
    let (payloads, _) = replay(&mut d, "deny");
    assert_eq!(
        kinds(&payloads),
        [
            "run_ready",
            "tool_use",
            "permission_requested",
            "permission_resolved",
            "result",
            "text",
            "turn_end"
        ]
    );
    let res = result(&payloads[4]);
    assert!(res.is_error && res.tool_results[0].is_error);
    assert_eq!(res.tool_results[0].text, "The command was declined.");
}

#[test]
fn interrupt_keeps_the_text_so_far() {
    let mut d = decoder();
    d.input_sent();
    let (payloads, changes) = replay(&mut d, "interrupt");
    assert_eq!(kinds(&payloads), ["run_ready", "text", "turn_end"]);
    let text = &content(&payloads[1]).blocks[0].text;
    assert!(text.starts_with("Slow answer "), "{text}");
    let t = turn_end(&payloads[2]);
    assert_eq!((t.subtype.as_str(), t.is_error), ("interrupted", true));
    assert_eq!(t.terminal_reason, "interrupted");
    assert_eq!(changes.last(), Some(&Change::Cleared));
    // The text kept is what the deltas showed.
    let fragments: String = changes
        .iter()
        .filter_map(|c| match c {
            Change::Fragment { fragment, .. } => Some(fragment.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(&fragments, text);
}

#[test]
fn interrupt_with_an_approval_pending() {
    let mut d = decoder();
    d.input_sent();
    let (payloads, _) = replay(&mut d, "interrupt_perm");
    // The tool Codex never completes is closed before the turn ends; the
    // approval Codex settles after the turn is withdrawn.
    assert_eq!(
        kinds(&payloads),
        [
            "run_ready",
            "tool_use",
            "permission_requested",
            "result",
            "turn_end",
            "permission_resolved"
        ]
    );
    let res = result(&payloads[3]);
    assert_eq!(res.tool_results[0].tool_use_id, "call_resp_9");
    assert_eq!(res.tool_results[0].text, "interrupted");
    assert!(res.tool_results[0].is_error);
    // The model call before the interrupt still counts.
    assert_eq!(turn_end(&payloads[4]).usage.unwrap().output_tokens, 7);
}

#[test]
fn lost_rollout_is_resume_failed() {
    let mut d = CodexDecoder::new(&setup(
        1 << 20,
        None,
        "019a0000-0000-7000-8000-000000000000",
    ));
    let (payloads, _) = replay(&mut d, "resume_lost");
    assert_eq!(kinds(&payloads), ["run_error"]);
    let Payload::RunError(e) = &payloads[0] else {
        unreachable!()
    };
    assert_eq!(e.kind, run_error_kind::RESUME_FAILED);
    assert_eq!(e.resume_id, "019a0000-0000-7000-8000-000000000000");
    assert!(e.message.starts_with("no rollout found"));
    // Without a resume id the error's own names the thread.
    let mut d = decoder();
    let (payloads, _) = replay(&mut d, "resume_lost");
    let Payload::RunError(e) = &payloads[0] else {
        unreachable!()
    };
    assert_eq!(e.resume_id, "019a0000-0000-7000-8000-000000000000");
}

#[test]
fn other_error_answers_are_cli_errors() {
    let mut d = decoder();
    let out = feed(
        &mut d,
        json!({"id": 7, "error": {"code": -32602, "message": "unknown model"}}),
    );
    let [Payload::RunError(e)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(e.kind, "cli_error");
    assert!(e.message.contains("unknown model"), "{}", e.message);
    // Answers with results other than a thread's are the process side's.
    assert!(feed(&mut d, json!({"id": 8, "result": {}})).is_empty());
}

#[test]
fn unreadable_lines_are_reported_as_for_claude() {
    let mut d = CodexDecoder::new(&setup(64, None, ""));
    let bad = d.line(&StdoutLine::Line("not json".into()));
    let too_long = d.line(&StdoutLine::Line(format!(
        "{{\"method\":\"{}\"}}",
        "x".repeat(100)
    )));
    let cut = d.line(&StdoutLine::TooLong {
        head: "{\"method\":".into(),
        len: 5000,
    });
    let neither = d.line(&StdoutLine::Line("{\"params\":{}}".into()));
    for (out, kind) in [
        (&bad, run_error_kind::BAD_LINE),
        (&too_long, run_error_kind::LINE_TOO_LARGE),
        (&cut, run_error_kind::LINE_TOO_LARGE),
        (&neither, run_error_kind::BAD_LINE),
    ] {
        let [(Payload::RunError(e), _)] = out.as_slice() else {
            panic!("{out:?}")
        };
        assert_eq!(e.kind, kind, "{}", e.message);
    }
    assert!(d.line(&StdoutLine::Line("  ".into())).is_empty());
}

#[test]
fn file_change_and_mcp_tools_classify_as_edit_and_mcp() {
    use agent_harness_protocol::derive::classify::{ToolKind, classify_tool};
    let mut d = decoder();
    d.input_sent();
    feed(
        &mut d,
        json!({"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "u"}}}),
    );
    let change = json!({"type": "fileChange", "id": "fc1", "status": "inProgress",
        "changes": [{"path": "/w/a.txt", "kind": {"type": "add"}, "diff": "+hi\n"}]});
    let out = feed(
        &mut d,
        json!({"method": "item/started", "params": {"item": change}}),
    );
    let b = &content(&out[0]).blocks[0];
    assert_eq!(
        classify_tool(&b.tool_name, b.input.as_ref()),
        ToolKind::Edit
    );
    let input = serde_json::to_value(b.input.as_ref().unwrap()).unwrap();
    assert_eq!(input["file_path"], "/w/a.txt");
    // Its approval names the same tool and input.
    let out = feed(
        &mut d,
        json!({"method": "item/fileChange/requestApproval", "id": "r-1",
               "params": {"itemId": "fc1", "reason": "outside the workspace", "grantRoot": "/w"}}),
    );
    let Payload::PermissionRequested(p) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(p.request_id, "\"r-1\"", "a string id keeps its quotes");
    assert_eq!(
        (p.tool_name.as_str(), p.input.as_ref()),
        ("Edit", b.input.as_ref())
    );
    assert_eq!(p.decision_reason, "outside the workspace");
    assert_eq!(p.blocked_path, "/w");
    let mut done = change.clone();
    done["status"] = json!("completed");
    let out = feed(
        &mut d,
        json!({"method": "item/completed", "params": {"item": done}}),
    );
    assert_eq!(result(&out[0]).tool_results[0].text, "/w/a.txt\n+hi\n");

    let call = json!({"type": "mcpToolCall", "id": "m1", "server": "docs", "tool": "search",
        "status": "inProgress", "arguments": {"q": "x"}});
    let out = feed(
        &mut d,
        json!({"method": "item/started", "params": {"item": call}}),
    );
    let b = &content(&out[0]).blocks[0];
    assert_eq!(b.tool_name, "mcp__docs__search");
    assert_eq!(classify_tool(&b.tool_name, b.input.as_ref()), ToolKind::Mcp);
    let mut failed = call.clone();
    failed["status"] = json!("failed");
    failed["error"] = json!({"message": "server gone"});
    let out = feed(
        &mut d,
        json!({"method": "item/completed", "params": {"item": failed}}),
    );
    let r = &result(&out[0]).tool_results[0];
    assert_eq!((r.text.as_str(), r.is_error), ("server gone", true));
}

#[test]
fn failed_turn_reports_codex_message() {
    let mut d = decoder();
    d.input_sent();
    feed(
        &mut d,
        json!({"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "u"}}}),
    );
    feed(
        &mut d,
        json!({"method": "error", "params": {"error": {"message": "stream disconnected"}, "willRetry": false, "threadId": "t", "turnId": "u"}}),
    );
    let out = feed(
        &mut d,
        json!({"method": "turn/completed", "params": {"threadId": "t", "turn": {"id": "u", "status": "failed", "error": null}}}),
    );
    let t = turn_end(&out[0]);
    assert_eq!((t.subtype.as_str(), t.is_error), ("error", true));
    assert_eq!(t.errors, ["stream disconnected"]);
}

#[test]
fn a_sub_agent_thread_is_not_the_run() {
    let mut d = decoder();
    d.input_sent();
    let (first, _) = replay(&mut d, "plain");
    assert_eq!(kinds(&first)[0], "run_ready");
    let child = json!({"method": "thread/started", "params": {"thread": {"id": "child", "parentThreadId": THREAD, "model": "m", "cwd": "/"}}});
    assert!(feed(&mut d, child).is_empty());
    let other = json!({"method": "item/started", "params": {"threadId": "child", "item": {"type": "commandExecution", "id": "x", "command": "ls", "cwd": "/"}}});
    assert!(feed(&mut d, other).is_empty());
}

#[test]
fn reasoning_is_thinking() {
    let mut d = decoder();
    let out = feed(
        &mut d,
        json!({"method": "item/completed", "params": {"item": {"type": "reasoning", "id": "r", "summary": ["Plan", "Act"], "content": []}}}),
    );
    assert_eq!(content(&out[0]).blocks[0].thinking, "Plan\n\nAct");
    let hidden = json!({"method": "item/completed", "params": {"item": {"type": "reasoning", "id": "r2", "summary": [], "content": []}}});
    assert!(feed(&mut d, hidden).is_empty());
}
