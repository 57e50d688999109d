//! Each session's fold, kept in memory: the `derive::Fold` of its log, so
//! Start, Send, GetSession and ListSessions cost O(new events) instead of
//! re-reading and re-folding the whole log on every call.
//!
//! The cache is the derive fold of a *prefix* of the log and nothing else
//! (no second "is it running" registry): it may lag the log, never differ
//! from it. Two paths move it forward, and both apply an event only when
//! its seq is exactly the next one, so every event is folded once, in order:
//! - the writers (the manager under the slot lock, the run task while a run
//!   lives) apply what their append returned;
//! - readers catch up to the log's head first, reading only the events the
//!   fold has not seen. So a client that saw seq N on Subscribe and then
//!   calls GetSession gets a state that includes N, even if the writer has
//!   not applied it yet.
//!
//! A session's fold is built lazily from `read_all` on its first use after
//! start-up (start-up recovery does not fold whole logs; see `recovery`).

use std::sync::Mutex;

use agent_harness_client::derive::{Fold, StatusFold};
use agent_harness_client::pb;
use agent_harness_client::pb::event::Payload;

use crate::log::{EventLogs, HISTORY_MAX_LIMIT, LogError};

/// The derive fold of one session's log (a prefix of it), plus the one
/// thing the manager reads from the log that derive does not keep.
#[derive(Debug, Clone, Default)]
pub(super) struct SessionFold {
    /// Every derivation (status, usage, tasks, ...), as GetSession reports.
    pub(super) fold: Fold,
    /// The latest run_start's config: a Send that respawns keeps its cwd,
    /// env, args and model.
    pub(super) last_config: Option<pb::StartConfig>,
    /// The seq of that run_start when its event is cut down (over the
    /// per-event budget): then `last_config` may hold shortened args, and a
    /// respawn reads the whole event instead.
    pub(super) last_config_cut: Option<u64>,
}

impl SessionFold {
    fn from_events(events: &[pb::Event]) -> Self {
        let mut d = Self::default();
        for e in events {
            d.apply(e);
        }
        d
    }

    fn head(&self) -> u64 {
        self.fold.status_fold().head_seq()
    }

    fn apply(&mut self, e: &pb::Event) {
        self.fold.apply(e);
        if let Some(Payload::RunStart(rs)) = &e.payload {
            self.last_config = rs.config.clone();
            self.last_config_cut = e.truncated.as_ref().map(|_| e.seq);
        }
    }

    /// The resume id the next run uses ("" when none).
    pub(super) fn resume_id(&self, session_id: &str) -> String {
        self.fold.session(session_id).resume_id
    }
}

/// One session's cached [`SessionFold`]; `None` until first built.
#[derive(Debug, Default)]
pub(super) struct FoldCell {
    /// A std mutex: every critical section is a few field reads or the
    /// fold of events already in hand, never an await.
    state: Mutex<Option<SessionFold>>,
}

impl FoldCell {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<SessionFold>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies events just appended (in seq order). Events the fold has
    /// already seen are skipped; at a gap (someone else appended and no
    /// reader caught up yet) the rest is left to the next catch-up.
    pub(super) fn applied(&self, events: &[pb::Event]) {
        let mut state = self.lock();
        let Some(d) = state.as_mut() else {
            // Not built yet: the lazy build will read these from the log.
            return;
        };
        for e in events {
            let head = d.head();
            if e.seq == head + 1 {
                d.apply(e);
            } else if e.seq > head + 1 {
                return;
            }
        }
    }

    /// Reads the cached state, whatever its lag (the run task's view: it is
    /// the writer, so the fold already holds everything it appended).
    pub(super) fn with<R>(&self, f: impl FnOnce(&SessionFold) -> R) -> Option<R> {
        self.lock().as_ref().map(f)
    }

    /// The status fold, or an empty one before the first build.
    pub(super) fn status(&self) -> StatusFold {
        self.with(|d| d.fold.status_fold().clone())
            .unwrap_or_default()
    }

    /// Brings the fold up to (at least) the log's head as of this call and
    /// returns a copy of what `f` reads from it.
    pub(super) async fn current<R>(
        &self,
        logs: &EventLogs,
        session_id: &str,
        f: impl FnOnce(&SessionFold) -> R,
    ) -> Result<R, LogError> {
        let head = logs.head_seq(session_id);
        let have = self.with(SessionFold::head);
        match have {
            Some(h) if h >= head => {}
            Some(h) if head - h <= u64::from(HISTORY_MAX_LIMIT) => {
                // The events after h: the page of `head - h` events before head + 1.
                let (events, _) = logs
                    .history(session_id, head + 1, (head - h) as u32)
                    .await?;
                self.applied(&events);
                if self.with(SessionFold::head).unwrap_or(0) < head {
                    // A page that did not connect (cannot happen with a
                    // gapless log; cheap insurance): refold from scratch.
                    self.rebuild(logs, session_id).await?;
                }
            }
            _ => self.rebuild(logs, session_id).await?,
        }
        Ok(self.with(f).expect("built above"))
    }

    /// Folds the whole log and keeps the result unless a writer moved the
    /// cached fold further meanwhile (both are folds of log prefixes; the
    /// longer one is the more current).
    async fn rebuild(&self, logs: &EventLogs, session_id: &str) -> Result<(), LogError> {
        let events = logs.read_all(session_id).await?;
        let built = SessionFold::from_events(&events);
        let mut state = self.lock();
        if state.as_ref().is_none_or(|d| d.head() < built.head()) {
            *state = Some(built);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(seq: u64, payload: Payload) -> pb::Event {
        pb::Event {
            seq,
            session_id: "s".into(),
            run_id: "r1".into(),
            payload: Some(payload),
            ..Default::default()
        }
    }

    fn run_start(seq: u64) -> pb::Event {
        ev(
            seq,
            Payload::RunStart(pb::RunStart {
                config: Some(pb::StartConfig {
                    prompt: "hi".into(),
                    model: "m".into(),
                    ..Default::default()
                }),
                ..Default::default()
            }),
        )
    }

    #[test]
    fn applies_each_event_once_in_order_and_stops_at_a_gap() {
        let cell = FoldCell::default();
        // Not built: writers' events are left for the build.
        cell.applied(&[run_start(1)]);
        assert!(cell.with(|_| ()).is_none());

        *cell.lock() = Some(SessionFold::from_events(&[run_start(1)]));
        // A repeat of seq 1 is skipped; seq 3 after a missing 2 is not applied.
        cell.applied(&[run_start(1), ev(3, Payload::RunEnd(pb::RunEnd::default()))]);
        assert_eq!(cell.with(SessionFold::head), Some(1));
        assert!(cell.status().run_live());
        assert_eq!(
            cell.with(|d| d.last_config.clone().unwrap().model),
            Some("m".to_owned())
        );

        cell.applied(&[
            ev(2, Payload::RunReady(pb::RunReady::default())),
            ev(3, Payload::RunEnd(pb::RunEnd::default())),
        ]);
        assert_eq!(cell.with(SessionFold::head), Some(3));
        assert!(!cell.status().run_live());
    }
}
