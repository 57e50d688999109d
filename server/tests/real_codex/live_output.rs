//! A command's output typed live while it runs: Codex's
//! `item/commandExecution/outputDelta` as tool-output deltas under the
//! command's tool_use id, superseded by its `result`.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;

use super::Harness;
use crate::support::cli_grpc::Events;

/// A command that prints a line at a time: a subscriber with live typing
/// on gets its output as tool-output deltas for its tool_use id, each
/// before the tool's `result`; the result holds every line. Codex streams
/// only what a command prints after its first moments (`line1`, printed at
/// once, comes only in the result; cassettes/codex/README.md), so the
/// deltas join to the end of the result's text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_commands_output_is_typed_live_until_its_result() {
    let mut h = Harness::new().await;
    let ev = Events::open_with(h.client().await, "c-out", true).await;
    h.start(
        "c-out",
        "BASH for i in 1 2 3; do echo line$i; sleep 0.3; done",
    )
    .await;
    let (_, asked) = ev.permission_requested_after(0).await;
    h.respond("c-out", &asked.request_id, true).await;
    let first = ev
        .wait_deltas("a tool-output delta", |ds| {
            ds.iter()
                .find(|(_, d)| d.block_type == pb::DeltaBlockType::ToolOutput as i32)
                .map(|(_, d)| d.clone())
        })
        .await;
    let (_, end) = ev.turn_end_after(0).await;
    assert!(!end.is_error, "{end:?}");

    let events = ev.snapshot();
    let tool_use_id = events
        .iter()
        .find_map(|e| match &e.payload {
            Some(Payload::Content(c)) => c
                .blocks
                .iter()
                .find(|b| b.r#type == "tool_use" && b.tool_name == "Bash")
                .map(|b| b.tool_use_id.clone()),
            _ => None,
        })
        .expect("the command's tool_use");
    assert_eq!(first.tool_use_id, tool_use_id, "{first:?}");
    assert_eq!(first.message_id, tool_use_id, "keyed by its tool_use id");
    assert_eq!(first.tool_name, "Bash");
    let (result_at, result) = events
        .iter()
        .enumerate()
        .find_map(|(i, e)| match &e.payload {
            Some(Payload::Result(r)) => r
                .tool_results
                .iter()
                .find(|t| t.tool_use_id == tool_use_id)
                .map(|t| (i, t.clone())),
            _ => None,
        })
        .expect("the command's result");
    assert!(!result.is_error, "{result:?}");
    for line in ["line1", "line2", "line3"] {
        assert!(result.text.contains(line), "{result:?}");
    }
    let outputs: Vec<(usize, pb::Delta)> = ev
        .deltas()
        .into_iter()
        .filter(|(_, d)| d.block_type == pb::DeltaBlockType::ToolOutput as i32)
        .collect();
    assert!(
        outputs
            .iter()
            .all(|(before, d)| d.tool_use_id == tool_use_id && *before <= result_at),
        "every tool-output delta of that tool came before its result (event {result_at}): {outputs:?}"
    );
    let typed: String = outputs.iter().map(|(_, d)| d.fragment.as_str()).collect();
    assert!(
        typed.contains("line3") && result.text.ends_with(&typed),
        "the live output is the end of the result's: {typed:?} / {result:?}"
    );
    h.shutdown().await;
    h.assert_stored_runs_end_once("c-out");
}
