//! The streamed form of an event: every message the server sends stays
//! under gRPC's default 4 MiB receive limit
//! (docs/ARCHITECTURE.md, "Bounded messages").
//!
//! An event whose protobuf encoding exceeds the per-event budget
//! (`--max-event-bytes`) is stored twice: whole (in the store's full-event
//! table, for `ReadFullEvent`) and cut down (in the events table, the
//! window, and everything streamed). [`fit`] makes the cut form, in steps
//! that stop as soon as it fits:
//! 1. the CLI line is left out (it repeats the payload);
//! 2. the longest bulky strings (text, thinking, tool results, prompts,
//!    and the string values inside tool inputs and other `Struct`s) are
//!    shortened to a common length, each ending with
//!    `…[truncated: N more bytes]`;
//! 3. `Struct`/`Value` fields are left out whole;
//! 4. repeated fields lose their last elements;
//! 5. the payload keeps only its case (a last resort that cannot fail).
//!
//! Ids, types, tool names, statuses, models, usage and counts are never cut
//! in steps 1–3, and a shortened string is never empty, so derive computes
//! the same status, usage, activity, tasks and pending permissions from the
//! cut form as from the whole event. Steps 4–5 need over a budget's worth
//! of ids and keys in one event and are there only so that the bound holds
//! whatever a CLI writes.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use pbjson_types::value::Kind as ValueKind;
use prost::Message;

/// gRPC's default receive limit in every language: no message the server
/// sends is larger.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;
/// Room a response needs around one event (tags, lengths, other fields).
const ENVELOPE_BYTES: usize = 16 * 1024;
/// Largest `--max-event-bytes`: one event in a Subscribe or History message
/// still fits in [`MAX_MESSAGE_BYTES`].
pub const MAX_EVENT_BYTES_CEILING: usize = MAX_MESSAGE_BYTES - ENVELOPE_BYTES;
/// Smallest `--max-event-bytes`: room for an event's ids, names and usage.
pub const MIN_EVENT_BYTES: usize = 16 * 1024;
/// Default `--max-event-bytes`.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 1024 * 1024;
/// Most bytes of events in one History page (and one subscriber read).
pub const PAGE_BYTES: usize = MAX_MESSAGE_BYTES - ENVELOPE_BYTES;
/// Longest marker [`shorten`] appends.
const MARKER_MAX: usize = 48;

/// Bytes an event takes inside a repeated field of a response (tag, length
/// prefix and body).
pub fn wire_len(e: &pb::Event) -> usize {
    let n = e.encoded_len();
    1 + prost::encoding::encoded_len_varint(n as u64) + n
}

/// The streamed form of `event` under `budget` bytes: `None` when it fits
/// as it is, else the cut form, marked `truncated`. An event already cut
/// (by a larger budget) keeps its original sizes and adds to its fields.
pub fn fit(event: &pb::Event, budget: usize) -> Option<pb::Event> {
    let size = event.encoded_len();
    if size <= budget {
        return None;
    }
    let mut marker = event.truncated.clone().unwrap_or(pb::Truncated {
        original_size: size as u64,
        cli_line_size: event.cli_line.len() as u64,
        fields: Vec::new(),
    });
    if !event.cli_line.is_empty() {
        marker.fields.push("cli_line".into());
    }
    // Step 1: without the line (cloned without it: it can be megabytes).
    let mut base = pb::Event {
        seq: event.seq,
        session_id: event.session_id.clone(),
        run_id: event.run_id.clone(),
        time: event.time,
        cli_line: String::new(),
        truncated: Some(marker),
        payload: event.payload.clone(),
    };
    if base.encoded_len() <= budget {
        return Some(base);
    }
    // Step 2: shorten the longest strings to a common length.
    if let Some(cut) = shorten_strings(&base, budget) {
        return Some(cut);
    }
    // Step 3: leave out Struct/Value fields, then shorten again.
    let dropped = drop_values(&mut base);
    mark(&mut base, dropped);
    if base.encoded_len() <= budget {
        return Some(base);
    }
    if let Some(cut) = shorten_strings(&base, budget) {
        return Some(cut);
    }
    // Step 4: shorten everything as far as it goes, then drop list tails.
    if let Some(mut cut) = shorten_to(&base, 0) {
        let dropped = drop_tails(&mut cut, budget);
        mark(&mut cut, dropped);
        if cut.encoded_len() <= budget {
            return Some(cut);
        }
        base = cut;
    }
    // Step 5: only the payload's case is left.
    base.payload = base.payload.as_ref().map(empty_like);
    mark(&mut base, vec!["payload".into()]);
    Some(base)
}

