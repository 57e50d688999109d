//! One session's slot: who answers for the session right now.
//!
//! A session has at most one **occupant**, holding a [`Claim`]: either a
//! call doing the work that needs no run task (deciding from the fold,
//! appending `run_start`, spawning) or the run task that call hands its
//! claim to. While a claim exists, every call on the session sends a
//! command down its channel and the occupant alone answers; only when the
//! slot is free does a call decide from the fold, and then it is the
//! occupant itself. So there is one authority per session at any moment,
//! and it is never a lock held across an fsync or a process wait: a claim
//! is taken and released under a std mutex that guards one `Option`.
//!
//! Releasing a claim (dropping it, also on an early return or a panic)
//! empties the slot first, then drops the commands still queued (their
//! callers see a dropped reply and ask the slot again, now free or held by
//! the next occupant), then cancels `ended`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::fold::FoldCell;
use super::run::RunCmd;

/// Commands queued for one occupant before it must answer them.
const COMMAND_QUEUE: usize = 32;

/// See the module docs.
#[derive(Default)]
pub(super) struct Slot {
    occupant: Mutex<Option<Occupant>>,
    /// The session's cached derive fold, shared with its run task.
    pub(super) fold: Arc<FoldCell>,
    next_claim: AtomicU64,
    /// [`Slots`]' clock at the last use, for least-recently-used order.
    last_used: AtomicU64,
}

/// Every session's slot that is in memory: those in use, plus at most
/// `cap` idle ones (free, held by no call), least recently used evicted
/// first. An evicted slot takes its cached fold with it; the next call
/// rebuilds the fold from the log. A slot held by anyone (a call, a run
/// task's claim) is never evicted, so there is never a second slot, and so
/// a second authority, for one session.
pub(super) struct Slots {
    map: Mutex<HashMap<String, Arc<Slot>>>,
    cap: usize,
    clock: AtomicU64,
}

impl Slots {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            map: Mutex::default(),
            cap: cap.max(1),
            clock: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Slot>>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn touch(&self, slot: &Slot) {
        let now = self.clock.fetch_add(1, Ordering::Relaxed);
        slot.last_used.store(now, Ordering::Relaxed);
    }

    /// The session's slot if it is in memory.
    pub(super) fn get(&self, session_id: &str) -> Option<Arc<Slot>> {
        let slot = self.lock().get(session_id).cloned()?;
        self.touch(&slot);
        Some(slot)
    }

    /// The session's slot, made if it is not in memory.
    pub(super) fn get_or_create(&self, session_id: &str) -> Arc<Slot> {
        let slot = {
            let mut map = self.lock();
            let slot = map.entry(session_id.to_owned()).or_default().clone();
            if map.len() > self.cap {
                self.evict_idle(&mut map);
            }
            slot
        };
        self.touch(&slot);
        slot
    }

    /// Drops the least recently used idle slots until nine tenths of the
    /// cap remain (so the sort runs once per tenth of the cap of new slots).
    fn evict_idle(&self, map: &mut HashMap<String, Arc<Slot>>) {
        let keep = self.cap - self.cap / 10;
        // Under the map's lock nobody can take a new reference, so a count
        // of one means only the map holds it (no call, no claim).
        let mut idle: Vec<(u64, String)> = map
            .iter()
            .filter(|(_, s)| Arc::strong_count(s) == 1 && s.occupant().is_none())
            .map(|(k, s)| (s.last_used.load(Ordering::Relaxed), k.clone()))
            .collect();
        idle.sort_unstable();
        let excess = map.len().saturating_sub(keep);
        for (_, k) in idle.into_iter().take(excess) {
            map.remove(&k);
        }
    }

    /// Every slot in memory.
    pub(super) fn all(&self) -> Vec<Arc<Slot>> {
        self.lock().values().cloned().collect()
    }

    /// How many slots are in memory.
    /// Forgets the slot of a deleted session, unless someone still holds
    /// or occupies it (a call that will go through it, then find the
    /// session gone or create it anew): the map's `Arc` and the caller's
    /// are the only ones.
    pub(super) fn remove_unused(&self, session_id: &str, slot: &Arc<Slot>) {
        let mut map = self.lock();
        if map.get(session_id).is_some_and(|s| {
            Arc::ptr_eq(s, slot) && Arc::strong_count(s) == 2 && s.occupant().is_none()
        }) {
            map.remove(session_id);
        }
    }

    pub(super) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// How a call reaches the current occupant.
#[derive(Clone)]
pub(super) struct Occupant {
    claim: u64,
    cmds: mpsc::Sender<RunCmd>,
    /// Cancelled once the claim is released.
    pub(super) ended: CancellationToken,
}

/// What a call finds in the slot.
pub(super) enum Entry {
    /// Nobody answers for the session: the caller is now the occupant.
    Free(Claim),
    /// Someone does: ask them.
    Occupied(Occupant),
}

impl Slot {
    fn lock(&self) -> MutexGuard<'_, Option<Occupant>> {
        self.occupant.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Claims the slot if it is free, else returns who holds it.
    pub(super) fn enter(self: &Arc<Self>) -> Entry {
        let mut occupant = self.lock();
        if let Some(o) = occupant.as_ref() {
            return Entry::Occupied(o.clone());
        }
        let claim = self.next_claim.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel(COMMAND_QUEUE);
        let ended = CancellationToken::new();
        *occupant = Some(Occupant {
            claim,
            cmds: tx,
            ended: ended.clone(),
        });
        Entry::Free(Claim {
            slot: self.clone(),
            claim,
            cmds: rx,
            ended,
        })
    }

