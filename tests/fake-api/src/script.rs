//! Directives: what the fake model answers, read from the conversation itself.
//!
//! The script is a pure function of the request body. The "anchor" is the latest user
//! message that carries prompt text (not only `tool_result` blocks or `<system-reminder>`
//! wrappers); its directive decides the scenario, and the number of assistant messages after
//! it says how far the scenario has got. No state is kept per connection, so a CLI that
//! retries, reconnects or is resumed (`--resume`) continues the same scenario.

use serde_json::{Value, json};
use std::time::Duration;

/// Text the fake model answers when there is no directive.
pub const DEFAULT_TEXT: &str = "Hello from fake model.";
/// First line of every answer to a `tool_result`; the tool output follows on the next lines.
pub const TOOL_STEP_TEXT: &str = "Tool step finished.";
/// Answer to a CLI-injected `<task-notification>` turn (background Bash or agent finished).
pub const TASK_NOTIFICATION_TEXT: &str = "Background work finished.";
/// Longest tool output echoed back in the answer to a `tool_result`.
const MAX_ECHOED_OUTPUT: usize = 4000;

/// What to send back for one `POST /v1/messages`.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// A normal assistant message.
    Message(ScriptedMessage),
    /// An HTTP error with the API's error body.
    Error {
        /// HTTP status, e.g. 400, 429, 500, 529.
        status: u16,
        /// `error.message` in the body.
        message: String,
    },
    /// `message_start`, then nothing until the client goes away.
    Hang,
}

/// An assistant message as a list of blocks, streamed with an optional pause between chunks.
#[derive(Debug, Clone, PartialEq)]
pub struct ScriptedMessage {
    /// Content blocks in order.
    pub blocks: Vec<Block>,
    /// Pause before each text chunk after the first (`SLOW`); zero streams at once.
    pub chunk_delay: Duration,
}

impl ScriptedMessage {
    fn new(blocks: Vec<Block>) -> Self {
        Self {
            blocks,
            chunk_delay: Duration::ZERO,
        }
    }

    fn text(text: impl Into<String>) -> Self {
        Self::new(vec![Block::text(text)])
    }

    /// `tool_use` when any block is a tool call, else `end_turn`.
    pub fn stop_reason(&self) -> &'static str {
        if self
            .blocks
            .iter()
            .any(|b| matches!(b, Block::ToolUse { .. }))
        {
            "tool_use"
        } else {
            "end_turn"
        }
    }

    /// All text and thinking, for output token estimates.
    pub fn output_chars(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| match b {
                Block::Text { chunks } => chunks.iter().map(String::len).sum(),
                Block::Thinking { thinking, .. } => thinking.len(),
                Block::ToolUse { input, .. } => input.to_string().len(),
            })
            .sum()
    }
}

/// One content block of a scripted message.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    /// Text, streamed as one `text_delta` per chunk.
    Text {
        /// The chunks; their concatenation is the block's text.
        chunks: Vec<String>,
    },
    /// Extended thinking, streamed as `thinking_delta` then `signature_delta`.
    Thinking {
        /// The thinking text.
        thinking: String,
        /// An opaque signature, as the real API sends.
        signature: String,
    },
    /// A tool call, streamed as `input_json_delta` fragments.
    ToolUse {
        /// Tool name as the CLI knows it (`Bash`, `Write`, `Agent`, ...).
        name: String,
        /// Tool input.
        input: Value,
    },
}

impl Block {
    fn text(text: impl Into<String>) -> Self {
        Block::Text {
            chunks: vec![text.into()],
        }
    }

    fn tool(name: &str, input: Value) -> Self {
        Block::ToolUse {
            name: name.to_owned(),
            input,
        }
    }
}

/// The directive found in the anchor message, with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// The keyword, e.g. `BASH`.
    pub keyword: String,
    /// Everything after the keyword, trimmed.
    pub args: String,
}

/// Every keyword the script understands. A directive is the first word of a prompt text, or
/// the second when the first is `please` (the convention of the recorded transcripts).
pub const KEYWORDS: &[&str] = &[
    "TEXT",
    "SLOW",
    "THINK",
    "BASH",
    "FAILBASH",
    "SLOWBASH",
    "BGBASH",
    "WRITE",
    "WRITEBASH",
    "AGENT",
    "SPAWNSUB",
    "BGAGENT",
    "CHILDTASK",
    "TOOL",
    "ERROR",
    "ERR400",
    "ERR529",
    "HANG",
    "CRONME",
    "CRONFIRED",
    "WAKEME",
    "WOKEN",
];

