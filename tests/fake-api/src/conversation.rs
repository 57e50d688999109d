//! Reading a Messages API request: which user prompt is the anchor of the scripted
//! scenario, its directive, how far the scenario has got, and what the CLI folded in
//! (tool results, steering prompts, task notifications, compaction, JSON-schema side calls).
//!
//! The anchor is the latest user message that carries prompt text (not only `tool_result`
//! blocks or `<system-reminder>` wrappers); the number of assistant messages after it is the
//! step. Nothing is kept per connection, so a CLI that retries, reconnects or is resumed
//! (`--resume`) continues the same scenario.

use crate::directive::{Directive, parse_directive};
use serde_json::Value;

/// The CLI's compaction prompt says this; the request is a summarisation side call.
const COMPACT_MARKER: &str = "create a detailed summary of the conversation";

/// How the CLI introduces a prompt the user sent while a turn was running.
const STEER_MARKER: &str = "The user sent a new message while you were working:";

/// The `<task-notification>` the CLI sends the model when a background task ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskNotification {
    /// `<status>`: completed, failed, killed.
    pub status: String,
    /// `<summary>`.
    pub summary: String,
    /// `<output-file>`: the task's output, on this machine.
    pub output_file: String,
}

impl TaskNotification {
    /// Reads the notification out of a prompt text, if it holds one.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let body = text.split_once("<task-notification>")?.1;
        let tag = |name: &str| {
            body.split_once(&format!("<{name}>"))
                .and_then(|(_, rest)| rest.split_once(&format!("</{name}>")))
                .map(|(v, _)| v.trim().to_owned())
                .unwrap_or_default()
        };
        Some(Self {
            status: tag("status"),
            summary: tag("summary"),
            output_file: tag("output-file"),
        })
    }
}

/// Where a request stands in its scripted scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Position {
    /// The anchor's directive, if any.
    pub directive: Option<Directive>,
    /// Assistant messages since the anchor: 0 for the first answer.
    pub step: usize,
    /// The anchor is a CLI-injected `<task-notification>` (a background task finished).
    pub task_notification: Option<TaskNotification>,
    /// Text of the `tool_result` blocks in the last user/assistant message, if it has any.
    pub tool_output: Option<String>,
    /// A prompt the user sent mid-turn that the CLI folded into this request (as a
    /// `system` message after the tool_result), when it starts with a directive.
    pub steer: Option<Directive>,
    /// This is the CLI's `/compact` (or auto-compact) summarisation call.
    pub compact: bool,
    /// `output_config.format.schema` when the request asks for JSON output (the CLI's
    /// session-title side call does, when non-essential traffic is not disabled).
    pub json_schema: Option<Value>,
    /// The `Working directory:` line of the system prompt, to make relative paths absolute.
    pub cwd: Option<String>,
}

impl Position {
    /// Reads the request body of a `POST /v1/messages`.
    pub fn of_request(body: &Value) -> Self {
        let empty = Vec::new();
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        let anchor = messages
            .iter()
            .rposition(|m| role(m) == "user" && !prompt_texts(m).is_empty());
        let (directive, step, task_notification) = match anchor {
            Some(i) => {
                let texts = prompt_texts(&messages[i]);
                let directive = texts.iter().rev().find_map(|t| parse_directive(t));
                let task = texts.iter().rev().find_map(|t| TaskNotification::parse(t));
                let step = messages[i + 1..]
                    .iter()
                    .filter(|m| role(m) == "assistant")
                    .count();
                (directive, step, task)
            }
            None => (None, 0, None),
        };
        // The CLI may append `system`-role messages (mid-conversation system beta) after the
        // tool_result, so look at the last user/assistant message.
        let tool_output = messages
            .iter()
            .rfind(|m| role(m) != "system")
            .and_then(tool_result_text);
        let last_assistant = messages.iter().rposition(|m| role(m) == "assistant");
        // Only a turn in progress (the anchor is before the last assistant message) can be
        // steered; a stale steering message stays in later requests.
        let steer = match (anchor, last_assistant) {
            (Some(a), Some(l)) if a < l => messages[l..]
                .iter()
                .filter(|m| role(m) == "system")
                .filter_map(steering_text)
                .filter_map(|t| parse_directive(&t))
                .next_back(),
            _ => None,
        };
        let compact = anchor.is_some_and(|i| {
            prompt_texts(&messages[i])
                .iter()
                .any(|t| t.contains(COMPACT_MARKER))
        });
        let json_schema = body
            .pointer("/output_config/format")
            .filter(|f| f.get("type").and_then(Value::as_str) == Some("json_schema"))
            .and_then(|f| f.get("schema"))
            .cloned();
        Self {
            directive,
            step,
            task_notification,
            tool_output,
            steer,
            compact,
            json_schema,
            cwd: system_cwd(body),
        }
    }

