//! How deep the JSON inside an event may nest.
//!
//! Arbitrary JSON (a tool's input, a `tool_use_result`, permission
//! suggestions, a client's content blocks and updated input) is stored as
//! `google.protobuf.Struct`/`Value`, where each level of JSON is two or
//! three levels of protobuf messages (Struct → map entry → Value → Struct
//! …). Protobuf decoders stop at 100 nested messages (prost's limit, and
//! most other runtimes'), so an event holding JSON nested ~33 levels deep
//! encodes fine but can never be decoded again: not by the server reading
//! its store, not by a client reading a stream.
//!
//! So every container nested deeper than [`MAX_JSON_DEPTH`] levels is kept
//! as its JSON text in a string starting with [`DEEP_JSON_MARKER`]: nothing
//! is lost, and the deepest event (Event → payload → block → Struct, inside
//! a Subscribe or History response) stays near 65 nested messages, well
//! under any decoder's limit. Every conversion of JSON into an event goes
//! through [`to_struct`] / [`to_value`]; Structs that arrive already built
//! (a client's) are cut the same way by [`bound_payload`] before they are
//! stored.
//!
//! A CLI line nested deeper than `serde_json` parses (128 levels) is first
//! cut at the text level ([`parse_line`]): each container past
//! [`LINE_DEPTH`] becomes a string holding its original text, and is written
//! back as that text when its subtree becomes a marked string.

use std::fmt::Write as _;
use std::sync::OnceLock;

#[cfg(test)]
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use pbjson_types::value::Kind;
use serde_json::Value;

/// Levels of JSON containers kept as Structs: the outermost object (or
/// array) is level 1; a container at a deeper level becomes a marked string.
pub const MAX_JSON_DEPTH: usize = 20;

/// The start of a string that holds a JSON container cut off at
/// [`MAX_JSON_DEPTH`]: the rest of the string is that container's JSON text.
pub const DEEP_JSON_MARKER: &str = "agent-harness/deep-json:";

/// Containers of a CLI line deeper than this are cut before the line is
/// parsed (`serde_json` refuses more than 128 levels, and a deeper parse
/// would recurse without bound). Every Struct starts at most a few levels
/// into a line, so these cuts always lie inside a subtree that
/// [`MAX_JSON_DEPTH`] turns into text.
pub const LINE_DEPTH: usize = 64;

/// Marks a string standing for a container [`parse_line`] cut: a NUL and a
/// per-process random tag, which no string the CLI writes can start with
/// by chance or design (it cannot know the tag).
fn line_cut_tag() -> &'static str {
    static TAG: OnceLock<String> = OnceLock::new();
    TAG.get_or_init(|| format!("\u{0}deep-line-{:016x}:", rand::random::<u64>()))
}

/// Parses one CLI line; containers nested deeper than [`LINE_DEPTH`] are
/// kept as their text (see the module docs). Linear in the line, without
/// recursion past [`LINE_DEPTH`]. A line that is not JSON is an error
/// however deep its fault lies.
pub fn parse_line(text: &str) -> serde_json::Result<Value> {
    parse_cut(text, LINE_DEPTH)
}

/// Parses a part of a CLI line found inside `enclosing` containers of it
/// (a tool's input: the line, its message, the content array, the block),
/// cut where [`parse_line`] would cut it in the whole line.
pub fn parse_part(text: &str, enclosing: usize) -> serde_json::Result<Value> {
    parse_cut(text, LINE_DEPTH.saturating_sub(enclosing))
}

/// Parses `text` with its containers nested deeper than `max` kept as
/// their text.
fn parse_cut(text: &str, max: usize) -> serde_json::Result<Value> {
    // Nesting past `max` takes more than `max` bytes of brackets.
    let cuts = if text.len() > max {
        deep_spans(text.as_bytes(), max)
    } else {
        Vec::new()
    };
    if cuts.is_empty() {
        return serde_json::from_str(text);
    }
    if !is_json(text.as_bytes()) {
        // Not JSON: let serde_json say where (it stops at its own limit).
        return serde_json::from_str(text);
    }
    let tag = line_cut_tag();
    let mut out = String::with_capacity(text.len() + cuts.len() * (tag.len() + 8));
    let mut at = 0;
    for (start, end) in cuts {
        out.push_str(&text[at..start]);
        let held = format!("{tag}{}", &text[start..end]);
        // Serializing a String cannot fail.
        out.push_str(&serde_json::to_string(&held).unwrap_or_default());
        at = end;
    }
    out.push_str(&text[at..]);
    serde_json::from_str(&out)
}