    /// Asks the occupant (`cmd`), or claims the slot if there is none. An
    /// occupant that goes away before answering is replaced by whoever
    /// holds the slot next (or the caller's claim).
    pub(super) async fn ask_or_claim<R>(
        self: &Arc<Self>,
        cmd: impl Fn(oneshot::Sender<R>) -> RunCmd,
    ) -> Result<R, Claim> {
        loop {
            match self.enter() {
                Entry::Free(claim) => return Err(claim),
                Entry::Occupied(run) => {
                    if let Some(answer) = run.ask(&cmd).await {
                        return Ok(answer);
                    }
                }
            }
        }
    }

    /// The current occupant, if any.
    pub(super) fn occupant(&self) -> Option<Occupant> {
        self.lock().clone()
    }
}

impl Occupant {
    /// Sends a command and waits for its answer. `None`: the occupant went
    /// away first (its claim was released); ask the slot again.
    pub(super) async fn ask<R>(&self, cmd: impl FnOnce(oneshot::Sender<R>) -> RunCmd) -> Option<R> {
        let (reply, answer) = oneshot::channel();
        self.cmds.send(cmd(reply)).await.ok()?;
        answer.await.ok()
    }

    /// Sends a command that has no answer; false if the occupant is gone.
    pub(super) async fn tell(&self, cmd: RunCmd) -> bool {
        self.cmds.send(cmd).await.is_ok()
    }
}

/// The right to answer for a session, and the commands sent to whoever
/// holds it. Released on drop.
pub(super) struct Claim {
    slot: Arc<Slot>,
    claim: u64,
    /// Commands from the other calls on this session.
    pub(super) cmds: mpsc::Receiver<RunCmd>,
    ended: CancellationToken,
}

impl Claim {
    /// The session's fold.
    pub(super) fn fold(&self) -> &Arc<FoldCell> {
        &self.slot.fold
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        {
            let mut occupant = self.slot.lock();
            if occupant.as_ref().is_some_and(|o| o.claim == self.claim) {
                *occupant = None;
            }
        }
        self.cmds.close();
        while self.cmds.try_recv().is_ok() {}
        self.ended.cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn idle_slots_past_the_cap_go_least_recently_used_first_held_ones_never() {
        let slots = Slots::new(10);
        let held = slots.get_or_create("held");
        let claimed = slots.get_or_create("claimed");
        let Entry::Free(claim) = claimed.enter() else {
            panic!("free")
        };
        drop(claimed); // only the claim keeps it now
        for i in 0..10 {
            slots.get_or_create(&format!("s{i}"));
        }
        // The 11th slot (s8) evicted the two oldest idle ones (down to nine
        // tenths of the cap); s9 made ten again.
        assert_eq!(slots.len(), 10);
        assert!(slots.get("held").is_some() && slots.get("claimed").is_some());
        assert!(slots.get("s0").is_none() && slots.get("s1").is_none());
        assert!(slots.get("s2").is_some() && slots.get("s9").is_some());
        // Held or claimed, the same slot is handed out: one authority.
        assert!(Arc::ptr_eq(&held, &slots.get_or_create("held")));
        drop(claim);
    }

    #[tokio::test]
    async fn one_occupant_and_queued_callers_ask_again_after_release() {
        let slot = Arc::new(Slot::default());
        let Entry::Free(claim) = slot.enter() else {
            panic!("a new slot is free");
        };
        let Entry::Occupied(occupant) = slot.enter() else {
            panic!("claimed slot must be occupied");
        };
        // A command queued while the claim is held is dropped on release:
        // the caller learns to ask again, and the slot is free by then.
        let asked = tokio::spawn(async move {
            occupant
                .ask(|reply| RunCmd::Stop { keyed: None, reply })
                .await
        });
        tokio::task::yield_now().await;
        let ended = slot.occupant().expect("held").ended;
        drop(claim);
        assert!(asked.await.unwrap().is_none());
        assert!(ended.is_cancelled());
        assert!(slot.occupant().is_none());
        assert!(matches!(slot.enter(), Entry::Free(_)));
    }

    #[tokio::test]
    async fn the_occupant_answers() {
        let slot = Arc::new(Slot::default());
        let Entry::Free(mut claim) = slot.enter() else {
            panic!("free");
        };
        let occupant = slot.occupant().unwrap();
        let answering = tokio::spawn(async move {
            if let Some(RunCmd::Stop { reply, .. }) = claim.cmds.recv().await {
                let _ = reply.send(Ok(true));
            }
            claim
        });
        let answer = occupant
            .ask(|reply| RunCmd::Stop { keyed: None, reply })
            .await;
        assert!(matches!(answer, Some(Ok(true))));
        drop(answering.await.unwrap());
        assert!(slot.occupant().is_none());
    }
}