/// Where a request stands in its scripted scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Position {
    /// The anchor's directive, if any.
    pub directive: Option<Directive>,
    /// Assistant messages since the anchor: 0 for the first answer.
    pub step: usize,
    /// The anchor is a CLI-injected `<task-notification>`.
    pub task_notification: bool,
    /// Text of the `tool_result` blocks in the last message, if it has any.
    pub tool_output: Option<String>,
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
                let task = texts.iter().any(|t| t.contains("<task-notification>"));
                let step = messages[i + 1..]
                    .iter()
                    .filter(|m| role(m) == "assistant")
                    .count();
                (directive, step, task)
            }
            None => (None, 0, false),
        };
        let tool_output = messages.last().and_then(tool_result_text);
        Self {
            directive,
            step,
            task_notification,
            tool_output,
            cwd: system_cwd(body),
        }
    }

    /// The keyword, for logs and the request log.
    pub fn label(&self) -> String {
        let kw = self.directive.as_ref().map_or("-", |d| d.keyword.as_str());
        if self.tool_output.is_some() {
            format!("{kw}+tool_result")
        } else if self.task_notification && self.directive.is_none() {
            "task-notification".to_owned()
        } else {
            kw.to_owned()
        }
    }
}

/// Decides the reply for a request at `pos`. `attempt` counts earlier identical requests (for
/// `ERROR <status> <times>`).
pub fn reply(pos: &Position, attempt: u32) -> Reply {
    // Any answer to a tool_result echoes the tool's output, whatever the scenario was.
    if let Some(output) = &pos.tool_output
        && pos.step > 0
    {
        return Reply::Message(ScriptedMessage::text(tool_step_text(output)));
    }
    let Some(d) = &pos.directive else {
        let text = if pos.task_notification {
            TASK_NOTIFICATION_TEXT
        } else {
            DEFAULT_TEXT
        };
        return Reply::Message(ScriptedMessage::text(text));
    };
    if pos.step > 0 {
        // A scenario that already answered and is asked again without a tool_result (e.g.
        // after a hook or a retry the CLI made on its own): finish politely.
        return Reply::Message(ScriptedMessage::text(TOOL_STEP_TEXT));
    }
    let args = d.args.as_str();
    let mut words = args.split_whitespace();
    let msg = match d.keyword.as_str() {
        "TEXT" => ScriptedMessage::text(or_default(args, DEFAULT_TEXT)),
        "SLOW" => {
            let n = words.next().and_then(|w| w.parse().ok()).unwrap_or(40);
            let ms = words.next().and_then(|w| w.parse().ok()).unwrap_or(250);
            ScriptedMessage {
                blocks: vec![Block::Text {
                    chunks: (0..n).map(|i| format!("tick {i} ")).collect(),
                }],
                chunk_delay: Duration::from_millis(ms),
            }
        }
        "THINK" => {
            let answer = or_default(args, "Thought about it.");
            ScriptedMessage::new(vec![
                Block::Thinking {
                    thinking: format!("The user wants me to think first. I will answer: {answer}"),
                    signature: "ZmFrZS1zaWduYXR1cmUtZm9yLXRoaW5raW5n".to_owned(),
                },
                Block::text(answer),
            ])
        }
        "BASH" => bash(or_default(args, "echo hello-bash"), "Run command", false),
        "FAILBASH" => bash("echo out; echo err 1>&2; exit 3", "fail", false),
        "SLOWBASH" => {
            let secs: u64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(20);
            bash(&format!("sleep {secs}"), &format!("Sleep {secs}s"), false)
        }
        "BGBASH" => bash(
            or_default(args, "sleep 3; echo bg-done"),
            "Background command",
            true,
        ),
        "WRITEBASH" => bash(
            &format!("touch made-by-bash-{}", crate::ids::unique_number()),
            "Create file",
            false,
        ),
        "WRITE" => {
            let path = words.next().unwrap_or("fake-api-written.txt");
            let content = args
                .trim_start()
                .strip_prefix(path)
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .unwrap_or("written by the fake model");
            let file_path = match &pos.cwd {
                Some(cwd) if !path.starts_with('/') => {
                    format!("{}/{}", cwd.trim_end_matches('/'), path)
                }
                _ => path.to_owned(),
            };
            ScriptedMessage::new(vec![Block::tool(
                "Write",
                json!({"file_path": file_path, "content": format!("{content}\n")}),
            )])
        }
        "AGENT" => agent(or_default(args, "CHILDTASK reply hi"), "child task", false),
        "SPAWNSUB" => {
            let mut m = agent(or_default(args, "CHILDTASK reply hi"), "child task", false);
            m.blocks.insert(0, Block::text("Spawning."));
            m
        }
        "BGAGENT" => agent(or_default(args, "CHILDTASK reply hi"), "child bg", true),
        "CHILDTASK" => ScriptedMessage::text("child says hi"),
        "TOOL" => {
            let name = words.next().unwrap_or("Read");
            let raw = args.trim_start().strip_prefix(name).unwrap_or("").trim();
            let input = serde_json::from_str(raw).unwrap_or_else(|_| json!({}));
            ScriptedMessage::new(vec![Block::tool(name, input)])
        }
        "ERROR" | "ERR400" | "ERR529" => {
            let (status, times) = match d.keyword.as_str() {
                "ERR400" => (400, None),
                "ERR529" => (529, None),
                _ => (
                    words.next().and_then(|w| w.parse().ok()).unwrap_or(500),
                    words.next().and_then(|w| w.parse::<u32>().ok()),
                ),
            };
            match times {
                Some(t) if attempt >= t => {
                    ScriptedMessage::text(format!("Recovered after {t} failed attempts."))
                }
                _ => {
                    return Reply::Error {
                        status,
                        message: format!("fake {status}"),
                    };
                }
            }
        }
        "HANG" => return Reply::Hang,
        "CRONME" => ScriptedMessage::new(vec![Block::tool(
            "CronCreate",
            json!({"cron": "* * * * *", "prompt": or_default(args, "CRONFIRED ping"), "recurring": false}),
        )]),
        "CRONFIRED" => ScriptedMessage::text("Scheduled prompt handled."),
        "WAKEME" => ScriptedMessage::new(vec![Block::tool(
            "ScheduleWakeup",
            json!({"delaySeconds": 60, "reason": "test wake", "prompt": "WOKEN up"}),
        )]),
        "WOKEN" => ScriptedMessage::text("Woke up."),
        _ => ScriptedMessage::text(DEFAULT_TEXT),
    };
    Reply::Message(msg)
}

