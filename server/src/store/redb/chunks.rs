//! The events table: a session's events stored in chunks, one row per run
//! of consecutive seqs a commit wrote.
//!
//! A row is keyed `(session_id, first seq)` and holds its events one after
//! the other, each as a varint length and the event's prost encoding (the
//! bytes every reader streams, untouched). A commit of 250 events to one
//! session is one B-tree insert instead of 250: per event, redb's insert,
//! leaf split, branch rebuild and page checksum were most of what a commit
//! cost the writer thread (measured in BENCHMARKS.md, "Events stored in
//! chunks"). A run longer than [`CHUNK_BYTES`] is split, so a read of one
//! event never loads more than that.
//!
//! A session's chunks do not overlap: the log numbers each session's events
//! from its head, once. Should a seq be written twice all the same, the
//! reads keep the first copy they meet in key order and skip the other.
//!
//! **A damaged row never fails a read**: a frame whose length runs past
//! the row's end (or does not parse) is read, from there to the row's end,
//! as one event at the next seq, which then reads as `unreadable` (see
//! [`crate::store::decode_event`]) with those bytes kept.

use ::redb::{ReadableTable, Table, TableDefinition};
use bytes::Bytes;

use super::super::{RawEvent, StoreError};
use super::rerr;

/// `(session_id, first seq) -> events, each a varint length and its
/// prost-encoded pb::Event`.
pub(super) const EVENT_CHUNKS: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("event_chunks");

/// A run of events is cut into chunks of at most this many bytes (a single
/// larger event is a chunk of its own).
pub(super) const CHUNK_BYTES: usize = 256 * 1024;

/// The events of the chunk starting at `first`: `(seq, bytes)` each.
pub(super) struct Frames<'a> {
    seq: u64,
    rest: &'a [u8],
}

impl<'a> Frames<'a> {
    pub(super) fn new(first: u64, chunk: &'a [u8]) -> Self {
        Self {
            seq: first,
            rest: chunk,
        }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = (u64, &'a [u8]);

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        let seq = self.seq;
        self.seq = self.seq.saturating_add(1);
        let mut cursor = self.rest;
        let framed = prost::encoding::decode_varint(&mut cursor)
            .ok()
            .and_then(|len| usize::try_from(len).ok())
            .filter(|&len| len <= cursor.len());
        let bytes = match framed {
            Some(len) => {
                let (bytes, rest) = cursor.split_at(len);
                self.rest = rest;
                bytes
            }
            // Damaged framing: the rest of the row is one (unreadable) event.
            None => std::mem::take(&mut self.rest),
        };
        Some((seq, bytes))
    }
}

/// Appends one event's frame to `chunk`.
pub(super) fn frame(chunk: &mut Vec<u8>, bytes: &[u8]) {
    prost::encoding::encode_varint(bytes.len() as u64, chunk);
    chunk.extend_from_slice(bytes);
}

/// Collects events in commit order into chunks and inserts them: a chunk
/// goes on while the next event is its session's next seq and it stays
/// within [`CHUNK_BYTES`].
pub(super) struct Chunker {
    open: Option<(String, u64, u64)>,
    buf: Vec<u8>,
}

impl Chunker {
    pub(super) fn new() -> Self {
        Self {
            open: None,
            buf: Vec::new(),
        }
    }

    /// Adds the event `(session_id, seq)` encoded as `bytes`, inserting the
    /// chunk before it into `table` when it does not go on.
    pub(super) fn push(
        &mut self,
        table: &mut Table<(&str, u64), &[u8]>,
        session_id: &str,
        seq: u64,
        bytes: &[u8],
    ) -> Result<(), StoreError> {
        let goes_on = matches!(&self.open, Some((sid, _, last))
            if sid == session_id
                && last.checked_add(1) == Some(seq)
                && self.buf.len() + bytes.len() <= CHUNK_BYTES);
        if goes_on {
            if let Some(open) = self.open.as_mut() {
                open.2 = seq;
            }
        } else {
            self.flush(table)?;
            self.open = Some((session_id.to_owned(), seq, seq));
        }
        frame(&mut self.buf, bytes);
        Ok(())
    }

