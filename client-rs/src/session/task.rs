//! The subscription task: the one owner of a [`SessionClient`]'s state.
//!
//! It keeps one Subscribe stream open (reconnecting with backoff), applies
//! what arrives to its [`ClientLog`], runs History requests for
//! `fetch_history`, folds live typing into its [`Partial`], and publishes a [`Snapshot`] after every batch. Handles
//! talk to it through a command channel.
//!
//! Stall watchdog: while a Subscribe call or stream is open, a deadline of
//! two heartbeat intervals runs; the call's answer and every stream message
//! (heartbeats included) push it back. When it fires, the stream is treated
//! as broken (a half-open connection sends nothing and reports nothing).
//!
//! Cancel policy: the task ends when it receives `Close` or when every
//! handle is dropped (the command channel closes). Dropping the stream
//! cancels the RPC; pending `fetch_history` callers then get `Closed`.
//!
//! [`SessionClient`]: super::SessionClient

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::{mpsc, oneshot, watch};
use tonic::Streaming;

use crate::derive;
use crate::partial::Partial;
use crate::pb::{self, subscribe_response::Kind};

use super::backoff::Backoff;
use super::log::{Applied, ClientLog, Fault, Prepended};
use super::{Hydration, Rpc, SessionError, Snapshot};

/// Most stream messages handled before a snapshot is published, so a long
/// replay still shows progress.
const MAX_BATCH: usize = 512;

/// A request from a handle to the task.
pub(crate) enum Command {
    /// Page older events; answered with `has_more`.
    FetchHistory {
        limit: u32,
        reply: oneshot::Sender<Result<bool, SessionError>>,
    },
    /// Add a local event; answered with whether it was added.
    Inject {
        event: Box<pb::Event>,
        reply: oneshot::Sender<bool>,
    },
    /// Drop the stream and resubscribe now.
    Reconnect,
    /// End the task.
    Close,
}

type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Where the subscription is.
enum Phase {
    /// The Subscribe call is under way.
    Connecting(BoxFut<Result<Streaming<pb::SubscribeResponse>, tonic::Status>>),
    /// The stream is open; `replayed` once its ReplayStart arrived.
    Streaming {
        stream: Box<Streaming<pb::SubscribeResponse>>,
        replayed: bool,
    },
    /// Backing off before the next attempt.
    Waiting(Pin<Box<tokio::time::Sleep>>),
    /// Stopped for good (see [`Snapshot::fatal`](super::Snapshot::fatal)):
    /// only a `Reconnect` command starts again.
    Stopped,
}

/// What woke the task.
// Lives on the stack for one loop turn; boxing the stream message would cost
// an allocation per message instead.
#[allow(clippy::large_enum_variant)]
enum Wake {
    Command(Option<Command>),
    History(Result<pb::HistoryResponse, tonic::Status>),
    Connected(Result<Streaming<pb::SubscribeResponse>, tonic::Status>),
    Message(Result<Option<pb::SubscribeResponse>, tonic::Status>),
    Retry,
    /// Nothing arrived for two heartbeat intervals.
    Stalled,
}

/// The History call in flight and everyone waiting for it.
struct HistoryCall {
    fut: BoxFut<Result<pb::HistoryResponse, tonic::Status>>,
    waiters: Vec<oneshot::Sender<Result<bool, SessionError>>>,
    /// The log's reset counter when the page was requested.
    epoch: u64,
    /// Started while hydrating: Ready waits for it.
    counts_for_hydration: bool,
}

/// The task's state.
pub(crate) struct SessionTask {
    pub(crate) rpc: Rpc,
    pub(crate) session_id: String,
    pub(crate) history_page: u32,
    /// Silence after which an open call or stream counts as dead (two
    /// heartbeat intervals); zero: never.
    pub(crate) stall_after: Duration,
    /// Subscribe with `include_deltas` and fold them.
    pub(crate) include_deltas: bool,
    pub(crate) backoff: Backoff,
    pub(crate) state: watch::Sender<Snapshot>,
    pub(crate) log: ClientLog,
    pub(crate) connected: bool,
    pub(crate) hydration: Hydration,
    /// The first CaughtUp of any subscription arrived.
    pub(crate) caught_up_once: bool,
    /// A History call started while hydrating has not settled yet.
    pub(crate) backfill_pending: bool,
    pub(crate) error: Option<String>,
    /// Why the subscription stopped for good, if it did.
    pub(crate) fatal: Option<SessionError>,
    /// Something besides the events changed since the last publish.
    pub(crate) meta_dirty: bool,
    /// Derived state of the last published list.
    pub(crate) derived: Arc<derive::Derived>,
    /// Live typing; shared with the last snapshot, so a change after a
    /// publish copies it once (a few blocks).
    pub(crate) partial: Arc<Partial>,
    /// `partial` changed since the last publish.
    pub(crate) partial_dirty: bool,
}

