//! Every answer of the validator checked against prost's decoder: events
//! of many shapes generated from the schema itself, the events the
//! normalizer makes of every recorded claude line, those truncated at every
//! length, mutated, and random bytes; then one case per rule. A derived
//! message ([`Scalars`], its descriptor written out beside it) covers what
//! the event schema lacks: repeated scalars, packed and not, fixed-width
//! ones, a map with a varint value, a field number past the dense table.
//! (`prost_types`' descriptor.proto is not a second schema to check
//! against: it predates the one protox compiles, which has fields, such as
//! `edition`, that prost_types skips as unknown.)

use std::collections::HashMap;
use std::sync::LazyLock;

use agent_harness_protocol::pb;
use proptest::prelude::*;
use proptest::sample::Index;
use prost::Message;
use prost::encoding::encode_varint;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, FieldDescriptorProto, FileDescriptorProto, FileDescriptorSet, MessageOptions,
};

use super::*;

fn event_schema() -> &'static Schema {
    &EVENT_SCHEMA
}

fn prost_event(bytes: &[u8]) -> bool {
    pb::Event::decode(bytes).is_ok()
}

/// A message of every numeric kind, repeated (packed by default or not),
/// a map with a varint value and a field past the dense table.
#[derive(Clone, PartialEq, prost::Message)]
struct Scalars {
    #[prost(fixed32, repeated, tag = "1")]
    fixed32: Vec<u32>,
    #[prost(sfixed64, repeated, packed = "false", tag = "2")]
    sfixed64: Vec<i64>,
    #[prost(float, repeated, tag = "3")]
    float: Vec<f32>,
    #[prost(double, tag = "4")]
    double: f64,
    #[prost(sint64, repeated, tag = "5")]
    sint64: Vec<i64>,
    #[prost(bool, repeated, tag = "6")]
    bools: Vec<bool>,
    #[prost(bytes = "vec", tag = "7")]
    bytes: Vec<u8>,
    #[prost(message, optional, boxed, tag = "8")]
    nested: Option<Box<Scalars>>,
    #[prost(map = "string, sint32", tag = "9")]
    map: HashMap<String, i32>,
    #[prost(string, tag = "300")]
    far: String,
}

