//! The CLI's frequent lines read typed, borrowing from the line: `assistant`,
//! `user`, `result` and `stream_event` share one [`Line`] (the fields each
//! reads; the rest of the line is checked and skipped). Each event of those
//! lines is built from this view only (`normalize/mod.rs`, `result`,
//! `typing`). Field by field it reads as the `Value` accessors of
//! [`crate::decoder::json`] do (see [`crate::decoder::lenient`]), so the
//! events are the same whichever way a line was read.
//!
//! A line the typed read refuses (not JSON, or nested deeper than
//! `serde_json` recurses) is parsed as a `Value` instead
//! ([`crate::nesting::parse_line`]); one of those kinds is then read here
//! again from that `Value`'s text (see [`Line::from_object`]).

use serde::de::MapAccess;
use serde_json::{Map, Value};

use crate::decoder::lenient::{
    Bool, Entries, F64, Fields, Index, Json, List, Raw, Text, U64, object,
};

/// The kinds of line read typed.
pub(super) fn is_typed(kind: &str) -> bool {
    matches!(kind, "assistant" | "user" | "result" | "stream_event")
}

/// Whether a line may be of a kind read typed. The CLI writes `type`
/// first, so a line that names another kind up front goes straight to the
/// `Value` parse instead of being read twice. Only a shortcut: the `Value`
/// path maps every kind the same way.
pub(super) fn worth_reading(text: &str) -> bool {
    match text
        .strip_prefix("{\"type\":\"")
        .and_then(|rest| rest.split_once('"'))
    {
        Some((kind, _)) => is_typed(kind),
        None => true,
    }
}

/// One line's fields, of whichever kind it is.
#[derive(Debug, Default)]
pub(super) struct Line<'a> {
    pub kind: Text<'a>,
    /// `assistant` and `user`.
    pub message: Message<'a>,
    pub parent_tool_use_id: Text<'a>,
    /// `assistant`.
    pub error: Text<'a>,
    /// `user`: a tool's own result object (inside the line: 1 container).
    pub tool_use_result: Option<Json<1>>,
    /// `stream_event`.
    pub event: StreamEvent<'a>,
    /// `result`, and the rest are `result`'s too.
    pub usage: Option<Usage>,
    pub total_cost_usd: F64,
    pub duration_ms: U64,
    pub duration_api_ms: U64,
    pub is_error: Bool,
    pub terminal_reason: Text<'a>,
    pub subtype: Text<'a>,
    pub num_turns: U64,
    pub result: Text<'a>,
    pub origin: Origin<'a>,
    pub model_usage: Entries<ModelUsage>,
    pub api_error_status: U64,
    /// Each entry as text (a string as itself, anything else as its JSON).
    pub errors: List<Json<2>>,
    pub permission_denials: List<Denial>,
}

impl<'a> Line<'a> {
    /// Reads a line; `None` when it is not JSON the typed read takes (see
    /// the module docs).
    pub fn read(text: &'a str) -> Option<Self> {
        serde_json::from_str(text).ok()
    }

    /// The text of an object parsed as a `Value`, to [`Line::read`]: the
    /// `Value` already holds what the typed read refused (containers past
    /// the depth limit as their text), and its text reads back to the same
    /// numbers and strings (floats round-trip).
    pub fn object_text(obj: &Map<String, Value>) -> String {
        // A map of JSON values always serializes.
        serde_json::to_string(obj).unwrap_or_default()
    }
}

impl<'de: 'a, 'a> Fields<'de> for Line<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "message" => self.message = map.next_value()?,
            "parent_tool_use_id" => self.parent_tool_use_id = map.next_value()?,
            "error" => self.error = map.next_value()?,
            "tool_use_result" => self.tool_use_result = Some(map.next_value()?),
            "event" => self.event = map.next_value()?,
            "usage" => self.usage = Some(map.next_value()?),
            "total_cost_usd" => self.total_cost_usd = map.next_value()?,
            "duration_ms" => self.duration_ms = map.next_value()?,
            "duration_api_ms" => self.duration_api_ms = map.next_value()?,
            "is_error" => self.is_error = map.next_value()?,
            "terminal_reason" => self.terminal_reason = map.next_value()?,
            "subtype" => self.subtype = map.next_value()?,
            "num_turns" => self.num_turns = map.next_value()?,
            "result" => self.result = map.next_value()?,
            "origin" => self.origin = map.next_value()?,
            "modelUsage" => self.model_usage = map.next_value()?,
            "api_error_status" => self.api_error_status = map.next_value()?,
            "errors" => self.errors = map.next_value()?,
            "permission_denials" => self.permission_denials = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(Line<'a>);

/// An API message: an `assistant` line's, a `user` line's, or the one a
/// `message_start` stream event names.
#[derive(Debug, Default)]
pub(super) struct Message<'a> {
    pub id: Text<'a>,
    pub model: Text<'a>,
    pub content: Content<'a>,
    pub usage: Option<Usage>,
    pub stop_reason: Text<'a>,
}

