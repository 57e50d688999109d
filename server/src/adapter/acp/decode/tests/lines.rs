//! Hand-made lines for what the Gemini recordings do not show: updates
//! after a prompt's answer, tool calls the agent announces and completes
//! with content, plans, `usage_update`, error answers, bad lines, and a
//! process side that does not copy its prompts.

use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::run_error_kind;
use serde_json::{Value, json};

use super::*;
use crate::adapter::StdoutLine;

fn ready(d: &mut AcpDecoder) {
    feed(
        d,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"agentInfo": {"version": "9.9"}}}),
    );
    let p = feed(
        d,
        json!({"jsonrpc": "2.0", "id": 2, "result": {"sessionId": "s1",
            "models": {"currentModelId": "m1", "availableModels": []}}}),
    );
    assert_eq!(kinds(&p), ["run_ready"]);
}

/// The harness sends input `id`: the input and the process side's copy.
fn prompt(d: &mut AcpDecoder, id: u64) {
    d.input_sent();
    let copy = json!({"jsonrpc": "2.0", "id": id, "method": "session/prompt",
        "params": {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}]}});
    assert!(feed(d, copy).is_empty());
}

fn update(u: Value) -> Value {
    json!({"jsonrpc": "2.0", "method": "session/update",
        "params": {"sessionId": "s1", "update": u}})
}

fn chunk(text: &str) -> Value {
    update(json!({"sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": text}}))
}

fn done(id: u64, reason: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": reason}})
}

#[test]
fn updates_after_the_answer_belong_to_the_finished_turn() {
    let mut d = decoder("");
    ready(&mut d);
    prompt(&mut d, 3);
    assert!(feed(&mut d, chunk("answer")).is_empty());
    let p = feed(&mut d, done(3, "end_turn"));
    assert_eq!(kinds(&p), ["text", "turn_end"]);
    d.take_partial();
    // Late: content at once, no turn begun, nothing typed live.
    let p = feed(&mut d, chunk(" and more"));
    assert_eq!(kinds(&p), ["text"]);
    assert_eq!(content(&p[0]).blocks[0].text, " and more");
    let p = feed(
        &mut d,
        update(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t9",
            "status": "completed", "kind": "read", "title": "Read a.txt",
            "content": [{"type": "content", "content": {"type": "text", "text": "A"}}]}),
        ),
    );
    assert_eq!(kinds(&p), ["tool_use", "result"]);
    assert!(d.take_partial().is_empty());
    // The next prompt is a turn again.
    prompt(&mut d, 4);
    assert!(feed(&mut d, chunk("next")).is_empty());
    let p = feed(&mut d, done(4, "end_turn"));
    assert_eq!(kinds(&p), ["text", "turn_end"]);
    assert_eq!(turn_ends(&p)[0].result, "next");
}

#[test]
fn chunks_only_keep_the_whole_text() {
    let mut d = decoder("");
    ready(&mut d);
    prompt(&mut d, 3);
    let parts = ["Hel", "lo, ", "", "wor", "ld"];
    for part in parts {
        assert!(feed(&mut d, chunk(part)).is_empty());
    }
    let typed_so_far = typed(&d.take_partial());
    let p = feed(&mut d, done(3, "end_turn"));
    assert_eq!(kinds(&p), ["text", "turn_end"]);
    assert_eq!(content(&p[0]).blocks[0].text, "Hello, world");
    assert_eq!(typed_so_far, "Hello, world");
    assert_eq!(turn_ends(&p)[0].result, "Hello, world");
}

