//! How a session's events read in a terminal: one line per tool call,
//! result, permission prompt and run boundary; assistant text as written.
//! The live-typing side (text shown before its event lands) is
//! [`super::tail`]'s.

use agent_harness_client::pb::{self, event::Payload};
use agent_harness_client::pbjson_types::{Struct, value::Kind};

/// Longest one-line summary, in characters.
const LINE_CHARS: usize = 120;

/// The tool input fields that say best what a call does, in order.
const SUMMARY_FIELDS: &[&str] = &[
    "command",
    "file_path",
    "path",
    "pattern",
    "url",
    "query",
    "description",
    "prompt",
];

/// The lines an event prints, `session` naming it in the commands a
/// permission prompt suggests. Assistant text is given whole (the caller
/// may have shown part of it already); none for events with nothing to
/// show.
pub fn event_lines(session: &str, event: &pb::Event) -> Vec<String> {
    let Some(payload) = &event.payload else {
        return Vec::new();
    };
    match payload {
        Payload::InputSent(i) => vec![format!("> {}", one_line(&i.text))],
        Payload::Content(c) => content_lines(c),
        Payload::Result(r) => r
            .tool_results
            .iter()
            .map(|t| {
                let mark = if t.is_error { "✗" } else { "✓" };
                format!("  {mark} {}", one_line(&t.text))
            })
            .collect(),
        Payload::PermissionRequested(p) => permission_lines(session, p, true, ""),
        Payload::PermissionResolved(p) => vec![format!(
            "-- permission {} {} ({})",
            p.request_id,
            if p.allow { "allowed" } else { "denied" },
            p.by
        )],
        Payload::RunStart(r) => vec![format!("-- run started ({})", r.trigger)],
        Payload::RunEnd(r) => vec![format!(
            "-- run ended: {}",
            r.reason()
                .as_str_name()
                .trim_start_matches("RUN_END_REASON_")
                .to_lowercase()
        )],
        Payload::RunError(r) => vec![format!("!! {}: {}", r.kind, one_line(&r.message))],
        Payload::StopRequested(_) => vec!["-- stop requested".to_owned()],
        Payload::TurnEnd(t) if t.compact => vec!["-- context compacted".to_owned()],
        Payload::TurnEnd(t) => vec![format!(
            "-- turn ended: {} ({:.1}s, ${:.4})",
            if t.is_error {
                format!("error {}", t.subtype)
            } else {
                "ok".to_owned()
            },
            t.duration_ms as f64 / 1000.0,
            t.cost_usd
        )],
        Payload::TitleSet(t) => vec![format!("-- title: {}", one_line(&t.title))],
        Payload::TaskStarted(t) => vec![format!("-- task {} started", t.task_id)],
        Payload::TaskNotification(t) => vec![format!("-- task {} finished", t.task_id)],
        _ => Vec::new(),
    }
}

/// A permission prompt; while it is `pending`, with the commands that
/// answer it, `flags` after them (a replayed prompt answered long ago
/// shows none).
pub fn permission_lines(
    session: &str,
    p: &pb::PermissionRequested,
    pending: bool,
    flags: &str,
) -> Vec<String> {
    let what = p
        .input
        .as_ref()
        .map(summary)
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| p.description.clone());
    let mut lines = vec![format!(
        "? permission {}: {} {}",
        p.request_id,
        p.tool_name,
        one_line(&what)
    )];
    if pending {
        lines.push(format!(
            "  allow: agent-harness approve {session} {}{flags}",
            p.request_id
        ));
        lines.push(format!(
            "  deny:  agent-harness deny {session} {} [REASON]{flags}",
            p.request_id
        ));
    }
    lines
}

/// An assistant message's blocks: text as written, one line per tool call,
/// a marker for thinking. A subagent's lines are indented under its call.
fn content_lines(c: &pb::Content) -> Vec<String> {
    let subagent = !c.parent_tool_use_id.is_empty();
    c.blocks
        .iter()
        .filter_map(|b| block_line(b, subagent))
        .collect()
}

/// One block of an assistant message, if it shows: a subagent's is
/// indented and its text cut to one line.
pub fn block_line(b: &pb::ContentBlock, subagent: bool) -> Option<String> {
    let indent = if subagent { "    " } else { "" };
    match b.r#type.as_str() {
        "text" if !subagent => Some(b.text.clone()),
        "text" => Some(format!("{indent}{}", one_line(&b.text))),
        "thinking" | "redacted_thinking" => Some(format!("{indent}(thinking)")),
        _ if !b.tool_name.is_empty() => Some(format!(
            "{indent}→ {} {}",
            b.tool_name,
            one_line(&b.input.as_ref().map(summary).unwrap_or_default())
        )),
        _ => None,
    }
}

/// What a tool input does, in a few words: its most telling field, else
/// the whole input as JSON.
pub fn summary(input: &Struct) -> String {
    SUMMARY_FIELDS
        .iter()
        .find_map(
            |name| match input.fields.get(*name).and_then(|v| v.kind.as_ref()) {
                Some(Kind::StringValue(s)) => Some(s.clone()),
                _ => None,
            },
        )
        .unwrap_or_else(|| serde_json::to_string(input).unwrap_or_default())
}

/// `text` on one line, cut to [`LINE_CHARS`] characters with "…".
pub fn one_line(text: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(LINE_CHARS) {
        Some((i, _)) => format!("{}…", &flat[..i]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permission_prompt_names_the_commands_that_answer_it() {
        let event = pb::Event {
            payload: Some(Payload::PermissionRequested(pb::PermissionRequested {
                request_id: "r1".into(),
                tool_name: "Write".into(),
                description: "write a file".into(),
                ..Default::default()
            })),
            ..Default::default()
        };
        let lines = event_lines("s1", &event);
        assert_eq!(lines[0], "? permission r1: Write write a file");
        assert_eq!(lines[1], "  allow: agent-harness approve s1 r1");
        assert_eq!(lines[2], "  deny:  agent-harness deny s1 r1 [REASON]");
    }

    #[test]
    fn long_text_is_cut_on_one_line() {
        let long = "a\nb ".repeat(100);
        let line = one_line(&long);
        assert!(!line.contains('\n'));
        assert_eq!(line.chars().count(), LINE_CHARS + 1);
    }
}
