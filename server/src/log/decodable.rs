//! Whether stored bytes decode as an event, answered without decoding them.
//!
//! A row that `pb::Event::decode` refuses is streamed as an `unreadable`
//! event (see [`crate::store::decode_event`]), so Subscribe and History
//! must know, for every stored row they send as it is, whether prost would
//! decode it. Decoding to find out built and dropped the whole event tree
//! per row: the largest per-event cost of a warm replay. [`event_decodes`]
//! walks the wire format instead, against tables of the schema, and
//! allocates nothing.
//!
//! It answers exactly what `pb::Event::decode(bytes).is_ok()` answers, by
//! following prost's decoder (`prost::encoding`, prost-derive's
//! `merge_field`) step by step:
//! - a key is a varint of at most `u32::MAX`, with a wire type 0–5 and a
//!   field number of at least 1; a varint has at most 10 bytes, the tenth
//!   0 or 1;
//! - a known field must come with its wire type, except that a repeated
//!   numeric field may also come packed (a length-delimited run of its
//!   values that ends exactly at the run's end);
//! - string fields (map keys and values included) must be UTF-8; every
//!   length must fit in what is left;
//! - a nested message (a map entry is one) must end exactly where its
//!   length says, and costs one level of prost's recursion limit: the
//!   fields of a message at the limit may hold no message and no unknown
//!   field;
//! - an unknown field is skipped as `prost::encoding::skip_field` does: a
//!   group up to its matching end (each level of groups costs one level),
//!   a stray end-group refused.
//!
//! Enum values are never checked (prost's enums are open: an `i32`), nor
//! are fields required or repeated singular fields refused (the last one
//! wins). The tables are built once, from the descriptor set the protocol
//! crate compiles from proto/ (the same compile as the generated types),
//! so a field added to proto/ is in them; the tests check every answer
//! against prost's.

use std::collections::HashMap;
use std::sync::LazyLock;

use agent_harness_protocol::proto::FILE_DESCRIPTOR_SET;
use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FileDescriptorSet};

/// The message every stored row holds.
pub const EVENT: &str = ".agentharness.v1.Event";

/// prost's recursion limit (`prost::RECURSION_LIMIT`, private to prost;
/// a test decodes messages nested just within and just past it).
pub const RECURSION_LIMIT: u32 = 100;

static EVENT_SCHEMA: LazyLock<Schema> = LazyLock::new(|| {
    let set = FileDescriptorSet::decode(FILE_DESCRIPTOR_SET)
        .expect("the protocol crate's descriptor set decodes");
    Schema::new(&set, EVENT).unwrap_or_else(|e| panic!("the event schema: {e}"))
});

/// Whether `pb::Event::decode(bytes)` succeeds, without decoding.
pub fn event_decodes(bytes: &[u8]) -> bool {
    EVENT_SCHEMA.decodes(bytes)
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const DELIMITED: u8 = 2;
const START_GROUP: u8 = 3;
const END_GROUP: u8 = 4;
const FIXED32: u8 = 5;

/// Field numbers below this are looked up in a vector, the rest by search.
const DENSE: usize = 256;

/// How prost decodes a field's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Any integer, bool or enum: a varint.
    Varint,
    /// float, fixed32, sfixed32: four bytes.
    Fixed32,
    /// double, fixed64, sfixed64: eight bytes.
    Fixed64,
    /// Length-delimited UTF-8.
    String,
    /// Length-delimited bytes.
    Bytes,
    /// A nested message (or map entry): its index in [`Schema::messages`].
    Message(usize),
}

/// One field of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    /// How its values are decoded.
    pub(crate) kind: Kind,
    /// Repeated: a numeric one may also come packed.
    pub(crate) repeated: bool,
}

/// A message's fields by number.
#[derive(Debug, Default)]
pub(crate) struct Table {
    /// Numbers below [`DENSE`].
    dense: Vec<Option<Field>>,
    /// The others, sorted by number.
    sparse: Vec<(u32, Field)>,
}

impl Table {
    /// The field numbered `tag`, if the schema has it.
    #[inline]
    pub(crate) fn get(&self, tag: u32) -> Option<Field> {
        match self.dense.get(tag as usize) {
            Some(f) => *f,
            None if self.sparse.is_empty() => None,
            None => self
                .sparse
                .binary_search_by_key(&tag, |(n, _)| *n)
                .ok()
                .map(|i| self.sparse[i].1),
        }
    }

