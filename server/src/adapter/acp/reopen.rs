//! When a session may be loaded again: Gemini CLI names its record of a
//! session by the minute (UTC) a process created or loaded it, and a load
//! in the same minute as the last one writes a fresh record over the very
//! file it is about to read, losing the conversation. A respawn soon after
//! a crash, a kill of the agent or a server restart would hit that; the
//! load is held back to the next minute instead. The last opening is the
//! time of the session's latest run_ready (`SpawnConfig::opened_at`), which
//! the log keeps across restarts: it comes after the agent's answer, so
//! after its record was started. However early its minute comes, the
//! load still waits for the agent's answer to `initialize`.

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

/// How long a load at `now` must wait to land in a later minute than the
/// session's last opening at `opened` (zero when it already does).
pub fn wait_before_load(opened: SystemTime, now: SystemTime) -> Duration {
    if minute(opened) < minute(now) {
        return Duration::ZERO;
    }
    let next = (minute(opened) + 1) as f64 * 60.0;
    Duration::from_secs_f64((next - seconds(now)).max(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_in_the_minute_of_the_last_opening_waits_for_the_next_minute() {
        let t = UNIX_EPOCH + Duration::from_secs(60 * 1000 + 50);
        assert_eq!(wait_before_load(t, t), Duration::from_secs(10));
        let later = t + Duration::from_secs(4);
        assert_eq!(wait_before_load(t, later), Duration::from_secs(6));
        assert_eq!(
            wait_before_load(t, t + Duration::from_secs(10)),
            Duration::ZERO
        );
        assert_eq!(
            wait_before_load(t, t + Duration::from_secs(3600)),
            Duration::ZERO
        );
        // A clock that went back: still the next minute after the opening.
        assert_eq!(
            wait_before_load(t, t - Duration::from_secs(5)),
            Duration::from_secs(15)
        );
    }
}