impl SessionTask {
    /// Runs until closed. See the module docs for the cancel policy.
    pub(crate) async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        let mut phase = self.subscribe();
        let mut history: Option<HistoryCall> = None;
        let mut watchdog = self.arm_watchdog(None);
        loop {
            let wake = tokio::select! {
                cmd = commands.recv() => Wake::Command(cmd),
                res = poll_history(&mut history) => Wake::History(res),
                wake = next_step(&mut phase) => wake,
                () = stalled(&mut watchdog) => Wake::Stalled,
            };
            // A sign of life (or a new attempt) pushes the deadline back.
            let alive = matches!(
                wake,
                Wake::Connected(_)
                    | Wake::Message(_)
                    | Wake::Retry
                    | Wake::Command(Some(Command::Reconnect))
            );
            match wake {
                Wake::Command(None | Some(Command::Close)) => break,
                Wake::Command(Some(Command::Reconnect)) => {
                    tracing::debug!(session_id = %self.session_id, "forced reconnect");
                    self.set_connected(false);
                    self.backoff.reset();
                    if self.fatal.take().is_some() {
                        self.meta_dirty = true;
                    }
                    phase = self.subscribe();
                }
                Wake::Command(Some(Command::Inject { event, reply })) => {
                    let _ = reply.send(self.log.inject(*event));
                }
                Wake::Command(Some(Command::FetchHistory { limit, reply })) => {
                    self.fetch_history(&mut history, limit, reply);
                }
                Wake::History(res) => {
                    if let Some(call) = history.take() {
                        self.finish_history(call, res);
                    }
                }
                Wake::Connected(Ok(stream)) => {
                    phase = Phase::Streaming {
                        stream: Box::new(stream),
                        replayed: false,
                    };
                }
                Wake::Connected(Err(status)) => {
                    phase = self.fail(format!("subscribe failed: {status}"));
                }
                Wake::Message(first) => {
                    if let Phase::Streaming { stream, replayed } = &mut phase {
                        if let Some(next) = self.drain(stream, replayed, first) {
                            phase = next;
                        }
                    }
                }
                Wake::Retry => phase = self.subscribe(),
                Wake::Stalled => {
                    phase = self.fail(format!(
                        "no message for {:?} (two heartbeat intervals); the connection is presumed dead",
                        self.stall_after
                    ));
                }
            }
            if matches!(phase, Phase::Waiting(_) | Phase::Stopped) {
                watchdog = None;
            } else if alive || watchdog.is_none() {
                watchdog = self.arm_watchdog(watchdog);
            }
            self.publish();
        }
        self.set_connected(false);
        self.publish();
        // Dropping `history` drops its waiters' senders: they see Closed.
    }

    /// (Re)starts the stall deadline, reusing the timer when there is one.
    fn arm_watchdog(
        &self,
        watchdog: Option<Pin<Box<tokio::time::Sleep>>>,
    ) -> Option<Pin<Box<tokio::time::Sleep>>> {
        if self.stall_after.is_zero() {
            return None;
        }
        let deadline = tokio::time::Instant::now() + self.stall_after;
        Some(match watchdog {
            Some(mut sleep) => {
                sleep.as_mut().reset(deadline);
                sleep
            }
            None => Box::pin(tokio::time::sleep_until(deadline)),
        })
    }

    /// Starts a Subscribe call from the cursor.
    fn subscribe(&self) -> Phase {
        let mut rpc = self.rpc.clone();
        let request = pb::SubscribeRequest {
            session_id: self.session_id.clone(),
            after_seq: self.log.cursor(),
            include_deltas: self.include_deltas,
        };
        tracing::debug!(session_id = %self.session_id, after_seq = request.after_seq, "subscribing");
        Phase::Connecting(Box::pin(async move {
            rpc.subscribe(request).await.map(|r| r.into_inner())
        }))
    }

    /// Handles `first` and then every message already buffered (up to
    /// [`MAX_BATCH`]), so they reach the snapshot together. Returns the next
    /// phase when the stream has to be abandoned.
    fn drain(
        &mut self,
        stream: &mut Streaming<pb::SubscribeResponse>,
        replayed: &mut bool,
        first: Result<Option<pb::SubscribeResponse>, tonic::Status>,
    ) -> Option<Phase> {
        let mut next = Some(first);
        let mut handled = 0;
        // Pull a message only when it will be handled: one left in hand at
        // the batch limit would be lost (and show up as a gap).
        while let Some(result) = next.take() {
            match result {
                Ok(Some(msg)) => {
                    if let Err(reason) = self.handle(msg, replayed) {
                        return Some(self.fail(reason));
                    }
                }
                Ok(None) => return Some(self.fail("stream ended".to_owned())),
                Err(status) if undeliverable(&status) => return Some(self.stop(status)),
                Err(status) => return Some(self.fail(format!("stream broke: {status}"))),
            }
            handled += 1;
            if handled == MAX_BATCH {
                break;
            }
            // Streaming::message is cancel-safe: a pending poll loses nothing.
            next = stream.message().now_or_never();
        }
        None
    }

    /// Applies one stream message.
    fn handle(&mut self, msg: pb::SubscribeResponse, replayed: &mut bool) -> Result<(), String> {
        let Some(kind) = msg.kind else {
            return Err("stream message with no kind".to_owned());
        };
        if !*replayed && !matches!(kind, Kind::Replay(_)) {
            return Err("stream did not open with a ReplayStart".to_owned());
        }
        match kind {
            Kind::Replay(start) => {
                if *replayed {
                    return Err("second ReplayStart on one stream".to_owned());
                }
                tracing::debug!(
                    session_id = %self.session_id,
                    reset = start.reset,
                    from_seq = start.from_seq,
                    head_seq = start.head_seq,
                    "replay started"
                );
                self.log.replay_start(&start).map_err(fault)?;
                // A new stream: the server's snapshot after caught_up
                // restores whatever is still being written.
                if !self.partial.is_empty() {
                    self.fold_partial(Partial::reset);
                }
                *replayed = true;
                self.error = None;
                self.meta_dirty = true;
                self.set_connected(true);
            }
            Kind::Event(event) => {
                // Before the log takes it (and may refuse it: then the
                // stream is dropped, and the next one's replay header resets
                // the fold anyway). A duplicate re-applies a drop: no change.
                if !self.partial.is_empty() {
                    self.fold_partial(|p| p.apply_event(&event));
                }
                if self.log.stream_event(event).map_err(fault)? == Applied::Appended {
                    self.backoff.reset();
                }
            }
            Kind::CaughtUp(caught_up) => {
                self.log.caught_up(caught_up.head_seq).map_err(fault)?;
                self.backoff.reset();
                if !self.caught_up_once {
                    self.caught_up_once = true;
                    self.meta_dirty = true;
                }
            }
            // Its head is only a hint: an event may be committed but not yet
            // sent; the next event's seq shows any real gap.
            Kind::Heartbeat(_) => {}
            Kind::Delta(delta) => {
                if self.include_deltas {
                    self.fold_partial(|p| p.apply_delta(&delta));
                }
            }
        }
        Ok(())
    }

    /// Applies `f` to the partial message (copied first when the last
    /// snapshot shares it) and notes a change.
    fn fold_partial(&mut self, f: impl FnOnce(&mut Partial) -> bool) {
        if f(Arc::make_mut(&mut self.partial)) {
            self.partial_dirty = true;
        }
    }

    /// Records a broken stream and schedules the next attempt.
    fn fail(&mut self, reason: String) -> Phase {
        let delay = self.backoff.next_delay();
        tracing::warn!(
            session_id = %self.session_id,
            cursor = self.log.cursor(),
            attempt = self.backoff.attempt(),
            delay_ms = delay.as_millis() as u64,
            %reason,
            "subscription lost; resubscribing"
        );
        self.error = Some(reason);
        self.meta_dirty = true;
        self.set_connected(false);
        Phase::Waiting(Box::pin(tokio::time::sleep(delay)))
    }

    /// Stops for good: the next message is one the client cannot take, and
    /// a resubscribe from the same cursor would meet it again.
    fn stop(&mut self, status: tonic::Status) -> Phase {
        tracing::error!(
            session_id = %self.session_id,
            cursor = self.log.cursor(),
            %status,
            "a message is too large to decode; the subscription stops (reconnect() retries)"
        );
        self.error = Some(format!(
            "stream stopped at seq {}: {status}",
            self.log.cursor()
        ));
        self.fatal = Some(SessionError::Rpc {
            rpc: "Subscribe",
            status,
        });
        self.meta_dirty = true;
        self.set_connected(false);
        Phase::Stopped
    }

    fn set_connected(&mut self, connected: bool) {
        if self.connected != connected {
            self.connected = connected;
            self.meta_dirty = true;
        }
    }

    /// Starts a History call, or joins the one in flight.
    fn fetch_history(
        &mut self,
        history: &mut Option<HistoryCall>,
        limit: u32,
        reply: oneshot::Sender<Result<bool, SessionError>>,
    ) {
        if let Some(call) = history {
            call.waiters.push(reply);
            return;
        }
        let Some(oldest) = self.log.oldest_seq() else {
            // Nothing held yet: the stream will deliver the tail, and there
            // is no position to page from.
            let _ = reply.send(Ok(false));
            return;
        };
        if !self.log.has_more_history() {
            let _ = reply.send(Ok(false));
            return;
        }
        let mut rpc = self.rpc.clone();
        let request = pb::HistoryRequest {
            session_id: self.session_id.clone(),
            before_seq: oldest,
            limit: if limit == 0 { self.history_page } else { limit },
        };
        tracing::debug!(session_id = %self.session_id, before_seq = oldest, limit = request.limit, "fetching history");
        let counts_for_hydration = self.hydration == Hydration::Hydrating;
        self.backfill_pending |= counts_for_hydration;
        *history = Some(HistoryCall {
            fut: Box::pin(async move { rpc.history(request).await.map(|r| r.into_inner()) }),
            waiters: vec![reply],
            epoch: self.log.epoch(),
            counts_for_hydration,
        });
    }

    fn finish_history(
        &mut self,
        call: HistoryCall,
        res: Result<pb::HistoryResponse, tonic::Status>,
    ) {
        let outcome = match res {
            Ok(page) => match self.log.prepend(call.epoch, page.events, page.has_more) {
                Prepended::Joined => Ok(page.has_more),
                // The list was rebuilt meanwhile; the page belongs to the old
                // one. The caller may simply ask again.
                Prepended::Stale => Ok(self.log.has_more_history()),
            },
            Err(status) => Err(SessionError::Rpc {
                rpc: "History",
                status,
            }),
        };
        self.meta_dirty = true;
        if call.counts_for_hydration {
            self.backfill_settled();
        }
        for waiter in call.waiters {
            let _ = waiter.send(outcome.clone());
        }
    }

    fn backfill_settled(&mut self) {
        // Only one History call runs at a time, so the one that just settled
        // was the only backfill Ready could be waiting for.
        self.backfill_pending = false;
    }

    /// Publishes a snapshot when anything changed.
    fn publish(&mut self) {
        if self.hydration == Hydration::Hydrating && self.caught_up_once && !self.backfill_pending {
            self.hydration = Hydration::Ready;
            self.meta_dirty = true;
        }
        if !self.log.changed() && !self.meta_dirty && !self.partial_dirty {
            return;
        }
        let events = if self.log.changed() {
            let (events, derived) = self.log.publish();
            self.derived = Arc::new(derived);
            Some(events)
        } else {
            None
        };
        self.meta_dirty = false;
        let partial = std::mem::take(&mut self.partial_dirty).then(|| self.partial.clone());
        let derived = self.derived.clone();
        let has_more_history = self.log.has_more_history();
        let cursor = self.log.cursor();
        self.state.send_modify(|s| {
            if let Some(events) = events {
                s.events = events;
                s.derived = derived;
            }
            if let Some(partial) = partial {
                s.partial = partial;
            }
            s.connected = self.connected;
            s.hydration = self.hydration;
            s.has_more_history = has_more_history;
            s.cursor = cursor;
            s.error.clone_from(&self.error);
            s.fatal.clone_from(&self.fatal);
        });
    }
}

