//! A subscriber that reads what the measurement needs from each message's
//! wire bytes: the kind, an event's seq, encoded length, payload kind,
//! sequencing time and first text block. It decodes nothing else, as the
//! JetStream driver reads only the 8-byte stamp of its messages: on this
//! 2-core machine the load tool shares the cores with the server it
//! measures, and a full decode of every event into the generated types
//! (2–3 µs an event; `--full-decode` restores it) made the subscribers the
//! largest user of CPU in the stress and replay rows.
//!
//! The reader is strict about the framing of every field (a truncated
//! field, a bad varint or a wire type 3/4/6/7 is an error) and checks the
//! UTF-8 of the one string it reads; it does not check the fields it skips
//! (the UTF-8 of other strings, nested messages). `--quick` (the CI smoke
//! run) decodes every message both ways and compares the readings
//! ([`cross_check`]), and the suites that test the server decode with the
//! generated types.

use agent_harness_protocol::pb;
use bytes::{Buf, Bytes};
use prost::Message;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// SubscribeRequest out, each response's bytes in, undecoded.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawCodec;

impl Codec for RawCodec {
    type Encode = pb::SubscribeRequest;
    type Decode = Bytes;
    type Encoder = RequestEncoder;
    type Decoder = RawDecoder;

    fn encoder(&mut self) -> RequestEncoder {
        RequestEncoder
    }

    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

/// Encodes the request with its generated type.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestEncoder;

impl Encoder for RequestEncoder {
    type Item = pb::SubscribeRequest;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encode SubscribeRequest: {e}")))
    }
}

/// Hands each message on as its bytes.
#[derive(Debug, Clone, Copy, Default)]
pub struct RawDecoder;

impl Decoder for RawDecoder {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// One SubscribeResponse, as much as the measurement reads of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg<'a> {
    /// `replay`: whether the server reset the cursor.
    Replay { reset: bool },
    /// `event`.
    Event(Ev<'a>),
    /// `caught_up`.
    CaughtUp,
    /// `heartbeat`, `delta`, or no kind set.
    Other,
}

/// An event's fields the measurement reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ev<'a> {
    /// Its seq.
    pub seq: u64,
    /// Bytes of its encoding.
    pub len: usize,
    /// Its `time` (the server's sequencing), nanoseconds since the epoch.
    pub time: Option<i128>,
    /// Which payload it carries.
    pub payload: Payload<'a>,
}

/// An event's payload, as far as the measurement tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload<'a> {
    /// `content`, with its first block's `text` (empty when it has none).
    Content { text: &'a str },
    /// `turn_end`.
    TurnEnd,
    /// Any other payload, or none.
    Other,
}

/// Why bytes are not a SubscribeResponse this reader accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub &'static str);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed SubscribeResponse: {}", self.0)
    }
}

/// Reads one SubscribeResponse.
pub fn parse(mut buf: &[u8]) -> Result<Msg<'_>, Malformed> {
    let mut msg = Msg::Other;
    while !buf.is_empty() {
        let (field, wire) = key(&mut buf)?;
        match (field, wire) {
            (1, LEN) => {
                msg = Msg::Replay {
                    reset: replay_reset(delimited(&mut buf)?)?,
                }
            }
            (2, LEN) => msg = Msg::Event(event(delimited(&mut buf)?)?),
            (3, LEN) => {
                delimited(&mut buf)?;
                msg = Msg::CaughtUp;
            }
            (4 | 5, LEN) => {
                delimited(&mut buf)?;
                msg = Msg::Other;
            }
            _ => skip(wire, &mut buf)?,
        }
    }
    Ok(msg)
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn replay_reset(mut buf: &[u8]) -> Result<bool, Malformed> {
    let mut reset = false;
    while !buf.is_empty() {
        match key(&mut buf)? {
            (1, VARINT) => reset = varint(&mut buf)? != 0,
            (_, wire) => skip(wire, &mut buf)?,
        }
    }
    Ok(reset)
}

fn event(body: &[u8]) -> Result<Ev<'_>, Malformed> {
    let mut ev = Ev {
        seq: 0,
        len: body.len(),
        time: None,
        payload: Payload::Other,
    };
    let mut buf = body;
    while !buf.is_empty() {
        match key(&mut buf)? {
            (1, VARINT) => ev.seq = varint(&mut buf)?,
            (4, LEN) => ev.time = Some(timestamp(delimited(&mut buf)?)?),
            (15, LEN) => {
                ev.payload = Payload::Content {
                    text: first_text(delimited(&mut buf)?)?,
                }
            }
            (17, LEN) => {
                delimited(&mut buf)?;
                ev.payload = Payload::TurnEnd;
            }
            // The oneof's other members: the last one set wins.
            (10..=14 | 16 | 18..=40, LEN) => {
                delimited(&mut buf)?;
                ev.payload = Payload::Other;
            }
            (_, wire) => skip(wire, &mut buf)?,
        }
    }
    Ok(ev)
}

