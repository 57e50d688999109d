//! One stdout line read as a JSON object, the same way for every agent's
//! decoder: a line over the limit, one that is not JSON, or JSON that is not
//! an object becomes a `run_error` that quotes its start, and the run goes
//! on. What an object must hold to be understood is each decoder's own rule
//! (claude: a `type`; Codex: a JSON-RPC `method` or `id`), reported with
//! [`bad_line`].

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::run_error_kind;
use serde_json::{Map, Value};

use crate::process::StdoutLine;

/// How many bytes of a bad line are quoted in the run_error message.
const ERROR_PREFIX_BYTES: usize = 200;

/// A line that is not a readable object: its run_error and the `cli_line`
/// kept with it.
pub(crate) type Unreadable = (Payload, String);

/// A line read: its text and object, nothing (blank), or not readable.
pub(crate) enum Read<'a> {
    Object(&'a str, Map<String, Value>),
    Blank,
    Unreadable(Box<Unreadable>),
}

/// Reads one stdout line.
pub(crate) fn object(line: &StdoutLine, max_line_bytes: usize) -> Read<'_> {
    match text(line, max_line_bytes) {
        Err(unreadable) => Read::Unreadable(unreadable),
        Ok(None) => Read::Blank,
        Ok(Some(text)) => match parse(text) {
            Ok(obj) => Read::Object(text, obj),
            Err(unreadable) => Read::Unreadable(unreadable),
        },
    }
}

/// A stdout line's text: `None` when it is blank, the `line_too_large`
/// error when it is over the limit.
pub(crate) fn text(
    line: &StdoutLine,
    max_line_bytes: usize,
) -> Result<Option<&str>, Box<Unreadable>> {
    let text = match line {
        StdoutLine::TooLong { head, len } => return Err(too_long(head, *len, max_line_bytes)),
        StdoutLine::Line(text) => text.as_str(),
    };
    if text.len() > max_line_bytes {
        return Err(too_long(text, text.len(), max_line_bytes));
    }
    if text.trim().is_empty() {
        return Ok(None);
    }
    Ok(Some(text))
}

/// The text a line's events keep as their `cli_line`.
pub(crate) fn whole(line: &StdoutLine) -> &str {
    match line {
        StdoutLine::Line(text) => text,
        StdoutLine::TooLong { head, .. } => head,
    }
}

/// A line's text parsed as a JSON object ([`crate::nesting::parse_line`]),
/// or the `bad_line` error that quotes it.
pub(crate) fn parse(text: &str) -> Result<Map<String, Value>, Box<Unreadable>> {
    match crate::nesting::parse_line(text) {
        Ok(Value::Object(obj)) => Ok(obj),
        Ok(_) => Err(Box::new((
            run_error(
                run_error_kind::BAD_LINE,
                format!("CLI wrote JSON that is not an object: {}", prefix(text)),
            ),
            text.to_owned(),
        ))),
        Err(e) => Err(Box::new((
            run_error(
                run_error_kind::BAD_LINE,
                format!("CLI wrote a line that is not JSON ({e}): {}", prefix(text)),
            ),
            text.to_owned(),
        ))),
    }
}

/// An object the decoder cannot place: `what` says what it lacks
/// ("an object without a \"type\"").
pub(crate) fn bad_line(what: &str, text: &str) -> Unreadable {
    (
        run_error(
            run_error_kind::BAD_LINE,
            format!("CLI wrote {what}: {}", prefix(text)),
        ),
        text.to_owned(),
    )
}

/// The line (or its head, all that was kept of it) over the limit; the
/// `cli_line` is only its first bytes.
fn too_long(text: &str, len: usize, max_line_bytes: usize) -> Box<Unreadable> {
    let head = prefix(text);
    Box::new((
        run_error(
            run_error_kind::LINE_TOO_LARGE,
            format!(
                "CLI stdout line of {len} bytes exceeds the {max_line_bytes} byte limit; it starts with: {head}"
            ),
        ),
        head.to_owned(),
    ))
}

pub(crate) fn run_error(kind: &str, message: String) -> Payload {
    Payload::RunError(pb::RunError {
        message,
        kind: kind.into(),
        ..Default::default()
    })
}

/// The first bytes of a line, cut on a char boundary.
pub(crate) fn prefix(s: &str) -> &str {
    if s.len() <= ERROR_PREFIX_BYTES {
        return s;
    }
    let mut end = ERROR_PREFIX_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