    /// The keyword, for logs and the request log.
    pub fn label(&self) -> String {
        if self.compact {
            return "compact".to_owned();
        }
        if self.json_schema.is_some() {
            return "json_schema".to_owned();
        }
        if let Some(s) = &self.steer {
            return format!("steer:{}", s.keyword);
        }
        let kw = self.directive.as_ref().map_or("-", |d| d.keyword.as_str());
        if self.tool_output.is_some() {
            format!("{kw}+tool_result")
        } else if self.task_notification.is_some() && self.directive.is_none() {
            "task-notification".to_owned()
        } else {
            kw.to_owned()
        }
    }
}

/// The user's prompts of a Messages request, oldest first (reminders and tool results left
/// out).
pub fn user_prompts(body: &Value) -> Vec<String> {
    body.get("messages")
        .and_then(Value::as_array)
        .map_or_else(Vec::new, |ms| {
            ms.iter()
                .filter(|m| role(m) == "user")
                .flat_map(prompt_texts)
                .collect()
        })
}

fn role(m: &Value) -> &str {
    m.get("role").and_then(Value::as_str).unwrap_or("")
}

/// Prompt texts of a message: its text blocks with `<system-reminder>` sections removed,
/// ignoring blocks left empty. `tool_result` blocks are not prompts.
fn prompt_texts(m: &Value) -> Vec<String> {
    let raw: Vec<&str> = match m.get("content") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    };
    raw.into_iter()
        .map(strip_reminders)
        .filter(|t| !t.trim().is_empty())
        .collect()
}

fn strip_reminders(text: &str) -> String {
    const OPEN: &str = "<system-reminder>";
    const CLOSE: &str = "</system-reminder>";
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        match rest[start..].find(CLOSE) {
            Some(end) => rest = &rest[start + end + CLOSE.len()..],
            None => {
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// The user's prompt inside a CLI steering message, if `m` is one.
fn steering_text(m: &Value) -> Option<String> {
    let text = match m.get("content")? {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    let rest = text.split_once(STEER_MARKER)?.1;
    let prompt = rest.split_once("\n\nIMPORTANT:").map_or(rest, |(p, _)| p);
    Some(prompt.trim().to_owned())
}

/// The text of the `tool_result` blocks of a message, or `None` when it has none.
fn tool_result_text(m: &Value) -> Option<String> {
    let blocks = m.get("content")?.as_array()?;
    let results: Vec<String> = blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .map(|b| match b.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .collect();
    (!results.is_empty()).then(|| results.join("\n"))
}

/// The CLI names the working directory on a `Working directory: /path` (or `Primary working
/// directory:`) line: in the system prompt (2.1.197), or in an `# Environment` text block of
/// the messages (newer CLIs, e.g. 2.1.332).
fn system_cwd(body: &Value) -> Option<String> {
    let blocks_text = |v: &'_ Value| -> Vec<String> {
        match v {
            Value::String(s) => vec![s.clone()],
            Value::Array(blocks) => blocks
                .iter()
                .filter_map(|b| b.get("text").and_then(Value::as_str))
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        }
    };
    let mut texts: Vec<String> = body.get("system").map(blocks_text).unwrap_or_default();
    if let Some(Value::Array(messages)) = body.get("messages") {
        texts.extend(
            messages
                .iter()
                .filter_map(|m| m.get("content"))
                .flat_map(blocks_text)
                .filter(|t| t.contains("working directory:")),
        );
    }
    texts.iter().find_map(|t| {
        t.lines().find_map(|l| {
            let l = l.trim().trim_start_matches("- ");
            l.strip_prefix("Primary working directory:")
                .or_else(|| l.strip_prefix("Working directory:"))
                .map(|p| p.trim().to_owned())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(messages: Value) -> Value {
        json!({"model": "m", "messages": messages, "system": [{"type": "text", "text": "x\nWorking directory: /w\n"}]})
    }

    /// CLI 2.1.332 sends the environment block as message text, not in the system prompt.
    #[test]
    fn cwd_from_an_environment_block_in_the_messages() {
        let body = json!({"model": "m", "system": [{"type": "text", "text": "x"}], "messages": [
            {"role": "user", "content": [{"type": "text", "text": "TEXT hi"}]},
            {"role": "user", "content": [{"type": "text", "text": "# Environment\n - Primary working directory: /w2\n - Platform: linux"}]}
        ]});
        assert_eq!(system_cwd(&body).as_deref(), Some("/w2"));
    }

    #[test]
    fn reminders_are_not_prompts() {
        let p = Position::of_request(&req(json!([{"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>\nBASH no\n</system-reminder>"},
            {"type": "text", "text": "TEXT yes"},
        ]}])));
        assert_eq!(p.directive.unwrap().keyword, "TEXT");
        assert_eq!(p.cwd.as_deref(), Some("/w"));
    }
}