fn timestamp(mut buf: &[u8]) -> Result<i128, Malformed> {
    let (mut seconds, mut nanos) = (0i64, 0i32);
    while !buf.is_empty() {
        match key(&mut buf)? {
            (1, VARINT) => seconds = varint(&mut buf)? as i64,
            (2, VARINT) => nanos = varint(&mut buf)? as i32,
            (_, wire) => skip(wire, &mut buf)?,
        }
    }
    Ok(seconds as i128 * 1_000_000_000 + nanos as i128)
}

/// Content's first block's `text` (the generated types read the first
/// block as `blocks[0]`).
fn first_text(mut buf: &[u8]) -> Result<&str, Malformed> {
    let mut text = None;
    while !buf.is_empty() {
        match key(&mut buf)? {
            (3, LEN) => {
                let block = delimited(&mut buf)?;
                if text.is_none() {
                    text = Some(block_text(block)?);
                }
            }
            (_, wire) => skip(wire, &mut buf)?,
        }
    }
    Ok(text.unwrap_or(""))
}

fn block_text(mut buf: &[u8]) -> Result<&str, Malformed> {
    let mut text: &[u8] = &[];
    while !buf.is_empty() {
        match key(&mut buf)? {
            (2, LEN) => text = delimited(&mut buf)?,
            (_, wire) => skip(wire, &mut buf)?,
        }
    }
    std::str::from_utf8(text).map_err(|_| Malformed("a text block is not UTF-8"))
}

fn key(buf: &mut &[u8]) -> Result<(u32, u8), Malformed> {
    let k = varint(buf)?;
    let field = u32::try_from(k >> 3).map_err(|_| Malformed("field number"))?;
    if field == 0 {
        return Err(Malformed("field number 0"));
    }
    Ok((field, (k & 7) as u8))
}

fn varint(buf: &mut &[u8]) -> Result<u64, Malformed> {
    let mut v = 0u64;
    for i in 0..10 {
        let (&b, rest) = buf.split_first().ok_or(Malformed("truncated varint"))?;
        *buf = rest;
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok(v);
        }
    }
    Err(Malformed("varint longer than 10 bytes"))
}

fn delimited<'a>(buf: &mut &'a [u8]) -> Result<&'a [u8], Malformed> {
    let n = usize::try_from(varint(buf)?).map_err(|_| Malformed("length"))?;
    if n > buf.len() {
        return Err(Malformed("a length runs past the message"));
    }
    let (body, rest) = buf.split_at(n);
    *buf = rest;
    Ok(body)
}

fn skip(wire: u8, buf: &mut &[u8]) -> Result<(), Malformed> {
    let n = match wire {
        VARINT => return varint(buf).map(drop),
        FIXED64 => 8,
        LEN => return delimited(buf).map(drop),
        FIXED32 => 4,
        _ => return Err(Malformed("unsupported wire type")),
    };
    if n > buf.len() {
        return Err(Malformed("a fixed field runs past the message"));
    }
    *buf = &buf[n..];
    Ok(())
}

impl<'a> Msg<'a> {
    /// What the lean reader reads of a message the generated types
    /// decoded (the `--full-decode` path, and [`cross_check`]).
    pub fn of(m: &'a pb::SubscribeResponse) -> Self {
        use pb::subscribe_response::Kind;
        match &m.kind {
            Some(Kind::Replay(r)) => Msg::Replay { reset: r.reset },
            Some(Kind::Event(e)) => Msg::Event(Ev::of(e)),
            Some(Kind::CaughtUp(_)) => Msg::CaughtUp,
            Some(Kind::Heartbeat(_) | Kind::Delta(_)) | None => Msg::Other,
        }
    }
}

impl<'a> Ev<'a> {
    /// What the lean reader reads of a decoded event.
    pub fn of(e: &'a pb::Event) -> Self {
        Ev {
            seq: e.seq,
            len: e.encoded_len(),
            time: e
                .time
                .as_ref()
                .map(|t| t.seconds as i128 * 1_000_000_000 + t.nanos as i128),
            payload: match &e.payload {
                Some(pb::event::Payload::Content(c)) => Payload::Content {
                    text: c.blocks.first().map_or("", |b| b.text.as_str()),
                },
                Some(pb::event::Payload::TurnEnd(_)) => Payload::TurnEnd,
                _ => Payload::Other,
            },
        }
    }
}