fn or_default<'a>(args: &'a str, default: &'a str) -> &'a str {
    if args.trim().is_empty() {
        default
    } else {
        args.trim()
    }
}

fn bash(command: &str, description: &str, background: bool) -> ScriptedMessage {
    let mut input = json!({"command": command, "description": description});
    if background {
        input["run_in_background"] = json!(true);
    }
    ScriptedMessage::new(vec![Block::tool("Bash", input)])
}

fn agent(prompt: &str, description: &str, background: bool) -> ScriptedMessage {
    let mut input = json!({
        "description": description,
        "prompt": prompt,
        "subagent_type": "general-purpose",
    });
    if background {
        input["run_in_background"] = json!(true);
    }
    ScriptedMessage::new(vec![Block::tool("Agent", input)])
}

fn tool_step_text(output: &str) -> String {
    let mut out = output.to_owned();
    if out.len() > MAX_ECHOED_OUTPUT {
        let mut cut = MAX_ECHOED_OUTPUT;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    format!("{TOOL_STEP_TEXT}\n{out}")
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

/// The directive of one prompt text: its first word, or its second after `please`.
pub fn parse_directive(text: &str) -> Option<Directive> {
    let text = text.trim_start();
    let (first, rest) = split_word(text);
    let (kw, args) = if first.eq_ignore_ascii_case("please") {
        split_word(rest.trim_start())
    } else {
        (first, rest)
    };
    KEYWORDS.contains(&kw).then(|| Directive {
        keyword: kw.to_owned(),
        args: args.trim().to_owned(),
    })
}

fn split_word(s: &str) -> (&str, &str) {
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
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

/// The CLI's system prompt names the working directory on a `Working directory: /path` line.
fn system_cwd(body: &Value) -> Option<String> {
    let texts: Vec<&str> = match body.get("system") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    };
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

    fn req(messages: Value) -> Value {
        json!({"model": "m", "messages": messages, "system": [{"type": "text", "text": "x\nWorking directory: /w\n"}]})
    }

    #[test]
    fn directive_is_first_word_or_after_please() {
        assert_eq!(parse_directive("TEXT hi there").unwrap().args, "hi there");
        assert_eq!(parse_directive("please BASH").unwrap().keyword, "BASH");
        assert_eq!(parse_directive("SLOW please").unwrap().keyword, "SLOW");
        assert!(parse_directive("Respond with TEXT ONLY").is_none());
        assert!(parse_directive("text hi").is_none());
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

    #[test]
    fn tool_result_continues_the_scenario() {
        let body = req(json!([
            {"role": "user", "content": "please BASH echo hi"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "hi"}]},
        ]));
        let p = Position::of_request(&body);
        assert_eq!(p.step, 1);
        let Reply::Message(m) = reply(&p, 0) else {
            panic!()
        };
        assert_eq!(m.blocks, vec![Block::text("Tool step finished.\nhi")]);
    }

    #[test]
    fn error_recovers_after_times() {
        let p = Position::of_request(&req(json!([{"role": "user", "content": "ERROR 529 2"}])));
        assert!(matches!(reply(&p, 1), Reply::Error { status: 529, .. }));
        assert!(matches!(reply(&p, 2), Reply::Message(_)));
    }

    #[test]
    fn write_makes_relative_paths_absolute() {
        let p = Position::of_request(&req(
            json!([{"role": "user", "content": "WRITE a.txt hello world"}]),
        ));
        let Reply::Message(m) = reply(&p, 0) else {
            panic!()
        };
        assert_eq!(
            m.blocks,
            vec![Block::tool(
                "Write",
                json!({"file_path": "/w/a.txt", "content": "hello world\n"})
            )]
        );
    }
}
