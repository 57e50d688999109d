//! When each session's record was last started by an agent process, so a
//! `session/load` never lands in the same minute: Gemini CLI names its
//! record of a session by the minute (UTC) a process created or loaded it,
//! and a load in the same minute as the last one writes a fresh record over
//! the very file it is about to read, losing the conversation. A respawn
//! soon after a crash or a kill of the agent would hit that; the load is
//! held back to the next minute instead. The clock lives as long as the
//! server: after a restart it knows no session (docs/agents.md).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Seconds since the epoch, with fractions.
fn seconds(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

fn minute(t: SystemTime) -> u64 {
    (seconds(t) / 60.0) as u64
}

/// Session id → when an agent process last created or loaded it.
#[derive(Debug, Default)]
pub struct SessionRecords {
    started: Mutex<HashMap<String, SystemTime>>,
}

impl SessionRecords {
    /// Session `id` was created or loaded at `at` (when the agent's answer
    /// came: its record was started at or before then).
    pub fn started(&self, id: &str, at: SystemTime) {
        let mut map = self.started.lock().unwrap_or_else(|e| e.into_inner());
        // Only the current minute's entries can hold a load back.
        map.retain(|_, t| minute(*t) >= minute(at));
        map.insert(id.to_owned(), at);
    }

    /// How long a load of session `id` at `now` must wait to land in a
    /// later minute than its last start (zero when it already does).
    pub fn wait_before_load(&self, id: &str, now: SystemTime) -> Duration {
        let map = self.started.lock().unwrap_or_else(|e| e.into_inner());
        match map.get(id) {
            Some(t) if minute(*t) >= minute(now) => {
                let next = (minute(*t) + 1) as f64 * 60.0;
                Duration::from_secs_f64((next - seconds(now)).max(0.0))
            }
            _ => Duration::ZERO,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_in_the_minute_of_the_last_start_waits_for_the_next_minute() {
        let r = SessionRecords::default();
        let t = UNIX_EPOCH + Duration::from_secs(60 * 1000 + 50);
        assert_eq!(r.wait_before_load("s", t), Duration::ZERO, "never started");
        r.started("s", t);
        assert_eq!(r.wait_before_load("s", t), Duration::from_secs(10));
        let later = t + Duration::from_secs(4);
        assert_eq!(r.wait_before_load("s", later), Duration::from_secs(6));
        assert_eq!(
            r.wait_before_load("s", t + Duration::from_secs(10)),
            Duration::ZERO
        );
        assert_eq!(r.wait_before_load("other", t), Duration::ZERO);
        // Old entries go when a later minute's start comes.
        r.started("x", t + Duration::from_secs(70));
        assert_eq!(r.started.lock().unwrap().len(), 1);
    }
}
