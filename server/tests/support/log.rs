//! Helpers shared by the event-log tests (`store_contract.rs`, `log_*.rs`).
#![allow(dead_code)]

use agent_harness_client::pb;
use agent_harness_server::log::NewEvent;

/// A small, distinct payload per `n`, so a mixed-up event is visible.
pub fn payload(n: u64) -> pb::event::Payload {
    pb::event::Payload::InputSent(pb::InputSent {
        text: format!("input #{n}"),
        source: 2,
        ..Default::default()
    })
}

/// A `NewEvent` with payload `n`.
pub fn new_event(n: u64) -> NewEvent {
    NewEvent {
        run_id: format!("run-{}", n % 3),
        payload: payload(n),
        cli_line: format!("{{\"n\":{n}}}"),
    }
}

/// A fully formed stored event (what the log would build), for store tests.
pub fn event(session_id: &str, seq: u64) -> pb::Event {
    pb::Event {
        seq,
        session_id: session_id.to_owned(),
        run_id: format!("run-{}", seq % 3),
        time: Some(agent_harness_client::pbjson_types::Timestamp {
            seconds: 1_700_000_000 + seq as i64,
            nanos: (seq % 1000) as i32,
        }),
        cli_line: format!("{{\"seq\":{seq}}}"),
        truncated: None,
        payload: Some(payload(seq)),
    }
}

/// The seqs of a slice of events.
pub fn seqs(events: &[pb::Event]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}