/// The byte ranges of the containers that open at level `max + 1` (the
/// outermost container is level 1), outside strings. Unbalanced input
/// yields what it can; the parse that follows reports the error.
fn deep_spans(bytes: &[u8], max: usize) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                if depth == max + 1 {
                    start = i;
                }
            }
            b'}' | b']' => {
                if depth == max + 1 {
                    spans.push((start, i + 1));
                }
                depth = depth.saturating_sub(1);
            }
            _ => {}
        }
    }
    spans
}

/// Whether `b` is one JSON value (RFC 8259), checked without recursion:
/// the containers open are a stack, so any depth costs only memory.
fn is_json(b: &[u8]) -> bool {
    #[derive(Clone, Copy, PartialEq)]
    enum Want {
        /// A value (after `:`, `,` in an array, or at the start).
        Value,
        /// A value or `]` (just after `[`).
        ValueOrClose,
        /// A key or `}` (just after `{`).
        KeyOrClose,
        /// A key (after `,` in an object).
        Key,
        /// `:` after a key.
        Colon,
        /// `,` or the closing bracket after a value (or the end at top).
        After,
    }
    let mut open: Vec<u8> = Vec::new();
    let mut want = Want::Value;
    let mut i = 0;
    let n = b.len();
    loop {
        while i < n && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        if i == n {
            return want == Want::After && open.is_empty();
        }
        let c = b[i];
        match want {
            Want::After => {
                match (c, open.last()) {
                    (b',', Some(b'[')) => want = Want::Value,
                    (b',', Some(b'{')) => want = Want::Key,
                    (b']', Some(b'[')) | (b'}', Some(b'{')) => {
                        open.pop();
                    }
                    _ => return false,
                }
                i += 1;
                continue;
            }
            Want::Colon => {
                if c != b':' {
                    return false;
                }
                want = Want::Value;
                i += 1;
                continue;
            }
            Want::KeyOrClose | Want::Key => {
                if c == b'}' && want == Want::KeyOrClose {
                    open.pop();
                    want = Want::After;
                    i += 1;
                    continue;
                }
                if c != b'"' {
                    return false;
                }
                match string_end(b, i) {
                    Some(end) => i = end,
                    None => return false,
                }
                want = Want::Colon;
                continue;
            }
            Want::Value | Want::ValueOrClose => {}
        }
        // A value (or `]` right after `[`).
        match c {
            b']' if want == Want::ValueOrClose => {
                open.pop();
                i += 1;
            }
            b'[' => {
                open.push(b'[');
                want = Want::ValueOrClose;
                i += 1;
                continue;
            }
            b'{' => {
                open.push(b'{');
                want = Want::KeyOrClose;
                i += 1;
                continue;
            }
            b'"' => match string_end(b, i) {
                Some(end) => i = end,
                None => return false,
            },
            b't' | b'f' | b'n' => {
                let word: &[u8] = match c {
                    b't' => b"true",
                    b'f' => b"false",
                    _ => b"null",
                };
                if !b[i..].starts_with(word) {
                    return false;
                }
                i += word.len();
            }
            b'-' | b'0'..=b'9' => match number_end(b, i) {
                Some(end) => i = end,
                None => return false,
            },
            _ => return false,
        }
        want = Want::After;
    }
}