#[test]
fn a_tool_call_and_its_update_are_a_tool_use_and_a_result_with_content() {
    let mut d = decoder("");
    ready(&mut d);
    prompt(&mut d, 3);
    feed(&mut d, chunk("Let me look."));
    let p = feed(
        &mut d,
        update(json!({"sessionUpdate": "tool_call", "toolCallId": "t1",
            "title": "Reading a.txt", "kind": "read", "status": "pending",
            "locations": [{"path": "/w/a.txt", "line": 3}]})),
    );
    assert_eq!(
        kinds(&p),
        ["text", "tool_use"],
        "the text block closes first"
    );
    let tool = &content(&p[1]).blocks[0];
    assert_eq!(tool.tool_name, "Read");
    assert_eq!(tool.tool_use_id, "t1");
    let input = serde_json::to_value(tool.input.as_ref().unwrap()).unwrap();
    assert_eq!(input["file_path"], "/w/a.txt");
    assert_eq!(input["locations"][0]["line"].as_f64(), Some(3.0));
    // In progress: nothing yet.
    assert!(
        feed(
            &mut d,
            update(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1",
                "status": "in_progress"})
            )
        )
        .is_empty()
    );
    let p = feed(
        &mut d,
        update(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t1",
            "status": "completed", "locations": [{"path": "/w/a.txt"}],
            "content": [
                {"type": "content", "content": {"type": "text", "text": "line one"}},
                {"type": "diff", "path": "/w/a.txt", "oldText": "x", "newText": "y"}
            ]}),
        ),
    );
    assert_eq!(kinds(&p), ["result"]);
    let r = result(&p[0]);
    assert!(!r.is_error);
    assert_eq!(r.tool_results[0].tool_use_id, "t1");
    assert_eq!(r.tool_results[0].text, "line one\n/w/a.txt\ny");
    let kept = serde_json::to_value(r.tool_use_result.as_ref().unwrap()).unwrap();
    assert_eq!(kept["locations"][0]["path"], "/w/a.txt", "locations kept");
    // A failed one is an error result; a repeated completion changes nothing.
    feed(
        &mut d,
        update(json!({"sessionUpdate": "tool_call", "toolCallId": "t2",
            "title": "ls", "kind": "execute", "rawInput": {"command": "ls -l"}})),
    );
    let p = feed(
        &mut d,
        update(
            json!({"sessionUpdate": "tool_call_update", "toolCallId": "t2",
            "status": "failed", "rawOutput": {"error": "boom"}}),
        ),
    );
    assert!(result(&p[0]).is_error);
    assert!(result(&p[0]).tool_results[0].text.contains("boom"));
    assert!(
        feed(
            &mut d,
            update(
                json!({"sessionUpdate": "tool_call_update", "toolCallId": "t2",
                "status": "failed"})
            )
        )
        .is_empty()
    );
    let p = feed(&mut d, done(3, "end_turn"));
    assert_eq!(kinds(&p), ["turn_end"], "no tool left open");
}

#[test]
fn a_plan_is_a_todo_write_with_its_result() {
    let mut d = decoder("");
    ready(&mut d);
    prompt(&mut d, 3);
    let p = feed(
        &mut d,
        update(json!({"sessionUpdate": "plan", "entries": [
            {"content": "Read the code", "priority": "high", "status": "completed"},
            {"content": "Fix it", "priority": "medium", "status": "in_progress"}]})),
    );
    assert_eq!(kinds(&p), ["tool_use", "result"]);
    let tool = &content(&p[0]).blocks[0];
    assert_eq!(tool.tool_name, "TodoWrite");
    let input = serde_json::to_value(tool.input.as_ref().unwrap()).unwrap();
    assert_eq!(input["todos"][1]["content"], "Fix it");
    assert_eq!(input["todos"][1]["status"], "in_progress");
    assert_eq!(result(&p[1]).tool_results[0].tool_use_id, tool.tool_use_id);
    assert!(!result(&p[1]).is_error);
}

#[test]
fn usage_update_and_the_answer_usage_make_the_turn_usage() {
    let mut d = decoder("");
    ready(&mut d);
    prompt(&mut d, 3);
    feed(
        &mut d,
        update(
            json!({"sessionUpdate": "usage_update", "used": 5000, "size": 200000,
            "cost": {"amount": 0.25, "currency": "USD"}}),
        ),
    );
    let p = feed(
        &mut d,
        json!({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn",
            "usage": {"inputTokens": 100, "outputTokens": 20, "cachedReadTokens": 7,
                      "cachedWriteTokens": 3, "totalTokens": 130}}}),
    );
    let end = turn_ends(&p)[0];
    let usage = end.usage.unwrap();
    assert_eq!(
        (
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_input_tokens,
            usage.cache_creation_input_tokens
        ),
        (100, 20, 7, 3)
    );
    assert_eq!(end.cost_usd, 0.25);
    assert_eq!(end.model_usage.len(), 1);
    assert_eq!(end.model_usage[0].model, "m1");
    assert_eq!(end.model_usage[0].context_window, 200000);
}

#[test]
fn other_stop_reasons_are_error_turns_of_that_subtype() {
    for reason in ["max_tokens", "max_turn_requests", "refusal"] {
        let mut d = decoder("");
        ready(&mut d);
        prompt(&mut d, 3);
        let p = feed(&mut d, done(3, reason));
        let end = turn_ends(&p)[0];
        assert!(end.is_error);
        assert_eq!(end.subtype, reason);
    }
}

