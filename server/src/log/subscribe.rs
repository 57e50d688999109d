//! One Subscribe stream: replay header, replay, `caught_up`, live, heartbeats.
//!
//! The stream is pull-based and owns no queue. It holds a `watch::Receiver`
//! of the session's committed head (registered before the replay starts, so
//! nothing committed after the replay's head can be missed) and a cursor
//! `last_sent`. Whenever it is polled and the head is ahead of the cursor, it
//! fetches the next chunk from the window, or from the store if the events
//! already left the window ([`REPLAY_CHUNK`] events while it replays,
//! [`SUBSCRIBER_CHUNK`] once live). A store read goes on to the end of the
//! stored row it stops in (so the next one starts at a row), and while the
//! stream replays it starts the next store read as soon as one lands: the
//! store is read on a blocking thread while the stream sends what it has,
//! one span ahead at most. A subscriber that stops reading therefore costs
//! nothing while appends go on, and catches up from storage when it reads
//! again. Events are yielded only with `seq == last_sent + 1`, so none is
//! ever duplicated or skipped.
//!
//! Fan-out cost: one committed event wakes every live subscriber of its
//! session, so per-event work here is multiplied by the subscriber count
//! (1,000 in the latency target). The live path therefore touches no shared
//! lock beyond the unavoidable ones (the window's read lock and the watch's
//! waiter list): shutdown is an atomic flag plus a wake through the head
//! watch (not a `CancellationToken`, whose check and registration lock one
//! mutex shared by every stream), and the heartbeat timer is armed once and
//! re-armed only when it fires early (not re-registered in the timer wheel
//! per event). The next event is taken straight out of the window without
//! an intermediate chunk vector, as the bytes the writer encoded at its
//! commit ([`Frame::Event`]): a reference count, never a copy or an
//! encoding per subscriber. An event already at hand (the rest of a fetched
//! span, or the one new event in the window) is yielded without a future
//! being made for it ([`SubStream`]); only a wait makes one, in a slot the
//! stream keeps.
//!
//! Live typing (`include_deltas`, see [`crate::partial`]): such a stream
//! also follows its session's board (a second watch) with a
//! [`Cursor`] of what it has sent. Before each next event it sends the text
//! the CLI wrote before that event (and only that: text written after an
//! event it has not sent waits for it), at most one delta per block in
//! flight. Nothing is queued per fragment: a stream that reads slowly gets
//! what was appended meanwhile as one fragment per block, and a stream
//! sends deltas at most every `LogOptions::delta_interval` (what was typed
//! meanwhile coalesced; it sleeps until then instead of waking per
//! fragment), except that before an event it always sends what precedes it.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::subscribe_response::Kind;
use futures::Stream;
use tokio::sync::watch;
use tokio::time::{Instant, Sleep};

use super::frame::{EncodedEvent, Frame};
use super::span::StoreSpan;
use super::{REPLAY_CHUNK, SUBSCRIBER_CHUNK, SUBSCRIBER_WINDOW_CHUNK, SessionLog, Shared};
use crate::partial::Cursor;

/// Pause before retrying a failed storage read (the stream never gives up).
const READ_RETRY: Duration = Duration::from_millis(200);

enum Phase {
    /// The replay header is next.
    Header,
    /// Replaying up to `until` (the head when the replay began).
    Replay { until: u64 },
    /// Caught up; following the head.
    Live,
}

struct Sub {
    shared: Arc<Shared>,
    session: Arc<SessionLog>,
    session_id: String,
    after_seq: u64,
    head_rx: watch::Receiver<u64>,
    phase: Phase,
    /// Seq of the last event yielded (or the replay's from_seq).
    last_sent: u64,
    /// The highest head seen live, so that lag is observed once per new
    /// head (`metrics::LogMetrics::subscriber_lag`).
    seen_head: u64,
    /// Fetched, not yet yielded events; empty (and unallocated) when idle.
    buf: std::vec::IntoIter<EncodedEvent>,
    /// When the next heartbeat is due (live phase only): the last yield
    /// plus the interval.
    heartbeat_at: Option<Instant>,
    /// The heartbeat timer, created on the first idle wait and kept: it is
    /// re-armed only when it fires before `heartbeat_at`, so a busy stream
    /// never touches the runtime's timer wheel per event.
    timer: Option<Pin<Box<Sleep>>>,
    /// Live typing, when the stream asked for it.
    typing: Option<Typing>,
    /// The store read of the span after `buf`, started while replaying.
    ahead: Option<StoreSpan>,
}