    /// Inserts the chunk being collected, if any.
    pub(super) fn flush(
        &mut self,
        table: &mut Table<(&str, u64), &[u8]>,
    ) -> Result<(), StoreError> {
        if let Some((sid, first, _)) = self.open.take() {
            table
                .insert((sid.as_str(), first), self.buf.as_slice())
                .map_err(rerr)?;
        }
        self.buf.clear();
        Ok(())
    }
}

/// How much a scan takes: at most `limit` events, and once they hold more
/// than `max_bytes` of encodings (each counted as at most `event_cap`, the
/// size it is streamed at) no more; always at least one. With
/// `whole_rows`, a forward scan that reaches `limit` inside a row takes
/// the rest of that row too (within `max_bytes`, and up to twice `limit`
/// events in all), so that a reader going on from there starts at the next
/// row instead of reading this one again.
#[derive(Clone, Copy)]
pub(super) struct Bound {
    pub(super) limit: usize,
    pub(super) max_bytes: usize,
    pub(super) event_cap: usize,
    pub(super) whole_rows: bool,
}

impl Bound {
    /// `limit` events, `max_bytes` of them counted at most `event_cap` each,
    /// not going on to the end of a row.
    pub(super) fn new(limit: usize, max_bytes: usize, event_cap: usize) -> Self {
        Self {
            limit,
            max_bytes,
            event_cap,
            whole_rows: false,
        }
    }
}

/// Collects a scan's events within its [`Bound`].
struct Taken {
    out: Vec<RawEvent>,
    bytes: usize,
    bound: Bound,
}

impl Taken {
    fn new(bound: Bound) -> Self {
        Self {
            out: Vec::new(),
            bytes: 0,
            bound,
        }
    }

    /// Counts one more event of `len` bytes, `in_row` of them already
    /// counted from its row; false when the bound is reached (it is then
    /// not counted).
    fn room(&mut self, len: usize, in_row: usize) -> bool {
        let counted = self.out.len() + in_row;
        let rest_of_row =
            self.bound.whole_rows && in_row > 0 && counted < self.bound.limit.saturating_mul(2);
        if counted >= self.bound.limit && !rest_of_row {
            return false;
        }
        let bytes = self.bytes.saturating_add(len.min(self.bound.event_cap));
        if counted > 0 && bytes > self.bound.max_bytes {
            return false;
        }
        self.bytes = bytes;
        true
    }

    /// Takes one event, copied.
    fn take(&mut self, seq: u64, bytes: &[u8]) -> bool {
        if !self.room(bytes.len(), 0) {
            return false;
        }
        self.out.push((seq, Bytes::copy_from_slice(bytes)));
        true
    }

