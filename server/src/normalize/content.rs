//! `assistant` lines as `content` events and `user` lines as `result`
//! events, from their typed view ([`super::read::Line`]).

use agent_harness_protocol::pb;

use super::read::{Block, Content, Line, Usage};
use super::{to_struct, to_value};

pub(super) fn content(l: &Line) -> pb::Content {
    let message = &l.message;
    let blocks = match &message.content {
        Content::Blocks(blocks) => blocks.iter().map(content_block).collect(),
        _ => Vec::new(),
    };
    pb::Content {
        message_id: message.id.owned(),
        model: message.model.owned(),
        blocks,
        usage: message.usage.as_ref().map(usage),
        parent_tool_use_id: l.parent_tool_use_id.owned(),
        stop_reason: message.stop_reason.owned(),
        error: l.error.owned(),
    }
}

fn content_block(block: &Block) -> pb::ContentBlock {
    let b = &block.fields;
    let kind = b.kind.owned();
    match kind.as_str() {
        "text" => pb::ContentBlock {
            text: b.text.owned(),
            r#type: kind,
            ..Default::default()
        },
        "thinking" => pb::ContentBlock {
            thinking: b.thinking.owned(),
            r#type: kind,
            ..Default::default()
        },
        "tool_use" | "server_tool_use" => pb::ContentBlock {
            tool_use_id: b.id.owned(),
            tool_name: b.name.owned(),
            input: b.input.as_ref().and_then(|i| to_struct(&i.0)),
            r#type: kind,
            ..Default::default()
        },
        // redacted_thinking, *_tool_result and whatever a newer CLI sends:
        // keep the whole block so nothing is lost.
        _ => pb::ContentBlock {
            raw: to_struct(&block.value()),
            r#type: kind,
            ..Default::default()
        },
    }
}

pub(super) fn user(l: &Line) -> pb::Result {
    let mut tool_results = Vec::new();
    let mut texts = Vec::new();
    match &l.message.content {
        Content::Text(s) => texts.push(s.to_string()),
        Content::Blocks(blocks) => {
            for block in blocks {
                let b = &block.fields;
                match b.kind.get() {
                    Some("tool_result") => tool_results.push(pb::ToolResult {
                        tool_use_id: b.tool_use_id.owned(),
                        text: b.content.joined(),
                        is_error: b.is_error.0,
                    }),
                    Some("text") => texts.push(b.text.owned()),
                    _ => {}
                }
            }
        }
        Content::Other => {}
    }
    pb::Result {
        is_error: tool_results.iter().any(|r| r.is_error),
        tool_results,
        parent_tool_use_id: l.parent_tool_use_id.owned(),
        text: texts.join("\n"),
        tool_use_result: l.tool_use_result.as_ref().and_then(|v| to_value(&v.0)),
    }
}

pub(super) fn usage(u: &Usage) -> pb::Usage {
    pb::Usage {
        input_tokens: u.input_tokens.0,
        output_tokens: u.output_tokens.0,
        cache_creation_input_tokens: u.cache_creation_input_tokens.0,
        cache_read_input_tokens: u.cache_read_input_tokens.0,
    }
}