/// A stream's live-typing state.
struct Typing {
    /// The board's version: wakes when text is added.
    rx: watch::Receiver<u64>,
    cursor: Cursor,
    /// The board may hold something not sent yet (it changed, or this is
    /// the snapshot after `caught_up`).
    dirty: bool,
    /// Computed, not yet sent (at most one per block in flight).
    ready: VecDeque<pb::Delta>,
    /// Pacing (`LogOptions::delta_interval`): no diff before this, unless
    /// an event is waiting (what precedes it goes first).
    next_at: Option<Instant>,
}

impl Drop for Sub {
    fn drop(&mut self) {
        self.shared
            .buffered
            .fetch_sub(self.buf.len(), Ordering::Relaxed);
        self.shared.subscribers.fetch_sub(1, Ordering::Relaxed);
        self.shared
            .resident
            .release_if_never_created(&self.session_id, &self.session);
    }
}

pub(super) fn stream(
    shared: Arc<Shared>,
    session: Arc<SessionLog>,
    session_id: &str,
    after_seq: u64,
    deltas: bool,
) -> impl Stream<Item = Frame> + Send + 'static {
    // Register for live notifications now, before any replay read.
    let head_rx = session.head.subscribe();
    let typing = deltas.then(|| Typing {
        rx: session.board.watch(),
        cursor: Cursor::default(),
        dirty: true,
        ready: VecDeque::new(),
        next_at: None,
    });
    shared.subscribers.fetch_add(1, Ordering::Relaxed);
    let sub = Sub {
        shared,
        session,
        session_id: session_id.to_owned(),
        after_seq,
        head_rx,
        phase: Phase::Header,
        last_sent: 0,
        seen_head: 0,
        buf: Vec::new().into_iter(),
        heartbeat_at: None,
        timer: None,
        typing,
        ahead: None,
    };
    SubStream {
        sub: Some(Box::new(sub)),
        waiting: Box::pin(None),
        wait: Sub::wait_next,
    }
}

/// A Subscribe stream: the next event is taken at once when it is already
/// at hand ([`Sub::ready_frame`]: the rest of a fetched span, or the one
/// new event in the window), with no future made, and awaited
/// ([`Sub::next`]) only when it is not. While one is awaited the stream's
/// state lives in that future, in a slot made once per stream.
struct SubStream<F> {
    /// The state, when no wait holds it.
    sub: Option<Box<Sub>>,
    /// The wait under way, if any.
    waiting: Pin<Box<Option<F>>>,
    wait: fn(Box<Sub>) -> F,
}

impl<F> Stream for SubStream<F>
where
    F: Future<Output = (Option<Frame>, Box<Sub>)>,
{
    type Item = Frame;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Frame>> {
        let this = &mut *self;
        loop {
            if let Some(wait) = this.waiting.as_mut().as_pin_mut() {
                let (frame, sub) = std::task::ready!(wait.poll(cx));
                this.waiting.set(None);
                // A stream that ended drops its state now (its counters with it).
                if frame.is_some() {
                    this.sub = Some(sub);
                }
                return Poll::Ready(frame);
            }
            let Some(mut sub) = this.sub.take() else {
                // Ended: the state is gone.
                return Poll::Ready(None);
            };
            if let Some(frame) = sub.ready_frame() {
                this.sub = Some(sub);
                return Poll::Ready(Some(frame));
            }
            this.waiting.set(Some((this.wait)(sub)));
        }
    }
}

impl Sub {
    async fn wait_next(mut self: Box<Self>) -> (Option<Frame>, Box<Self>) {
        let frame = self.next().await;
        (frame, self)
    }