/// [`Scalars`] as a descriptor set, as protoc would write it.
static SCALARS_SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
    fn field(
        name: &str,
        number: i32,
        ty: Type,
        label: Label,
        type_name: &str,
    ) -> FieldDescriptorProto {
        FieldDescriptorProto {
            name: Some(name.into()),
            number: Some(number),
            r#type: Some(ty as i32),
            label: Some(label as i32),
            type_name: (!type_name.is_empty()).then(|| type_name.into()),
            ..Default::default()
        }
    }
    let (rep, opt) = (Label::Repeated, Label::Optional);
    let entry = DescriptorProto {
        name: Some("MapEntry".into()),
        field: vec![
            field("key", 1, Type::String, opt, ""),
            field("value", 2, Type::Sint32, opt, ""),
        ],
        options: Some(MessageOptions {
            map_entry: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    let msg = DescriptorProto {
        name: Some("Scalars".into()),
        field: vec![
            field("fixed32", 1, Type::Fixed32, rep, ""),
            field("sfixed64", 2, Type::Sfixed64, rep, ""),
            field("float", 3, Type::Float, rep, ""),
            field("double", 4, Type::Double, opt, ""),
            field("sint64", 5, Type::Sint64, rep, ""),
            field("bools", 6, Type::Bool, rep, ""),
            field("bytes", 7, Type::Bytes, opt, ""),
            field("nested", 8, Type::Message, opt, ".t.Scalars"),
            field("map", 9, Type::Message, rep, ".t.Scalars.MapEntry"),
            field("far", 300, Type::String, opt, ""),
        ],
        nested_type: vec![entry],
        ..Default::default()
    };
    let set = FileDescriptorSet {
        file: vec![FileDescriptorProto {
            name: Some("t.proto".into()),
            package: Some("t".into()),
            message_type: vec![msg],
            syntax: Some("proto3".into()),
            ..Default::default()
        }],
    };
    Schema::new(&set, ".t.Scalars").expect("schema")
});

fn prost_scalars(bytes: &[u8]) -> bool {
    Scalars::decode(bytes).is_ok()
}

/// The events the normalizer makes of every `out` line of the claude
/// cassettes, encoded as the writer stores them.
static FIXTURES: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../cassettes");
    let mut files: Vec<_> = std::fs::read_dir(root)
        .expect("cassettes")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().ends_with(".cassette.jsonl"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).expect("cassette");
        let mut lines = text.lines();
        let header: serde_json::Value =
            serde_json::from_str(lines.next().unwrap_or("{}")).expect("header");
        if header["agent"].as_str().is_some_and(|a| a != "claude") {
            continue;
        }
        let mut n = crate::normalize::Normalizer::new(10 << 20);
        for l in lines {
            let rec: serde_json::Value = serde_json::from_str(l).expect("record");
            if rec["dir"] != "out" {
                continue;
            }
            let line = rec["line"].as_str().unwrap_or("").to_owned();
            for (payload, cli_line) in n.line_owned(crate::adapter::StdoutLine::Line(line)) {
                let event = pb::Event {
                    seq: out.len() as u64 + 1,
                    session_id: "fixture-session".into(),
                    run_id: "run-1".into(),
                    time: Some(pbjson_types::Timestamp {
                        seconds: 1_790_000_000,
                        nanos: 123_456_789,
                    }),
                    cli_line,
                    truncated: None,
                    payload: Some(payload),
                };
                out.push(event.encode_to_vec());
            }
        }
    }
    out
});

/// Builds messages of a schema from a stream of choices (proptest shrinks
/// the stream, so the message shrinks): known fields of every kind, in any
/// order and repeated, packed runs, overlong varints, multi-byte UTF-8,
/// unknown fields of every wire type (groups nested), and now and then a
/// chain of nested messages as deep as prost's limit, or one deeper.
struct Gen<'a> {
    schema: &'a Schema,
    choices: &'a [u8],
    at: usize,
    /// Messages from which a chain of nested messages can go on forever.
    recursive: Vec<bool>,
}

