//! One record of the write-ahead log: everything a [`Commit`] writes, in
//! the forms the tables store it (an event as its prost encoding, a meta,
//! a receipt or an index row as its JSON row), so replaying a record
//! writes the same rows.
//!
//! The payload is a run of items, each a tag byte and its fields, every
//! field a little-endian `u32` length and that many bytes (a seq is a
//! little-endian `u64`). Decoding rebuilds the [`Commit`] the tables were
//! filled from; a record that does not decode is damage the checksum did
//! not catch, which the recovery refuses rather than guess at.

use agent_harness_protocol::pb;
use bytes::Bytes;
use prost::Message;

use super::super::super::{
    Commit, IndexRow, ReceiptWrite, SessionMeta, StoreError, TranscriptEntry, receipt,
};
use super::super::encode_meta;

const EVENT: u8 = 1;
const FULL: u8 = 2;
const META: u8 = 3;
const RECEIPT_PUT: u8 = 4;
const RECEIPT_REMOVE: u8 = 5;
const TRANSCRIPT: u8 = 6;
const INDEX: u8 = 7;

fn field(buf: &mut Vec<u8>, bytes: &[u8]) {
    // A field over 4 GiB cannot reach here: a commit of that size is
    // refused long before (the per-event budget cuts events down).
    buf.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    buf.extend_from_slice(bytes);
}

/// An event as its `events` row holds it (prost-encoded, streamed form).
fn event(buf: &mut Vec<u8>, encoded: &[u8]) {
    buf.push(EVENT);
    field(buf, encoded);
}

/// The whole form of a cut event, as its `full_events` row holds it.
fn full(buf: &mut Vec<u8>, encoded: &[u8]) {
    buf.push(FULL);
    field(buf, encoded);
}

/// A meta as its `sessions` row holds it (JSON).
fn meta(buf: &mut Vec<u8>, row: &[u8]) {
    buf.push(META);
    field(buf, row);
}

/// A receipt write.
fn receipt_write(buf: &mut Vec<u8>, write: &ReceiptWrite) {
    match write {
        ReceiptWrite::Put(r) => {
            buf.push(RECEIPT_PUT);
            field(buf, r.session_id.as_bytes());
            field(buf, &receipt::encode(r));
        }
        ReceiptWrite::Remove { session_id, key } => {
            buf.push(RECEIPT_REMOVE);
            field(buf, session_id.as_bytes());
            field(buf, key.as_bytes());
        }
    }
}

/// A transcript line.
fn transcript(buf: &mut Vec<u8>, t: &TranscriptEntry) {
    buf.push(TRANSCRIPT);
    field(buf, t.session_id.as_bytes());
    field(buf, t.path.as_bytes());
    field(buf, t.line.as_bytes());
}

/// An index row as its `session_index` row holds it (JSON).
fn index(buf: &mut Vec<u8>, row: &[u8]) {
    buf.push(INDEX);
    field(buf, row);
}

/// Appends the record of `commit` to `buf`: every row the tables get, in
/// the forms they store it (an event from the caller's encoding when it
/// has one). Built before the transaction is filled, so the record can be
/// on its way to the disk meanwhile (see `Wal::commit`).
pub(super) fn build(buf: &mut Vec<u8>, commit: Commit<'_>) -> Result<(), StoreError> {
    let mut scratch = Vec::with_capacity(512);
    for ev in commit.full {
        encode(ev, &mut scratch)?;
        full(buf, &scratch);
    }
    for (i, ev) in commit.events.iter().enumerate() {
        match commit.encoded.get(i) {
            Some(bytes) => event(buf, bytes),
            None => {
                encode(ev, &mut scratch)?;
                event(buf, &scratch);
            }
        }
    }
    for m in commit.metas {
        meta(buf, &encode_meta(m));
    }
    for w in commit.receipts {
        receipt_write(buf, w);
    }
    for t in commit.transcript {
        transcript(buf, t);
    }
    for row in commit.index {
        index(buf, &row.encode());
    }
    Ok(())
}

fn encode(ev: &pb::Event, scratch: &mut Vec<u8>) -> Result<(), StoreError> {
    scratch.clear();
    ev.encode(scratch)
        .map_err(|e| StoreError::Rejected(e.to_string()))
}

/// A decoded record: owns what the [`Commit`] it stands for borrows.
#[derive(Debug, Default)]
pub(super) struct Decoded {
    events: Vec<pb::Event>,
    encoded: Vec<Bytes>,
    full: Vec<pb::Event>,
    metas: Vec<SessionMeta>,
    receipts: Vec<ReceiptWrite>,
    transcript: Vec<TranscriptEntry>,
    index: Vec<IndexRow>,
}

impl Decoded {
    /// The commit the record was written for.
    pub(super) fn commit(&self) -> Commit<'_> {
        Commit {
            events: &self.events,
            encoded: &self.encoded,
            full: &self.full,
            metas: &self.metas,
            receipts: &self.receipts,
            transcript: &self.transcript,
            index: &self.index,
        }
    }

    /// How many events it holds.
    pub(super) fn events(&self) -> usize {
        self.events.len()
    }
}

/// Reads fields off a payload.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], String> {
        if self.0.len() < n {
            return Err(format!(
                "an item runs past the record's end ({n} bytes wanted)"
            ));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn field(&mut self) -> Result<&'a [u8], String> {
        let len = self.take(4)?;
        let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
        self.take(len)
    }

    fn text(&mut self) -> Result<String, String> {
        String::from_utf8(self.field()?.to_vec()).map_err(|e| e.to_string())
    }
}

fn event_of(bytes: &[u8]) -> Result<pb::Event, String> {
    pb::Event::decode(bytes).map_err(|e| format!("an event does not decode: {e}"))
}

/// Decodes a record's payload.
pub(super) fn decode(payload: &[u8]) -> Result<Decoded, String> {
    let mut r = Reader(payload);
    let mut out = Decoded::default();
    while let Some((&tag, rest)) = r.0.split_first() {
        r.0 = rest;
        match tag {
            EVENT => {
                let bytes = r.field()?;
                out.events.push(event_of(bytes)?);
                out.encoded.push(Bytes::copy_from_slice(bytes));
            }
            FULL => out.full.push(event_of(r.field()?)?),
            META => out
                .metas
                .push(serde_json::from_slice(r.field()?).map_err(|e| format!("a meta: {e}"))?),
            RECEIPT_PUT => {
                let sid = r.text()?;
                let row = r.field()?;
                let put = receipt::decode(&sid, row).ok_or("a receipt does not decode")?;
                out.receipts.push(ReceiptWrite::Put(put));
            }
            RECEIPT_REMOVE => out.receipts.push(ReceiptWrite::Remove {
                session_id: r.text()?,
                key: r.text()?,
            }),
            TRANSCRIPT => out.transcript.push(TranscriptEntry {
                session_id: r.text()?,
                path: r.text()?,
                line: r.text()?,
            }),
            INDEX => out.index.push(
                serde_json::from_slice(r.field()?).map_err(|e| format!("an index row: {e}"))?,
            ),
            other => return Err(format!("unknown item tag {other}")),
        }
    }
    Ok(out)
}