/// Adds field paths to the event's marker (deduplicated, in order).
fn mark(e: &mut pb::Event, fields: Vec<String>) {
    if let Some(t) = e.truncated.as_mut() {
        for f in fields {
            if !t.fields.contains(&f) {
                t.fields.push(f);
            }
        }
    }
}

/// Shortens the longest strings of `base` to one common length, the
/// largest at which the event fits `budget`; `None` when even length 0
/// does not fit.
fn shorten_strings(base: &pb::Event, budget: usize) -> Option<pb::Event> {
    let mut probe = base.clone();
    let strings = bulky(&mut probe);
    let lens: Vec<usize> = strings.iter().map(|(_, s)| s.len()).collect();
    // The marker may name every path (each a repeated string: tag, length).
    let mut paths: Vec<&str> = strings.iter().map(|(p, _)| p.as_str()).collect();
    paths.dedup();
    let names: usize = paths.iter().map(|p| p.len() + 2).sum();
    let total: usize = lens.iter().sum();
    let skeleton = base.encoded_len().saturating_sub(total) + names;
    // Length prefixes of shortened strings only shrink; markers are counted
    // at their longest.
    let room = budget.checked_sub(skeleton)?;
    let fits = |limit: usize| -> bool {
        lens.iter()
            .map(|&l| if l > limit { limit + MARKER_MAX } else { l })
            .sum::<usize>()
            <= room
    };
    if !fits(0) {
        return None;
    }
    // The largest limit that fits (binary search over 0..=longest).
    let (mut lo, mut hi) = (0usize, lens.iter().copied().max().unwrap_or(0));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if fits(mid) { lo = mid } else { hi = mid - 1 }
    }
    let mut limit = lo;
    loop {
        let cut = shorten_to(base, limit)?;
        let over = cut.encoded_len().saturating_sub(budget);
        if over == 0 {
            return Some(cut);
        }
        // The estimate was off by a few bytes: take them from every string
        // that was cut.
        if limit == 0 {
            return None;
        }
        let cut_strings = lens.iter().filter(|&&l| l > limit).count().max(1);
        limit = limit.saturating_sub(over.div_ceil(cut_strings) + 1);
    }
}

/// `base` with every bulky string longer than `limit` shortened to it.
fn shorten_to(base: &pb::Event, limit: usize) -> Option<pb::Event> {
    let mut cut = base.clone();
    let mut fields = Vec::new();
    for (path, s) in bulky(&mut cut) {
        if s.len() > limit {
            shorten(s, limit);
            if !fields.contains(&path) {
                fields.push(path);
            }
        }
    }
    mark(&mut cut, fields);
    Some(cut)
}

/// Keeps at most `limit` bytes of `s` (on a char boundary, never empty)
/// and appends a marker saying how much was left out.
fn shorten(s: &mut String, limit: usize) {
    let mut end = limit.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let omitted = s.len() - end;
    s.truncate(end);
    s.push_str(&format!("…[truncated: {omitted} more bytes]"));
}

