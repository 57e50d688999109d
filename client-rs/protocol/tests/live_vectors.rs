//! Live activity conformance cases: `tests/vectors/live/activity.json` (a
//! derived activity, a Subscribe stream folded into the partial message,
//! and the activity expected; format in `tests/vectors/README.md`). Each
//! case is checked with [`live_activity`], every mismatch reported.

use std::path::Path;

use agent_harness_protocol::derive::{Activity, ActivityKind};
use agent_harness_protocol::live::live_activity;
use agent_harness_protocol::partial::Partial;
use agent_harness_protocol::pb::SubscribeResponse;
use serde_json::{Value, json};

/// Fewer cases than this means the file went missing or was cut.
const MIN_CASES: usize = 10;

fn kind(name: &str) -> ActivityKind {
    match name {
        "idle" => ActivityKind::Idle,
        "starting" => ActivityKind::Starting,
        "thinking" => ActivityKind::Thinking,
        "writing" => ActivityKind::Writing,
        "running_tool" => ActivityKind::RunningTool,
        "waiting_for_permission" => ActivityKind::WaitingForPermission,
        "stopping" => ActivityKind::Stopping,
        other => panic!("unknown activity kind {other}"),
    }
}

#[test]
fn live_activity_vectors() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/live/activity.json");
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let cases = doc["cases"].as_array().expect("cases");
    assert!(
        cases.len() >= MIN_CASES,
        "{} cases in {path:?}",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let derived = Activity::of(
            kind(case["derived"]["kind"].as_str().unwrap()),
            case["derived"]["toolName"].as_str().map(str::to_owned),
        );
        let mut partial = Partial::new();
        for step in case["steps"].as_array().unwrap() {
            let res: SubscribeResponse = serde_json::from_value(step.clone())
                .unwrap_or_else(|e| panic!("{name}: step {step}: {e}"));
            partial.apply(res.kind.as_ref().expect("a kind"));
        }
        let got = live_activity(&derived, &partial);
        let got = json!({"kind": got.kind.as_str(), "toolName": got.tool_name, "label": got.label});
        if got != case["expect"] {
            failures.push(format!("{name}: got {got}, want {}", case["expect"]));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
