//! A Subscribe stream's shutdown: the log's frames pass through until the
//! server's shutdown token is cancelled; then the stream keeps going only
//! until it has delivered the session's head at that moment (so the
//! run_end that shutdown appended reaches the client), or for
//! [`SHUTDOWN_DRAIN`] at most, and ends cleanly.
//!
//! Per frame this is a poll of the inner stream and nothing else: the
//! token is looked at (its check locks one mutex every stream shares) when
//! the inner stream has nothing ready, and once every [`CHECK_EVERY`]
//! frames while it always has (a long replay), not once per frame.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use agent_harness_protocol::pb::subscribe_response::Kind;
use futures::{Stream, StreamExt};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::log::{EventLogs, Frame};

/// Most time a stream keeps draining after shutdown before it ends anyway.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(2);

/// A stream whose next frame is always ready looks at the token after this
/// many frames.
const CHECK_EVERY: u32 = 256;

pub(super) type Inner = Pin<Box<dyn Stream<Item = Frame> + Send + 'static>>;

/// Passes `inner` through until `shutdown`; then drains (see the module).
pub(super) fn drain_on_shutdown(
    inner: Inner,
    logs: EventLogs,
    session_id: String,
    shutdown: CancellationToken,
) -> Drained {
    Drained {
        inner,
        logs,
        session_id,
        last_seq: 0,
        cancelled: Box::pin(shutdown.cancelled_owned()),
        ready_run: 0,
        draining: None,
    }
}

/// See [`drain_on_shutdown`].
pub(super) struct Drained {
    inner: Inner,
    logs: EventLogs,
    session_id: String,
    /// The last seq delivered (or the replay's start).
    last_seq: u64,
    /// Ready once shutdown began; made once, polled as the module says.
    cancelled: Pin<Box<WaitForCancellationFutureOwned>>,
    /// Frames delivered since the token was last looked at.
    ready_run: u32,
    /// After shutdown: the rest of the stream.
    draining: Option<Inner>,
}

/// The last seq delivered once `frame` is, `last` before it.
fn delivered(last: u64, frame: &Frame) -> u64 {
    match frame {
        Frame::Event(e) => e.seq,
        Frame::Message(m) => match **m {
            Kind::Replay(ref r) => r.from_seq,
            Kind::CaughtUp(ref c) => last.max(c.head_seq),
            _ => last,
        },
    }
}

impl Drained {
    /// The stream from shutdown on: up to the head at that moment, within
    /// the deadline.
    fn drain(&mut self) -> Inner {
        let inner = std::mem::replace(&mut self.inner, Box::pin(futures::stream::empty()));
        let (logs, session_id, last_seq) =
            (self.logs.clone(), self.session_id.clone(), self.last_seq);
        let start = async move {
            // A failed read: drain what was already seen.
            let head = logs.head_seq(&session_id).await.unwrap_or(last_seq);
            let deadline = tokio::time::Instant::now() + SHUTDOWN_DRAIN;
            futures::stream::unfold((inner, last_seq), move |(mut inner, last)| async move {
                if last >= head {
                    return None;
                }
                let frame = tokio::time::timeout_at(deadline, inner.next())
                    .await
                    .ok()??;
                let last = delivered(last, &frame);
                Some((frame, (inner, last)))
            })
        };
        Box::pin(futures::stream::once(start).flatten())
    }
}

impl Stream for Drained {
    type Item = Frame;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        let this = &mut *self;
        if let Some(rest) = this.draining.as_mut() {
            return rest.poll_next_unpin(cx);
        }
        let look = this.ready_run >= CHECK_EVERY;
        if !look && let Poll::Ready(frame) = this.inner.poll_next_unpin(cx) {
            if let Some(f) = &frame {
                this.last_seq = delivered(this.last_seq, f);
                this.ready_run += 1;
            }
            return Poll::Ready(frame);
        }
        this.ready_run = 0;
        if this.cancelled.as_mut().poll(cx).is_pending() {
            if look {
                // Not shut down: the frame this poll skipped.
                return self.poll_next(cx);
            }
            return Poll::Pending;
        }
        let rest = this.drain();
        this.draining.insert(rest).poll_next_unpin(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;

    use super::*;
    use crate::log::{EncodedEvent, LogOptions};
    use crate::store::MemoryStore;

    fn logs() -> EventLogs {
        EventLogs::open(Arc::new(MemoryStore::new()), LogOptions::default()).expect("open")
    }

    /// Events 1, 2, 3, … for ever, each ready at once.
    fn endless() -> Inner {
        Box::pin(futures::stream::iter((1u64..).map(|seq| {
            Frame::Event(EncodedEvent {
                seq,
                bytes: Bytes::new(),
            })
        })))
    }

    #[tokio::test]
    async fn frames_pass_through_until_shutdown() {
        let shutdown = CancellationToken::new();
        let mut s = drain_on_shutdown(endless(), logs(), "s".into(), shutdown.clone());
        for want in 1..=3 * u64::from(CHECK_EVERY) {
            match s.next().await {
                Some(Frame::Event(e)) => assert_eq!(e.seq, want),
                _ => panic!("event {want} expected"),
            }
        }
    }

    /// A stream whose next frame is always ready still sees the shutdown,
    /// within CHECK_EVERY frames, and then ends: the session's head (0,
    /// unknown) is behind what it delivered.
    #[tokio::test]
    async fn an_always_ready_stream_sees_the_shutdown() {
        let shutdown = CancellationToken::new();
        let mut s = drain_on_shutdown(endless(), logs(), "s".into(), shutdown.clone());
        for _ in 0..10 {
            s.next().await.expect("a frame");
        }
        shutdown.cancel();
        let mut after = 0;
        while s.next().await.is_some() {
            after += 1;
            assert!(after <= CHECK_EVERY, "still passing frames after {after}");
        }
        assert!(s.next().await.is_none(), "ended for good");
    }

    /// A stream waiting on its log is woken by the shutdown and ends.
    #[tokio::test]
    async fn a_waiting_stream_ends_at_shutdown() {
        let shutdown = CancellationToken::new();
        let inner: Inner = Box::pin(futures::stream::pending());
        let s = drain_on_shutdown(inner, logs(), "s".into(), shutdown.clone());
        let ended = tokio::spawn(s.count());
        tokio::task::yield_now().await;
        assert!(!ended.is_finished(), "nothing to deliver: it waits");
        shutdown.cancel();
        assert_eq!(ended.await.expect("the stream's task"), 0);
    }
}