/// Every string of the payload that may be shortened, with the path the
/// marker names. Ids, names, types, statuses and paths are not in it.
fn bulky(e: &mut pb::Event) -> Vec<(String, &mut String)> {
    let mut out: Vec<(String, &mut String)> = Vec::new();
    let Some(payload) = e.payload.as_mut() else {
        return out;
    };
    match payload {
        Payload::RunStart(r) => {
            if let Some(c) = r.config.as_mut() {
                out.push(("run_start.config.prompt".into(), &mut c.prompt));
                for (i, b) in c.content_blocks.iter_mut().enumerate() {
                    struct_strings(format!("run_start.config.content_blocks[{i}]"), b, &mut out);
                }
            }
        }
        Payload::RunEnd(r) => out.push(("run_end.stderr_tail".into(), &mut r.stderr_tail)),
        Payload::RunError(r) => out.push(("run_error.message".into(), &mut r.message)),
        Payload::Content(c) => {
            for (i, b) in c.blocks.iter_mut().enumerate() {
                out.push((format!("content.blocks[{i}].text"), &mut b.text));
                out.push((format!("content.blocks[{i}].thinking"), &mut b.thinking));
                if let Some(s) = b.input.as_mut() {
                    struct_strings(format!("content.blocks[{i}].input"), s, &mut out);
                }
                if let Some(s) = b.raw.as_mut() {
                    struct_strings(format!("content.blocks[{i}].raw"), s, &mut out);
                }
            }
        }
        Payload::Result(r) => {
            for (i, t) in r.tool_results.iter_mut().enumerate() {
                out.push((format!("result.tool_results[{i}].text"), &mut t.text));
            }
            out.push(("result.text".into(), &mut r.text));
            if let Some(v) = r.tool_use_result.as_mut() {
                value_strings("result.tool_use_result", v, &mut out);
            }
        }
        Payload::TurnEnd(t) => {
            out.push(("turn_end.result".into(), &mut t.result));
            for (i, s) in t.errors.iter_mut().enumerate() {
                out.push((format!("turn_end.errors[{i}]"), s));
            }
            for (i, d) in t.permission_denials.iter_mut().enumerate() {
                if let Some(s) = d.tool_input.as_mut() {
                    struct_strings(
                        format!("turn_end.permission_denials[{i}].tool_input"),
                        s,
                        &mut out,
                    );
                }
            }
        }
        Payload::InputSent(i) => {
            out.push(("input_sent.text".into(), &mut i.text));
            for (n, b) in i.content_blocks.iter_mut().enumerate() {
                struct_strings(format!("input_sent.content_blocks[{n}]"), b, &mut out);
            }
        }
        Payload::TaskStarted(t) => {
            out.push(("task_started.description".into(), &mut t.description));
            out.push(("task_started.prompt".into(), &mut t.prompt));
        }
        Payload::TaskUpdated(t) => {
            out.push(("task_updated.description".into(), &mut t.description));
            out.push(("task_updated.error".into(), &mut t.error));
            out.push(("task_updated.summary".into(), &mut t.summary));
        }
        Payload::TaskNotification(t) => {
            out.push(("task_notification.summary".into(), &mut t.summary));
        }
        Payload::PermissionRequested(p) => {
            out.push((
                "permission_requested.description".into(),
                &mut p.description,
            ));
            out.push((
                "permission_requested.decision_reason".into(),
                &mut p.decision_reason,
            ));
            if let Some(s) = p.input.as_mut() {
                struct_strings("permission_requested.input".into(), s, &mut out);
            }
            for (i, v) in p.suggestions.iter_mut().enumerate() {
                value_strings(
                    &format!("permission_requested.suggestions[{i}]"),
                    v,
                    &mut out,
                );
            }
        }
        Payload::PermissionResolved(p) => {
            out.push(("permission_resolved.message".into(), &mut p.message));
            if let Some(s) = p.updated_input.as_mut() {
                struct_strings("permission_resolved.updated_input".into(), s, &mut out);
            }
        }
        Payload::FilesRewound(f) => {
            for (i, s) in f.files_changed.iter_mut().enumerate() {
                out.push((format!("files_rewound.files_changed[{i}]"), s));
            }
        }
        Payload::Unreadable(u) => out.push(("unreadable.reason".into(), &mut u.reason)),
        Payload::RunReady(_)
        | Payload::StopRequested(_)
        | Payload::TurnStart(_)
        | Payload::SettingChanged(_)
        | Payload::TitleSet(_) => {}
    }
    out
}

/// The string values inside a Struct (keys are never shortened).
fn struct_strings<'a>(
    path: String,
    s: &'a mut pbjson_types::Struct,
    out: &mut Vec<(String, &'a mut String)>,
) {
    for v in s.fields.values_mut() {
        value_strings(&path, v, out);
    }
}

