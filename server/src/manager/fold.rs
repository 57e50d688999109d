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
//! A session's fold is built lazily on its first use (after start-up, or
//! after its slot was evicted), by reading the log in pages of
//! [`FOLD_PAGE`] events: never the whole log at once.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agent_harness_protocol::derive::{Fold, StatusFold};
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;

use crate::log::{EventLogs, LogError};

/// Events read per page when a fold catches up or is rebuilt.
const FOLD_PAGE: usize = 1000;

/// The derive fold of one session's log (a prefix of it), plus what the
/// manager reads from the log that derive does not keep.
#[derive(Debug, Clone, Default)]
pub(super) struct SessionFold {
    /// Every derivation (status, usage, tasks, ...), as GetSession reports.
    pub(super) fold: Fold,
    /// The latest run_start's config without its prompt and content blocks
    /// (a respawn brings its own, and images must not stay in memory): a
    /// Send that respawns keeps its cwd, env, args and model.
    pub(super) last_config: Option<pb::StartConfig>,
    /// The seq of that run_start when its event is cut down (over the
    /// per-event budget): then `last_config` may hold shortened args, and a
    /// respawn reads the whole event instead.
    pub(super) last_config_cut: Option<u64>,
    /// The settings changed since that run_start (SetModel, ...): a respawn
    /// applies them over `last_config`.
    pub(super) changed: SettingsChanged,
    /// When the latest run_ready was appended: the last time a process
    /// opened the session's conversation.
    pub(super) last_ready_at: Option<SystemTime>,
}

/// Settings changed since the latest run_start; `None`: unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct SettingsChanged {
    pub(super) model: Option<String>,
    pub(super) permission_mode: Option<String>,
    pub(super) max_thinking_tokens: Option<Option<u32>>,
}

impl SettingsChanged {
    fn apply(&mut self, s: &pb::SettingChanged) {
        match s.setting() {
            pb::Setting::Model => self.model = Some(s.value.clone()),
            pb::Setting::PermissionMode => self.permission_mode = Some(s.value.clone()),
            pb::Setting::MaxThinkingTokens => {
                self.max_thinking_tokens = Some(s.value.parse().ok());
            }
            pb::Setting::Unspecified => {}
        }
    }

    /// Writes the changed settings into a config for the next spawn.
    pub(super) fn apply_to(&self, config: &mut pb::StartConfig) {
        if let Some(m) = &self.model {
            config.model = m.clone();
        }
        if let Some(m) = &self.permission_mode {
            config.permission_mode = m.clone();
        }
        if let Some(t) = self.max_thinking_tokens {
            config.max_thinking_tokens = t;
        }
    }
}

impl SessionFold {
    #[cfg(test)]
    fn from_events(events: &[pb::Event]) -> Self {
        let mut d = Self::default();
        for e in events {
            d.apply(e);
        }
        d
    }

    pub(super) fn head(&self) -> u64 {
        self.fold.status_fold().head_seq()
    }

    fn apply(&mut self, e: &pb::Event) {
        self.fold.apply(e);
        if let Some(Payload::RunStart(rs)) = &e.payload {
            self.last_config = rs.config.as_ref().map(|c| pb::StartConfig {
                prompt: String::new(),
                content_blocks: Vec::new(),
                ..c.clone()
            });
            self.last_config_cut = e.truncated.as_ref().map(|_| e.seq);
            self.changed = SettingsChanged::default();
        }
        if let Some(Payload::SettingChanged(s)) = &e.payload {
            self.changed.apply(s);
        }
        if let (Some(Payload::RunReady(_)), Some(t)) = (&e.payload, &e.time) {
            let since_epoch = Duration::new(
                u64::try_from(t.seconds).unwrap_or(0),
                u32::try_from(t.nanos).unwrap_or(0),
            );
            self.last_ready_at = Some(UNIX_EPOCH + since_epoch);
        }
    }

    /// What a run that names no resume id of its own continues: `Ok` with
    /// the session's resume id, `Err` with the lost one when the CLI could
    /// not resume the session's last conversation and no new one has begun
    /// since (the run starts a new conversation and says so), `Ok("")` for
    /// a session with no conversation yet.
    pub(super) fn resume_or_lost(&self) -> Result<String, String> {
        match (self.fold.resume_id(), self.fold.context_lost()) {
            (Some(id), _) => Ok(id.to_owned()),
            (None, Some(lost)) => Err(lost.resume_id.clone()),
            (None, None) => Ok(String::new()),
        }
    }
}