    /// The next frame when it is an event already at hand and nothing must
    /// be waited for or sent before it: in the replay, the next event of a
    /// fetched span; live (not typing), the next fetched event or the one
    /// new event in the window. Exactly what [`Sub::next`] would give then;
    /// `None` leaves every other case to it.
    fn ready_frame(&mut self) -> Option<Frame> {
        if self.shared.is_closed() || self.session.deleted.load(Ordering::Acquire) {
            return None;
        }
        let ev = match self.phase {
            Phase::Header => return None,
            Phase::Replay { until } => {
                if self.last_sent >= until {
                    return None;
                }
                self.pop_next()?
            }
            Phase::Live => {
                if self.typing.is_some() {
                    return None;
                }
                let head = self.observe_head();
                if head <= self.last_sent {
                    return None;
                }
                let ev = match self.pop_next() {
                    Some(ev) => ev,
                    None if self.buf.len() == 0 => self.window_next(head)?,
                    None => return None,
                };
                self.heartbeat_at = Some(Instant::now() + self.shared.opts.heartbeat);
                ev
            }
        };
        Some(Frame::Event(ev))
    }

    /// The fetched event `last_sent + 1`, taken, when it is the next in
    /// the buffer.
    fn pop_next(&mut self) -> Option<EncodedEvent> {
        if self.buf.as_slice().first()?.seq != self.last_sent + 1 {
            return None;
        }
        let ev = self.buf.next()?;
        self.shared.buffered.fetch_sub(1, Ordering::Relaxed);
        self.last_sent = ev.seq;
        if self.buf.len() == 0 {
            // Free the chunk's allocation: an idle subscriber holds nothing.
            self.buf = Vec::new().into_iter();
        }
        Some(ev)
    }

    /// The live common case, exactly one new event (`upto` is
    /// `last_sent + 1`): taken straight from the window, with no chunk
    /// vector and no counters.
    fn window_next(&mut self, upto: u64) -> Option<EncodedEvent> {
        if upto != self.last_sent + 1 {
            return None;
        }
        let ev = self.session.window_get(upto)?;
        self.last_sent = upto;
        Some(ev)
    }

    /// The head, marked seen; how far behind a new one found us is
    /// observed once per head, not per event.
    fn observe_head(&mut self) -> u64 {
        let head = *self.head_rx.borrow_and_update();
        if head > self.seen_head {
            self.seen_head = head;
            self.shared
                .metrics
                .subscriber_lag
                .observe(head - self.last_sent);
        }
        head
    }

    async fn next(&mut self) -> Option<Frame> {
        let frame = self.step().await?;
        if let Phase::Live = self.phase {
            let at = Instant::now() + self.shared.opts.heartbeat;
            self.heartbeat_at = Some(at);
            if let (Frame::Message(kind), Some(timer)) = (&frame, self.timer.as_mut())
                && let Kind::Heartbeat(_) = **kind
            {
                // It just fired: arm it for the next interval.
                timer.as_mut().reset(at);
            }
        }
        Some(frame)
    }