/// The index after the string starting at `b[i] == '"'`; `None` if it is
/// not a valid JSON string.
fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    while i < b.len() {
        match b[i] {
            b'"' => return Some(i + 1),
            b'\\' => {
                match *b.get(i + 1)? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                    b'u' => {
                        // As serde_json: a surrogate must come in a pair.
                        match hex4(b, i + 2)? {
                            0xD800..=0xDBFF => {
                                if b.get(i + 6..i + 8) != Some(b"\\u".as_slice())
                                    || !(0xDC00..=0xDFFF).contains(&hex4(b, i + 8)?)
                                {
                                    return None;
                                }
                                i += 12;
                            }
                            0xDC00..=0xDFFF => return None,
                            _ => i += 6,
                        }
                    }
                    _ => return None,
                }
            }
            0x00..=0x1f => return None,
            _ => i += 1,
        }
    }
    None
}

/// The four hex digits at `b[i..]` as a number.
fn hex4(b: &[u8], i: usize) -> Option<u32> {
    let hex = std::str::from_utf8(b.get(i..i + 4)?).ok()?;
    if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(hex, 16).ok()
}

/// The index after the number starting at `b[i]`; `None` if it is not a
/// valid JSON number or (as serde_json has it) is out of f64's range.
fn number_end(b: &[u8], start: usize) -> Option<usize> {
    let end = number_syntax_end(b, start)?;
    let text = std::str::from_utf8(&b[start..end]).ok()?;
    text.parse::<f64>().ok().filter(|f| f.is_finite())?;
    Some(end)
}

fn number_syntax_end(b: &[u8], mut i: usize) -> Option<usize> {
    let digits = |b: &[u8], mut i: usize| {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        (i > start).then_some(i)
    };
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(b, i)?,
        _ => return None,
    }
    if b.get(i) == Some(&b'.') {
        i = digits(b, i + 1)?;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        i = digits(b, i)?;
    }
    Some(i)
}

/// A JSON object as a protobuf Struct, nested at most [`MAX_JSON_DEPTH`]
/// levels; `None` for anything else.
pub fn to_struct(v: &Value) -> Option<pbjson_types::Struct> {
    let Value::Object(map) = v else {
        return None;
    };
    Some(object(map, 1))
}

/// Any JSON value (except null) as a protobuf Value, nested at most
/// [`MAX_JSON_DEPTH`] levels.
pub fn to_value(v: &Value) -> Option<pbjson_types::Value> {
    if v.is_null() {
        return None;
    }
    Some(value(v, 1))
}

fn object(map: &serde_json::Map<String, Value>, level: usize) -> pbjson_types::Struct {
    pbjson_types::Struct {
        fields: map
            .iter()
            .map(|(k, v)| (k.clone(), value(v, level + 1)))
            .collect(),
    }
}

/// `v` as found at `level` (the level its container would have).
fn value(v: &Value, level: usize) -> pbjson_types::Value {
    let deep = level > MAX_JSON_DEPTH;
    let kind = match v {
        // A JSON null is `null_value`, never a Value without a kind (not a
        // valid `google.protobuf.Value` for other clients' printers).
        Value::Null => Kind::NullValue(0),
        Value::Bool(b) => Kind::BoolValue(*b),
        Value::Number(n) => Kind::NumberValue(n.as_f64().unwrap_or(0.0)),
        Value::String(s) => match s.strip_prefix(line_cut_tag()) {
            Some(text) => Kind::StringValue(format!("{DEEP_JSON_MARKER}{text}")),
            None => Kind::StringValue(s.clone()),
        },
        Value::Array(_) | Value::Object(_) if deep => {
            Kind::StringValue(format!("{DEEP_JSON_MARKER}{}", json_text(v)))
        }
        Value::Array(items) => Kind::ListValue(pbjson_types::ListValue {
            values: items.iter().map(|i| value(i, level + 1)).collect(),
        }),
        Value::Object(map) => Kind::StructValue(object(map, level)),
    };
    pbjson_types::Value { kind: Some(kind) }
}

/// `v` as compact JSON text; a container [`parse_line`] cut is written back
/// as its original text.
pub fn json_text(v: &Value) -> String {
    let mut out = String::new();
    write_json(v, &mut out);
    out
}

fn write_json(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => match s.strip_prefix(line_cut_tag()) {
            Some(text) => out.push_str(text),
            None => push_json_string(s, out),
        },
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_json(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_string(k, out);
                out.push(':');
                write_json(item, out);
            }
            out.push('}');
        }
        scalar => {
            let _ = write!(out, "{scalar}");
        }
    }
}