    /// Every field, by number (the tests' generator walks them).
    #[cfg(test)]
    pub(crate) fn fields(&self) -> impl Iterator<Item = (u32, Field)> + '_ {
        let dense = self
            .dense
            .iter()
            .enumerate()
            .filter_map(|(n, f)| f.map(|f| (n as u32, f)));
        dense.chain(self.sparse.iter().copied())
    }

    fn insert(&mut self, number: u32, field: Field) {
        let n = number as usize;
        if n < DENSE {
            if self.dense.len() <= n {
                self.dense.resize(n + 1, None);
            }
            self.dense[n] = Some(field);
        } else {
            let at = self.sparse.partition_point(|(m, _)| *m < number);
            self.sparse.insert(at, (number, field));
        }
    }
}

/// The tables of a message and of every message it nests, as prost's
/// decoder sees them.
#[derive(Debug)]
pub struct Schema {
    /// The root first, then each message reachable from it.
    pub(crate) messages: Vec<Table>,
    /// Their full names (`.package.Message`), in the same order.
    pub(crate) names: Vec<String>,
}

impl Schema {
    /// The tables of message `root` (a full name, `.package.Message`) of
    /// `set` and of every message it reaches. Fails on a name the set does
    /// not define and on a group field (proto2; prost decodes one
    /// differently and none is in proto/).
    pub fn new(set: &FileDescriptorSet, root: &str) -> Result<Schema, String> {
        let mut defined: HashMap<String, &DescriptorProto> = HashMap::new();
        fn define<'a>(
            prefix: &str,
            msg: &'a DescriptorProto,
            out: &mut HashMap<String, &'a DescriptorProto>,
        ) {
            let name = format!("{prefix}.{}", msg.name());
            for nested in &msg.nested_type {
                define(&name, nested, out);
            }
            out.insert(name, msg);
        }
        for file in &set.file {
            let prefix = match file.package() {
                "" => String::new(),
                p => format!(".{p}"),
            };
            for msg in &file.message_type {
                define(&prefix, msg, &mut defined);
            }
        }
        let mut schema = Schema {
            messages: Vec::new(),
            names: vec![root.to_owned()],
        };
        let mut index: HashMap<String, usize> = HashMap::from([(root.to_owned(), 0)]);
        let mut next = 0;
        while next < schema.names.len() {
            let name = schema.names[next].clone();
            let desc = defined
                .get(&name)
                .ok_or_else(|| format!("{name} is not in the descriptor set"))?;
            let mut table = Table::default();
            for f in &desc.field {
                let kind = match f.r#type() {
                    Type::Int32
                    | Type::Int64
                    | Type::Uint32
                    | Type::Uint64
                    | Type::Sint32
                    | Type::Sint64
                    | Type::Bool
                    | Type::Enum => Kind::Varint,
                    Type::Fixed32 | Type::Sfixed32 | Type::Float => Kind::Fixed32,
                    Type::Fixed64 | Type::Sfixed64 | Type::Double => Kind::Fixed64,
                    Type::String => Kind::String,
                    Type::Bytes => Kind::Bytes,
                    Type::Message => {
                        let target = f.type_name();
                        let i = match index.get(target) {
                            Some(&i) => i,
                            None => {
                                schema.names.push(target.to_owned());
                                index.insert(target.to_owned(), schema.names.len() - 1);
                                schema.names.len() - 1
                            }
                        };
                        Kind::Message(i)
                    }
                    Type::Group => {
                        return Err(format!("{name}.{} is a group", f.name()));
                    }
                };
                let field = Field {
                    kind,
                    repeated: f.label() == Label::Repeated,
                };
                table.insert(f.number() as u32, field);
            }
            schema.messages.push(table);
            next += 1;
        }
        Ok(schema)
    }

    /// Whether prost decodes `bytes` as the root message.
    pub fn decodes(&self, bytes: &[u8]) -> bool {
        self.message(0, bytes, RECURSION_LIMIT)
    }

    /// Whether `buf` is the body of message `msg` whose fields prost
    /// decodes with `depth` levels of recursion left.
    fn message(&self, msg: usize, mut buf: &[u8], depth: u32) -> bool {
        let table = &self.messages[msg];
        while !buf.is_empty() {
            let Some((tag, wire)) = key(&mut buf) else {
                return false;
            };
            let ok = match table.get(tag) {
                Some(field) => self.field(field, wire, &mut buf, depth),
                None => skip(wire, tag, &mut buf, depth),
            };
            if !ok {
                return false;
            }
        }
        true
    }

    /// Reads one value of a known field.
    #[inline]
    fn field(&self, field: Field, wire: u8, buf: &mut &[u8], depth: u32) -> bool {
        match (field.kind, wire) {
            (Kind::Varint, VARINT) => varint(buf).is_some(),
            (Kind::Fixed32, FIXED32) => take(buf, 4).is_some(),
            (Kind::Fixed64, FIXED64) => take(buf, 8).is_some(),
            (Kind::String, DELIMITED) => {
                delimited(buf).is_some_and(|s| std::str::from_utf8(s).is_ok())
            }
            (Kind::Bytes, DELIMITED) => delimited(buf).is_some(),
            (Kind::Message(m), DELIMITED) => {
                depth > 0 && delimited(buf).is_some_and(|b| self.message(m, b, depth - 1))
            }
            (kind @ (Kind::Varint | Kind::Fixed32 | Kind::Fixed64), DELIMITED)
                if field.repeated =>
            {
                delimited(buf).is_some_and(|run| packed(kind, run))
            }
            _ => false,
        }
    }
}