fn value_strings<'a>(
    path: &str,
    v: &'a mut pbjson_types::Value,
    out: &mut Vec<(String, &'a mut String)>,
) {
    match v.kind.as_mut() {
        Some(ValueKind::StringValue(s)) => out.push((path.to_owned(), s)),
        Some(ValueKind::StructValue(s)) => {
            for v in s.fields.values_mut() {
                value_strings(path, v, out);
            }
        }
        Some(ValueKind::ListValue(l)) => {
            for v in &mut l.values {
                value_strings(path, v, out);
            }
        }
        _ => {}
    }
}

/// Step 3: leaves out every Struct/Value field; returns their paths.
fn drop_values(e: &mut pb::Event) -> Vec<String> {
    let mut out = Vec::new();
    let mut take = |name: &str, present: bool| {
        if present {
            out.push(name.to_owned());
        }
    };
    match e.payload.as_mut() {
        Some(Payload::RunStart(r)) => {
            if let Some(c) = r.config.as_mut() {
                take(
                    "run_start.config.content_blocks",
                    !c.content_blocks.is_empty(),
                );
                // Keep one (empty) block: derive reads "has content blocks".
                if !c.content_blocks.is_empty() {
                    c.content_blocks = vec![pbjson_types::Struct::default()];
                }
            }
        }
        Some(Payload::Content(c)) => {
            for (i, b) in c.blocks.iter_mut().enumerate() {
                take(
                    &format!("content.blocks[{i}].input"),
                    b.input.take().is_some(),
                );
                take(&format!("content.blocks[{i}].raw"), b.raw.take().is_some());
            }
        }
        Some(Payload::Result(r)) => {
            take("result.tool_use_result", r.tool_use_result.take().is_some());
        }
        Some(Payload::TurnEnd(t)) => {
            for (i, d) in t.permission_denials.iter_mut().enumerate() {
                take(
                    &format!("turn_end.permission_denials[{i}].tool_input"),
                    d.tool_input.take().is_some(),
                );
            }
        }
        Some(Payload::InputSent(i)) => {
            take("input_sent.content_blocks", !i.content_blocks.is_empty());
            if !i.content_blocks.is_empty() {
                i.content_blocks = vec![pbjson_types::Struct::default()];
            }
        }
        Some(Payload::PermissionRequested(p)) => {
            take("permission_requested.input", p.input.take().is_some());
            take(
                "permission_requested.suggestions",
                !p.suggestions.is_empty(),
            );
            p.suggestions.clear();
        }
        Some(Payload::PermissionResolved(p)) => {
            take(
                "permission_resolved.updated_input",
                p.updated_input.take().is_some(),
            );
        }
        _ => {}
    }
    out
}

/// Step 4: drops the last elements of the payload's lists until the event
/// fits (or they are empty); returns the lists it shortened. Each list is
/// cut in one pass, by the sizes of its elements.
fn drop_tails(e: &mut pb::Event, budget: usize) -> Vec<String> {
    let mut out = Vec::new();
    for list in 0.. {
        let excess = e.encoded_len().saturating_sub(budget);
        if excess == 0 {
            break;
        }
        let (name, dropped) = match (e.payload.as_mut(), list) {
            (Some(Payload::Content(c)), 0) => {
                ("content.blocks", pop_messages(&mut c.blocks, excess))
            }
            (Some(Payload::Result(r)), 0) => (
                "result.tool_results",
                pop_messages(&mut r.tool_results, excess),
            ),
            (Some(Payload::RunReady(r)), 0) => (
                "run_ready.mcp_servers",
                pop_messages(&mut r.mcp_servers, excess),
            ),
            (Some(Payload::RunReady(r)), 1) => {
                ("run_ready.tools", pop_strings(&mut r.tools, excess))
            }
            (Some(Payload::TurnEnd(t)), 0) => {
                ("turn_end.errors", pop_strings(&mut t.errors, excess))
            }
            (Some(Payload::TurnEnd(t)), 1) => (
                "turn_end.permission_denials",
                pop_messages(&mut t.permission_denials, excess),
            ),
            (Some(Payload::TurnEnd(t)), 2) => (
                "turn_end.model_usage",
                pop_messages(&mut t.model_usage, excess),
            ),
            (Some(Payload::RunStart(r)), 0) => match r.config.as_mut() {
                Some(c) => ("run_start.config.args", pop_strings(&mut c.args, excess)),
                None => break,
            },
            (Some(Payload::RunStart(r)), 1) => match r.config.as_mut() {
                Some(c) => {
                    let had = c.env.len();
                    c.env.clear();
                    ("run_start.config.env", had > 0)
                }
                None => break,
            },
            _ => break,
        };
        if dropped {
            out.push(name.to_owned());
        }
    }
    out
}

