//! The log's tuning knobs and their defaults.

use std::time::Duration;

use super::cut;
use crate::duration::{duration_default, parse_duration};

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

/// Default of [`LogOptions::max_batch`].
pub const DEFAULT_MAX_BATCH: usize = 10_000;
/// Default of [`LogOptions::max_queued`].
pub const DEFAULT_MAX_QUEUED: usize = 40_000;

/// Tuning knobs of the log; `serve` takes them as flags (the doc comments
/// are their `--help` text), except the writer's batch and queue bounds.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct LogOptions {
    /// Events kept in memory per session; older reads fall through to the
    /// store.
    #[arg(long, env = "AGENT_HARNESS_WINDOW", default_value_t = DEFAULT_WINDOW)]
    pub window: usize,

    /// Most bytes (encoded events) one session keeps in memory; its newest
    /// event always stays.
    #[arg(long, env = "AGENT_HARNESS_WINDOW_BYTES", default_value_t = DEFAULT_WINDOW_BYTES)]
    pub window_bytes: usize,

    /// Most bytes all sessions keep in memory together; past it the least
    /// recently used sessions' windows are dropped (reads go to the store).
    #[arg(long, env = "AGENT_HARNESS_CACHE_BYTES", default_value_t = DEFAULT_WINDOW_CACHE_BYTES)]
    pub cache_bytes: usize,

    /// Most idle sessions (no live run, no open stream) whose state stays in
    /// memory; past it the least recently used are evicted and reloaded
    /// from the store when used again.
    #[arg(long, env = "AGENT_HARNESS_CACHE_SESSIONS", default_value_t = DEFAULT_CACHE_SESSIONS)]
    pub cache_sessions: usize,

    /// Most events a Subscribe replays before going live; an older cursor
    /// gets a reset and the tail.
    #[arg(long, env = "AGENT_HARNESS_MAX_REPLAY", default_value_t = DEFAULT_MAX_REPLAY as u64)]
    pub max_replay: u64,

    /// Heartbeat interval of idle Subscribe streams.
    #[arg(long, env = "AGENT_HARNESS_HEARTBEAT", default_value = duration_default!(DEFAULT_HEARTBEAT), value_parser = parse_duration)]
    pub heartbeat: Duration,

    /// Live typing: each stream sends deltas at most this often, what was
    /// typed meanwhile coalesced into one delta per block (a stream never
    /// wakes per fragment). 0 = every change as it comes. Before an event a
    /// stream always sends what precedes it first, whatever the interval.
    #[arg(long, env = "AGENT_HARNESS_DELTA_INTERVAL", default_value = duration_default!(DEFAULT_DELTA_INTERVAL), value_parser = parse_duration)]
    pub delta_interval: Duration,

    /// Most events in one group commit; bounds a transaction's size.
    #[arg(skip = DEFAULT_MAX_BATCH)]
    pub max_batch: usize,

    /// Most events (and meta changes) waiting for the writer; further
    /// commits wait for room.
    #[arg(skip = DEFAULT_MAX_QUEUED)]
    pub max_queued: usize,

    /// Largest event streamed whole, in bytes of its protobuf encoding. A
    /// larger one (a long answer, a Read of a big file) is stored whole but
    /// streamed cut down and marked `truncated`; ReadFullEvent returns the
    /// whole. At most 4177920 (4 MiB less room for the message around it),
    /// at least 16384.
    #[arg(long, env = "AGENT_HARNESS_MAX_EVENT_BYTES", default_value_t = cut::DEFAULT_MAX_EVENT_BYTES)]
    pub max_event_bytes: usize,

    /// On a store other processes write too: how often the sessions in
    /// memory are re-checked against the store even without a commit
    /// notice (the fallback for notices lost). Unused with the embedded
    /// store, which only this process writes.
    #[arg(long, env = "AGENT_HARNESS_TAIL_POLL", default_value = duration_default!(DEFAULT_TAIL_POLL), value_parser = parse_duration)]
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
            max_batch: DEFAULT_MAX_BATCH,
            max_queued: DEFAULT_MAX_QUEUED,
            max_event_bytes: cut::DEFAULT_MAX_EVENT_BYTES,
            tail_poll: DEFAULT_TAIL_POLL,
        }
    }
}