    /// Takes the events of the row starting at `first` whose seqs are
    /// `*next..=end`, in order, advancing `*next`. What it takes of the row
    /// is copied once, in one piece, and each event is a slice of that
    /// copy (not a copy and an allocation each). False when the scan is
    /// done: past `end`, or the bound reached.
    fn row(&mut self, first: u64, row: &[u8], next: &mut u64, end: u64) -> bool {
        // (seq, offset in the row, length) of each event taken.
        let mut picked: Vec<(u64, usize, usize)> = Vec::new();
        let mut go_on = true;
        for (seq, bytes) in Frames::new(first, row) {
            if seq > end {
                go_on = false;
                break;
            }
            if seq < *next {
                continue;
            }
            if !self.room(bytes.len(), picked.len()) {
                go_on = false;
                break;
            }
            let at = bytes.as_ptr() as usize - row.as_ptr() as usize;
            picked.push((seq, at, bytes.len()));
            *next = seq.saturating_add(1);
        }
        if let (Some(&(_, from, _)), Some(&(_, at, len))) = (picked.first(), picked.last()) {
            let piece = Bytes::copy_from_slice(&row[from..at + len]);
            self.out.extend(
                picked
                    .into_iter()
                    .map(|(seq, at, len)| (seq, piece.slice(at - from..at - from + len))),
            );
        }
        go_on
    }
}

/// Events of `session_id` with seqs in `seqs`, ascending (descending when
/// `rev`), within `bound`, as stored (undecoded).
pub(super) fn scan(
    table: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    session_id: &str,
    seqs: std::ops::RangeInclusive<u64>,
    rev: bool,
    bound: Bound,
) -> Result<Vec<RawEvent>, StoreError> {
    let (start, end) = (*seqs.start(), *seqs.end());
    let mut taken = Taken::new(bound);
    if start > end || bound.limit == 0 {
        return Ok(taken.out);
    }
    if rev {
        let mut below = u64::MAX;
        for row in table
            .range((session_id, 0)..=(session_id, end))
            .map_err(rerr)?
            .rev()
        {
            let (k, v) = row.map_err(rerr)?;
            let first = k.value().1;
            let frames: Vec<_> = Frames::new(first, v.value()).collect();
            for (seq, bytes) in frames.into_iter().rev() {
                if seq > end || seq >= below || seq < start {
                    continue;
                }
                if !taken.take(seq, bytes) {
                    return Ok(taken.out);
                }
                below = seq;
            }
            if first <= start {
                break;
            }
        }
        return Ok(taken.out);
    }
    // The row holding `start` begins at or before it: the lookup reads it,
    // and its events are taken from there (not read again by the range).
    let mut next = start;
    let holding = table
        .range((session_id, 0)..=(session_id, start))
        .map_err(rerr)?
        .next_back()
        .transpose()
        .map_err(rerr)?;
    if let Some((k, v)) = holding
        && !taken.row(k.value().1, v.value(), &mut next, end)
    {
        return Ok(taken.out);
    }
    let Some(after) = start.checked_add(1) else {
        return Ok(taken.out);
    };
    for row in table
        .range((session_id, after)..=(session_id, end))
        .map_err(rerr)?
    {
        let (k, v) = row.map_err(rerr)?;
        if !taken.row(k.value().1, v.value(), &mut next, end) {
            break;
        }
    }
    Ok(taken.out)
}

/// The stored bytes of event `seq` of `session_id`.
pub(super) fn get(
    table: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    session_id: &str,
    seq: u64,
) -> Result<Option<Vec<u8>>, StoreError> {
    let bound = Bound::new(1, usize::MAX, usize::MAX);
    let found = scan(table, session_id, seq..=seq, false, bound)?;
    Ok(found.into_iter().next().map(|(_, b)| Vec::from(b)))
}

/// The last stored event of `session_id`: its seq and bytes.
pub(super) fn last(
    table: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    session_id: &str,
) -> Result<Option<(u64, Vec<u8>)>, StoreError> {
    let row = table
        .range((session_id, 0)..=(session_id, u64::MAX))
        .map_err(rerr)?
        .next_back()
        .transpose()
        .map_err(rerr)?;
    Ok(row.and_then(|(k, v)| {
        Frames::new(k.value().1, v.value())
            .last()
            .map(|(seq, bytes)| (seq, bytes.to_vec()))
    }))
}

/// Every stored event of every session, in key order: `(session_id, seq,
/// bytes)` to `f`.
pub(super) fn each(
    table: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    mut f: impl FnMut(&str, u64, &[u8]),
) -> Result<(), StoreError> {
    for row in table.iter().map_err(rerr)? {
        let (k, v) = row.map_err(rerr)?;
        let (sid, first) = k.value();
        for (seq, bytes) in Frames::new(first, v.value()) {
            f(sid, seq, bytes);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use ::redb::backends::InMemoryBackend;
    use ::redb::{Database, ReadableDatabase};

    use super::*;

    fn all() -> Bound {
        Bound::new(usize::MAX, usize::MAX, usize::MAX)
    }

    /// Writes `(session, seq, bytes)` in this order through a [`Chunker`],
    /// in one transaction, and returns how many rows it made.
    fn store(db: &Database, events: &[(&str, u64, Vec<u8>)]) -> u64 {
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(EVENT_CHUNKS).unwrap();
            let mut c = Chunker::new();
            for (sid, seq, bytes) in events {
                c.push(&mut table, sid, *seq, bytes).unwrap();
            }
            c.flush(&mut table).unwrap();
        }
        txn.commit().unwrap();
        let txn = db.begin_read().unwrap();
        ::redb::ReadableTableMetadata::len(&txn.open_table(EVENT_CHUNKS).unwrap()).unwrap()
    }

    fn seqs(
        db: &Database,
        sid: &str,
        r: std::ops::RangeInclusive<u64>,
        rev: bool,
        b: Bound,
    ) -> Vec<u64> {
        let txn = db.begin_read().unwrap();
        let table = txn.open_table(EVENT_CHUNKS).unwrap();
        scan(&table, sid, r, rev, b)
            .unwrap()
            .into_iter()
            .map(|(s, _)| s)
            .collect()
    }

    /// Runs of consecutive seqs of one session become one row each, split
    /// where the session changes, a seq is skipped, or a chunk would pass
    /// [`CHUNK_BYTES`]; every read crosses the rows as if they were one.
    #[test]
    fn runs_become_chunks_and_reads_cross_them() {
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .unwrap();
        let big = vec![7u8; CHUNK_BYTES / 2];
        let mut events = Vec::new();
        for seq in 1..=4 {
            events.push(("a", seq, vec![seq as u8]));
        }
        events.push(("b", 1, vec![1]));
        events.push(("a", 5, vec![5]));
        // A gap: 7 starts a chunk of its own.
        events.push(("a", 7, vec![7]));
        // Three halves of a chunk: the third starts another.
        for seq in 8..=10 {
            events.push(("a", seq, big.clone()));
        }
        // a: [1-4] [5] [7-8] [9] [10] (7 and one half fit, a second half
        // does not); b: [1].
        let rows = store(&db, &events);
        assert_eq!(rows, 6);
        let want: Vec<u64> = vec![1, 2, 3, 4, 5, 7, 8, 9, 10];
        assert_eq!(seqs(&db, "a", 0..=u64::MAX, false, all()), want);
        let mut rev = want.clone();
        rev.reverse();
        assert_eq!(seqs(&db, "a", 0..=u64::MAX, true, all()), rev);
        // From inside a chunk, to inside another.
        assert_eq!(seqs(&db, "a", 3..=8, false, all()), vec![3, 4, 5, 7, 8]);
        assert_eq!(seqs(&db, "a", 3..=8, true, all()), vec![8, 7, 5, 4, 3]);
        assert_eq!(seqs(&db, "a", 6..=6, false, all()), Vec::<u64>::new());
        assert_eq!(seqs(&db, "b", 0..=u64::MAX, false, all()), vec![1]);
        // Limits: a count, and bytes (always at least one event).
        let two = Bound { limit: 2, ..all() };
        assert_eq!(seqs(&db, "a", 2..=u64::MAX, false, two), vec![2, 3]);
        assert_eq!(seqs(&db, "a", 0..=9, true, two), vec![9, 8]);
        let small = Bound {
            max_bytes: 1,
            ..all()
        };
        assert_eq!(seqs(&db, "a", 8..=u64::MAX, false, small), vec![8]);
        let txn = db.begin_read().unwrap();
        let table = txn.open_table(EVENT_CHUNKS).unwrap();
        assert_eq!(get(&table, "a", 4).unwrap(), Some(vec![4]));
        assert_eq!(get(&table, "a", 6).unwrap(), None);
        assert_eq!(last(&table, "a").unwrap(), Some((10, big.clone())));
        assert_eq!(last(&table, "c").unwrap(), None);
        let mut n = 0;
        each(&table, |_, _, _| n += 1).unwrap();
        assert_eq!(n, 10);
    }

    /// A read with `whole_rows` that reaches its limit inside a row takes
    /// the rest of that row and no more, so the next read starts at a row;
    /// the byte bound still holds. Every event read is its stored bytes.
    #[test]
    fn a_read_onward_ends_at_the_end_of_a_row() {
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .unwrap();
        let ev = |seq: u64| vec![seq as u8; seq as usize];
        // a: [1-4] in one commit, [5-6] in another, [7-9] in a third.
        store(&db, &(1..=4).map(|s| ("a", s, ev(s))).collect::<Vec<_>>());
        store(&db, &(5..=6).map(|s| ("a", s, ev(s))).collect::<Vec<_>>());
        store(&db, &(7..=9).map(|s| ("a", s, ev(s))).collect::<Vec<_>>());
        let onward = |limit, max_bytes| Bound {
            limit,
            max_bytes,
            whole_rows: true,
            ..all()
        };
        let read = |from: u64, b: Bound| {
            let txn = db.begin_read().unwrap();
            let table = txn.open_table(EVENT_CHUNKS).unwrap();
            let got = scan(&table, "a", from..=u64::MAX, false, b).unwrap();
            for (seq, bytes) in &got {
                assert_eq!(bytes.as_ref(), ev(*seq).as_slice(), "bytes of seq {seq}");
            }
            got.into_iter().map(|(s, _)| s).collect::<Vec<u64>>()
        };
        // The limit falls inside [1-4]: the rest of that row, not [5-6].
        assert_eq!(read(1, onward(2, usize::MAX)), vec![1, 2, 3, 4]);
        // It falls on a row's last event: nothing of the next row.
        assert_eq!(read(1, onward(4, usize::MAX)), vec![1, 2, 3, 4]);
        // From inside a row, over the next.
        assert_eq!(read(3, onward(3, usize::MAX)), vec![3, 4, 5, 6]);
        assert_eq!(read(5, onward(1, usize::MAX)), vec![5, 6]);
        // Bytes bound the rest of the row as they bound the rest.
        assert_eq!(read(7, onward(1, 15)), vec![7, 8]);
        // So does twice the limit: a long row is not taken whole.
        assert_eq!(read(1, onward(1, usize::MAX)), vec![1, 2]);
        assert_eq!(read(2, onward(1, usize::MAX)), vec![2, 3]);
        // Without whole_rows the limit is exact, and the bytes are too.
        let exact = Bound { limit: 2, ..all() };
        assert_eq!(read(1, exact), vec![1, 2]);
        assert_eq!(read(3, all()), vec![3, 4, 5, 6, 7, 8, 9]);
    }

    /// A seq written twice (never by the log, which numbers from the
    /// head): each read keeps the copy it meets first, none repeats it.
    #[test]
    fn a_seq_stored_twice_is_read_once() {
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .unwrap();
        store(
            &db,
            &[("a", 1, vec![1]), ("a", 2, vec![2]), ("a", 3, vec![3])],
        );
        store(
            &db,
            &[("a", 2, vec![20]), ("a", 3, vec![30]), ("a", 4, vec![40])],
        );
        assert_eq!(seqs(&db, "a", 0..=u64::MAX, false, all()), vec![1, 2, 3, 4]);
        assert_eq!(seqs(&db, "a", 0..=u64::MAX, true, all()), vec![4, 3, 2, 1]);
    }

    fn chunk(events: &[&[u8]]) -> Vec<u8> {
        let mut buf = Vec::new();
        for e in events {
            frame(&mut buf, e);
        }
        buf
    }

    #[test]
    fn frames_number_their_events_from_the_first_seq() {
        let c = chunk(&[b"a", b"", b"ccc"]);
        let got: Vec<_> = Frames::new(7, &c).collect();
        assert_eq!(got, vec![(7, &b"a"[..]), (8, &b""[..]), (9, &b"ccc"[..])]);
    }

    #[test]
    fn a_frame_running_past_the_row_is_the_rest_as_one_event() {
        let mut c = chunk(&[b"ok"]);
        let damaged = [0x10, b'x', b'y'];
        c.extend_from_slice(&damaged);
        let got: Vec<_> = Frames::new(1, &c).collect();
        assert_eq!(got, vec![(1, &b"ok"[..]), (2, &damaged[..])]);
        // A length that is not a varint at all.
        let bad = [0xff; 11];
        let got: Vec<_> = Frames::new(3, &bad).collect();
        assert_eq!(got, vec![(3, &bad[..])]);
    }
}
