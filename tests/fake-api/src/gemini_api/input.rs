//! Reading a Gemini API request into the [`Position`] the script answers from.
//!
//! `contents` is a list of turns with a `role` (`user` or `model`) and `parts`: `text`
//! (with `thought: true` for the model's thinking), `functionCall` and `functionResponse`.
//! The anchor is the latest user turn with prompt text; a user turn holding only
//! `functionResponse` parts is a tool answer, not a prompt. Gemini CLI sends its own context
//! as user text too (the session context block it opens a chat with); those are not prompts.
//! The step is the number of model turns after the anchor. As on the other APIs nothing is
//! kept per connection, so a loaded session continues its scenario.

use crate::conversation::Position;
use crate::directive::parse_directive;
use crate::usage::Usage;
use serde_json::Value;

/// Where a `:streamGenerateContent` or `:generateContent` body stands in its scenario.
pub fn position(body: &Value) -> Position {
    let turns = contents(body);
    let anchor = turns.iter().rposition(|t| !prompts(t).is_empty());
    let (directive, step) = match anchor {
        Some(a) => {
            let directive = prompts(&turns[a])
                .iter()
                .rev()
                .find_map(|t| parse_directive(t));
            let step = turns[a + 1..].iter().filter(|t| role(t) == "model").count();
            (directive, step)
        }
        None => (None, 0),
    };
    // The tool answers the client sent since the model's last turn.
    let last_model = turns.iter().rposition(|t| role(t) == "model");
    let outputs: Vec<String> = turns[last_model.map_or(0, |i| i + 1)..]
        .iter()
        .flat_map(parts)
        .filter_map(|p| p.get("functionResponse"))
        .map(response_text)
        .collect();
    Position {
        directive,
        step,
        task_notification: None,
        tool_output: (!outputs.is_empty()).then(|| outputs.join("\n")),
        steer: None,
        compact: false,
        json_schema: json_schema(body),
        cwd: turns
            .iter()
            .flat_map(parts)
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .find_map(context_cwd),
    }
}

/// Token estimates for a Gemini request body.
pub fn usage(body: &Value) -> Usage {
    Usage::estimate(
        &[body.get("systemInstruction"), body.get("tools")],
        contents(body),
        |t| role(t) == "model",
    )
}

/// The user's prompts of a Gemini request, oldest first (the CLI's context blocks and tool
/// answers left out): what a test reads to see that a loaded session sent the earlier
/// conversation.
pub fn user_prompts(body: &Value) -> Vec<String> {
    contents(body).iter().flat_map(prompts).collect()
}

/// Whether the request asks for the model's thoughts
/// (`generationConfig.thinkingConfig.includeThoughts`): only then does a reply carry
/// thought parts, as the real API does.
pub fn wants_thoughts(body: &Value) -> bool {
    body.pointer("/generationConfig/thinkingConfig/includeThoughts")
        .and_then(Value::as_bool)
        == Some(true)
}

/// The JSON schema of a structured-output call (`generationConfig.responseJsonSchema` or
/// `responseSchema`): Gemini CLI's routing and next-speaker checks ask for one.
fn json_schema(body: &Value) -> Option<Value> {
    let config = body.get("generationConfig")?;
    config
        .get("responseJsonSchema")
        .or_else(|| config.get("responseSchema"))
        .cloned()
}

