//! Helpers shared by the event-log tests (`store_contract.rs`, `log_*.rs`).
#![allow(dead_code)]

use agent_harness_protocol::pb;
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
        time: Some(agent_harness_protocol::pbjson_types::Timestamp {
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

/// `{"k": {"k": … {}}}`, `depth` Structs deep, built without recursion.
pub fn deep_struct(depth: usize) -> agent_harness_protocol::pbjson_types::Struct {
    use agent_harness_protocol::pbjson_types::{Struct, Value, value::Kind};
    let mut s = Struct::default();
    for _ in 1..depth {
        let inner = Value {
            kind: Some(Kind::StructValue(s)),
        };
        s = Struct {
            fields: [("k".to_owned(), inner)].into(),
        };
    }
    s
}

/// The CLI line [`poisoned_event`] carries.
pub const POISON_LINE: &str = r#"{"type":"assistant","message":{"content":[]}}"#;

/// The row a server wrote before JSON nesting was bounded: a content event
/// whose tool input nests 40 Structs deep (about 120 nested messages). It
/// encodes, and no protobuf decoder reads it back.
pub fn poisoned_event(session_id: &str, seq: u64, run_id: &str) -> pb::Event {
    pb::Event {
        seq,
        session_id: session_id.into(),
        run_id: run_id.into(),
        cli_line: POISON_LINE.into(),
        time: Some(agent_harness_protocol::pbjson_types::Timestamp {
            seconds: 1_800_000_000,
            nanos: 0,
        }),
        payload: Some(pb::event::Payload::Content(pb::Content {
            message_id: "msg_deep".into(),
            blocks: vec![pb::ContentBlock {
                r#type: "tool_use".into(),
                tool_use_id: "toolu_deep".into(),
                tool_name: "Deep".into(),
                input: Some(deep_struct(40)),
                ..Default::default()
            }],
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// Appends a [`poisoned_event`] after the last event of `session_id`
/// (same run), straight into `store` as the old server's writer did;
/// returns its seq and stored bytes.
pub fn poison(store: &dyn agent_harness_server::store::Store, session_id: &str) -> (u64, Vec<u8>) {
    use prost::Message;
    let events = store.read_range(session_id, 0, usize::MAX).unwrap();
    let last = events.last().expect("the session has events");
    let ev = poisoned_event(session_id, last.seq + 1, &last.run_id);
    let bytes = ev.encode_to_vec();
    assert!(
        pb::Event::decode(bytes.as_slice()).is_err(),
        "the row must be past the decoder's limit"
    );
    store.append_batch(&[ev], &[]).unwrap();
    (last.seq + 1, bytes)
}