/// Decodes `bytes` with the generated types too, and panics where the two
/// readings differ: the `--quick` run's proof that the lean reader reads
/// what a generated client would.
pub fn cross_check(bytes: &[u8], lean: &Msg<'_>) {
    let full = pb::SubscribeResponse::decode(bytes)
        .unwrap_or_else(|e| panic!("a message the lean reader took does not decode: {e}"));
    assert_eq!(
        &Msg::of(&full),
        lean,
        "the lean reader read {lean:?} where the generated types read {full:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use pb::subscribe_response::Kind;

    fn response(kind: Kind) -> Vec<u8> {
        pb::SubscribeResponse { kind: Some(kind) }.encode_to_vec()
    }

    fn content_event(seq: u64, texts: &[&str]) -> pb::Event {
        pb::Event {
            seq,
            session_id: "s".into(),
            run_id: "r".into(),
            time: Some(pbjson_types::Timestamp {
                seconds: 1_764_000_000,
                nanos: 123_456_789,
            }),
            cli_line: r#"{"type":"assistant"}"#.into(),
            payload: Some(pb::event::Payload::Content(pb::Content {
                message_id: "m".into(),
                blocks: texts
                    .iter()
                    .map(|t| pb::ContentBlock {
                        r#type: "text".into(),
                        text: (*t).into(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            })),
            ..Default::default()
        }
    }

    #[test]
    fn reads_what_the_generated_types_read() {
        let cases = [
            response(Kind::Replay(pb::ReplayStart {
                reset: true,
                from_seq: 4,
                head_seq: 9,
            })),
            response(Kind::Replay(pb::ReplayStart::default())),
            response(Kind::CaughtUp(pb::CaughtUp::default())),
            response(Kind::Heartbeat(pb::Heartbeat::default())),
            response(Kind::Event(content_event(
                7,
                &["load 7 t=1 ⟨t=1764⟩", "second"],
            ))),
            response(Kind::Event(content_event(8, &[]))),
            response(Kind::Event(pb::Event {
                seq: 9,
                payload: Some(pb::event::Payload::TurnEnd(pb::TurnEnd::default())),
                ..Default::default()
            })),
            response(Kind::Event(pb::Event {
                seq: 10,
                payload: Some(pb::event::Payload::RunStart(pb::RunStart::default())),
                ..Default::default()
            })),
            Vec::new(),
        ];
        for bytes in &cases {
            let lean = parse(bytes).expect("parses");
            cross_check(bytes, &lean);
        }
        let Msg::Event(ev) = parse(&cases[4]).unwrap() else {
            panic!("an event");
        };
        assert_eq!(ev.seq, 7);
        assert_eq!(ev.time, Some(1_764_000_000_123_456_789));
        assert_eq!(
            ev.payload,
            Payload::Content {
                text: "load 7 t=1 ⟨t=1764⟩"
            }
        );
        assert_eq!(parse(&cases[0]).unwrap(), Msg::Replay { reset: true });
    }

    #[test]
    fn unknown_fields_are_skipped_and_damage_is_refused() {
        let mut bytes = response(Kind::Event(content_event(3, &["x"])));
        // An unknown field of each wire type the generated types skip.
        bytes.extend_from_slice(&[0x30, 0x05]); // field 6, varint
        bytes.extend_from_slice(&[0x39, 1, 2, 3, 4, 5, 6, 7, 8]); // field 7, fixed64
        bytes.extend_from_slice(&[0x45, 1, 2, 3, 4]); // field 8, fixed32
        let lean = parse(&bytes).expect("unknown fields are skipped");
        cross_check(&bytes, &lean);

        let whole = response(Kind::Event(content_event(3, &["some text"])));
        for cut in 1..whole.len() {
            assert!(
                parse(&whole[..cut]).is_err()
                    || pb::SubscribeResponse::decode(&whole[..cut]).is_ok(),
                "a cut at {cut} was read though the generated types refuse it"
            );
        }
        assert_eq!(
            parse(&[0x0b]).unwrap_err(),
            Malformed("unsupported wire type")
        );
        assert!(parse(&[0x12, 0x05, 0x08]).is_err(), "a length past the end");
        assert!(parse(&[0x08; 11]).is_err(), "a varint past 10 bytes");
    }

    #[test]
    #[should_panic(expected = "where the generated types read")]
    fn the_cross_check_fails_where_the_readings_differ() {
        let bytes = response(Kind::Event(content_event(7, &["x"])));
        let Msg::Event(mut ev) = parse(&bytes).unwrap() else {
            panic!("an event");
        };
        ev.seq = 8;
        cross_check(&bytes, &Msg::Event(ev));
    }
}
