//! RewindFiles and fork against the REAL claude CLI and the
//! scripted Messages API: a rewind restores a file the agent wrote (the
//! CLI's own file checkpoints, keyed by the uuid the server gives each user
//! message), and a fork at an earlier seq continues from that point while
//! the source goes on independently.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli rewind_fork::`.

use crate::support::cli_grpc;

use agent_harness_fake_api::FakeApi;
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::claude::PermissionMode;
use cli_grpc::{Events, Harness, Setup};
use tonic::Code;

/// The seq of the input_sent whose text is `text`.
async fn input_seq(ev: &Events, text: &str) -> (u64, String) {
    let (e, uuid) = ev
        .payload_after("input_sent", 0, |p| match p {
            Payload::InputSent(i) if i.text == text => Some(i.message_uuid.clone()),
            _ => None,
        })
        .await;
    (e.seq, uuid)
}

/// The Messages API calls of a conversation mentioning `needle`, as text.
/// At least one.
fn conversations_with(api: &FakeApi, needle: &str) -> Vec<String> {
    let found: Vec<String> = api
        .message_requests()
        .into_iter()
        .filter(|r| r.is_messages())
        .filter_map(|r| r.body.map(|b| b["messages"].to_string()))
        .filter(|m| m.contains(needle))
        .collect();
    assert!(
        !found.is_empty(),
        "no Messages API call mentions {needle:?}"
    );
    found
}

/// Two turns write a.txt; RewindFiles to the second turn's message lists
/// a.txt on a dry run (changing nothing, recording nothing), then restores
/// the first turn's content and records `files_rewound`. Asking for a seq
/// that is not a user message is INVALID_ARGUMENT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_files_restores_a_file_the_agent_wrote() {
    let setup = Setup {
        permissions: PermissionMode::Skip,
        strip_env: vec!["IS_SANDBOX".into()],
        ..Setup::default()
    };
    let (h, ev, _) = Harness::started(setup, "rw", "WRITE a.txt first").await;
    let file = h.work.path().join("a.txt");
    let (one, _) = ev.turn_end_after(0).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "first\n");
    h.send("rw", "WRITE a.txt second").await;
    let (two, _) = ev.turn_end_after(one.seq).await;
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "second\n");
    let (to_seq, uuid) = input_seq(&ev, "WRITE a.txt second").await;
    assert_eq!(
        uuid.len(),
        36,
        "the server's uuid for the message: {uuid:?}"
    );

    let mut c = h.client();
    let rewind = |to_seq: u64, dry_run: bool, key: &str| pb::RewindFilesRequest {
        session_id: "rw".into(),
        to_seq,
        dry_run,
        idempotency_key: key.into(),
    };
    let dry = c
        .rewind_files(rewind(to_seq, true, ""))
        .await
        .expect("RewindFiles dry run")
        .into_inner();
    assert_eq!(dry.seq, 0, "a dry run records nothing");
    assert!(
        dry.files_changed.iter().any(|f| f.ends_with("/a.txt")),
        "{dry:?}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "second\n");

    let done = c
        .rewind_files(rewind(to_seq, false, "rw-1"))
        .await
        .expect("RewindFiles")
        .into_inner();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "first\n");
    assert!(done.seq > two.seq, "{done:?}");
    assert_eq!(done.files_changed, dry.files_changed);
    let (e, rewound) = ev
        .payload_after("files_rewound", two.seq, |p| match p {
            Payload::FilesRewound(f) => Some(f.clone()),
            _ => None,
        })
        .await;
    assert_eq!(e.seq, done.seq);
    assert_eq!(
        (rewound.to_seq, rewound.message_uuid.as_str()),
        (to_seq, uuid.as_str())
    );
    // A keyed repeat answers the same and rewinds nothing again.
    std::fs::write(&file, "edited by hand\n").unwrap();
    let again = c
        .rewind_files(rewind(to_seq, false, "rw-1"))
        .await
        .expect("RewindFiles repeated")
        .into_inner();
    assert_eq!(again, done);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "edited by hand\n");

    for bad in [one.seq, 10_000] {
        let err = c.rewind_files(rewind(bad, true, "")).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains("to_seq"), "{err:?}");
    }
    h.finish("rw", &ev).await;
}

