//! A client's strings never become words of the CLI's command line, against
//! the REAL claude CLI and the scripted Messages API:
//! - the one-shot adapter (`--adapter cli`) writes the prompt to stdin, so a
//!   prompt naming a subcommand (`mcp`) is a prompt, even when another
//!   argument starts with `cc://` (which makes CLI 2.1.197 parse its
//!   subcommands: `-- mcp` ran `claude mcp`);
//! - the word `mcp` anywhere in the argv made CLI 2.1.197 skip its input
//!   (the session failed on every respawn): each value is joined to its
//!   flag (`--system-prompt=mcp`), and a model named like a subcommand or
//!   a URL is refused before it can reach a spawn.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli argv_words::`.

use crate::support::cli_grpc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use cli_grpc::{AdapterChoice, Events, Harness, Setup};
use tonic::Code;

/// Whether some Messages API call carried `needle` in its body.
fn api_saw(h: &Harness, needle: &str) -> bool {
    h.api().message_requests().iter().any(|r| {
        r.is_messages()
            && r.body
                .as_ref()
                .is_some_and(|b| b.to_string().contains(needle))
    })
}

/// The turn after `after` ended as a turn (not as a failed process).
async fn a_turn_ends(ev: &Events, after: u64) -> u64 {
    let end = ev.turn_or_run_end_after(after).await;
    match &end.payload {
        Some(Payload::TurnEnd(t)) => assert!(!t.is_error, "{t:?}"),
        other => panic!(
            "the process ended without a turn: {other:?}\n{}",
            cli_grpc::describe_all(&ev.snapshot())
        ),
    }
    end.seq
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_one_shot_prompt_naming_a_subcommand_is_a_prompt() {
    let setup = Setup {
        adapter: AdapterChoice::OneShot,
        ..Setup::default()
    };
    let h = Harness::with(setup).await;
    let ev = h.subscribe("one-shot").await;
    let mut config = h.config("mcp");
    // Allowed by default; as a word of its own it made the CLI register
    // its subcommands.
    config.args = vec!["--system-prompt".into(), "cc://x".into()];
    h.try_start("one-shot", config).await.expect("Start");
    a_turn_ends(&ev, 0).await;
    assert!(api_saw(&h, "cc://x"), "the system prompt reached the API");
    let recorded = cli_grpc::run_starts(&ev.snapshot())[0].1.clone();
    assert_eq!(
        recorded.config.expect("config").args,
        ["--system-prompt", "cc://x"],
        "the log keeps the args as the client gave them"
    );

    // The old way in: a model the CLI reads as a URL.
    let mut config = h.config("mcp");
    config.model = "cc://x".into();
    let err = h.try_start("url-model", config).await.unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("config.model"), "{err:?}");
    h.finish("one-shot", &ev).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_word_mcp_in_args_does_not_wedge_a_session() {
    let mut setup = Setup::default();
    // The idle process ends, so the next Send respawns.
    setup.manager.idle_timeout = std::time::Duration::from_secs(2);
    let h = Harness::with(setup).await;
    let ev = h.subscribe("wedge").await;
    let mut config = h.config("TEXT first answer");
    config.args = vec![
        "--system-prompt".into(),
        "mcp".into(),
        "--disallowedTools".into(),
        "mcp".into(),
        "update".into(),
    ];
    h.try_start("wedge", config).await.expect("Start");
    let first = a_turn_ends(&ev, 0).await;
    assert!(api_saw(&h, "first answer"));

    // SetModel of a subcommand's name is refused: it would reach every
    // later spawn.
    let err = h
        .client()
        .set_model(pb::SetModelRequest {
            session_id: "wedge".into(),
            model: "mcp".into(),
            idempotency_key: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    assert!(err.message().contains("model"), "{err:?}");

    // A respawn (same args, recorded) works too.
    let (ended, _) = ev.run_end_after(first).await;
    h.send("wedge", "TEXT second answer").await;
    a_turn_ends(&ev, ended.seq).await;
    assert!(api_saw(&h, "second answer"));
    h.finish("wedge", &ev).await;
}
