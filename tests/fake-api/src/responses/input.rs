//! Reading a Responses API request into the [`Position`] the script answers from.
//!
//! `input` is a list of items: `message` (roles `developer`, `user`, `assistant`),
//! `reasoning`, `function_call` and `function_call_output`. The anchor is the latest user
//! message with prompt text. Codex sends its own context as user messages too
//! (`<environment_context>`, `<turn_aborted>`, `# AGENTS.md instructions …`); those are not
//! prompts. The step is the number of model replies after the anchor, a reply being a run of
//! the model's items (`reasoning`, assistant `message`, `function_call`). As on the Messages
//! side nothing is kept per connection, so a resumed thread continues its scenario.

use crate::conversation::Position;
use crate::directive::parse_directive;
use crate::usage::Usage;
use serde_json::Value;

/// Where a `POST /v1/responses` body stands in its scenario.
pub fn position(body: &Value) -> Position {
    let items = items(body);
    let anchor = items.iter().rposition(|i| !prompts(i).is_empty());
    let (directive, step) = match anchor {
        Some(a) => {
            let directive = prompts(&items[a])
                .iter()
                .rev()
                .find_map(|t| parse_directive(t));
            (directive, replies(&items[a + 1..]))
        }
        None => (None, 0),
    };
    // The tool outputs the client sent back since the model's last item.
    let last_model = items.iter().rposition(from_model);
    let outputs: Vec<String> = items[last_model.map_or(0, |i| i + 1)..]
        .iter()
        .filter(|i| kind(i) == "function_call_output")
        .map(output_text)
        .collect();
    Position {
        directive,
        step,
        task_notification: None,
        tool_output: (!outputs.is_empty()).then(|| outputs.join("\n")),
        steer: None,
        compact: false,
        json_schema: None,
        cwd: items.iter().flat_map(texts).find_map(environment_cwd),
    }
}

/// Token estimates for a `POST /v1/responses` body.
pub fn usage(body: &Value) -> Usage {
    Usage::estimate(
        &[body.get("instructions"), body.get("tools")],
        items(body),
        from_model,
    )
}

/// The user's prompts in a Responses request, oldest first (Codex's context blocks left
/// out): what a test reads to see that a resumed thread sent the earlier conversation.
pub fn user_prompts(body: &Value) -> Vec<String> {
    items(body).iter().flat_map(prompts).collect()
}

fn items(body: &Value) -> &[Value] {
    body.get("input")
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn kind(item: &Value) -> &str {
    item.get("type")
        .and_then(Value::as_str)
        .unwrap_or("message")
}

fn role(item: &Value) -> &str {
    item.get("role").and_then(Value::as_str).unwrap_or("")
}

/// An item the model produced (as opposed to the user, the client or a tool).
fn from_model(item: &Value) -> bool {
    match kind(item) {
        "message" => role(item) == "assistant",
        "reasoning" | "function_call" | "custom_tool_call" | "local_shell_call" => true,
        _ => false,
    }
}

/// How many runs of model items `items` holds.
fn replies(items: &[Value]) -> usize {
    let mut n = 0;
    let mut in_reply = false;
    for item in items {
        let m = from_model(item);
        if m && !in_reply {
            n += 1;
        }
        in_reply = m;
    }
    n
}

/// The texts of a message item's content parts.
fn texts(item: &Value) -> Vec<&str> {
    match item.get("content") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// The prompt texts of a user message: its texts minus Codex's context blocks.
fn prompts(item: &Value) -> Vec<String> {
    if kind(item) != "message" || role(item) != "user" {
        return Vec::new();
    }
    texts(item)
        .into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty() && !t.starts_with('<') && !t.starts_with("# AGENTS.md"))
        .map(str::to_owned)
        .collect()
}

/// A `function_call_output`'s text: a plain string, or content parts.
fn output_text(item: &Value) -> String {
    match item.get("output") {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Object(o)) => o
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        _ => String::new(),
    }
}

/// `<cwd>…</cwd>` of Codex's `<environment_context>` block.
fn environment_cwd(text: &str) -> Option<String> {
    let rest = text.split_once("<environment_context>")?.1;
    let cwd = rest.split_once("<cwd>")?.1.split_once("</cwd>")?.0;
    Some(cwd.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::{Block, Reply, reply};
    use serde_json::json;

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    fn body(input: Value) -> Value {
        json!({"model": "m", "instructions": "", "input": input, "stream": true})
    }

    #[test]
    fn context_blocks_are_not_prompts() {
        let b = body(json!([
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "TEXT no"}]},
            user("# AGENTS.md instructions for /w\n\nTEXT no"),
            user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
            user("BASH echo hi"),
        ]));
        let p = position(&b);
        assert_eq!(p.directive.unwrap().args, "echo hi");
        assert_eq!((p.step, p.cwd.as_deref()), (0, Some("/w")));
        assert_eq!(p.tool_output, None);
        assert_eq!(user_prompts(&b), ["BASH echo hi"]);
    }

    #[test]
    fn a_function_call_output_continues_the_scenario() {
        let b = body(json!([
            user("BASH echo hi"),
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "name": "exec_command", "arguments": "{\"cmd\":\"echo hi\"}", "call_id": "c1"},
            {"type": "function_call_output", "call_id": "c1", "output": "hi\n"},
        ]));
        let p = position(&b);
        assert_eq!((p.step, p.tool_output.as_deref()), (1, Some("hi\n")));
        assert_eq!(p.label(), "BASH+tool_result");
        let Reply::Message(m) = reply(&p, 0) else {
            panic!()
        };
        assert_eq!(
            m.blocks,
            vec![Block::Text {
                chunks: vec!["Tool step finished.\nhi\n".into()]
            }]
        );
    }

    #[test]
    fn a_follow_up_prompt_is_the_new_anchor() {
        let b = body(json!([
            user("TEXT one"),
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one"}]},
            user("<turn_aborted>\n</turn_aborted>"),
            user("TEXT two"),
        ]));
        let p = position(&b);
        assert_eq!((p.directive.unwrap().args.as_str(), p.step), ("two", 0));
        assert_eq!(user_prompts(&b), ["TEXT one", "TEXT two"]);
        let u = usage(&b);
        assert!(u.cache_read_input_tokens > 0 && u.cache_creation_input_tokens > 0);
    }
}