/// A fork at the source's first answer continues from there: its model
/// sees "alpha" but not the source's later "beta", its conversation is its
/// own, and the source goes on as if nothing happened. The fork's
/// run_start records where it came from; a respawn of the fork continues
/// the fork.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fork_at_an_earlier_seq_continues_from_there_and_the_source_goes_on() {
    let mut setup = Setup::default();
    setup.manager.idle_timeout = std::time::Duration::from_secs(2);
    let (h, src, _) = Harness::started(setup, "src", "TEXT alpha").await;
    let (one, _) = src.turn_end_after(0).await;
    let (alpha, _) = src
        .payload_after("alpha's content", 0, |p| match p {
            Payload::Content(c) if c.blocks.iter().any(|b| b.text == "alpha") => Some(()),
            _ => None,
        })
        .await;
    h.send("src", "TEXT beta").await;
    src.turn_end_after(one.seq).await;
    let src_resume = h.get("src").await.resume_id;

    // Errors first: nothing is created by a refused fork.
    let fork_config = |at_seq: u64, prompt: &str| {
        let mut c = h.config(prompt);
        c.cwd = String::new(); // the fork runs where its source ran
        c.fork = Some(pb::Fork {
            from_session_id: "src".into(),
            at_seq,
            message_uuid: String::new(),
        });
        c
    };
    for (session, config, code) in [
        (
            "f-bad",
            fork_config(one.seq, "TEXT x"),
            Code::InvalidArgument,
        ),
        (
            "f-bad",
            fork_config(99_999, "TEXT x"),
            Code::InvalidArgument,
        ),
        (
            "src",
            fork_config(alpha.seq, "TEXT x"),
            Code::InvalidArgument,
        ),
    ] {
        let err = h.try_start(session, config).await.unwrap_err();
        assert_eq!(err.code(), code, "{err:?}");
        assert!(err.message().contains("fork"), "{err:?}");
    }

    let fork = h.subscribe("fork").await;
    h.try_start("fork", fork_config(alpha.seq, "TEXT gamma"))
        .await
        .expect("Start the fork");
    let (rs_ev, rs) = fork
        .payload_after("run_start", 0, |p| match p {
            Payload::RunStart(rs) => Some(rs.clone()),
            _ => None,
        })
        .await;
    let config = rs.config.unwrap_or_default();
    let f = config.fork.expect("the run_start records the fork");
    assert_eq!((f.from_session_id.as_str(), f.at_seq), ("src", alpha.seq));
    assert_eq!(f.message_uuid.len(), 36, "{f:?}");
    assert_eq!(config.resume, src_resume);
    assert_eq!(config.cwd, h.work.path().display().to_string());
    let (_, ready) = fork.run_ready_after(rs_ev.seq).await;
    assert_ne!(ready.resume_id, src_resume, "the fork's own conversation");
    fork.turn_end_after(rs_ev.seq).await;
    let seen = conversations_with(h.api(), "TEXT gamma");
    assert!(
        seen.iter()
            .all(|m| m.contains("alpha") && !m.contains("TEXT beta")),
        "the fork sees alpha and not beta: {seen:?}"
    );

    // The source goes on, knowing nothing of the fork.
    let (two, _) = src.turn_end_after(one.seq).await;
    h.send("src", "TEXT delta").await;
    src.turn_end_after(two.seq).await;
    let seen = conversations_with(h.api(), "TEXT delta");
    assert!(
        seen.iter()
            .all(|m| m.contains("TEXT beta") && !m.contains("gamma")),
        "{seen:?}"
    );
    assert_eq!(h.get("src").await.resume_id, src_resume);

    // After its idle timeout the fork respawns into its own conversation.
    let fork_resume = h.get("fork").await.resume_id;
    let (end, _) = fork.run_end_after(rs_ev.seq).await;
    h.send("fork", "TEXT epsilon").await;
    let (_, rs2) = fork
        .payload_after("the respawn's run_start", end.seq, |p| match p {
            Payload::RunStart(rs) => Some(rs.clone()),
            _ => None,
        })
        .await;
    let config = rs2.config.unwrap_or_default();
    assert!(config.fork.is_none(), "a respawn is not a fork again");
    assert_eq!(config.resume, fork_resume);
    fork.turn_end_after(end.seq).await;
    let seen = conversations_with(h.api(), "TEXT epsilon");
    assert!(
        seen.iter()
            .all(|m| m.contains("gamma") && m.contains("alpha") && !m.contains("TEXT beta")),
        "{seen:?}"
    );
    drop(src);
    h.finish("fork", &fork).await;
}

/// After the idle timeout there is no process to ask: RewindFiles spawns
/// one resuming the conversation, with no prompt (`run_start{trigger:
/// "control"}`, no turn), and the resumed CLI rewinds from the checkpoints
/// in its transcript.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rewind_files_after_the_idle_timeout_resumes_the_conversation_to_rewind() {
    let mut setup = Setup {
        permissions: PermissionMode::Skip,
        strip_env: vec!["IS_SANDBOX".into()],
        ..Setup::default()
    };
    // Long enough that the run spawned for the control requests is not
    // ended by its idle clock between them on a loaded machine (the
    // dry run's answer, then the rewind itself), short enough to wait for.
    setup.manager.idle_timeout = std::time::Duration::from_secs(5);
    let (h, ev, _) = Harness::started(setup, "idle-rw", "WRITE b.txt first").await;
    let file = h.work.path().join("b.txt");
    let (one, _) = ev.turn_end_after(0).await;
    h.send("idle-rw", "WRITE b.txt second").await;
    let (two, _) = ev.turn_end_after(one.seq).await;
    let (end, run_end) = ev.run_end_after(two.seq).await;
    assert_eq!(run_end.reason(), pb::RunEndReason::IdleTimeout);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "second\n");
    let (to_seq, _) = input_seq(&ev, "WRITE b.txt second").await;

    let done = h
        .client()
        .rewind_files(pb::RewindFilesRequest {
            session_id: "idle-rw".into(),
            to_seq,
            dry_run: false,
            idempotency_key: String::new(),
        })
        .await
        .expect("RewindFiles with no live process")
        .into_inner();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "first\n");
    assert!(
        done.files_changed.iter().any(|f| f.ends_with("/b.txt")),
        "{done:?}"
    );
    let (start, rs) = ev
        .payload_after("the resumed run", end.seq, |p| match p {
            Payload::RunStart(rs) => Some(rs.clone()),
            _ => None,
        })
        .await;
    assert_eq!(rs.trigger, "control");
    let config = rs.config.unwrap_or_default();
    assert!(
        config.prompt.is_empty() && !config.resume.is_empty(),
        "{config:?}"
    );
    let (rewound, _) = ev
        .payload_after("files_rewound", start.seq, |p| match p {
            Payload::FilesRewound(f) => Some(f.clone()),
            _ => None,
        })
        .await;
    assert_eq!(rewound.seq, done.seq);
    let since = ev.since(start.seq);
    assert!(
        !since
            .iter()
            .any(|e| matches!(e.payload, Some(Payload::InputSent(_) | Payload::TurnEnd(_)))),
        "no turn: {since:?}"
    );
    // The resumed process idles out like any other.
    ev.run_end_after(done.seq).await;
    h.finish("idle-rw", &ev).await;
}