impl<'de: 'a, 'a> Fields<'de> for Message<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "id" => self.id = map.next_value()?,
            "model" => self.model = map.next_value()?,
            "content" => self.content = map.next_value()?,
            "usage" => self.usage = Some(map.next_value()?),
            "stop_reason" => self.stop_reason = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(Message<'a>);

/// A message's `content`: a string (a user's plain text) or blocks.
#[derive(Debug, Default)]
pub(super) enum Content<'a> {
    #[default]
    Other,
    Text(std::borrow::Cow<'a, str>),
    Blocks(Vec<Block<'a>>),
}

impl<'de: 'a, 'a> crate::decoder::lenient::Lenient<'de> for Content<'a> {
    fn str(s: std::borrow::Cow<'de, str>) -> Self {
        Content::Text(s)
    }
    fn seq<S: serde::de::SeqAccess<'de>>(seq: S) -> Result<Self, S::Error> {
        let List(blocks) = List::seq(seq)?;
        Ok(Content::Blocks(blocks))
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Content<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::decoder::lenient::lenient(d)
    }
}

/// One content block, with its text (a block of a type read field by field
/// by no one is kept whole).
#[derive(Debug)]
pub(super) struct Block<'a> {
    pub fields: BlockFields<'a>,
    /// The block as the line has it (inside 3 containers: the line, its
    /// message, the content array).
    pub raw: Raw<'a>,
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Block<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <Raw<'de>>::deserialize(d)?;
        let fields = serde_json::from_str(raw.get()).map_err(serde::de::Error::custom)?;
        Ok(Block { fields, raw })
    }
}

impl Block<'_> {
    /// The whole block as a `Value`, cut as the line's parse cuts it.
    pub fn value(&self) -> Value {
        crate::nesting::parse_part(self.raw.get(), 3).unwrap_or(Value::Null)
    }
}

/// What the blocks of either side hold.
#[derive(Debug, Default)]
pub(super) struct BlockFields<'a> {
    pub kind: Text<'a>,
    pub text: Text<'a>,
    pub thinking: Text<'a>,
    /// tool_use.
    pub id: Text<'a>,
    pub name: Text<'a>,
    /// Inside the line, its message, the content array and the block.
    pub input: Option<Json<4>>,
    /// tool_result.
    pub tool_use_id: Text<'a>,
    pub content: ToolContent<'a>,
    pub is_error: Bool,
}

impl<'de: 'a, 'a> Fields<'de> for BlockFields<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "text" => self.text = map.next_value()?,
            "thinking" => self.thinking = map.next_value()?,
            "id" => self.id = map.next_value()?,
            "name" => self.name = map.next_value()?,
            "input" => self.input = Some(map.next_value()?),
            "tool_use_id" => self.tool_use_id = map.next_value()?,
            "content" => self.content = map.next_value()?,
            "is_error" => self.is_error = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(BlockFields<'a>);

/// A tool_result's content: a string, or items whose string `text`s count.
#[derive(Debug, Default)]
pub(super) enum ToolContent<'a> {
    #[default]
    Other,
    Text(std::borrow::Cow<'a, str>),
    Items(Vec<TextField<'a>>),
}

impl ToolContent<'_> {
    /// As one string: text items joined with newlines.
    pub fn joined(&self) -> String {
        match self {
            ToolContent::Text(s) => s.to_string(),
            ToolContent::Items(items) => items
                .iter()
                .filter_map(|i| i.text.get())
                .collect::<Vec<_>>()
                .join("\n"),
            ToolContent::Other => String::new(),
        }
    }
}

impl<'de: 'a, 'a> crate::decoder::lenient::Lenient<'de> for ToolContent<'a> {
    fn str(s: std::borrow::Cow<'de, str>) -> Self {
        ToolContent::Text(s)
    }
    fn seq<S: serde::de::SeqAccess<'de>>(seq: S) -> Result<Self, S::Error> {
        let List(items) = List::seq(seq)?;
        Ok(ToolContent::Items(items))
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for ToolContent<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::decoder::lenient::lenient(d)
    }
}

/// An object's `text`.
#[derive(Debug, Default)]
pub(super) struct TextField<'a> {
    pub text: Text<'a>,
}

