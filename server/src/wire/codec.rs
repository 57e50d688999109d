//! The codec of the hand-written Subscribe and History path: requests are
//! decoded as the generated server decodes them (a malformed one answers
//! INVALID_ARGUMENT); responses are written by hand around the events'
//! shared bytes.
//!
//! A `SubscribeResponse` carrying an event is its `event` field's key and
//! length, then the event's encoding: exactly what prost writes for the
//! decoded message, without decoding it. A `HistoryResponse` is each event
//! the same way in its repeated `events` field, then `has_more` when true.
//! Every other message (replay header, `caught_up`, heartbeat, delta) is
//! small and encoded by prost.

use std::marker::PhantomData;

use agent_harness_protocol::codec::RequestDecoder;
use bytes::BufMut;
use prost::Message;
use prost::encoding::{WireType, encode_key, encode_varint, encoded_len_varint, key_len};
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, EncodeBuf, Encoder};

use crate::log::{EncodedEvent, Frame, HistoryPage};

/// `SubscribeResponse.event`'s field number.
const SUBSCRIBE_EVENT: u32 = 2;
/// `HistoryResponse.events`' field number.
const HISTORY_EVENTS: u32 = 1;
/// `HistoryResponse.has_more`'s field number.
const HISTORY_HAS_MORE: u32 = 2;

/// A response the wire path writes by hand.
pub trait WireMessage {
    /// Its encoded length.
    fn encoded_len(&self) -> usize;
    /// Writes its encoding (as long as [`WireMessage::encoded_len`]).
    fn encode_to(&self, buf: &mut impl BufMut);
}

/// An event as a length-delimited field `tag` of its response.
fn event_len(tag: u32, e: &EncodedEvent) -> usize {
    key_len(tag) + encoded_len_varint(e.bytes.len() as u64) + e.bytes.len()
}

fn put_event(tag: u32, e: &EncodedEvent, buf: &mut impl BufMut) {
    encode_key(tag, WireType::LengthDelimited, buf);
    encode_varint(e.bytes.len() as u64, buf);
    buf.put_slice(&e.bytes);
}

impl WireMessage for Frame {
    fn encoded_len(&self) -> usize {
        match self {
            Frame::Event(e) => event_len(SUBSCRIBE_EVENT, e),
            Frame::Message(kind) => kind.encoded_len(),
        }
    }

    fn encode_to(&self, buf: &mut impl BufMut) {
        match self {
            Frame::Event(e) => put_event(SUBSCRIBE_EVENT, e, buf),
            // The oneof's own encoding is the whole message's.
            Frame::Message(kind) => kind.encode(buf),
        }
    }
}

impl WireMessage for HistoryPage {
    fn encoded_len(&self) -> usize {
        let events: usize = self
            .events
            .iter()
            .map(|e| event_len(HISTORY_EVENTS, e))
            .sum();
        events
            + if self.has_more {
                key_len(HISTORY_HAS_MORE) + 1
            } else {
                0
            }
    }

    fn encode_to(&self, buf: &mut impl BufMut) {
        for e in &self.events {
            put_event(HISTORY_EVENTS, e, buf);
        }
        if self.has_more {
            prost::encoding::bool::encode(HISTORY_HAS_MORE, &true, buf);
        }
    }
}

/// Requests of type `U` decoded as the generated server does, responses
/// `T` written by hand.
#[derive(Debug, Clone)]
pub struct WireCodec<T, U> {
    _pd: PhantomData<(T, U)>,
}

impl<T, U> Default for WireCodec<T, U> {
    fn default() -> Self {
        Self { _pd: PhantomData }
    }
}

impl<T, U> Codec for WireCodec<T, U>
where
    T: WireMessage + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = WireEncoder<T>;
    type Decoder = RequestDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        WireEncoder { _pd: PhantomData }
    }

    fn decoder(&mut self) -> Self::Decoder {
        RequestDecoder::default()
    }
}

/// Writes a [`WireMessage`].
#[derive(Debug, Clone)]
pub struct WireEncoder<T> {
    _pd: PhantomData<T>,
}

impl<T: WireMessage> Encoder for WireEncoder<T> {
    type Item = T;
    type Error = Status;

    fn encode(&mut self, item: T, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        buf.reserve(item.encoded_len());
        item.encode_to(buf);
        Ok(())
    }

