//! What one write to the log carries: a session's new events, a change to
//! its meta and a keyed call's receipt, committed together or not at all
//! ([`EventLogs::commit`](super::EventLogs::commit)).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use agent_harness_protocol::pb;
use tokio::sync::{OwnedSemaphorePermit, oneshot};

use super::LogError;
use crate::store::{ReceiptWrite, SessionMeta, TranscriptEntry};

/// An event to append; the log assigns `seq`, `session_id` and `time`.
#[derive(Debug, Clone)]
pub struct NewEvent {
    /// The run it belongs to ("" for none).
    pub run_id: String,
    /// What happened.
    pub payload: pb::event::Payload,
    /// The CLI's original stdout line ("" for harness-made events).
    pub cli_line: String,
}

/// A change to a session's meta, applied on the writer thread; it cannot
/// change the session id, the head or the creation time.
pub type MetaChange = Box<dyn FnOnce(&mut SessionMeta) + Send + 'static>;

/// One write to a session's log, durable as a whole: after a crash either
/// all of it is there or none (a `run_end` with the clearing of the pid it
/// ended; a keyed call's receipt with the events it appended). Any part may
/// be empty: with no events it is a meta change (creating the meta if
/// absent); with a receipt alone the session is not touched; with nothing
/// at all it does nothing.
#[derive(Default)]
pub struct Commit {
    /// Appended in order, with consecutive seqs.
    pub events: Vec<NewEvent>,
    /// The session's meta change.
    pub meta: Option<MetaChange>,
    /// The receipt of the keyed call this write answers.
    pub receipt: Option<ReceiptWrite>,
    /// Lines the CLI added to its conversation files, written beside the
    /// log (never events; see [`crate::store::transcript`]).
    pub transcript: Vec<TranscriptEntry>,
}

impl std::fmt::Debug for Commit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Commit")
            .field("events", &self.events)
            .field("meta", &self.meta.is_some())
            .field("receipt", &self.receipt.is_some())
            .field("transcript", &self.transcript.len())
            .finish()
    }
}

impl Commit {
    /// A write of `events` alone.
    pub fn events(events: Vec<NewEvent>) -> Self {
        Self {
            events,
            ..Self::default()
        }
    }

    /// A write of a meta change alone.
    pub fn meta(f: impl FnOnce(&mut SessionMeta) + Send + 'static) -> Self {
        Self::default().with_meta(f)
    }

    /// With the meta change `f`.
    pub fn with_meta(mut self, f: impl FnOnce(&mut SessionMeta) + Send + 'static) -> Self {
        self.meta = Some(Box::new(f));
        self
    }

    /// With the receipt `receipt`, when there is one.
    pub fn with_receipt(mut self, receipt: Option<ReceiptWrite>) -> Self {
        self.receipt = receipt;
        self
    }

    /// Whether it writes nothing.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.meta.is_none()
            && self.receipt.is_none()
            && self.transcript.is_empty()
    }

    /// Its room in the writer's queue and batch: one per event, per meta
    /// change, per receipt and per transcript entry.
    pub(super) fn weight(&self) -> usize {
        self.events.len()
            + usize::from(self.meta.is_some())
            + usize::from(self.receipt.is_some())
            + self.transcript.len()
    }
}

/// What a commit resolves to: the events as appended.
pub(super) type Answer = Result<Vec<pb::Event>, LogError>;

/// A commit handed to the writer
/// ([`EventLogs::submit`](super::EventLogs::submit)): resolves to what
/// [`EventLogs::commit`](super::EventLogs::commit) would, once the writer
/// answers. Until then it holds the commit's room in the writer's queue.
#[must_use = "a submitted commit's answer comes through it"]
pub struct Submitted(State);

enum State {
    Waiting {
        _room: OwnedSemaphorePermit,
        reply: oneshot::Receiver<Answer>,
    },
    /// Answered without the writer (nothing to write, or the log closed).
    Ready(Option<Answer>),
}

impl Submitted {
    pub(super) fn waiting(room: OwnedSemaphorePermit, reply: oneshot::Receiver<Answer>) -> Self {
        Self(State::Waiting { _room: room, reply })
    }

    pub(super) fn ready(answer: Answer) -> Self {
        Self(State::Ready(Some(answer)))
    }
}

impl Future for Submitted {
    type Output = Answer;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Answer> {
        match &mut self.0 {
            State::Waiting { reply, .. } => Pin::new(reply)
                .poll(cx)
                .map(|r| r.unwrap_or(Err(LogError::Closed))),
            State::Ready(answer) => {
                Poll::Ready(answer.take().expect("a submitted commit is awaited once"))
            }
        }
    }
}
