//! The log's tuning knobs and their defaults.

use std::time::Duration;

use super::cut;

/// Default of [`LogOptions::window`] (`--window`).
pub const DEFAULT_WINDOW: usize = 2_000;
/// Default of [`LogOptions::window_bytes`] (`--window-bytes`).
pub const DEFAULT_WINDOW_BYTES: usize = 2 * 1024 * 1024;
/// Default of [`LogOptions::cache_bytes`] (`--cache-bytes`): the
/// event windows of all sessions together.
pub const DEFAULT_WINDOW_CACHE_BYTES: usize = 128 * 1024 * 1024;
/// Default of [`LogOptions::cache_sessions`] (`--cache-sessions`).
pub const DEFAULT_CACHE_SESSIONS: usize = 1_000;
/// Default of [`LogOptions::max_replay`] (`--max-replay`).
pub const DEFAULT_MAX_REPLAY: usize = 10_000;
/// Default of [`LogOptions::heartbeat`] (`--heartbeat`).
pub const DEFAULT_HEARTBEAT: Duration = Duration::from_secs(15);
/// Default of [`LogOptions::tail_poll`] (`--tail-poll`).
pub const DEFAULT_TAIL_POLL: Duration = Duration::from_secs(1);
/// Default of [`LogOptions::delta_interval`] (`--delta-interval`).
pub const DEFAULT_DELTA_INTERVAL: Duration = Duration::from_millis(50);

/// Tuning knobs of the log.
#[derive(Debug, Clone)]
pub struct LogOptions {
    /// Latest events kept in memory per session (2,000); older reads go to the store.
    pub window: usize,
    /// Most bytes (encoded) one session's window holds (2 MiB); the newest
    /// event always stays.
    pub window_bytes: usize,
    /// Most bytes all windows hold together (128 MiB); past it the least
    /// recently used sessions' windows are dropped.
    pub cache_bytes: usize,
    /// Most sessions kept in memory that no stream follows (1,000; also
    /// the writer's meta cache); past it the least recently used go.
    pub cache_sessions: usize,
    /// Largest gap Subscribe replays contiguously (10,000); beyond it the
    /// stream resets to the tail window.
    pub max_replay: u64,
    /// Heartbeat interval on an idle live stream (15 s).
    pub heartbeat: Duration,
    /// Live typing: a stream sends deltas at most this often (50 ms), what
    /// was typed meanwhile coalesced; zero sends each change as it comes.
    /// Before an event a stream always sends what precedes it first.
    pub delta_interval: Duration,
    /// Most events in one group commit (10,000); bounds a transaction's size.
    pub max_batch: usize,
    /// Most events (and meta changes) waiting for the writer (40,000);
    /// further appends wait for room.
    pub max_queued: usize,
    /// Largest event streamed whole, in bytes of its encoding (1 MiB); a
    /// larger one is streamed cut down ([`cut::fit`]). At most
    /// [`cut::MAX_EVENT_BYTES_CEILING`].
    pub max_event_bytes: usize,
    /// On a store other processes write too (one with a commit feed): how
    /// often the sessions this log holds are re-checked against the store
    /// even without a notice (1 s), the fallback for notices lost.
    pub tail_poll: Duration,
}

impl Default for LogOptions {
    fn default() -> Self {
        Self {
            window: DEFAULT_WINDOW,
            window_bytes: DEFAULT_WINDOW_BYTES,
            cache_bytes: DEFAULT_WINDOW_CACHE_BYTES,
            cache_sessions: DEFAULT_CACHE_SESSIONS,
            max_replay: DEFAULT_MAX_REPLAY as u64,
            heartbeat: DEFAULT_HEARTBEAT,
            delta_interval: DEFAULT_DELTA_INTERVAL,
            max_batch: 10_000,
            max_queued: 40_000,
            max_event_bytes: cut::DEFAULT_MAX_EVENT_BYTES,
            tail_poll: DEFAULT_TAIL_POLL,
        }
    }
}