fn contents(body: &Value) -> &[Value] {
    body.get("contents")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn role(turn: &Value) -> &str {
    turn.get("role").and_then(Value::as_str).unwrap_or("user")
}

fn parts(turn: &Value) -> &[Value] {
    turn.get("parts")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// The prompt texts of a user turn: its text parts minus the CLI's context blocks.
fn prompts(turn: &Value) -> Vec<String> {
    if role(turn) != "user" {
        return Vec::new();
    }
    parts(turn)
        .iter()
        .filter(|p| p.get("thought").and_then(Value::as_bool) != Some(true))
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .map(str::trim)
        .filter(|t| !t.is_empty() && !is_context(t))
        .map(str::to_owned)
        .collect()
}

/// Text Gemini CLI adds to a chat by itself: its session context (`<session_context>`, or
/// `This is the Gemini CLI. We are setting up the context …` in older releases) and other
/// tagged blocks.
fn is_context(text: &str) -> bool {
    text.starts_with('<') || text.starts_with("This is the Gemini CLI.")
}

/// A `functionResponse`'s text: `response.output` (or `response.error`), else the whole
/// response as JSON.
fn response_text(fr: &Value) -> String {
    let response = fr.get("response").unwrap_or(&Value::Null);
    ["output", "error", "llmContent"]
        .iter()
        .find_map(|k| response.get(k).and_then(Value::as_str))
        .map_or_else(|| response.to_string(), str::to_owned)
}

/// The working directory the CLI's context names (`I'm currently working in the directory:
/// /w`), to make relative paths absolute.
fn context_cwd(text: &str) -> Option<String> {
    let rest = text.split_once("working in the directory:")?.1;
    let line = rest.trim_start().lines().next()?.trim();
    (!line.is_empty()).then(|| line.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{Block, Reply, reply};
    use serde_json::json;

    fn user(text: &str) -> Value {
        json!({"role": "user", "parts": [{"text": text}]})
    }

    fn model(text: &str) -> Value {
        json!({"role": "model", "parts": [{"text": text}]})
    }

    fn body(contents: Value) -> Value {
        json!({"contents": contents, "systemInstruction": {"parts": [{"text": "sys"}]}})
    }

    #[test]
    fn context_is_not_a_prompt() {
        let b = body(json!([
            user(
                "<session_context>\nI'm currently working in the directory: /w\n</session_context>"
            ),
            model("Got it. Thanks for the context!"),
            user("BASH echo hi"),
        ]));
        let p = position(&b);
        assert_eq!(p.directive.unwrap().args, "echo hi");
        assert_eq!((p.step, p.cwd.as_deref()), (0, Some("/w")));
        assert_eq!(user_prompts(&b), ["BASH echo hi"]);
        assert!(p.json_schema.is_none());
    }

    #[test]
    fn a_function_response_continues_the_scenario() {
        let b = body(json!([
            user("BASH echo hi"),
            {"role": "model", "parts": [{"functionCall": {"name": "run_shell_command", "args": {"command": "echo hi"}}}]},
            {"role": "user", "parts": [{"functionResponse": {"name": "run_shell_command", "response": {"output": "Output: hi"}}}]},
        ]));
        let p = position(&b);
        assert_eq!((p.step, p.tool_output.as_deref()), (1, Some("Output: hi")));
        assert_eq!(p.label(), "BASH+tool_result");
        let Reply::Message(m) = reply(&p, 0) else {
            panic!()
        };
        assert_eq!(
            m.blocks,
            vec![Block::Text {
                chunks: vec!["Tool step finished.\nOutput: hi".into()]
            }]
        );
    }

    #[test]
    fn a_follow_up_is_the_new_anchor_and_usage_reads_the_cache() {
        let b = body(json!([user("TEXT one"), model("one"), user("TEXT two")]));
        let p = position(&b);
        assert_eq!((p.directive.unwrap().args.as_str(), p.step), ("two", 0));
        assert_eq!(user_prompts(&b), ["TEXT one", "TEXT two"]);
        let u = usage(&b);
        assert!(u.cache_read_input_tokens > 0 && u.cache_creation_input_tokens > 0);
    }

    #[test]
    fn a_schema_call_is_a_side_call() {
        let mut b = body(json!([user("TEXT one"), model("one")]));
        b["generationConfig"] = json!({"responseJsonSchema": {"type": "object"}});
        assert_eq!(position(&b).label(), "json_schema");
        assert!(!wants_thoughts(&b));
        b["generationConfig"] = json!({"thinkingConfig": {"includeThoughts": true}});
        assert!(wants_thoughts(&b));
    }
}