/// One session's cached [`SessionFold`]; `None` until first built.
#[derive(Debug, Default)]
pub(super) struct FoldCell {
    /// A std mutex: every critical section is a few field reads or the
    /// fold of events already in hand, never an await.
    state: Mutex<CellState>,
}

#[derive(Debug, Default)]
struct CellState {
    /// Moves on every [`FoldCell::reset`]: a reader that read the log
    /// before a reset (of a session deleted meanwhile) does not install
    /// what it read.
    generation: u64,
    fold: Option<SessionFold>,
}

impl FoldCell {
    fn lock(&self) -> std::sync::MutexGuard<'_, CellState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Forgets the fold (the session's log was deleted): the next reader
    /// folds the log as it is then.
    pub(super) fn reset(&self) {
        let mut state = self.lock();
        state.generation += 1;
        state.fold = None;
    }

    fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// Applies events just appended (in seq order). Events the fold has
    /// already seen are skipped; at a gap (someone else appended and no
    /// reader caught up yet) the rest is left to the next catch-up.
    pub(super) fn applied(&self, events: &[pb::Event]) {
        let generation = self.generation();
        self.applied_in(generation, events);
    }

    /// [`FoldCell::applied`] of events read in `generation`: nothing after
    /// a reset.
    fn applied_in(&self, generation: u64, events: &[pb::Event]) {
        let mut state = self.lock();
        if state.generation != generation {
            return;
        }
        let Some(d) = state.fold.as_mut() else {
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
        self.lock().fold.as_ref().map(f)
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
        loop {
            let generation = self.generation();
            self.catch_up(logs, session_id, generation).await?;
            let state = self.lock();
            if state.generation == generation
                && let Some(d) = state.fold.as_ref()
            {
                return Ok(f(d));
            }
            // Reset meanwhile (the session was deleted): fold the log as it
            // is now.
        }
    }

    /// Builds the fold if needed and catches it up to the log's head as of
    /// this call, installing nothing once a reset moved past `generation`.
    async fn catch_up(
        &self,
        logs: &EventLogs,
        session_id: &str,
        generation: u64,
    ) -> Result<(), LogError> {
        let head = logs.head_seq(session_id).await?;
        if self.with(SessionFold::head).is_none() {
            self.rebuild(logs, session_id, head, generation).await?;
        }
        // Catch up from what the fold has: the writers may have applied
        // past `head` meanwhile, which ends the loop at once.
        loop {
            let have = self.with(SessionFold::head).unwrap_or(0);
            if have >= head || self.generation() != generation {
                return Ok(());
            }
            let page = logs.read_range(session_id, have, FOLD_PAGE).await?;
            if page.is_empty() {
                return Ok(());
            }
            self.applied_in(generation, &page);
            if self.with(SessionFold::head).unwrap_or(0) == have {
                // A page that did not connect (cannot happen with a gapless
                // log; cheap insurance): refold from scratch.
                {
                    let mut state = self.lock();
                    if state.generation == generation {
                        state.fold = None;
                    }
                }
                return self.rebuild(logs, session_id, head, generation).await;
            }
        }
    }

    /// Folds the log up to `head` page by page and keeps the result unless
    /// a writer moved the cached fold further meanwhile (both are folds of
    /// log prefixes; the longer one is the more current) or a reset moved
    /// past `generation`.
    async fn rebuild(
        &self,
        logs: &EventLogs,
        session_id: &str,
        head: u64,
        generation: u64,
    ) -> Result<(), LogError> {
        let mut built = SessionFold::default();
        while built.head() < head {
            let page = logs.read_range(session_id, built.head(), FOLD_PAGE).await?;
            if page.is_empty() {
                break;
            }
            for e in &page {
                built.apply(e);
            }
        }
        let mut state = self.lock();
        if state.generation == generation
            && state.fold.as_ref().is_none_or(|d| d.head() < built.head())
        {
            state.fold = Some(built);
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

        cell.lock().fold = Some(SessionFold::from_events(&[run_start(1)]));
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

    #[test]
    fn the_latest_run_ready_says_when_the_conversation_was_last_opened() {
        let mut ready = ev(2, Payload::RunReady(pb::RunReady::default()));
        ready.time = Some(pbjson_types::Timestamp {
            seconds: 1_000,
            nanos: 500,
        });
        let fold = SessionFold::from_events(&[run_start(1)]);
        assert_eq!(fold.last_ready_at, None);
        let fold = SessionFold::from_events(&[run_start(1), ready]);
        assert_eq!(
            fold.last_ready_at,
            Some(UNIX_EPOCH + Duration::new(1_000, 500))
        );
    }
}
