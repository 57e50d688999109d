//! The recorded Gemini CLI 0.60.0 ACP transcripts, decoded.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::{resolved_by, run_error_kind};
use serde_json::{Value, json};

use super::*;
use crate::nesting::to_value;

fn session_id(name: &str) -> String {
    answer(name, 2)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn quota_usage(name: &str, id: u64) -> pb::Usage {
    let t = &answer(name, id)["result"]["_meta"]["quota"]["token_count"];
    pb::Usage {
        input_tokens: t["input_tokens"].as_u64().unwrap(),
        output_tokens: t["output_tokens"].as_u64().unwrap(),
        ..Default::default()
    }
}

#[test]
fn first_turn_is_ready_text_and_a_successful_turn_end_with_usage() {
    let mut d = decoder("");
    let (p, changes) = replay(&mut d, "first_turn");
    assert_eq!(kinds(&p), ["run_ready", "text", "turn_end"]);
    let Payload::RunReady(ready) = &p[0] else {
        unreachable!()
    };
    assert_eq!(ready.agent, AGENT);
    assert_eq!(ready.resume_id, session_id("first_turn"));
    assert_eq!(ready.model, "auto");
    assert_eq!(ready.cli_version, "0.60.0");
    assert_eq!(ready.pid, 4242);
    let text = &answers_text("first_turn")[0];
    assert_eq!(&content(&p[1]).blocks[0].text, text);
    assert_eq!(content(&p[1]).model, "auto");
    assert_eq!(&typed(&changes), text, "the chunks were typed live");
    let end = turn_ends(&p)[0];
    assert!(!end.is_error);
    assert_eq!(end.subtype, "success");
    assert_eq!(end.terminal_reason, "end_turn");
    assert_eq!(&end.result, text);
    assert_eq!(end.usage, Some(quota_usage("first_turn", 3)));
    assert_eq!(end.model_usage.len(), 1);
    assert_eq!(end.model_usage[0].model, "gemini-3.5-flash");
    assert_eq!(
        end.model_usage[0].input_tokens,
        quota_usage("first_turn", 3).input_tokens
    );
}

#[test]
fn follow_up_is_a_second_turn_on_the_same_session() {
    let mut d = decoder("");
    let (p, _) = replay(&mut d, "follow_up");
    assert_eq!(
        kinds(&p),
        ["run_ready", "text", "turn_end", "text", "turn_end"]
    );
    let texts = answers_text("follow_up");
    assert_eq!(content(&p[3]).blocks[0].text, texts[1]);
    let ends = turn_ends(&p);
    assert!(ends.iter().all(|e| e.subtype == "success"));
    assert_eq!(ends[1].usage, Some(quota_usage("follow_up", 4)));
}

#[test]
fn a_thought_is_a_thinking_block_before_the_answer() {
    let mut d = decoder("");
    let (p, changes) = replay(&mut d, "thinking");
    assert_eq!(kinds(&p), ["run_ready", "thinking", "text", "turn_end"]);
    let thought = &content(&p[1]).blocks[0].thinking;
    assert!(thought.starts_with("**Thinking it over**"), "{thought}");
    assert_eq!(content(&p[2]).blocks[0].text, "pondered");
    assert_eq!(typed(&changes), format!("{thought}pondered"));
    assert_ne!(content(&p[1]).message_id, content(&p[2]).message_id);
}

/// The permission request of a transcript (its one agent request).
fn permission_request(name: &str) -> Value {
    out_messages(name)
        .into_iter()
        .find(|m| m["method"] == "session/request_permission")
        .unwrap()
}

#[test]
fn an_allowed_command_is_a_tool_use_a_permission_request_and_its_result() {
    let mut d = decoder("");
    let (p, _) = replay(&mut d, "permission_allow");
    assert_eq!(
        kinds(&p),
        [
            "run_ready",
            "tool_use",
            "permission_requested",
            "result",
            "text",
            "turn_end"
        ]
    );
    let request = permission_request("permission_allow");
    let call = &request["params"]["toolCall"];
    let tool = &content(&p[1]).blocks[0];
    assert_eq!(tool.tool_use_id, call["toolCallId"].as_str().unwrap());
    assert_eq!(tool.tool_name, "Bash");
    let input = serde_json::to_value(tool.input.as_ref().unwrap()).unwrap();
    assert_eq!(input["command"], call["title"]);
    let Payload::PermissionRequested(asked) = &p[2] else {
        unreachable!()
    };
    assert_eq!(asked.request_id, "0");
    assert_eq!(asked.tool_use_id, tool.tool_use_id);
    assert_eq!(asked.tool_name, "Bash");
    assert_eq!(asked.input, tool.input);
    let options: Vec<_> = request["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| to_value(o).unwrap())
        .collect();
    assert_eq!(
        asked.suggestions, options,
        "the options, for the process side"
    );
    let r = result(&p[3]);
    assert!(!r.is_error);
    assert_eq!(r.tool_results[0].tool_use_id, tool.tool_use_id);
    assert!(r.tool_use_result.is_some(), "the update is kept");
    assert!(!turn_ends(&p)[0].is_error);
}

#[test]
fn a_rejected_command_gets_a_not_run_result_at_the_turn_end() {
    let mut d = decoder("");
    let (p, _) = replay(&mut d, "permission_reject");
    assert_eq!(
        kinds(&p),
        [
            "run_ready",
            "tool_use",
            "permission_requested",
            "text",
            "result",
            "turn_end",
            "text",
            "turn_end"
        ]
    );
    let tool_id = content(&p[1]).blocks[0].tool_use_id.clone();
    let r = result(&p[4]);
    assert!(r.is_error);
    assert_eq!(r.tool_results[0].tool_use_id, tool_id);
    assert_eq!(r.tool_results[0].text, "not run");
    let texts = answers_text("permission_reject");
    assert_eq!(content(&p[3]).blocks[0].text, texts[0]);
    let ends = turn_ends(&p);
    assert!(ends.iter().all(|e| !e.is_error), "the model went on");
    assert!(
        !p.iter()
            .any(|p| matches!(p, Payload::PermissionResolved(_))),
        "the harness answered: nothing withdrawn"
    );
}

#[test]
fn a_cancel_keeps_the_text_so_far_and_ends_an_interrupted_turn() {
    let mut d = decoder("");
    let (p, _) = replay(&mut d, "cancel");
    assert_eq!(
        kinds(&p),
        ["run_ready", "text", "turn_end", "text", "turn_end"]
    );
    let texts = answers_text("cancel");
    assert_eq!(content(&p[1]).blocks[0].text, texts[0]);
    assert!(texts[0].starts_with("tick 0 "));
    let ends = turn_ends(&p);
    assert!(ends[0].is_error);
    assert_eq!(ends[0].subtype, "interrupted");
    assert_eq!(ends[0].terminal_reason, "cancelled");
    assert_eq!(ends[0].usage, None, "the cancelled answer reports none");
    assert!(ends[0].result.is_empty());
    assert_eq!(ends[1].subtype, "success");
    assert_eq!(ends[1].result, texts[1]);
}

#[test]
fn a_cancel_with_a_permission_pending_withdraws_it_and_closes_the_tool() {
    let mut d = decoder("");
    let (p, _) = replay(&mut d, "cancel_pending_permission");
    assert_eq!(
        kinds(&p),
        [
            "run_ready",
            "tool_use",
            "permission_requested",
            "permission_resolved",
            "result",
            "turn_end",
            "text",
            "turn_end"
        ]
    );
    let Payload::PermissionResolved(resolved) = &p[3] else {
        unreachable!()
    };
    assert_eq!(resolved.request_id, "0");
    assert!(!resolved.allow);
    assert_eq!(resolved.by, resolved_by::CANCELLED);
    let r = result(&p[4]);
    assert!(r.is_error);
    assert_eq!(r.tool_results[0].text, "interrupted");
    assert_eq!(turn_ends(&p)[0].subtype, "interrupted");
}

#[test]
fn a_load_drops_the_replayed_history_before_and_after_its_answer() {
    let mut first = decoder("");
    replay(&mut first, "load");
    let id = session_id("load");
    let mut d = decoder(&id);
    let (p, changes) = replay(&mut d, "load.2");
    // The replay (the context block before the answer, the earlier prompt
    // and answer after it) is gone; only the new turn is there.
    assert_eq!(kinds(&p), ["run_ready", "text", "turn_end"]);
    let Payload::RunReady(ready) = &p[0] else {
        unreachable!()
    };
    assert_eq!(ready.resume_id, id, "the loaded session's id");
    assert_eq!(ready.model, "auto");
    assert_eq!(content(&p[1]).blocks[0].text, "again");
    assert_eq!(typed(&changes), "again");
    let replayed = out_messages("load.2")
        .iter()
        .filter(|m| m["params"]["update"]["sessionUpdate"] == "agent_message_chunk")
        .count();
    assert_eq!(replayed, 2, "the recording replays the earlier answer");
}

#[test]
fn without_copies_a_load_still_drops_the_replay_but_loses_the_first_turns_text() {
    let id = session_id("load");
    let mut d = decoder(&id);
    let (p, _) = feed_with(&mut d, &transcript("load.2"), false);
    assert_eq!(kinds(&p), ["run_ready", "turn_end"]);
    // The turns after it are whole.
    let mut d = decoder("");
    let (with, _) = replay(&mut d, "follow_up");
    let mut d = decoder("");
    let (without, _) = feed_with(&mut d, &transcript("follow_up"), false);
    assert_eq!(with, without);
}

#[test]
fn an_unknown_session_is_resume_failed_naming_it() {
    let id = "00000000-0000-4000-8000-000000000000";
    let mut d = decoder(id);
    let (p, _) = replay(&mut d, "unknown_session.2");
    assert_eq!(kinds(&p), ["run_error"]);
    let Payload::RunError(e) = &p[0] else {
        unreachable!()
    };
    assert_eq!(e.kind, run_error_kind::RESUME_FAILED);
    assert_eq!(e.resume_id, id);
    assert!(
        e.message.contains("Invalid session identifier"),
        "{}",
        e.message
    );
    // The first process of that recording is a plain turn.
    let mut d = decoder("");
    let (p, _) = replay(&mut d, "unknown_session");
    assert_eq!(kinds(&p), ["run_ready", "text", "turn_end"]);
}

/// The decoder's payloads for each transcript are stored beside the
/// conformance vectors (`tests/vectors/acp/<name>.json`), as Event JSON.
/// Checked here, so a vector's ACP events are what an ACP run gives;
/// `AGENT_HARNESS_WRITE_ACP_PAYLOADS=1` rewrites them. `late_update` is
/// `first_turn` with a chunk added after the prompt's answer.
#[test]
fn vector_payloads_are_what_the_decoder_makes() {
    for name in [
        "first_turn",
        "permission_allow",
        "cancel",
        "cancel_pending_permission",
        "unknown_session",
        "unknown_session.2",
        "load",
        "load.2",
        "late_update",
    ] {
        let (cassette, resume_id) = match name {
            "unknown_session.2" => (name, session_id("unknown_session")),
            "load.2" => (name, session_id("load")),
            "late_update" => ("first_turn", String::new()),
            _ => (name, String::new()),
        };
        let mut lines = transcript(cassette);
        if name == "late_update" {
            let late = json!({"jsonrpc": "2.0", "method": "session/update", "params": {
                "sessionId": session_id(cassette),
                "update": {"sessionUpdate": "agent_message_chunk",
                           "content": {"type": "text", "text": " (late)"}}}});
            lines.push((true, late.to_string()));
        }
        let mut d = decoder(&resume_id);
        let (payloads, _) = feed_lines(&mut d, &lines);
        testing::check_vector(
            "acp",
            "AGENT_HARNESS_WRITE_ACP_PAYLOADS",
            name,
            &format!("gemini/{cassette}"),
            payloads,
        );
    }
}