    fn buffer_settings(&self) -> BufferSettings {
        // The generated server's (prost's) settings: the same buffer per
        // stream, so an idle stream costs what it did.
        BufferSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agent_harness_protocol::pb;

    /// What the generated server sends for `frame` (the decoded message).
    fn generated(frame: &Frame, session_id: &str) -> pb::SubscribeResponse {
        frame.clone().into_response(session_id)
    }
    use crate::log::cut;
    use agent_harness_protocol::pb::event::Payload;
    use agent_harness_protocol::pb::subscribe_response::Kind;

    fn encode(m: &impl WireMessage) -> Vec<u8> {
        let mut buf = Vec::new();
        m.encode_to(&mut buf);
        assert_eq!(buf.len(), m.encoded_len(), "encoded_len agrees");
        buf
    }

    fn content(seq: u64, text: &str, cli_line: &str) -> pb::Event {
        let input = pbjson_types::Struct {
            fields: [(
                "command".to_owned(),
                pbjson_types::Value {
                    kind: Some(pbjson_types::value::Kind::StringValue("ls".into())),
                },
            )]
            .into_iter()
            .collect(),
        };
        pb::Event {
            seq,
            session_id: "s".into(),
            run_id: "r".into(),
            time: Some(pbjson_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 5,
            }),
            cli_line: cli_line.into(),
            truncated: None,
            payload: Some(Payload::Content(pb::Content {
                blocks: vec![
                    pb::ContentBlock {
                        text: text.into(),
                        ..Default::default()
                    },
                    pb::ContentBlock {
                        input: Some(input),
                        ..Default::default()
                    },
                ],
                ..Default::default()
            })),
        }
    }

    /// Every kind of event a stream carries: ordinary, with a CLI line,
    /// cut down (truncated), recorded by the harness, and an empty one.
    fn events() -> Vec<pb::Event> {
        let big = "x".repeat(3 * cut::MIN_EVENT_BYTES);
        let whole = content(3, &big, &format!("{{\"line\":\"{big}\"}}"));
        let cut = cut::fit(&whole, cut::MIN_EVENT_BYTES).expect("over the budget");
        assert!(cut.truncated.is_some());
        vec![
            content(1, "hello", ""),
            content(2, "hello", r#"{"type":"assistant","message":{}}"#),
            cut,
            pb::Event {
                seq: 4,
                session_id: "s".into(),
                payload: Some(Payload::StopRequested(pb::StopRequested::default())),
                ..Default::default()
            },
            pb::Event {
                seq: 5,
                ..Default::default()
            },
        ]
    }

    fn messages() -> Vec<Kind> {
        vec![
            Kind::Replay(pb::ReplayStart {
                reset: true,
                from_seq: 7,
                head_seq: 9,
            }),
            Kind::Replay(pb::ReplayStart::default()),
            Kind::CaughtUp(pb::CaughtUp { head_seq: 9 }),
            Kind::Heartbeat(pb::Heartbeat { head_seq: 300 }),
            Kind::Heartbeat(pb::Heartbeat::default()),
            Kind::Delta(pb::Delta {
                run_id: "r".into(),
                after_seq: 9,
                message_id: "m".into(),
                index: 1,
                block_type: pb::DeltaBlockType::Text as i32,
                fragment: "partial".into(),
                snapshot: true,
                ..Default::default()
            }),
        ]
    }

    #[test]
    fn a_subscribe_frame_is_what_the_generated_server_sends() {
        let frames: Vec<Frame> = events()
            .iter()
            .map(|e| Frame::Event(EncodedEvent::of(e)))
            .chain(messages().into_iter().map(Frame::message))
            .collect();
        for frame in frames {
            let ours = encode(&frame);
            let want = generated(&frame, "s");
            // Byte for byte: prost's encoding of these is canonical (one
            // key per map, fields in order).
            assert_eq!(ours, want.encode_to_vec(), "{frame:?}");
            assert_eq!(
                pb::SubscribeResponse::decode(ours.as_slice()).unwrap(),
                want
            );
        }
        // The events decoded are the events encoded.
        for e in events() {
            let ours = encode(&Frame::Event(EncodedEvent::of(&e)));
            let back = pb::SubscribeResponse::decode(ours.as_slice()).unwrap();
            assert_eq!(back.kind, Some(Kind::Event(e)));
        }
    }

    #[test]
    fn a_history_page_is_what_the_generated_server_sends() {
        let all = events();
        for (events, has_more) in [
            (all.clone(), true),
            (all.clone(), false),
            (all[..1].to_vec(), true),
            (Vec::new(), false),
        ] {
            let page = HistoryPage {
                events: events.iter().map(EncodedEvent::of).collect(),
                has_more,
            };
            let want = pb::HistoryResponse { events, has_more };
            let ours = encode(&page);
            assert_eq!(ours, want.encode_to_vec());
            assert_eq!(pb::HistoryResponse::decode(ours.as_slice()).unwrap(), want);
            assert_eq!(page.into_response("s"), want);
        }
    }

    #[test]
    fn stored_bytes_from_an_older_encoder_still_decode_to_the_event() {
        // A row whose bytes prost would not write itself (fields out of
        // order, an unknown field): sent as stored, a client decodes the
        // same event the generated path (decode, then encode) would send.
        let e = content(1, "hi", "");
        let mut bytes = Vec::new();
        prost::encoding::string::encode(5, &"line".to_owned(), &mut bytes);
        bytes.extend(e.encode_to_vec());
        prost::encoding::uint64::encode(99, &7, &mut bytes);
        let raw = EncodedEvent {
            seq: 1,
            bytes: bytes.into(),
        };
        let frame = Frame::Event(raw);
        let ours = encode(&frame);
        let back = pb::SubscribeResponse::decode(ours.as_slice()).unwrap();
        assert_eq!(back, generated(&frame, "s"));
    }
}