/// Bytes an element takes in a repeated field (tag, length, body).
fn elem_len(n: usize) -> usize {
    1 + prost::encoding::encoded_len_varint(n as u64) + n
}

/// Pops elements off the end until `excess` bytes are gone; whether any was.
fn pop_messages<T: Message>(v: &mut Vec<T>, excess: usize) -> bool {
    let mut gone = 0;
    let before = v.len();
    while gone < excess {
        match v.pop() {
            Some(x) => gone += elem_len(x.encoded_len()),
            None => break,
        }
    }
    v.len() < before
}

fn pop_strings(v: &mut Vec<String>, excess: usize) -> bool {
    let mut gone = 0;
    let before = v.len();
    while gone < excess {
        match v.pop() {
            Some(x) => gone += elem_len(x.len()),
            None => break,
        }
    }
    v.len() < before
}

/// A payload of the same case with nothing in it.
fn empty_like(p: &Payload) -> Payload {
    match p {
        Payload::RunStart(_) => Payload::RunStart(Default::default()),
        Payload::RunReady(_) => Payload::RunReady(Default::default()),
        Payload::RunEnd(r) => Payload::RunEnd(pb::RunEnd {
            reason: r.reason,
            exit_code: r.exit_code,
            inferred: r.inferred,
            ..Default::default()
        }),
        Payload::RunError(_) => Payload::RunError(Default::default()),
        Payload::StopRequested(_) => Payload::StopRequested(Default::default()),
        Payload::Content(_) => Payload::Content(Default::default()),
        Payload::Result(_) => Payload::Result(Default::default()),
        Payload::TurnEnd(t) => Payload::TurnEnd(pb::TurnEnd {
            usage: t.usage,
            cost_usd: t.cost_usd,
            is_error: t.is_error,
            compact: t.compact,
            ..Default::default()
        }),
        Payload::InputSent(i) => Payload::InputSent(pb::InputSent {
            source: i.source,
            message_uuid: i.message_uuid.clone(),
            ..Default::default()
        }),
        Payload::TaskStarted(_) => Payload::TaskStarted(Default::default()),
        Payload::TaskUpdated(_) => Payload::TaskUpdated(Default::default()),
        Payload::TaskNotification(_) => Payload::TaskNotification(Default::default()),
        Payload::PermissionRequested(_) => Payload::PermissionRequested(Default::default()),
        Payload::PermissionResolved(p) => Payload::PermissionResolved(pb::PermissionResolved {
            allow: p.allow,
            ..Default::default()
        }),
        Payload::TurnStart(_) => Payload::TurnStart(Default::default()),
        Payload::SettingChanged(s) => Payload::SettingChanged(s.clone()),
        Payload::TitleSet(t) => Payload::TitleSet(t.clone()),
        Payload::FilesRewound(f) => Payload::FilesRewound(pb::FilesRewound {
            to_seq: f.to_seq,
            message_uuid: f.message_uuid.clone(),
            insertions: f.insertions,
            deletions: f.deletions,
            ..Default::default()
        }),
        Payload::Unreadable(u) => Payload::Unreadable(pb::Unreadable {
            size: u.size,
            ..Default::default()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(text: String, line: String) -> pb::Event {
        pb::Event {
            seq: 7,
            session_id: "s".into(),
            run_id: "r".into(),
            cli_line: line,
            payload: Some(Payload::Content(pb::Content {
                message_id: "msg_1".into(),
                model: "m".into(),
                blocks: vec![pb::ContentBlock {
                    r#type: "text".into(),
                    text,
                    ..Default::default()
                }],
                usage: Some(pb::Usage {
                    input_tokens: 3,
                    output_tokens: 4,
                    ..Default::default()
                }),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn a_small_event_is_left_alone() {
        assert!(fit(&content("hi".into(), "{}".into()), 1024).is_none());
    }

    #[test]
    fn the_line_goes_first_then_the_longest_text() {
        let big = "x".repeat(100_000);
        let e = content(big.clone(), format!("{{\"text\":\"{big}\"}}"));
        // Without its line the event fits: only the line is cut.
        let cut = fit(&e, 101_000).expect("cut");
        let t = cut.truncated.clone().expect("marked");
        assert_eq!(t.fields, vec!["cli_line"]);
        assert_eq!(t.original_size, e.encoded_len() as u64);
        assert_eq!(t.cli_line_size, e.cli_line.len() as u64);
        assert!(cut.cli_line.is_empty());
        // Smaller: the text is shortened too, and marked.
        let cut = fit(&e, 20_000).expect("cut");
        assert!(cut.encoded_len() <= 20_000);
        let t = cut.truncated.clone().expect("marked");
        assert_eq!(t.fields, vec!["cli_line", "content.blocks[0].text"]);
        let Some(Payload::Content(c)) = &cut.payload else {
            panic!()
        };
        assert!(
            c.blocks[0].text.ends_with("more bytes]"),
            "{}",
            &c.blocks[0].text[19_000..]
        );
        assert!(c.blocks[0].text.len() > 15_000, "uses the budget");
        assert_eq!(
            c.usage,
            Some(pb::Usage {
                input_tokens: 3,
                output_tokens: 4,
                ..Default::default()
            })
        );
        assert_eq!(c.message_id, "msg_1");
    }

    #[test]
    fn multibyte_text_is_cut_on_a_char_boundary() {
        let e = content("é".repeat(50_000), String::new());
        let cut = fit(&e, 30_001).expect("cut");
        assert!(cut.encoded_len() <= 30_001);
    }

    #[test]
    fn many_small_values_are_left_out_then_lists_shortened() {
        // A tool input of 200,000 numbers: no string to shorten.
        let numbers = pbjson_types::Value {
            kind: Some(ValueKind::ListValue(pbjson_types::ListValue {
                values: (0..200_000)
                    .map(|n| pbjson_types::Value {
                        kind: Some(ValueKind::NumberValue(f64::from(n))),
                    })
                    .collect(),
            })),
        };
        let mut e = content("t".into(), String::new());
        if let Some(Payload::Content(c)) = e.payload.as_mut() {
            c.blocks[0].input = Some(pbjson_types::Struct {
                fields: [("n".to_owned(), numbers)].into(),
            });
            c.blocks[0].tool_use_id = "toolu_1".into();
        }
        let cut = fit(&e, MIN_EVENT_BYTES).expect("cut");
        assert!(cut.encoded_len() <= MIN_EVENT_BYTES);
        let t = cut.truncated.clone().unwrap();
        assert!(
            t.fields.contains(&"content.blocks[0].input".to_owned()),
            "{t:?}"
        );
        let Some(Payload::Content(c)) = &cut.payload else {
            panic!()
        };
        assert_eq!(c.blocks[0].tool_use_id, "toolu_1");

        // 100,000 blocks with ids: the list itself is shortened.
        let mut e = content("t".into(), String::new());
        if let Some(Payload::Content(c)) = e.payload.as_mut() {
            c.blocks = (0..100_000)
                .map(|n| pb::ContentBlock {
                    r#type: "tool_use".into(),
                    tool_use_id: format!("toolu_{n}"),
                    ..Default::default()
                })
                .collect();
        }
        let cut = fit(&e, MIN_EVENT_BYTES).expect("cut");
        assert!(cut.encoded_len() <= MIN_EVENT_BYTES);
        assert!(
            cut.truncated
                .unwrap()
                .fields
                .contains(&"content.blocks".to_owned())
        );
    }

    #[test]
    fn cutting_a_cut_event_keeps_its_original_sizes() {
        let big = "y".repeat(200_000);
        let e = content(big.clone(), big);
        let once = fit(&e, 100_000).expect("cut");
        let twice = fit(&once, 50_000).expect("cut again");
        let (a, b) = (once.truncated.unwrap(), twice.truncated.clone().unwrap());
        assert_eq!(a.original_size, b.original_size);
        assert_eq!(a.cli_line_size, b.cli_line_size);
        assert!(twice.encoded_len() <= 50_000);
    }
}