    async fn step(&mut self) -> Option<Frame> {
        loop {
            if self.shared.is_closed() {
                return None;
            }
            if self.session.deleted.load(Ordering::Acquire) {
                return self.held_after_delete();
            }
            match self.phase {
                Phase::Header => {
                    let head = *self.head_rx.borrow_and_update();
                    let opts = &self.shared.opts;
                    let after = self.after_seq;
                    let reset = after > head || head - after > opts.max_replay;
                    let from_seq = if reset {
                        head - head.min(opts.window as u64)
                    } else {
                        after
                    };
                    self.last_sent = from_seq;
                    self.phase = Phase::Replay { until: head };
                    return Some(Frame::message(Kind::Replay(pb::ReplayStart {
                        reset,
                        from_seq,
                        head_seq: head,
                    })));
                }
                Phase::Replay { until } => {
                    if self.last_sent >= until {
                        self.seen_head = until;
                        self.phase = Phase::Live;
                        // A read ahead the window made useless (the end of
                        // the replay came from it) is dropped, not held
                        // while the stream is live.
                        self.ahead = None;
                        return Some(Frame::message(Kind::CaughtUp(pb::CaughtUp {
                            head_seq: until,
                        })));
                    }
                    if let Some(ev) = self.next_event(until).await {
                        return Some(Frame::Event(ev));
                    }
                }
                Phase::Live => {
                    // Deltas computed earlier follow events already sent and
                    // precede any event committed since.
                    if let Some(d) = self.typing.as_mut().and_then(|t| t.ready.pop_front()) {
                        return Some(Frame::message(Kind::Delta(d)));
                    }
                    // Text the CLI wrote before the next event goes first,
                    // paced or not.
                    // (Only for a typing stream: the plain fan-out path takes
                    // no extra look at the head watch.)
                    let event_waiting =
                        self.typing.is_some() && *self.head_rx.borrow() > self.last_sent;
                    if self.deltas_due(event_waiting) {
                        continue;
                    }
                    let head = self.observe_head();
                    if head > self.last_sent {
                        if let Some(ev) = self.next_event(head).await {
                            return Some(Frame::Event(ev));
                        }
                        continue;
                    }
                    // Checked again after `borrow_and_update`: shutdown sets the
                    // flag and then bumps every head watch, so either the flag is
                    // visible here or `changed()` below fires.
                    if self.shared.is_closed() {
                        return None;
                    }
                    let beat = *self
                        .heartbeat_at
                        .get_or_insert_with(|| Instant::now() + self.shared.opts.heartbeat);
                    let timer = self
                        .timer
                        .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(beat)));
                    let typing = async {
                        match self.typing.as_mut() {
                            // Typed meanwhile, held back by the pacing: one
                            // wake at the next slot, not one per fragment.
                            Some(Typing {
                                dirty: true,
                                next_at: Some(at),
                                ..
                            }) => {
                                tokio::time::sleep_until(*at).await;
                                Ok(())
                            }
                            Some(t) => t.rx.changed().await,
                            None => std::future::pending().await,
                        }
                    };
                    tokio::select! {
                        biased;
                        changed = self.head_rx.changed() => {
                            // The sender lives as long as our Arc<SessionLog>; an
                            // error would mean the session is gone, so end.
                            changed.ok()?;
                        }
                        changed = typing => {
                            changed.ok()?;
                            if let Some(t) = self.typing.as_mut() {
                                t.dirty = true;
                            }
                        }
                        () = timer.as_mut() => {
                            if timer.deadline() < beat {
                                // Armed for an earlier deadline; events were sent since.
                                timer.as_mut().reset(beat);
                                continue;
                            }
                            // An event committed meanwhile goes first: a
                            // heartbeat never names a head the stream has
                            // not delivered yet.
                            if *self.head_rx.borrow() > self.last_sent {
                                continue;
                            }
                            // Re-armed by `next` (heartbeat_at moves on).
                            return Some(Frame::message(Kind::Heartbeat(pb::Heartbeat {
                                head_seq: self.last_sent,
                            })));
                        }
                    }
                }
            }
        }
    }

    /// Live typing: when the board may hold something unsent, computes the
    /// deltas this stream may send now (the text written before any event
    /// it has not sent) into `ready`. True when there is one to send. Stays
    /// dirty while the board holds text that follows an unsent event.
    /// Paced by `LogOptions::delta_interval` unless `event_waiting`.
    fn deltas_due(&mut self, event_waiting: bool) -> bool {
        let Some(t) = self.typing.as_mut() else {
            return false;
        };
        // A change since the last look counts even when no wait saw it.
        if !t.dirty && !t.rx.has_changed().unwrap_or(false) {
            return false;
        }
        let now = Instant::now();
        if !event_waiting && t.next_at.is_some_and(|at| now < at) {
            t.dirty = true;
            return false;
        }
        // Seen before reading, so an addition made after the read wakes us.
        t.rx.borrow_and_update();
        let state = self.session.board.read();
        t.dirty = !t.cursor.diff(&state, self.last_sent, &mut t.ready);
        if t.ready.is_empty() {
            return false;
        }
        let interval = self.shared.opts.delta_interval;
        t.next_at = (!interval.is_zero()).then(|| now + interval);
        self.shared
            .metrics
            .deltas_sent
            .fetch_add(t.ready.len() as u64, Ordering::Relaxed);
        true
    }

    /// The event `last_sent + 1` (never beyond `upto`), fetching a chunk when
    /// the buffer is empty. `None` means "try again" (a read failed and we
    /// waited, or shutdown began).
    async fn next_event(&mut self, upto: u64) -> Option<EncodedEvent> {
        loop {
            if let Some(ev) = self.pop_next() {
                return Some(ev);
            }
            // Not the next event: one already sent, or a gap (neither
            // happens with a gapless store).
            if let Some(ev) = self.buf.next() {
                self.shared.buffered.fetch_sub(1, Ordering::Relaxed);
                if ev.seq <= self.last_sent {
                    continue; // already sent: never duplicate
                }
                // A gap: refetch rather than skip.
                tracing::error!(
                    session_id = %self.session_id,
                    expected = self.last_sent + 1,
                    got = ev.seq,
                    "event log gap while streaming; re-reading"
                );
                self.drop_buf();
                tokio::time::sleep(READ_RETRY).await;
                return None;
            }
            if let Some(ev) = self.window_next(upto) {
                return Some(ev);
            }
            let want = usize::try_from(upto - self.last_sent)
                .unwrap_or(usize::MAX)
                .min(SUBSCRIBER_WINDOW_CHUNK);
            let read = match self.session.window_span(self.last_sent, want) {
                Some(evs) => {
                    // The rest comes from the window: no read ahead is needed.
                    self.ahead = None;
                    Ok(evs)
                }
                // Not in the window: from the store.
                None => self.store_span(upto).await,
            };
            match read {
                Ok(evs) if !evs.is_empty() => {
                    self.shared.buffered.fetch_add(evs.len(), Ordering::Relaxed);
                    self.buf = evs.into_iter();
                }
                Ok(_) => {
                    tracing::error!(
                        session_id = %self.session_id,
                        after = self.last_sent,
                        upto,
                        "committed events missing from storage; retrying"
                    );
                    tokio::time::sleep(READ_RETRY).await;
                    return None;
                }
                Err(e) => {
                    tracing::warn!(session_id = %self.session_id, error = %e, "subscriber read failed; retrying");
                    tokio::time::sleep(READ_RETRY).await;
                    return None;
                }
            }
        }
    }

    /// The events after `last_sent` (up to `upto`) from the store: the read
    /// started ahead, if one starts there, else a new one. While it
    /// replays, the stream then starts reading the span after this one, so
    /// that the store is read while this span is sent (one span ahead at
    /// most; a live stream reads only what it needs).
    async fn store_span(&mut self, upto: u64) -> Result<Vec<EncodedEvent>, super::LogError> {
        let chunk = match self.phase {
            Phase::Replay { .. } => REPLAY_CHUNK,
            _ => SUBSCRIBER_CHUNK,
        };
        let span = match self.ahead.take() {
            Some(span) if span.after == self.last_sent => span,
            _ => {
                self.shared
                    .store_span(&self.session_id, &self.session, self.last_sent, upto, chunk)
            }
        };
        let read = span.events().await;
        if let (Phase::Replay { until }, Ok(evs)) = (&self.phase, &read)
            && let Some(last) = evs.last()
            && last.seq < *until
        {
            self.ahead = Some(self.shared.store_span(
                &self.session_id,
                &self.session,
                last.seq,
                *until,
                REPLAY_CHUNK,
            ));
        }
        read
    }

    /// After the session was deleted: the next event this stream still
    /// holds (fetched, or in the window its entry kept), then nothing: the
    /// stream ends. A stream that was keeping up thus still gets everything
    /// committed before the deletion, down to the run's `run_end`.
    fn held_after_delete(&mut self) -> Option<Frame> {
        if let Phase::Header = self.phase {
            return None;
        }
        let next = self.last_sent + 1;
        let ev = loop {
            match self.buf.next() {
                Some(ev) => {
                    self.shared.buffered.fetch_sub(1, Ordering::Relaxed);
                    if ev.seq < next {
                        continue;
                    }
                    break (ev.seq == next).then_some(ev);
                }
                None => break self.session.window_get(next),
            }
        }?;
        self.last_sent = ev.seq;
        Some(Frame::Event(ev))
    }

    fn drop_buf(&mut self) {
        let n = self.buf.len();
        self.shared.buffered.fetch_sub(n, Ordering::Relaxed);
        self.buf = Vec::new().into_iter();
    }
}