impl<'de: 'a, 'a> Fields<'de> for TextField<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "text" => self.text = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(TextField<'a>);

/// Token counts of one API call, or of a turn.
#[derive(Debug, Default)]
pub(super) struct Usage {
    pub input_tokens: U64,
    pub output_tokens: U64,
    pub cache_creation_input_tokens: U64,
    pub cache_read_input_tokens: U64,
}

impl<'de> Fields<'de> for Usage {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "input_tokens" => self.input_tokens = map.next_value()?,
            "output_tokens" => self.output_tokens = map.next_value()?,
            "cache_creation_input_tokens" => self.cache_creation_input_tokens = map.next_value()?,
            "cache_read_input_tokens" => self.cache_read_input_tokens = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(Usage);

/// One model's running totals in a `result`'s `modelUsage`.
#[derive(Debug, Default)]
pub(super) struct ModelUsage {
    pub input_tokens: U64,
    pub output_tokens: U64,
    pub cache_read_input_tokens: U64,
    pub cache_creation_input_tokens: U64,
    pub cost_usd: F64,
    pub context_window: U64,
    pub max_output_tokens: U64,
}

impl<'de> Fields<'de> for ModelUsage {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "inputTokens" => self.input_tokens = map.next_value()?,
            "outputTokens" => self.output_tokens = map.next_value()?,
            "cacheReadInputTokens" => self.cache_read_input_tokens = map.next_value()?,
            "cacheCreationInputTokens" => self.cache_creation_input_tokens = map.next_value()?,
            "costUSD" => self.cost_usd = map.next_value()?,
            "contextWindow" => self.context_window = map.next_value()?,
            "maxOutputTokens" => self.max_output_tokens = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(ModelUsage);

/// An entry of a `result`'s `permission_denials`.
#[derive(Debug, Default)]
pub(super) struct Denial {
    pub tool_name: String,
    pub tool_use_id: String,
    /// Inside the line, the array and the entry.
    pub tool_input: Option<Json<3>>,
}

impl<'de> Fields<'de> for Denial {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "tool_name" => self.tool_name = map.next_value::<Text>()?.owned(),
            "tool_use_id" => self.tool_use_id = map.next_value::<Text>()?.owned(),
            "tool_input" => self.tool_input = Some(map.next_value()?),
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(Denial);

/// A `result`'s `origin`: a string, or an object naming its `kind`.
#[derive(Debug, Default)]
pub(super) struct Origin<'a>(pub Text<'a>);

impl<'de: 'a, 'a> crate::decoder::lenient::Lenient<'de> for Origin<'a> {
    fn str(s: std::borrow::Cow<'de, str>) -> Self {
        Origin(Text(Some(s)))
    }
    fn map<A: MapAccess<'de>>(map: A) -> Result<Self, A::Error> {
        let kind: KindField = crate::decoder::lenient::fields(map)?;
        Ok(Origin(kind.kind))
    }
}

impl<'de: 'a, 'a> serde::Deserialize<'de> for Origin<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        crate::decoder::lenient::lenient(d)
    }
}

/// An object's `kind`.
#[derive(Debug, Default)]
struct KindField<'a> {
    kind: Text<'a>,
}

impl<'de: 'a, 'a> Fields<'de> for KindField<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "kind" => self.kind = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}

/// A `stream_event`'s event (`--include-partial-messages`).
#[derive(Debug, Default)]
pub(super) struct StreamEvent<'a> {
    pub kind: Text<'a>,
    /// `message_start`.
    pub message: Message<'a>,
    pub index: Index,
    /// `content_block_start`.
    pub content_block: StartedBlock<'a>,
    /// `content_block_delta`.
    pub delta: Delta<'a>,
}

impl<'de: 'a, 'a> Fields<'de> for StreamEvent<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "message" => self.message = map.next_value()?,
            "index" => self.index = map.next_value()?,
            "content_block" => self.content_block = map.next_value()?,
            "delta" => self.delta = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(StreamEvent<'a>);

/// The block a `content_block_start` begins.
#[derive(Debug, Default)]
pub(super) struct StartedBlock<'a> {
    pub kind: Text<'a>,
    pub name: Text<'a>,
    pub id: Text<'a>,
}

impl<'de: 'a, 'a> Fields<'de> for StartedBlock<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "name" => self.name = map.next_value()?,
            "id" => self.id = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(StartedBlock<'a>);

/// A `content_block_delta`'s fragment.
#[derive(Debug, Default)]
pub(super) struct Delta<'a> {
    pub kind: Text<'a>,
    pub text: Text<'a>,
    pub thinking: Text<'a>,
    pub partial_json: Text<'a>,
}

impl<'de: 'a, 'a> Fields<'de> for Delta<'a> {
    fn field<A: MapAccess<'de>>(&mut self, key: &str, map: &mut A) -> Result<bool, A::Error> {
        match key {
            "type" => self.kind = map.next_value()?,
            "text" => self.text = map.next_value()?,
            "thinking" => self.thinking = map.next_value()?,
            "partial_json" => self.partial_json = map.next_value()?,
            _ => return Ok(false),
        }
        Ok(true)
    }
}
object!(Delta<'a>);
