//! `session/update` notifications as content: the text and thinking being
//! written (live typing, then one block with all its chunks), tool calls,
//! plans and usage.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde_json::Value;

use super::AcpDecoder;
use super::tools::{self, ToolCall};
use crate::decoder::json::str_at;
use crate::partial::BlockKind;

/// Text or thinking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Text,
    Thinking,
}

/// A text or thinking block being written from its chunks.
#[derive(Debug)]
pub(super) struct OpenBlock {
    id: String,
    kind: Kind,
    /// Every chunk so far, kept up to the line limit.
    text: String,
}

/// A tool with a tool_use in the log and no result yet.
#[derive(Debug, Clone)]
pub(super) struct OpenTool {
    pub(super) id: String,
    pub(super) call: ToolCall,
}

impl AcpDecoder {
    /// One `session/update`. Dropped while a loaded session replays its
    /// history; outside a turn (after a prompt's answer) each one is
    /// complete content at once, the finished turn's.
    pub(super) fn update(&mut self, update: &Value) -> Vec<Payload> {
        let kind = str_at(update, "sessionUpdate");
        if self.replaying {
            tracing::debug!(update = %kind, "dropping a replayed update");
            return Vec::new();
        }
        let mut out = match kind.as_str() {
            "agent_message_chunk" => self.chunk(Kind::Text, update),
            "agent_thought_chunk" => self.chunk(Kind::Thinking, update),
            "tool_call" => {
                let mut out = self.flush();
                self.in_turn();
                out.extend(self.tool_call(update));
                out
            }
            "tool_call_update" => {
                let mut out = self.flush();
                self.in_turn();
                out.extend(self.tool_call_update(update));
                out
            }
            "plan" => {
                let mut out = self.flush();
                self.in_turn();
                let id = self.next_id("plan");
                let call = tools::plan(update);
                out.push(Payload::Content(
                    self.content(vec![tools::tool_use_block(&id, &call)], ""),
                ));
                out.push(Payload::Result(tools::plan_result(&id)));
                out
            }
            "usage_update" => {
                self.usage_update(update);
                Vec::new()
            }
            other => {
                tracing::debug!(update = other, "ignoring ACP session update");
                Vec::new()
            }
        };
        if self.turn.is_none() {
            // A late chunk is all there will be of its block.
            out.extend(self.flush());
        }
        out
    }

    /// A message or thought chunk: appended to the block being written,
    /// which the other kind of chunk closes.
    fn chunk(&mut self, kind: Kind, update: &Value) -> Vec<Payload> {
        let content = update.get("content").unwrap_or(&Value::Null);
        let text = if str_at(content, "type") == "text" {
            str_at(content, "text")
        } else {
            String::new()
        };
        let mut out = Vec::new();
        if self.block.as_ref().is_some_and(|b| b.kind != kind) {
            out.extend(self.flush());
        }
        let live = self.in_turn();
        if self.block.is_none() {
            let id = self.next_id("block");
            if live {
                self.partial.begin_message("", &id);
                let block_kind = match kind {
                    Kind::Text => BlockKind::Text,
                    Kind::Thinking => BlockKind::Thinking,
                };
                self.partial.begin_block("", 0, block_kind);
            }
            self.block = Some(OpenBlock {
                id,
                kind,
                text: String::new(),
            });
        }
        let max = self.max_line_bytes;
        if let Some(block) = self.block.as_mut()
            && block.text.len() + text.len() <= max
        {
            block.text.push_str(&text);
            if live && self.partial.streaming("") == Some(block.id.as_str()) {
                self.partial.append("", 0, &text);
            }
        }
        out
    }

    /// The block being written is complete: its content (nothing for a
    /// block without text), and its live text leaves the board.
    pub(super) fn flush(&mut self) -> Vec<Payload> {
        let Some(block) = self.block.take() else {
            return Vec::new();
        };
        self.partial.complete_block(&block.id, 0);
        if self.partial.streaming("") == Some(block.id.as_str()) {
            self.partial.end_message("");
        }
        if block.text.is_empty() {
            return Vec::new();
        }
        let b = match block.kind {
            Kind::Text => {
                if let Some(turn) = self.turn.as_mut() {
                    turn.last_text = block.text.clone();
                }
                pb::ContentBlock {
                    r#type: "text".into(),
                    text: block.text,
                    ..Default::default()
                }
            }
            Kind::Thinking => pb::ContentBlock {
                r#type: "thinking".into(),
                thinking: block.text,
                ..Default::default()
            },
        };
        vec![Payload::Content(self.content(vec![b], &block.id))]
    }

    /// The tool_use of a tool call, once per call (never again once it
    /// has its result).
    pub(super) fn tool_use(&mut self, id: &str, call: &Value) -> Vec<Payload> {
        if id.is_empty()
            || self.closed_tools.contains(id)
            || self.open_tools.iter().any(|t| t.id == id)
        {
            return Vec::new();
        }
        let call = tools::tool_call(call);
        let block = tools::tool_use_block(id, &call);
        self.open_tools.push(OpenTool {
            id: id.to_owned(),
            call,
        });
        vec![Payload::Content(self.content(vec![block], ""))]
    }

    fn tool_call(&mut self, update: &Value) -> Vec<Payload> {
        let id = str_at(update, "toolCallId");
        if self.closed_tools.contains(&id) {
            return Vec::new();
        }
        let mut out = self.tool_use(&id, update);
        if tools::finished(update) {
            out.extend(self.tool_done(&id, update));
        }
        out
    }

    fn tool_call_update(&mut self, update: &Value) -> Vec<Payload> {
        let id = str_at(update, "toolCallId");
        if !tools::finished(update) || self.closed_tools.contains(&id) {
            return Vec::new();
        }
        // A tool the agent never announced still gets its tool_use first.
        let mut out = self.tool_use(&id, update);
        out.extend(self.tool_done(&id, update));
        out
    }

    fn tool_done(&mut self, id: &str, update: &Value) -> Vec<Payload> {
        self.open_tools.retain(|t| t.id != id);
        self.closed_tools.insert(id.to_owned());
        vec![Payload::Result(tools::tool_result(update))]
    }
}
