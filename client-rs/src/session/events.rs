//! [`Events`]: the event list a [`Snapshot`](super::Snapshot) carries.
//!
//! A snapshot is published after every batch of stream messages, and every
//! receiver may keep the old one alive, so the list cannot be one `Vec`
//! mutated in place, and copying the whole log per batch would make a long
//! session quadratic. Instead the list is a handful of shared, immutable
//! chunks: a batch adds one chunk, and neighbouring chunks are merged when
//! the older one is no larger than the newer one, so a log of n events has
//! O(log n) chunks and each event is copied O(log n) times over its life.

use std::fmt;
use std::sync::Arc;

use crate::pb::Event;

/// Above this many chunks (history pages and rebuilds add chunks outside the
/// merge rule) the mirror is rebuilt as one chunk.
const MAX_CHUNKS: usize = 64;

/// An immutable, cheaply cloneable list of events, oldest first.
///
/// Cloning costs O(log n) reference-count bumps, never an event copy.
#[derive(Clone, Default)]
pub struct Events {
    chunks: Vec<Arc<[Event]>>,
    len: usize,
}

impl Events {
    /// Number of events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no events.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The events, oldest first.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Event> + '_ {
        self.chunks.iter().flat_map(|c| c.iter())
    }

    /// The event at `index` (0 = oldest).
    pub fn get(&self, mut index: usize) -> Option<&Event> {
        for chunk in &self.chunks {
            if index < chunk.len() {
                return chunk.get(index);
            }
            index -= chunk.len();
        }
        None
    }

    /// The oldest event.
    pub fn first(&self) -> Option<&Event> {
        self.chunks.first().and_then(|c| c.first())
    }

    /// The newest event.
    pub fn last(&self) -> Option<&Event> {
        self.chunks.last().and_then(|c| c.last())
    }

    /// The events copied into one `Vec`.
    pub fn to_vec(&self) -> Vec<Event> {
        self.iter().cloned().collect()
    }

    /// The seq of every event, oldest first (0 for local events).
    pub fn seqs(&self) -> Vec<u64> {
        self.iter().map(|e| e.seq).collect()
    }

    /// A list that shares nothing: one chunk holding a copy of `events`.
    pub(crate) fn from_slice(events: &[Event]) -> Self {
        if events.is_empty() {
            return Self::default();
        }
        Self {
            chunks: vec![Arc::from(events)],
            len: events.len(),
        }
    }

    /// Adds `events` at the end as a new chunk, then merges trailing chunks
    /// while the older one is no larger than the newer one.
    pub(crate) fn append(&mut self, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        self.chunks.push(Arc::from(events));
        self.len += events.len();
        while let [.., older, newer] = self.chunks.as_slice() {
            if older.len() > newer.len() {
                break;
            }
            let merged: Arc<[Event]> = older.iter().chain(newer.iter()).cloned().collect();
            self.chunks.truncate(self.chunks.len() - 2);
            self.chunks.push(merged);
        }
    }

    /// Adds `events` at the front as a new chunk.
    pub(crate) fn prepend(&mut self, events: &[Event]) {
        if events.is_empty() {
            return;
        }
        self.chunks.insert(0, Arc::from(events));
        self.len += events.len();
    }

    /// True when so many chunks piled up that lookups get slow.
    pub(crate) fn fragmented(&self) -> bool {
        self.chunks.len() > MAX_CHUNKS
    }

    #[cfg(test)]
    pub(crate) fn chunk_count(&self) -> usize {
        self.chunks.len()
    }
}

impl<'a> IntoIterator for &'a Events {
    type Item = &'a Event;
    type IntoIter = Box<dyn DoubleEndedIterator<Item = &'a Event> + 'a>;

    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl PartialEq for Events {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl fmt::Debug for Events {
    /// Summarised: a whole log in a debug line helps nobody.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events")
            .field("len", &self.len)
            .field("first_seq", &self.first().map(|e| e.seq))
            .field("last_seq", &self.last().map(|e| e.seq))
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64) -> Event {
        Event {
            seq,
            ..Default::default()
        }
    }

    #[test]
    fn appends_keep_order_and_few_chunks() {
        let mut list = Events::default();
        let mut expected = Vec::new();
        for seq in 1..=1000 {
            list.append(&[ev(seq)]);
            expected.push(seq);
        }
        assert_eq!(list.seqs(), expected);
        assert_eq!(list.len(), 1000);
        // Binary-counter merging: at most one chunk per bit of 1000.
        assert!(list.chunk_count() <= 10, "{} chunks", list.chunk_count());
        assert_eq!(list.get(0).map(|e| e.seq), Some(1));
        assert_eq!(list.get(999).map(|e| e.seq), Some(1000));
        assert!(list.get(1000).is_none());
    }

    #[test]
    fn clones_share_chunks_and_prepend_goes_first() {
        let mut list = Events::default();
        list.append(&[ev(5), ev(6)]);
        let before = list.clone();
        list.prepend(&[ev(3), ev(4)]);
        list.append(&[ev(7)]);
        assert_eq!(before.seqs(), vec![5, 6]);
        assert_eq!(list.seqs(), vec![3, 4, 5, 6, 7]);
        assert_eq!(list.first().map(|e| e.seq), Some(3));
        assert_eq!(list.last().map(|e| e.seq), Some(7));
    }
}
