//! An event as the streams send it: its streamed form encoded once, when
//! the writer commits it (or as the store's row holds it), then shared by
//! every window, Subscribe stream and History page (a clone is a reference
//! count, never a copy or a second encoding).
//!
//! A Subscribe stream yields [`Frame`]s: an event's shared bytes, or a small
//! message of its own (replay header, `caught_up`, heartbeat, delta). The
//! gRPC path writes them out as they are (`crate::wire`); in-process
//! readers decode them ([`Frame::into_response`]).

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use bytes::Bytes;
use prost::Message;

/// One event's streamed form, protobuf-encoded (a `pb::Event` message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedEvent {
    /// The event's seq (also inside `bytes`).
    pub seq: u64,
    /// The encoded event, as the store's events table holds it.
    pub bytes: Bytes,
}

impl EncodedEvent {
    /// Event `seq`'s encoding, as encoded elsewhere (the writer, a row).
    pub fn new(seq: u64, bytes: Bytes) -> Self {
        Self { seq, bytes }
    }

    /// Encodes `event` (its streamed form).
    pub fn of(event: &pb::Event) -> Self {
        Self {
            seq: event.seq,
            bytes: Bytes::from(event.encode_to_vec()),
        }
    }

    /// The event, decoded; bytes that do not decode read as an
    /// `unreadable` event at this seq, as a stored row does.
    pub fn decode(&self, session_id: &str) -> pb::Event {
        crate::store::decode_event(session_id, self.seq, &self.bytes)
    }

    /// Bytes the event takes inside a response (its field's tag, length
    /// prefix and body), as [`super::cut::wire_len`] counts a decoded one.
    pub fn wire_len(&self) -> usize {
        let n = self.bytes.len();
        1 + prost::encoding::encoded_len_varint(n as u64) + n
    }
}

/// Whether stored bytes decode as an event (a row that does not is
/// streamed as `unreadable`, see [`crate::store::decode_event`]): the
/// answer of a decode, without decoding ([`super::decodable`]).
pub(super) fn decodes(bytes: &[u8]) -> bool {
    super::decodable::event_decodes(bytes)
}

/// One message of a Subscribe stream, as it goes on the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum Frame {
    /// The next event: its shared bytes.
    Event(EncodedEvent),
    /// Anything else the stream sends (never [`Kind::Event`]); boxed: an
    /// event frame, the common one, stays small.
    Message(Box<Kind>),
}

impl Frame {
    /// A message of the stream's own.
    pub fn message(kind: Kind) -> Self {
        Frame::Message(Box::new(kind))
    }

    /// The frame as the generated type (in-process readers): an event is
    /// decoded.
    pub fn into_response(self, session_id: &str) -> pb::SubscribeResponse {
        let kind = match self {
            Frame::Event(e) => Kind::Event(e.decode(session_id)),
            Frame::Message(kind) => *kind,
        };
        pb::SubscribeResponse { kind: Some(kind) }
    }
}

/// A History page: the events as stored (streamed form, encoded).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistoryPage {
    /// Oldest first.
    pub events: Vec<EncodedEvent>,
    /// Whether older events exist.
    pub has_more: bool,
}

impl HistoryPage {
    /// The page as the generated type (in-process readers): decoded.
    pub fn into_response(self, session_id: &str) -> pb::HistoryResponse {
        pb::HistoryResponse {
            events: self.events.iter().map(|e| e.decode(session_id)).collect(),
            has_more: self.has_more,
        }
    }
}
