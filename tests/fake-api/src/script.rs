//! Directives: what the fake model answers at a given [`Position`] of a conversation.
//!
//! [`reply`] is a pure function of the position (plus an attempt count for
//! `ERROR <status> <times>`), except that a task-notification answer reads the task's output
//! file from this machine.

use crate::conversation::{Position, TaskNotification};
use serde_json::{Value, json};
use std::time::Duration;

/// Text the fake model answers when there is no directive.
pub const DEFAULT_TEXT: &str = "Hello from fake model.";
/// First line of every answer to a `tool_result`; the tool output follows on the next lines.
pub const TOOL_STEP_TEXT: &str = "Tool step finished.";
/// Answer to a CLI-injected `<task-notification>` turn (background Bash or agent finished).
pub const TASK_NOTIFICATION_TEXT: &str = "Background work finished.";
/// The fake summary, in the `<analysis>`/`<summary>` shape the compaction prompt asks for.
pub const COMPACT_SUMMARY: &str = "<analysis>Fake analysis.</analysis>\n<summary>Fake summary of the conversation so far.</summary>";
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

/// Decides the reply for a request at `pos`. `attempt` counts earlier identical requests (for
/// `ERROR <status> <times>`).
pub fn reply(pos: &Position, attempt: u32) -> Reply {
    if pos.compact {
        return Reply::Message(ScriptedMessage::text(COMPACT_SUMMARY));
    }
    if let Some(schema) = &pos.json_schema {
        return Reply::Message(ScriptedMessage::text(fill_schema(schema).to_string()));
    }
    if let Some(steer) = &pos.steer {
        let steered = Position {
            directive: Some(steer.clone()),
            step: 0,
            task_notification: None,
            tool_output: None,
            steer: None,
            compact: false,
            json_schema: None,
            cwd: pos.cwd.clone(),
        };
        return reply(&steered, attempt);
    }
    // An answer to a tool_result echoes the tool's output, whatever the scenario was, unless
    // a new directive arrived in the same message (a prompt sent right after an interrupt).
    if let Some(output) = &pos.tool_output
        && (pos.step > 0 || pos.directive.is_none())
    {
        return Reply::Message(ScriptedMessage::text(tool_step_text(output)));
    }
    let Some(d) = &pos.directive else {
        let text = match &pos.task_notification {
            Some(t) => task_notification_text(t),
            None => DEFAULT_TEXT.to_owned(),
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
        "SLOW" | "SLOWTHENBASH" => {
            let n = words.next().and_then(|w| w.parse().ok()).unwrap_or(40);
            let ms = words.next().and_then(|w| w.parse().ok()).unwrap_or(250);
            let mut blocks = vec![Block::Text {
                chunks: (0..n).map(|i| format!("tick {i} ")).collect(),
            }];
            if d.keyword == "SLOWTHENBASH" {
                // A turn that, once its answer has streamed, goes on: a
                // tool, then another model request.
                let command = words.collect::<Vec<_>>().join(" ");
                let command = or_default(&command, "echo slow-then-bash");
                blocks.push(Block::tool(
                    "Bash",
                    json!({"command": command, "description": "Run command"}),
                ));
            }
            ScriptedMessage {
                blocks,
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
        // A command the model asks to run outside the sandbox (Claude's own Bash flag; the
        // Responses API turns it into Codex's escalation request).
        "ESCBASH" => ScriptedMessage::new(vec![Block::tool(
            "Bash",
            json!({"command": or_default(args, "echo escalated"),
                   "description": "Run outside the sandbox",
                   "dangerouslyDisableSandbox": true}),
        )]),
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
        "BIG" => {
            // A long answer (default 6,000,000 bytes), streamed in 64 KiB
            // chunks: "big 0 big 1 big 2 ..." cut to the exact length.
            let n: usize = words
                .next()
                .and_then(|w| w.parse().ok())
                .unwrap_or(6_000_000);
            let mut text = String::with_capacity(n + 16);
            let mut i = 0u64;
            while text.len() < n {
                text.push_str(&format!("big {i} "));
                i += 1;
            }
            text.truncate(n);
            let chunks = text
                .as_bytes()
                .chunks(64 * 1024)
                .map(|c| String::from_utf8_lossy(c).into_owned())
                .collect();
            ScriptedMessage {
                blocks: vec![Block::Text { chunks }],
                chunk_delay: Duration::ZERO,
            }
        }
        "TOOL" => {
            let name = words.next().unwrap_or("Read");
            let raw = args.trim_start().strip_prefix(name).unwrap_or("").trim();
            let input = serde_json::from_str(raw).unwrap_or_else(|_| json!({}));
            ScriptedMessage::new(vec![Block::tool(name, input)])
        }
        "DEEPTOOL" => {
            let name = words.next().unwrap_or("Read");
            let depth: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(200);
            ScriptedMessage::new(vec![Block::tool(name, nested(depth))])
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

/// A small value that satisfies a JSON schema: the CLI's title call gets
/// `{"title":"Fake session title"}`; Gemini CLI's next-speaker check gets the first of its
/// `enum` (`user`: the turn ends) and its routing a score of 1 (the simple model).
fn fill_schema(schema: &Value) -> Value {
    if let Some(v) = schema.get("const") {
        return v.clone();
    }
    if let Some(v) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return v.clone();
    }
    // Gemini CLI's schemas spell types in upper case (`OBJECT`, `STRING`).
    let kind = schema
        .get("type")
        .and_then(Value::as_str)
        .map(str::to_ascii_lowercase);
    match kind.as_deref() {
        Some("object") => {
            let mut out = serde_json::Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, sub) in props {
                    let v = if name == "title" && sub.get("type") == Some(&json!("string")) {
                        json!("Fake session title")
                    } else {
                        fill_schema(sub)
                    };
                    out.insert(name.clone(), v);
                }
            }
            Value::Object(out)
        }
        Some("array") => json!([]),
        Some("string") => json!("fake"),
        // The lower bound when there is one (Gemini CLI's routing asks for a score from 1).
        Some("integer") | Some("number") => schema.get("minimum").cloned().unwrap_or(json!(1)),
        Some("boolean") => json!(false),
        _ => Value::Null,
    }
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

/// [`TASK_NOTIFICATION_TEXT`], the summary and the task's output: the fake runs on the
/// CLI's machine, so it reads the output file, which lets a test assert that a
/// background command really ran.
fn task_notification_text(t: &TaskNotification) -> String {
    let output = std::fs::read_to_string(&t.output_file).unwrap_or_default();
    format!(
        "{TASK_NOTIFICATION_TEXT}\n{}\n{}",
        t.summary,
        truncate(output.trim_end())
    )
}

fn tool_step_text(output: &str) -> String {
    format!("{TOOL_STEP_TEXT}\n{}", truncate(output))
}

fn truncate(text: &str) -> String {
    let mut out = text.to_owned();
    if out.len() > MAX_ECHOED_OUTPUT {
        let mut cut = MAX_ECHOED_OUTPUT;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("...");
    }
    out
}

/// An object nested `depth` levels deep: `{"level": 1, "next": {"level": 2,
/// "next": … {"level": depth, "bottom": true}}}`. Built from the inside out
/// (no recursion), so any depth works.
fn nested(depth: usize) -> Value {
    let mut v = json!({"level": depth.max(1), "bottom": true});
    for level in (1..depth).rev() {
        v = json!({"level": level, "next": v});
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(messages: Value) -> Value {
        json!({"model": "m", "messages": messages, "system": [{"type": "text", "text": "x\nWorking directory: /w\n"}]})
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
    fn task_notification_echoes_the_output_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("b1.output");
        std::fs::write(&file, "bg-done\n").unwrap();
        let text = format!(
            "<task-notification>\n<task-id>b1</task-id>\n<output-file>{}</output-file>\n<status>completed</status>\n<summary>Background command done</summary>\n</task-notification>",
            file.display()
        );
        let p = Position::of_request(&req(
            json!([{"role": "user", "content": [{"type": "text", "text": text}]}]),
        ));
        assert_eq!(p.label(), "task-notification");
        let Reply::Message(m) = reply(&p, 0) else {
            panic!()
        };
        assert_eq!(
            m.blocks,
            vec![Block::text(
                "Background work finished.\nBackground command done\nbg-done"
            )]
        );
    }

    #[test]
    fn steering_message_runs_its_directive() {
        let body = req(json!([
            {"role": "user", "content": "SLOWBASH 3"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "done"}]},
            {"role": "system", "content": "The user sent a new message while you were working:\nTEXT steered\n\nIMPORTANT: After completing your current task, you MUST address it."},
        ]));
        let p = Position::of_request(&body);
        assert_eq!(p.label(), "steer:TEXT");
        let Reply::Message(m) = reply(&p, 0) else {
            panic!()
        };
        assert_eq!(m.blocks, vec![Block::text("steered")]);
    }

    #[test]
    fn slow_then_bash_streams_then_calls_the_tool() {
        let p = Position::of_request(&req(
            json!([{"role": "user", "content": "SLOWTHENBASH 2 30 echo x y"}]),
        ));
        let Reply::Message(m) = reply(&p, 0) else {
            panic!()
        };
        assert_eq!(m.chunk_delay, Duration::from_millis(30));
        assert_eq!(
            m.blocks,
            vec![
                Block::Text {
                    chunks: vec!["tick 0 ".into(), "tick 1 ".into()]
                },
                Block::tool(
                    "Bash",
                    json!({"command": "echo x y", "description": "Run command"})
                ),
            ]
        );
        assert_eq!(m.stop_reason(), "tool_use");
    }

    #[test]
    fn compaction_gets_a_summary() {
        let body = req(json!([
            {"role": "user", "content": "TEXT a"},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
            {"role": "user", "content": [{"type": "text", "text": "CRITICAL: Respond with TEXT ONLY.\nYour task is to create a detailed summary of the conversation so far"}]},
        ]));
        let p = Position::of_request(&body);
        assert_eq!(p.label(), "compact");
        assert_eq!(
            reply(&p, 0),
            Reply::Message(ScriptedMessage::text(COMPACT_SUMMARY))
        );
    }

    #[test]
    fn json_schema_requests_get_matching_json() {
        let mut body = req(json!([{"role": "user", "content": "<session>\nBASH x\n</session>"}]));
        body["output_config"] = json!({"format": {"type": "json_schema", "schema": {
            "type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}}});
        let p = Position::of_request(&body);
        assert_eq!(p.label(), "json_schema");
        assert_eq!(
            reply(&p, 0),
            Reply::Message(ScriptedMessage::text(r#"{"title":"Fake session title"}"#))
        );
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