fn push_json_string(s: &str, out: &mut String) {
    // Serializing a str cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

/// Cuts every Struct and Value of `payload` to [`MAX_JSON_DEPTH`] levels
/// (a client's content blocks and updated input arrive already built, at
/// whatever depth the request decoder allowed). JSON the normalizer made is
/// already within the bound and is left as it is.
pub fn bound_payload(payload: &mut Payload) {
    let structs: Vec<&mut pbjson_types::Struct> = match payload {
        Payload::RunStart(r) => r
            .config
            .as_mut()
            .map(|c| c.content_blocks.iter_mut().collect())
            .unwrap_or_default(),
        Payload::Content(c) => c
            .blocks
            .iter_mut()
            .flat_map(|b| [b.input.as_mut(), b.raw.as_mut()])
            .flatten()
            .collect(),
        Payload::Result(r) => {
            if let Some(v) = r.tool_use_result.as_mut() {
                bound_value(v, 1);
            }
            Vec::new()
        }
        Payload::TurnEnd(t) => t
            .permission_denials
            .iter_mut()
            .filter_map(|d| d.tool_input.as_mut())
            .collect(),
        Payload::InputSent(i) => i.content_blocks.iter_mut().collect(),
        Payload::PermissionRequested(p) => {
            for v in &mut p.suggestions {
                bound_value(v, 1);
            }
            p.input.iter_mut().collect()
        }
        Payload::PermissionResolved(p) => p.updated_input.iter_mut().collect(),
        _ => Vec::new(),
    };
    for s in structs {
        bound_struct(s, 1);
    }
}

fn bound_struct(s: &mut pbjson_types::Struct, level: usize) {
    for v in s.fields.values_mut() {
        bound_value(v, level + 1);
    }
}

fn bound_value(v: &mut pbjson_types::Value, level: usize) {
    match &mut v.kind {
        Some(Kind::StructValue(_) | Kind::ListValue(_)) if level > MAX_JSON_DEPTH => {
            let text = serde_json::to_string(&*v).unwrap_or_default();
            v.kind = Some(Kind::StringValue(format!("{DEEP_JSON_MARKER}{text}")));
        }
        Some(Kind::StructValue(s)) => bound_struct(s, level),
        Some(Kind::ListValue(l)) => {
            for item in &mut l.values {
                bound_value(item, level + 1);
            }
        }
        _ => {}
    }
}

/// How many levels of containers `s` nests (1 for a Struct of scalars).
pub fn struct_depth(s: &pbjson_types::Struct) -> usize {
    1 + s.fields.values().map(value_depth).max().unwrap_or(0)
}

fn value_depth(v: &pbjson_types::Value) -> usize {
    match &v.kind {
        Some(Kind::StructValue(s)) => struct_depth(s),
        Some(Kind::ListValue(l)) => 1 + l.values.iter().map(value_depth).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use serde_json::json;

    /// `{"k": {"k": … {"end": true}}}`, `depth` objects, as compact text.
    fn nested_text(depth: usize) -> String {
        format!(
            "{}{{\"end\":true}}{}",
            "{\"k\":".repeat(depth - 1),
            "}".repeat(depth - 1)
        )
    }

    /// The string at the bottom of the kept levels of `s`, following "k".
    fn cut_string(s: &pbjson_types::Struct) -> (usize, String) {
        let mut level = 1;
        let mut s = s;
        loop {
            match &s.fields["k"].kind {
                Some(Kind::StructValue(inner)) => {
                    s = inner;
                    level += 1;
                }
                Some(Kind::StringValue(text)) => return (level + 1, text.clone()),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn containers_past_the_bound_are_kept_as_marked_json_text() {
        let text = nested_text(50);
        let v: Value = serde_json::from_str(&text).unwrap();
        let s = to_struct(&v).unwrap();
        assert_eq!(struct_depth(&s), MAX_JSON_DEPTH);
        let (level, cut) = cut_string(&s);
        assert_eq!(level, MAX_JSON_DEPTH + 1, "the first level cut");
        let kept = cut.strip_prefix(DEEP_JSON_MARKER).expect("marked");
        // The text is the subtree, byte for byte (compact input).
        assert_eq!(kept, nested_text(50 - MAX_JSON_DEPTH));
        // Shallow JSON is untouched, nulls included.
        let shallow = json!({"a": [1.5, {"b": null}], "c": "x"});
        assert_eq!(
            serde_json::to_value(to_struct(&shallow).unwrap()).unwrap(),
            shallow
        );
    }

    #[test]
    fn a_line_deeper_than_serde_json_reads_keeps_its_text() {
        for depth in [LINE_DEPTH, 200, 5000] {
            let input = nested_text(depth);
            let line = format!(
                r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","id":"t","name":"X","input":{input}}}]}}}}"#
            );
            let v = parse_line(&line).unwrap_or_else(|e| panic!("{depth}: {e}"));
            let s = to_struct(&v["message"]["content"][0]["input"]).unwrap();
            let (_, cut) = cut_string(&s);
            assert_eq!(
                cut.strip_prefix(DEEP_JSON_MARKER).unwrap(),
                nested_text(depth - MAX_JSON_DEPTH),
                "{depth}"
            );
            // The Struct in an event decodes again.
            let event = pb::Event {
                payload: Some(Payload::Content(pb::Content {
                    blocks: vec![pb::ContentBlock {
                        input: Some(s),
                        ..Default::default()
                    }],
                    ..Default::default()
                })),
                ..Default::default()
            };
            pb::Event::decode(event.encode_to_vec().as_slice()).expect("decodes");
        }
    }

    #[test]
    fn a_deep_line_that_is_not_json_stays_an_error() {
        let deep = "[".repeat(100) + "1" + &"]".repeat(100);
        assert!(parse_line(&format!(r#"{{"type":"x","v":{deep}}}"#)).is_ok());
        for bad in [
            deep.replace('1', "1,"),
            deep.replace('1', "tru"),
            deep.replace('1', "\"a\\q\""),
            deep.replace('1', "01"),
            deep.replace("1]", "1}"),
            deep[..deep.len() - 1].to_owned(),
            format!("{deep} x"),
            deep.replace('1', "{\"a\" 1}"),
        ] {
            assert!(parse_line(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_validator_agrees_with_serde_json() {
        for text in [
            "1",
            "-0.5e+3",
            "\"a\\u00e9\\n\"",
            "[]",
            "{}",
            "[1,[2,{}]]",
            " {\"a\":[true,false,null]} ",
            "",
            "01",
            "1.",
            "-",
            "[1,]",
            "{\"a\"}",
            "{\"a\":1,}",
            "[1 2]",
            "\"\u{1}\"",
            "nul",
            "{1:2}",
            "\"\\x\"",
            "1e",
            "[",
            "]",
            "{\"a\":1}}",
            "1e999",
            "-1e400",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\\ud800\\u0041\"",
            "\"\\ud83d\\ude00\"",
            "123456789012345678901234567890",
        ] {
            assert_eq!(
                is_json(text.as_bytes()),
                serde_json::from_str::<Value>(text).is_ok(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_clients_struct_is_cut_before_it_is_stored() {
        let deep: pbjson_types::Struct = serde_json::from_str(&nested_text(30)).unwrap();
        let mut p = Payload::PermissionResolved(pb::PermissionResolved {
            updated_input: Some(deep),
            ..Default::default()
        });
        bound_payload(&mut p);
        let Payload::PermissionResolved(r) = &p else {
            unreachable!()
        };
        let s = r.updated_input.as_ref().unwrap();
        assert_eq!(struct_depth(s), MAX_JSON_DEPTH);
        let (_, cut) = cut_string(s);
        let kept: Value =
            serde_json::from_str(cut.strip_prefix(DEEP_JSON_MARKER).unwrap()).unwrap();
        assert_eq!(
            kept,
            serde_json::from_str::<Value>(&nested_text(10)).unwrap()
        );
    }
}