fn fault(f: Fault) -> String {
    f.to_string()
}

async fn poll_history(
    history: &mut Option<HistoryCall>,
) -> Result<pb::HistoryResponse, tonic::Status> {
    match history {
        Some(call) => (&mut call.fut).await,
        None => std::future::pending().await,
    }
}

async fn stalled(watchdog: &mut Option<Pin<Box<tokio::time::Sleep>>>) {
    match watchdog {
        Some(sleep) => sleep.await,
        None => std::future::pending().await,
    }
}

/// Whether a stream error means the next message cannot be delivered at
/// all (over the decode limit here, or over the sender's encode limit):
/// tonic reports both as OUT_OF_RANGE ("... message length too large");
/// other stacks say RESOURCE_EXHAUSTED with the same words.
fn undeliverable(status: &tonic::Status) -> bool {
    match status.code() {
        tonic::Code::OutOfRange => true,
        tonic::Code::ResourceExhausted => {
            let m = status.message();
            m.contains("message length too large") || m.contains("larger than max")
        }
        _ => false,
    }
}

async fn next_step(phase: &mut Phase) -> Wake {
    match phase {
        Phase::Connecting(fut) => Wake::Connected(fut.await),
        Phase::Streaming { stream, .. } => Wake::Message(stream.message().await),
        Phase::Waiting(sleep) => {
            sleep.await;
            Wake::Retry
        }
        Phase::Stopped => std::future::pending().await,
    }
}
