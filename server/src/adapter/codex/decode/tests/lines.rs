//! Hand-made lines for what the recordings do not show.

use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::run_error_kind;
use serde_json::json;

use super::*;
use crate::adapter::{Decoder, StdoutLine};
use crate::partial::Change;

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
    assert_eq!(e.kind, run_error_kind::CLI_ERROR);
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
fn a_permissions_approval_names_what_it_asks_for() {
    let mut d = decoder();
    let permissions = json!({"network": {"enabled": true}, "fileSystem": null});
    let out = feed(
        &mut d,
        json!({"method": "item/permissions/requestApproval", "id": 3,
               "params": {"itemId": "i1", "reason": "needs the network", "permissions": permissions}}),
    );
    let [Payload::PermissionRequested(p)] = out.as_slice() else {
        panic!("{out:?}")
    };
    assert_eq!(
        (p.request_id.as_str(), p.tool_name.as_str()),
        ("3", "RequestPermissions")
    );
    assert_eq!(
        serde_json::to_value(p.input.as_ref().unwrap()).unwrap(),
        permissions
    );
    assert_eq!(p.decision_reason, "needs the network");
    // Other requests are the process side's to answer, never events; a
    // resolution of a request that was never a permission is nothing.
    let other =
        json!({"method": "item/tool/requestUserInput", "id": 4, "params": {"itemId": "i1"}});
    assert!(feed(&mut d, other).is_empty());
    let resolved = json!({"method": "serverRequest/resolved", "params": {"requestId": 4}});
    assert!(feed(&mut d, resolved).is_empty());
    // Resolved once: a repeat is nothing.
    let resolved = json!({"method": "serverRequest/resolved", "params": {"requestId": 3}});
    assert_eq!(
        kinds(&feed(&mut d, resolved.clone())),
        ["permission_resolved"]
    );
    assert!(feed(&mut d, resolved).is_empty());
}

#[test]
fn an_error_codex_retries_is_not_the_turns() {
    let mut d = decoder();
    d.input_sent();
    feed(
        &mut d,
        json!({"method": "turn/started", "params": {"turn": {"id": "u"}}}),
    );
    feed(
        &mut d,
        json!({"method": "error", "params": {"error": {"message": "reconnecting"}, "willRetry": true}}),
    );
    let out = feed(
        &mut d,
        json!({"method": "turn/completed", "params": {"turn": {"id": "u", "status": "completed"}}}),
    );
    let t = turn_ends(&out)[0];
    assert!(t.errors.is_empty() && !t.is_error, "{t:?}");
}

/// What codex-cli 0.169.0 does with a `turn/start` while a turn runs: it
/// steers the input into the running turn (same turn id, a userMessage
/// item) and restarts its answer, never completing the message it was
/// writing. That message leaves no content and leaves live typing. (The
/// process side sends one `turn/start` per turn, so a message sent
/// mid-turn waits for the next one; the decoder still reads a steered turn
/// right should Codex do it.)
#[test]
fn input_steered_into_the_turn_drops_the_abandoned_message() {
    let mut d = decoder();
    d.input_sent();
    let item = |kind: &str, id: &str, text: &str| json!({"type": kind, "id": id, "text": text});
    let lines = [
        json!({"method": "turn/started", "params": {"turn": {"id": "u"}}}),
        json!({"method": "item/started", "params": {"item": item("agentMessage", "m1", "")}}),
        json!({"method": "item/agentMessage/delta", "params": {"itemId": "m1", "delta": "Slow "}}),
    ];
    let mut out = Vec::new();
    for l in lines {
        out.extend(feed(&mut d, l));
    }
    // The harness sends more: Codex answers with the same turn.
    d.input_sent();
    for l in [
        json!({"method": "item/started", "params": {"item": {"type": "userMessage", "id": "um", "content": []}}}),
        json!({"method": "item/started", "params": {"item": item("agentMessage", "m2", "")}}),
        json!({"method": "item/agentMessage/delta", "params": {"itemId": "m2", "delta": "Hello"}}),
        json!({"method": "item/completed", "params": {"item": item("agentMessage", "m2", "Hello")}}),
        json!({"method": "turn/completed", "params": {"turn": {"id": "u", "status": "completed"}}}),
    ] {
        out.extend(feed(&mut d, l));
    }
    assert_eq!(kinds(&out), ["text", "turn_end"]);
    assert_eq!(content(&out[0]).blocks[0].text, "Hello");
    let changes = d.take_partial();
    assert!(changes.contains(&Change::Done {
        message_id: "m1".into(),
        index: None
    }));
    assert_eq!(typed(&changes), "Slow Hello");
}

/// A command's output as it runs (`item/commandExecution/outputDelta`,
/// shaped as the schema of codex-cli 0.169.0 says) is live typing of a
/// block keyed by the command's item id: several commands apart, each done
/// when its result is decoded. The log gets only the result, whole.
#[test]
fn command_output_streams_under_its_tool_until_its_result() {
    let mut d = decoder();
    d.input_sent();
    let command = |id: &str, status: &str, output: &str| {
        json!({"type": "commandExecution", "id": id, "command": "/bin/bash -lc 'x'",
               "cwd": "/w", "status": status, "aggregatedOutput": output, "exitCode": 0})
    };
    let delta = |id: &str, text: &str| {
        json!({"method": "item/commandExecution/outputDelta",
               "params": {"threadId": "t", "turnId": "u", "itemId": id, "delta": text}})
    };
    let mut out = Vec::new();
    for l in [
        json!({"method": "turn/started", "params": {"turn": {"id": "u"}}}),
        delta("call_early", "before its tool_use"),
        json!({"method": "item/started", "params": {"item": command("call_a", "inProgress", "")}}),
        json!({"method": "item/started", "params": {"item": command("call_b", "inProgress", "")}}),
        delta("call_a", "line1\n"),
        delta("call_b", "other\n"),
        delta("call_a", "line2\n"),
    ] {
        out.extend(feed(&mut d, l));
    }
    assert_eq!(
        kinds(&out),
        ["tool_use", "tool_use"],
        "deltas are not events"
    );
    let changes = d.take_partial();
    assert_eq!(
        changes[0],
        Change::Started {
            message_id: "call_a".into(),
            parent_tool_use_id: "".into(),
            index: 0,
            kind: crate::partial::BlockKind::ToolOutput {
                tool_name: "Bash".into(),
                tool_use_id: "call_a".into(),
            },
        }
    );
    assert_eq!(typed(&changes), "line1\nother\nline2\n");
    let done = feed(
        &mut d,
        json!({"method": "item/completed", "params": {"item": command("call_a", "completed", "line1\nline2\n")}}),
    );
    assert_eq!(result(&done[0]).tool_results[0].tool_use_id, "call_a");
    assert_eq!(
        d.take_partial(),
        vec![Change::Done {
            message_id: "call_a".into(),
            index: None
        }],
        "the result's batch ends the output it supersedes, and only that"
    );
    // An interrupt leaves call_b running: the turn's end clears it.
    feed(&mut d, delta("call_b", "more\n"));
    let end = feed(
        &mut d,
        json!({"method": "turn/completed", "params": {"turn": {"id": "u", "status": "interrupted"}}}),
    );
    assert_eq!(kinds(&end), ["result", "turn_end"]);
    assert_eq!(
        d.take_partial(),
        vec![
            Change::Fragment {
                message_id: "call_b".into(),
                index: 0,
                fragment: "more\n".into()
            },
            Change::Cleared
        ]
    );
}