/// Whether `run` is a packed run of `kind` values, ending at its end.
fn packed(kind: Kind, mut run: &[u8]) -> bool {
    match kind {
        Kind::Fixed32 => run.len() % 4 == 0,
        Kind::Fixed64 => run.len() % 8 == 0,
        _ => {
            while !run.is_empty() {
                if varint(&mut run).is_none() {
                    return false;
                }
            }
            true
        }
    }
}

/// Skips an unknown field as `prost::encoding::skip_field` does, with
/// `depth` levels of recursion left.
fn skip(wire: u8, tag: u32, buf: &mut &[u8], depth: u32) -> bool {
    if depth == 0 {
        return false;
    }
    match wire {
        VARINT => varint(buf).is_some(),
        FIXED64 => take(buf, 8).is_some(),
        DELIMITED => delimited(buf).is_some(),
        FIXED32 => take(buf, 4).is_some(),
        START_GROUP => loop {
            let Some((inner, inner_wire)) = key(buf) else {
                return false;
            };
            if inner_wire == END_GROUP {
                return inner == tag;
            }
            if !skip(inner_wire, inner, buf, depth - 1) {
                return false;
            }
        },
        _ => false,
    }
}

/// A field key, as `prost::encoding::decode_key` accepts it.
#[inline]
fn key(buf: &mut &[u8]) -> Option<(u32, u8)> {
    let key = varint(buf)?;
    let key = u32::try_from(key).ok()?;
    let wire = (key & 7) as u8;
    let tag = key >> 3;
    (wire <= FIXED32 && tag >= 1).then_some((tag, wire))
}

/// A varint, as `prost::encoding::decode_varint` accepts it: at most ten
/// bytes, the tenth 0 or 1.
#[inline]
fn varint(buf: &mut &[u8]) -> Option<u64> {
    if let Some((&b, rest)) = buf.split_first() {
        if b < 0x80 {
            *buf = rest;
            return Some(u64::from(b));
        }
    }
    let mut value = 0u64;
    for i in 0..10 {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return (i < 9 || b < 2).then_some(value);
        }
    }
    None
}

/// The next `n` bytes.
#[inline]
fn take<'a>(buf: &mut &'a [u8], n: u64) -> Option<&'a [u8]> {
    if n > buf.len() as u64 {
        return None;
    }
    let (head, rest) = buf.split_at(n as usize);
    *buf = rest;
    Some(head)
}

/// A length-delimited value's bytes.
#[inline]
fn delimited<'a>(buf: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = varint(buf)?;
    take(buf, n)
}

#[cfg(test)]
mod tests;