#[test]
fn error_answers_end_the_prompt_or_are_cli_errors() {
    let mut d = decoder("");
    ready(&mut d);
    prompt(&mut d, 3);
    feed(&mut d, chunk("partial"));
    let p = feed(
        &mut d,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "Internal error",
            "data": {"details": "quota exceeded"}}}),
    );
    assert_eq!(kinds(&p), ["text", "turn_end"]);
    let end = turn_ends(&p)[0];
    assert!(end.is_error);
    assert_eq!(end.errors, ["Internal error: quota exceeded"]);
    // A set_mode refused (id 4, no prompt running): never dropped.
    let p = feed(
        &mut d,
        json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "no such mode"}}),
    );
    let Payload::RunError(e) = &p[0] else {
        panic!("{p:?}")
    };
    assert_eq!(e.kind, run_error_kind::CLI_ERROR);
    assert!(e.message.contains("no such mode"));
    // Other answers are nothing.
    assert!(feed(&mut d, json!({"jsonrpc": "2.0", "id": 5, "result": {}})).is_empty());
}

#[test]
fn a_new_session_refused_is_a_cli_error() {
    let mut d = decoder("");
    let p = feed(
        &mut d,
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "Authentication required"}}),
    );
    let Payload::RunError(e) = &p[0] else {
        panic!("{p:?}")
    };
    assert_eq!(e.kind, run_error_kind::CLI_ERROR);
}

#[test]
fn malformed_lines_are_bad_lines() {
    let mut d = decoder("");
    for (line, what) in [
        ("{\"jsonrpc\":\"2.0\"}", "without a \"method\""),
        ("not json", "not JSON"),
        ("[1,2]", "not an object"),
    ] {
        let p = d.line(&StdoutLine::Line(line.into()));
        let Payload::RunError(e) = &p[0].0 else {
            panic!("{p:?}")
        };
        assert_eq!(e.kind, run_error_kind::BAD_LINE, "{line}");
        assert!(e.message.contains(what), "{}", e.message);
        assert_eq!(p[0].1, line);
    }
    assert!(d.line(&StdoutLine::Line("  ".into())).is_empty());
}

#[test]
fn without_copies_of_the_prompts_the_first_update_after_an_input_opens_the_turn() {
    let mut d = decoder("");
    ready(&mut d);
    d.input_sent();
    // Not a turn's update: no turn yet.
    feed(
        &mut d,
        update(json!({"sessionUpdate": "available_commands_update", "availableCommands": []})),
    );
    assert!(
        feed(&mut d, chunk("hi")).is_empty(),
        "typed, not yet content"
    );
    assert_eq!(typed(&d.take_partial()), "hi");
    let p = feed(&mut d, done(3, "end_turn"));
    assert_eq!(kinds(&p), ["text", "turn_end"]);
    let p = feed(&mut d, chunk("late"));
    assert_eq!(kinds(&p), ["text"]);
}

#[test]
fn agent_requests_other_than_permission_are_the_process_sides() {
    let mut d = decoder("");
    ready(&mut d);
    prompt(&mut d, 3);
    let p = feed(
        &mut d,
        json!({"jsonrpc": "2.0", "id": 7, "method": "fs/read_text_file",
            "params": {"sessionId": "s1", "path": "/etc/hosts"}}),
    );
    assert!(p.is_empty());
}

#[test]
fn with_copies_a_refused_setting_mid_turn_is_a_cli_error_and_the_turn_goes_on() {
    let mut d = decoder("");
    ready(&mut d);
    prompt(&mut d, 3);
    feed(&mut d, chunk("working"));
    let p = feed(
        &mut d,
        json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "no such mode"}}),
    );
    assert_eq!(kinds(&p), ["run_error"]);
    let p = feed(&mut d, done(3, "end_turn"));
    assert_eq!(kinds(&p), ["text", "turn_end"]);
    assert!(!turn_ends(&p)[0].is_error);
}

#[test]
fn without_copies_an_error_answer_after_an_input_is_the_prompts() {
    let mut d = decoder("");
    ready(&mut d);
    d.input_sent();
    let p = feed(
        &mut d,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "model unavailable"}}),
    );
    assert_eq!(kinds(&p), ["turn_end"]);
    assert!(turn_ends(&p)[0].is_error);
    // Nothing waits now: an error is the process side's request's.
    let p = feed(
        &mut d,
        json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602, "message": "no such mode"}}),
    );
    assert_eq!(kinds(&p), ["run_error"]);
}

#[test]
fn a_copy_ahead_of_the_last_answer_names_the_next_turns_prompt() {
    let mut d = decoder("");
    ready(&mut d);
    prompt(&mut d, 3);
    feed(&mut d, chunk("one"));
    // A queued input goes out as the answer to 3 arrives.
    prompt(&mut d, 4);
    assert_eq!(
        kinds(&feed(&mut d, done(3, "end_turn"))),
        ["text", "turn_end"]
    );
    feed(&mut d, chunk("two"));
    let p = feed(
        &mut d,
        json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "boom"}}),
    );
    assert_eq!(kinds(&p), ["text", "turn_end"]);
    assert_eq!(turn_ends(&p)[0].errors, ["boom"]);
}
