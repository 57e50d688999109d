//! Tailing: following the commits other processes make to a shared store.
//!
//! The writer thread publishes what this process commits. When the store is
//! shared (it has a commit feed, [`Store::commit_notices`]), another
//! process can commit events of a session this process holds in memory and
//! serves Subscribe streams for; this task brings such sessions forward.
//!
//! It wakes on a notice naming resident sessions, on a lost or lagged feed
//! (every resident session), and every [`LogOptions::tail_poll`] (every
//! resident session: the fallback when notices are lost without a word).
//! It reads the store's heads of those sessions in one call, and for each
//! one where the store is ahead of the resident head, reads the newest
//! events up to that head (at most a window's worth) and hands head and
//! events to the writer thread ([`Cmd::Follow`]), which applies them
//! between its own commits: the window and the head watch only move
//! forward, and nothing enters a window twice. The subscribers then pull
//! the new events as they pull their own process's (from the window, or
//! the store for what it lacks): gapless, never twice, `caught_up` as ever.
//!
//! Resident sessions with no stream are followed too: History and the head
//! are read from the resident entry. A store without a feed (redb locks its
//! file to one process) runs no task.
//!
//! [`LogOptions::tail_poll`]: super::LogOptions::tail_poll

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use agent_harness_protocol::pb;
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::{broadcast, oneshot};
use tokio_util::sync::CancellationToken;

use super::writer::Cmd;
use super::{SUBSCRIBER_CHUNK, Shared, cut};
use crate::store::{CommitNotice, Store};

/// A resident session the store is ahead of: its stored head and the
/// newest events up to it (none, or not reaching it, when the read came
/// short).
pub(super) struct Ahead {
    pub session_id: String,
    pub head: u64,
    pub events: Vec<pb::Event>,
}

/// Starts the tailing task when the store has a commit feed and a Tokio
/// runtime is at hand (a log opened outside one does not tail). The log
/// owns it, not the server's task set (the log is opened before that set
/// exists and closes after it was waited for). Cancel policy: it ends on
/// `stop`, which shutdown and the last handle's drop cancel (shutdown then
/// waits for it), or when the writer is gone.
pub(super) fn spawn(
    shared: Arc<Shared>,
    tx: std::sync::mpsc::Sender<Cmd>,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    let notices = shared.store.commit_notices()?;
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    Some(runtime.spawn(run(shared, tx, notices, stop)))
}

/// What woke the task: these sessions, or every resident one.
enum Check {
    Some(BTreeSet<String>),
    All,
}

async fn run(
    shared: Arc<Shared>,
    tx: std::sync::mpsc::Sender<Cmd>,
    mut notices: broadcast::Receiver<CommitNotice>,
    stop: CancellationToken,
) {
    let period = shared
        .opts
        .tail_poll
        .max(std::time::Duration::from_millis(1));
    let mut poll = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut feed_open = true;
    loop {
        let check = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            got = notices.recv(), if feed_open => match got {
                Ok(notice) => drain(&mut notices, notice),
                Err(RecvError::Lagged(_)) => Check::All,
                Err(RecvError::Closed) => {
                    tracing::warn!("the store's commit feed closed; tailing by polling only");
                    feed_open = false;
                    Check::All
                }
            },
            _ = poll.tick() => Check::All,
        };
        // A reader loading a head from the store right now (`Shared::load`)
        // may have read it before this commit: it loads again.
        shared.published.fetch_add(1, Ordering::SeqCst);
        let ids: Vec<String> = match check {
            Check::All => shared.resident.ids(),
            Check::Some(ids) => ids
                .into_iter()
                .filter(|id| shared.resident.peek(id).is_some())
                .collect(),
        };
        if ids.is_empty() {
            continue;
        }
        let ahead = tokio::select! {
            biased;
            () = stop.cancelled() => return,
            ahead = ahead_of(&shared, ids) => ahead,
        };
        let ahead = match ahead {
            Ok(a) if a.is_empty() => continue,
            Ok(a) => a,
            Err(e) => {
                // The next notice or poll tries again.
                tracing::warn!(error = %e, "tailing: reading the store's heads failed");
                continue;
            }
        };
        let (reply, done) = oneshot::channel();
        if tx.send(Cmd::Follow { ahead, reply }).is_err() || done.await.is_err() {
            return;
        }
    }
}

/// The sessions named by `first` and every notice already queued behind
/// it, so a burst of commits costs one look at the store.
fn drain(notices: &mut broadcast::Receiver<CommitNotice>, first: CommitNotice) -> Check {
    let mut ids = BTreeSet::new();
    let mut next = Ok(first);
    loop {
        match next {
            Ok(CommitNotice::Sessions(s)) => ids.extend(s),
            Ok(CommitNotice::Lost) | Err(broadcast::error::TryRecvError::Lagged(_)) => {
                return Check::All;
            }
            Err(_) => return Check::Some(ids),
        }
        next = notices.try_recv();
    }
}

/// The sessions of `ids` whose stored head is ahead of their resident one,
/// each with the newest events up to that head.
async fn ahead_of(shared: &Arc<Shared>, ids: Vec<String>) -> Result<Vec<Ahead>, super::LogError> {
    let heads = {
        let ids = ids.clone();
        shared.blocking(move |st| st.heads(&ids)).await?
    };
    let mut ahead = Vec::new();
    for (session_id, head) in ids.into_iter().zip(heads) {
        let Some(session) = shared.resident.peek(&session_id) else {
            continue;
        };
        let local = *session.head.borrow();
        if head <= local {
            continue;
        }
        // The newest events up to the head, as many as a window keeps (the
        // rest, if any, subscribers read from the store).
        let keep = (head - local).min(shared.opts.window.min(SUBSCRIBER_CHUNK) as u64);
        let from = head - keep;
        let budget = shared.budget();
        let sid = session_id.clone();
        let events = shared
            .blocking(move |st: &dyn Store| {
                st.read_range_within(&sid, from, keep as usize, cut::PAGE_BYTES, budget)
            })
            .await?;
        ahead.push(Ahead {
            session_id,
            head,
            events: shared.streamed(events),
        });
    }
    Ok(ahead)
}