impl<'a> Gen<'a> {
    fn new(schema: &'a Schema, choices: &'a [u8]) -> Self {
        let mut recursive = vec![true; schema.messages.len()];
        loop {
            let mut changed = false;
            for (m, table) in schema.messages.iter().enumerate() {
                let on = table.fields().any(|(_, f)| match f.kind {
                    Kind::Message(c) => recursive[c],
                    _ => false,
                });
                if recursive[m] && !on {
                    recursive[m] = false;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        Gen {
            schema,
            choices,
            at: 0,
            recursive,
        }
    }

    fn byte(&mut self) -> u8 {
        let b = self.choices.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 { 0 } else { self.byte() as usize % n }
    }

    fn root(mut self) -> Vec<u8> {
        let mut out = Vec::new();
        if self.below(6) == 0 {
            let levels = RECURSION_LIMIT - 3 + self.below(6) as u32;
            self.chain(0, levels, 0, &mut out);
        }
        self.message(0, 0, &mut out);
        out
    }

    fn message(&mut self, msg: usize, level: u32, out: &mut Vec<u8>) {
        let n = self.below(match level {
            0 => 9,
            1..=3 => 5,
            _ => 2,
        });
        for _ in 0..n {
            self.field(msg, level, out);
        }
    }

    /// `levels` nested messages, each a field of the one above.
    fn chain(&mut self, msg: usize, levels: u32, level: u32, out: &mut Vec<u8>) {
        let next: Vec<(u32, usize)> = self.schema.messages[msg]
            .fields()
            .filter_map(|(n, f)| match f.kind {
                Kind::Message(m) if self.recursive[m] => Some((n, m)),
                _ => None,
            })
            .collect();
        if levels == 0 || next.is_empty() {
            self.message(msg, level, out);
            return;
        }
        let (tag, m) = next[self.below(next.len())];
        let mut body = Vec::new();
        self.chain(m, levels - 1, level + 1, &mut body);
        put_key(tag, DELIMITED, out);
        put_delimited(&body, out);
    }

    fn field(&mut self, msg: usize, level: u32, out: &mut Vec<u8>) {
        let fields: Vec<(u32, Field)> = self.schema.messages[msg].fields().collect();
        if fields.is_empty() || self.below(6) == 0 {
            self.unknown(msg, level, out);
            return;
        }
        let (tag, f) = fields[self.below(fields.len())];
        let packable = f.repeated && matches!(f.kind, Kind::Varint | Kind::Fixed32 | Kind::Fixed64);
        if packable && self.below(2) == 0 {
            let mut run = Vec::new();
            for _ in 0..self.below(5) {
                self.scalar(f.kind, &mut run);
            }
            put_key(tag, DELIMITED, out);
            put_delimited(&run, out);
            return;
        }
        match f.kind {
            Kind::Varint => put_key(tag, VARINT, out),
            Kind::Fixed32 => put_key(tag, FIXED32, out),
            Kind::Fixed64 => put_key(tag, FIXED64, out),
            _ => put_key(tag, DELIMITED, out),
        }
        match f.kind {
            Kind::Message(m) => {
                let mut body = Vec::new();
                self.message(m, level + 1, &mut body);
                put_delimited(&body, out);
            }
            kind => self.scalar(kind, out),
        }
    }

    /// A value of a kind other than a message.
    fn scalar(&mut self, kind: Kind, out: &mut Vec<u8>) {
        match kind {
            Kind::Varint => self.varint(out),
            Kind::Fixed32 => {
                for _ in 0..4 {
                    out.push(self.byte());
                }
            }
            Kind::Fixed64 => {
                for _ in 0..8 {
                    out.push(self.byte());
                }
            }
            Kind::String => {
                const CHARS: [&str; 12] = [
                    "a", "Z", "0", " ", "\n", "é", "ß", "中", "😀", "\u{0}", "\u{7f}", "\u{ffff}",
                ];
                let mut s = String::new();
                for _ in 0..self.below(12) {
                    s.push_str(CHARS[self.below(CHARS.len())]);
                }
                put_delimited(s.as_bytes(), out);
            }
            Kind::Bytes | Kind::Message(_) => {
                let b: Vec<u8> = (0..self.below(16)).map(|_| self.byte()).collect();
                put_delimited(&b, out);
            }
        }
    }

    /// A varint, sometimes overlong (prost takes up to ten bytes).
    fn varint(&mut self, out: &mut Vec<u8>) {
        match self.below(5) {
            0 => out.push(self.byte() & 0x7f),
            1 => {
                let v = u32::from_le_bytes([self.byte(), self.byte(), self.byte(), self.byte()]);
                encode_varint(u64::from(v), out);
            }
            2 => {
                let v = u64::from_le_bytes(std::array::from_fn(|_| self.byte()));
                encode_varint(v, out);
            }
            3 => {
                let len = 2 + self.below(9);
                out.push(self.byte() | 0x80);
                out.extend(std::iter::repeat_n(0x80, len - 2));
                out.push(if len == 10 { self.byte() & 1 } else { 0 });
            }
            _ => encode_varint(u64::MAX - self.below(3) as u64, out),
        }
    }

    /// A field the message does not have, of any wire type.
    fn unknown(&mut self, msg: usize, level: u32, out: &mut Vec<u8>) {
        let table = &self.schema.messages[msg];
        let last = table.fields().map(|(n, _)| n).max().unwrap_or(0);
        let tag = match self.below(3) {
            0 => last + 1 + self.below(4) as u32,
            1 => 1 + self.below(40) as u32,
            _ => (1 << 29) - 1 - self.below(2) as u32,
        };
        if table.get(tag).is_some() {
            return;
        }
        self.any_field(tag, level, out);
    }

    /// Field `tag` with a value of any wire type.
    fn any_field(&mut self, tag: u32, level: u32, out: &mut Vec<u8>) {
        match self.below(5) {
            0 => {
                put_key(tag, VARINT, out);
                self.varint(out);
            }
            1 => {
                put_key(tag, FIXED64, out);
                self.scalar(Kind::Fixed64, out);
            }
            2 => {
                put_key(tag, DELIMITED, out);
                self.scalar(Kind::Bytes, out);
            }
            3 => {
                put_key(tag, FIXED32, out);
                self.scalar(Kind::Fixed32, out);
            }
            _ => {
                put_key(tag, START_GROUP, out);
                if level < 8 {
                    for _ in 0..self.below(3) {
                        let inner = 1 + self.below(30) as u32;
                        self.any_field(inner, level + 1, out);
                    }
                }
                put_key(tag, END_GROUP, out);
            }
        }
    }
}

fn put_key(tag: u32, wire: u8, out: &mut Vec<u8>) {
    encode_varint(u64::from(tag << 3 | u32::from(wire)), out);
}

fn put_delimited(body: &[u8], out: &mut Vec<u8>) {
    encode_varint(body.len() as u64, out);
    out.extend_from_slice(body);
}

/// The validator and prost agree on `bytes`.
fn agree(schema: &Schema, prost: fn(&[u8]) -> bool, bytes: &[u8]) -> Result<(), TestCaseError> {
    let (ours, theirs) = (schema.decodes(bytes), prost(bytes));
    prop_assert_eq!(
        ours,
        theirs,
        "validator {} prost {} on {:02x?}",
        ours,
        theirs,
        bytes
    );
    Ok(())
}

/// ... and on every prefix of it.
fn agree_truncated(
    schema: &Schema,
    prost: fn(&[u8]) -> bool,
    bytes: &[u8],
) -> Result<(), TestCaseError> {
    for end in 0..=bytes.len() {
        agree(schema, prost, &bytes[..end])?;
    }
    Ok(())
}

/// A change to a message: flip a bit, set a byte, insert one, remove one.
fn mutate(bytes: &mut Vec<u8>, edits: &[(Index, u8, u8)]) {
    for (at, op, value) in edits {
        let len = bytes.len();
        match op % 4 {
            0 if len > 0 => bytes[at.index(len)] ^= 1 << (value % 8),
            1 if len > 0 => bytes[at.index(len)] = *value,
            2 => bytes.insert(at.index(len + 1), *value),
            3 if len > 0 => {
                bytes.remove(at.index(len));
            }
            _ => bytes.push(*value),
        }
    }
}

fn edits() -> impl Strategy<Value = Vec<(Index, u8, u8)>> {
    proptest::collection::vec((any::<Index>(), any::<u8>(), any::<u8>()), 1..6)
}

fn choices(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..max)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn generated_events_agree(choices in choices(2048)) {
        let bytes = Gen::new(event_schema(), &choices).root();
        agree(event_schema(), prost_event, &bytes)?;
        // The same event as prost encodes it (fields in order, defaults
        // left out), when it decodes.
        if let Ok(event) = pb::Event::decode(bytes.as_slice()) {
            let canonical = event.encode_to_vec();
            prop_assert!(event_schema().decodes(&canonical));
        }
    }

    #[test]
    fn generated_events_agree_truncated(choices in choices(384)) {
        let bytes = Gen::new(event_schema(), &choices).root();
        agree_truncated(event_schema(), prost_event, &bytes)?;
    }

    #[test]
    fn mutated_events_agree(choices in choices(1024), edits in edits()) {
        let mut bytes = Gen::new(event_schema(), &choices).root();
        mutate(&mut bytes, &edits);
        agree(event_schema(), prost_event, &bytes)?;
    }

    #[test]
    fn mutated_fixtures_agree(which in any::<Index>(), edits in edits()) {
        let mut bytes = FIXTURES[which.index(FIXTURES.len())].clone();
        mutate(&mut bytes, &edits);
        agree(event_schema(), prost_event, &bytes)?;
    }

    #[test]
    fn random_bytes_agree(bytes in choices(256)) {
        agree(event_schema(), prost_event, &bytes)?;
        agree(&SCALARS_SCHEMA, prost_scalars, &bytes)?;
    }

    #[test]
    fn random_keyed_bytes_agree(tag in 1u32..40, wire in 0u8..8, rest in choices(64)) {
        // A first key of the schema's own, so the rest gets read.
        let mut bytes = Vec::new();
        encode_varint(u64::from(tag << 3 | u32::from(wire)), &mut bytes);
        bytes.extend_from_slice(&rest);
        agree(event_schema(), prost_event, &bytes)?;
        agree(&SCALARS_SCHEMA, prost_scalars, &bytes)?;
    }

    #[test]
    fn generated_scalars_agree(choices in choices(1024), edits in edits()) {
        let mut bytes = Gen::new(&SCALARS_SCHEMA, &choices).root();
        agree_truncated(&SCALARS_SCHEMA, prost_scalars, &bytes)?;
        mutate(&mut bytes, &edits);
        agree(&SCALARS_SCHEMA, prost_scalars, &bytes)?;
    }

}

#[test]
fn the_generator_makes_mostly_valid_messages_and_reaches_the_limit() {
    // Not a check of the validator: that the properties above see valid
    // messages (not only refusals), and deep ones on both sides of the limit.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        // xorshift64: a fixed sequence, the same every run.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let (mut valid, mut deep_valid, mut deep_refused) = (0, 0, 0);
    for _ in 0..2000 {
        let len = (next() % 2048) as usize;
        let choices: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let bytes = Gen::new(event_schema(), &choices).root();
        let ok = prost_event(&bytes);
        valid += usize::from(ok);
        let deep = choices.first().is_some_and(|b| b % 6 == 0);
        if deep && ok {
            deep_valid += 1;
        }
        if deep && !ok {
            deep_refused += 1;
        }
    }
    assert!(valid > 1400, "only {valid} of 2000 generated events decode");
    assert!(
        deep_valid > 20 && deep_refused > 20,
        "deep: {deep_valid} decode, {deep_refused} refused"
    );
}

#[test]
fn every_fixture_and_every_prefix_agrees() {
    assert!(
        FIXTURES.len() > 50,
        "only {} fixture events",
        FIXTURES.len()
    );
    for bytes in FIXTURES.iter() {
        assert!(event_schema().decodes(bytes));
        for end in 0..bytes.len() {
            let prefix = &bytes[..end];
            assert_eq!(
                event_schema().decodes(prefix),
                prost_event(prefix),
                "{prefix:02x?}"
            );
        }
    }
}

#[test]
fn the_event_schema_covers_every_message_the_descriptor_reaches() {
    let s = event_schema();
    assert_eq!(s.names[0], EVENT);
    for name in [
        ".agentharness.v1.RunStart",
        ".agentharness.v1.StartConfig.EnvEntry",
        ".google.protobuf.Struct",
        ".google.protobuf.Struct.FieldsEntry",
        ".google.protobuf.Value",
        ".google.protobuf.ListValue",
        ".google.protobuf.Timestamp",
    ] {
        assert!(
            s.names.iter().any(|n| n == name),
            "{name} missing from {:?}",
            s.names
        );
    }
    // Every field of every message, by number and kind.
    let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET).expect("set");
    let mut checked = 0;
    for file in &set.file {
        for msg in &file.message_type {
            let name = format!(".{}.{}", file.package(), msg.name());
            let Some(i) = s.names.iter().position(|n| *n == name) else {
                continue;
            };
            for f in &msg.field {
                assert!(
                    s.messages[i].get(f.number() as u32).is_some(),
                    "{name}.{}",
                    f.name()
                );
                checked += 1;
            }
            assert_eq!(s.messages[i].fields().count(), msg.field.len(), "{name}");
        }
    }
    assert!(checked > 100, "only {checked} fields checked");
}

#[test]
fn a_group_field_or_an_unknown_type_is_refused_when_the_schema_is_built() {
    let group = FieldDescriptorProto {
        name: Some("g".into()),
        number: Some(1),
        r#type: Some(Type::Group as i32),
        type_name: Some(".t.M".into()),
        ..Default::default()
    };
    let set = FileDescriptorSet {
        file: vec![FileDescriptorProto {
            package: Some("t".into()),
            message_type: vec![DescriptorProto {
                name: Some("M".into()),
                field: vec![group],
                ..Default::default()
            }],
            ..Default::default()
        }],
    };
    assert_eq!(Schema::new(&set, ".t.M").unwrap_err(), ".t.M.g is a group");
    assert!(Schema::new(&set, ".t.Missing").is_err());
}

/// Both prost and the validator give `expected` for `bytes` (an event).
#[track_caller]
fn case(bytes: &[u8], expected: bool) {
    assert_eq!(prost_event(bytes), expected, "prost on {bytes:02x?}");
    assert_eq!(event_decodes(bytes), expected, "validator on {bytes:02x?}");
}

#[track_caller]
fn scalars_case(bytes: &[u8], expected: bool) {
    assert_eq!(prost_scalars(bytes), expected, "prost on {bytes:02x?}");
    assert_eq!(
        SCALARS_SCHEMA.decodes(bytes),
        expected,
        "validator on {bytes:02x?}"
    );
}

/// `tag` (wire type LEN) holding `body`.
fn delimited_field(tag: u32, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    put_key(tag, DELIMITED, &mut out);
    put_delimited(body, &mut out);
    out
}

#[test]
fn varints() {
    case(&[], true);
    case(&[0x08, 0x01], true); // seq = 1
    // Ten bytes, the tenth 1: u64::MAX.
    case(
        &[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ],
        true,
    );
    // Overlong but ten bytes: accepted.
    case(
        &[
            0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
        ],
        true,
    );
    // Tenth byte 2: overflows.
    case(
        &[
            0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
        ],
        false,
    );
    // Eleven bytes.
    case(
        &[
            0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00,
        ],
        false,
    );
    // Cut short.
    case(&[0x08, 0x80], false);
    case(&[0x08], false);
}

#[test]
fn keys() {
    case(&[0x00], false); // field 0
    case(&[0x06], false); // wire type 6
    case(&[0x0f], false); // wire type 7
    case(&[0x80], false); // a key cut short
    // A key past u32::MAX (field number 2^29 with wire type 0 is the first).
    case(&[0x80, 0x80, 0x80, 0x80, 0x10, 0x00], false);
    // The largest field number: an unknown varint, skipped.
    case(&[0xf8, 0xff, 0xff, 0xff, 0x0f, 0x00], true);
}

#[test]
fn lengths() {
    case(&delimited_field(2, b"abc"), true);
    case(&[0x12, 0x04, b'a', b'b', b'c'], false); // past the end
    case(&[0x12, 0x80], false); // length cut short
    case(
        &[
            0x12, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
        ],
        false,
    ); // u64::MAX
    // A nested message whose field runs past the message's own end, though
    // not past the buffer's.
    let mut bytes = vec![0x22, 0x02, 0x08, 0x96]; // time { seconds: <cut> }
    bytes.extend([0x01, 0x10, 0x01]);
    case(&bytes, false);
    // Unknown length-delimited: skipped, but must fit.
    case(&[0xfa, 0x01, 0x02, 0x00, 0x00], true); // field 31
    case(&[0xfa, 0x01, 0x03, 0x00, 0x00], false);
}

#[test]
fn wire_types_of_known_fields() {
    case(&[0x0a, 0x00], false); // seq as LEN
    case(&[0x09, 0, 0, 0, 0, 0, 0, 0, 0], false); // seq as fixed64
    case(&[0x10, 0x01], false); // session_id as varint
    case(&[0x25, 0, 0, 0, 0], false); // time as fixed32
    case(&[0x23, 0x24], false); // time as a group
    case(&[0x0c], false); // a stray end-group at seq
}

#[test]
fn packed_and_unpacked_repeated_scalars() {
    // fixed32 (1): packed and not; the run must hold whole values.
    scalars_case(&[0x0d, 1, 2, 3, 4], true);
    scalars_case(&[0x0a, 0x08, 1, 2, 3, 4, 5, 6, 7, 8], true);
    scalars_case(&[0x0a, 0x00], true);
    scalars_case(&[0x0a, 0x05, 1, 2, 3, 4, 5], false);
    scalars_case(&[0x0a, 0x03, 1, 2, 3, 0x0d, 1, 2, 3, 4], false);
    // sfixed64 declared unpacked (2): prost takes it packed too.
    scalars_case(&[0x12, 0x08, 1, 2, 3, 4, 5, 6, 7, 8], true);
    scalars_case(&[0x11, 1, 2, 3, 4, 5, 6, 7, 8], true);
    scalars_case(&[0x12, 0x07, 1, 2, 3, 4, 5, 6, 7], false);
    // sint64 (5): packed varints must end with the run.
    scalars_case(&[0x2a, 0x03, 0x01, 0x96, 0x01], true);
    scalars_case(&[0x2a, 0x02, 0x01, 0x96, 0x01], false);
    scalars_case(&[0x28, 0x96, 0x01], true);
    // A singular double (4) is never packed.
    scalars_case(&[0x22, 0x08, 1, 2, 3, 4, 5, 6, 7, 8], false);
    scalars_case(&[0x21, 1, 2, 3, 4, 5, 6, 7, 8], true);
    // A field past the dense table (300): a string.
    let mut far = vec![0xe2, 0x12];
    put_delimited(b"ok", &mut far);
    scalars_case(&far, true);
    let mut far = vec![0xe2, 0x12];
    put_delimited(&[0xff], &mut far);
    scalars_case(&far, false);
    // The map's value (9 -> 2, sint32) is never packed.
    scalars_case(&delimited_field(9, &[0x10, 0x01]), true);
    scalars_case(&delimited_field(9, &[0x12, 0x01, 0x01]), false);
}

#[test]
fn utf8_in_strings_and_map_keys_and_values() {
    case(&delimited_field(2, "é中😀".as_bytes()), true);
    case(&delimited_field(2, &[0xc3]), false); // cut inside a character
    case(&delimited_field(2, &[0xed, 0xa0, 0x80]), false); // a surrogate
    case(&delimited_field(2, &[0xc0, 0x80]), false); // overlong NUL
    // run_start (10) { config (1) { env (4) { key (1), value (2) } } }
    let env = |entry: &[u8]| {
        let config = delimited_field(4, entry);
        let start = delimited_field(1, &config);
        delimited_field(10, &start)
    };
    let mut entry = delimited_field(1, b"HOME");
    entry.extend(delimited_field(2, b"/root"));
    case(&env(&entry), true);
    let mut bad_key = delimited_field(1, &[0xff]);
    bad_key.extend(delimited_field(2, b"/root"));
    case(&env(&bad_key), false);
    let mut bad_value = delimited_field(1, b"HOME");
    bad_value.extend(delimited_field(2, &[0x80]));
    case(&env(&bad_value), false);
    // A map entry's unknown field is skipped; a wrong wire type is not.
    let mut extra = delimited_field(1, b"HOME");
    extra.extend([0x18, 0x01]);
    case(&env(&extra), true);
    case(&env(&[0x08, 0x01]), false);
    // The map field itself as a varint.
    case(
        &delimited_field(10, &delimited_field(1, &[0x20, 0x01])),
        false,
    );
}

#[test]
fn groups_are_skipped_as_prost_skips_them() {
    // Unknown field 31 as a group holding a varint and a nested group.
    let open = |tag: u32, out: &mut Vec<u8>| put_key(tag, START_GROUP, out);
    let close = |tag: u32, out: &mut Vec<u8>| put_key(tag, END_GROUP, out);
    let mut ok = Vec::new();
    open(31, &mut ok);
    ok.extend([0x08, 0x01]);
    open(5, &mut ok);
    close(5, &mut ok);
    close(31, &mut ok);
    case(&ok, true);
    let mut wrong_end = Vec::new();
    open(31, &mut wrong_end);
    close(30, &mut wrong_end);
    case(&wrong_end, false);
    let mut unclosed = Vec::new();
    open(31, &mut unclosed);
    unclosed.extend([0x08, 0x01]);
    case(&unclosed, false);
    let mut stray = Vec::new();
    close(31, &mut stray);
    case(&stray, false);
    // Groups nested 100 deep in an event fit prost's limit; 101 do not.
    let nested = |levels: u32| {
        let mut out = Vec::new();
        for _ in 0..levels {
            open(31, &mut out);
        }
        for _ in 0..levels {
            close(31, &mut out);
        }
        out
    };
    case(&nested(RECURSION_LIMIT), true);
    case(&nested(RECURSION_LIMIT + 1), false);
}

/// `levels` of Value { list_value { values [ ... ] } } around `inner`.
fn nested_values(levels: u32, inner: &[u8]) -> Vec<u8> {
    let mut body = inner.to_vec();
    for i in 0..levels {
        // Odd levels are ListValue (values = 1), even ones Value
        // (list_value = 6).
        body = delimited_field(if i % 2 == 0 { 1 } else { 6 }, &body);
    }
    body
}

#[test]
fn the_recursion_limit() {
    // tool_use_result (Value, 5) of result (16): two levels down, then
    // `levels` (even) more of ListValue and Value; the innermost message,
    // a Value, is at level `2 + levels`.
    let event = |levels: u32, inner: &[u8]| {
        let value = nested_values(levels, inner);
        delimited_field(16, &delimited_field(5, &value))
    };
    // The deepest message prost takes is at level 100 (the root is 0):
    // here a Value; its fields may be scalars, but not a message or an
    // unknown field.
    let levels = RECURSION_LIMIT - 2;
    case(&event(levels, &[]), true);
    case(&event(levels, &[0x20, 0x01]), true); // bool_value
    case(&event(levels, &[0xf8, 0x01, 0x01]), false); // unknown 31
    case(&event(levels, &[0x32, 0x00]), false); // list_value at 101
    case(&event(levels - 2, &[0x32, 0x00]), true); // list_value at 99
    // Prost's limit itself, checked with the derived message: a chain of
    // `nested` exactly RECURSION_LIMIT deep decodes, one more does not.
    let chain = |levels: u32| {
        let mut body = Vec::new();
        for _ in 0..levels {
            body = delimited_field(8, &body);
        }
        body
    };
    scalars_case(&chain(RECURSION_LIMIT), true);
    scalars_case(&chain(RECURSION_LIMIT + 1), false);
}

#[test]
fn the_event_decodes_stays_true_for_what_the_writer_stores() {
    let event = pb::Event {
        seq: 7,
        session_id: "s".into(),
        run_id: "r".into(),
        time: Some(pbjson_types::Timestamp {
            seconds: -1,
            nanos: -5,
        }),
        cli_line: "{\"type\":\"x\"}".into(),
        truncated: Some(pb::Truncated::default()),
        payload: Some(pb::event::Payload::Unreadable(pb::Unreadable {
            reason: "é".into(),
            size: u64::MAX,
        })),
    };
    assert!(event_decodes(&event.encode_to_vec()));
}
