//! JetStream's replay of a long stream: the peer of our replay row (one
//! Subscribe from seq 0 to `caught_up`, cold then warm).
//!
//! The driver writes `events` messages of `payload` bytes into a fresh
//! file-storage stream (`nats-load replay-write`: one subject, async
//! publishes with acks); the server is then restarted (SIGTERM, so
//! JetStream closes its files as an operator's restart would) and the OS
//! page cache dropped while it is down, as our cold replay restarts our
//! server and drops it ([`crate::os::drop_page_cache`]); then the driver
//! reads the whole stream back with an ordered consumer (`nats-load
//! replay-read`, the client's default pull settings), cold, and again
//! (warm, on the same server). Each read checks every message is the next
//! one, whole: a message lost, repeated or out of order fails the run.
//!
//! Writing is not timed, and reads do not sync, so the sync policy of the
//! server does not change the figures: the load tool writes on a server
//! with JetStream's default sync (durable publishes run at ~500/s here,
//! half an hour for a million).

use serde::Deserialize;

use super::Nats;
use crate::peers::Replay;
use crate::stats::Rate;

#[derive(Deserialize)]
struct ReplayOut {
    measure: String,
    events: u64,
    secs: f64,
}

impl Nats {
    /// Writes `events` messages of `payload` bytes, restarts the server
    /// (dropping the page cache while it is down when `drop_cache`), and
    /// reads them back with an ordered consumer, cold then warm.
    pub fn replay(&mut self, events: u64, payload: usize, drop_cache: bool) -> Replay {
        let args = [
            ("-events", events.to_string()),
            ("-payload", payload.to_string()),
        ];
        let wrote = self.replay_step("replay-write", &args);
        assert_eq!(
            wrote.events, events,
            "nats-load wrote {} of {events}",
            wrote.events
        );
        let mut dropped = false;
        self.restart(|| dropped = drop_cache && crate::os::drop_page_cache());
        let cold = self.replay_step("replay-read", &args);
        let warm = self.replay_step("replay-read", &args);
        Replay {
            cold: Rate {
                events: cold.events,
                secs: cold.secs,
            },
            warm: Rate {
                events: warm.events,
                secs: warm.secs,
            },
            cold_dropped_os_cache: dropped,
        }
    }

    fn replay_step(&self, measure: &str, args: &[(&str, String)]) -> ReplayOut {
        let out: ReplayOut = self.run(measure, args);
        assert_eq!(
            out.measure, measure,
            "nats-load answered another measurement"
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::SyncPolicy;
    use super::*;

    /// The replay row, small, against a real server: every message read
    /// back twice, across a restart. Needs `./tests/setup.sh`.
    #[test]
    fn replay_reads_every_message_across_a_restart() {
        let mut nats = Nats::start_in(&std::env::temp_dir(), SyncPolicy::Default);
        let before = nats.pid();
        let r = nats.replay(2_000, 300, false);
        assert_ne!(nats.pid(), before, "the server was not restarted");
        assert!(!r.cold_dropped_os_cache);
        for rate in [r.cold, r.warm] {
            assert_eq!(rate.events, 2_000, "{r:?}");
            assert!(rate.secs > 0.0, "{r:?}");
        }
        let pid = nats.pid();
        drop(nats);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "the restarted nats-server outlived Nats"
        );
    }

    /// A read that does not find every message it was told to expect fails
    /// the run instead of reporting a rate.
    #[test]
    #[should_panic(expected = "replay-read failed")]
    fn replay_read_short_of_the_count_fails() {
        let nats = Nats::start_in(&std::env::temp_dir(), SyncPolicy::Default);
        let args = |n: u64| [("-events", n.to_string()), ("-payload", "100".into())];
        nats.replay_step("replay-write", &args(50));
        nats.replay_step("replay-read", &args(51));
    }
}
