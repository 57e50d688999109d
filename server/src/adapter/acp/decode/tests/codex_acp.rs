//! The decoder on codex-acp's transcripts (`cassettes/codex-acp`, see its
//! README) where codex-acp behaves unlike Gemini CLI.

use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::vocab::run_error_kind;
use serde_json::Value;

use super::{decoder, feed_lines, kinds, transcript_of, turn_ends};

fn session_id(name: &str) -> String {
    transcript_of("codex-acp", name)
        .into_iter()
        .filter(|(out, _)| *out)
        .find_map(|(_, l)| {
            let v: Value = serde_json::from_str(&l).ok()?;
            v.pointer("/result/sessionId")?.as_str().map(str::to_owned)
        })
        .expect("a session id")
}

/// A lost conversation codex-acp loads anyway: its first prompt's error
/// is the resume failure, so the manager starts a new conversation.
#[test]
fn a_first_prompt_failing_after_a_load_is_resume_failed() {
    let resume = session_id("lost_rollout");
    let mut d = decoder(&resume);
    let (p, _) = feed_lines(&mut d, &transcript_of("codex-acp", "lost_rollout.2"));
    assert_eq!(kinds(&p), ["run_ready", "run_error", "turn_end"]);
    let Payload::RunError(e) = &p[1] else {
        unreachable!()
    };
    assert_eq!(e.kind, run_error_kind::RESUME_FAILED);
    assert_eq!(e.resume_id, resume);
    assert!(e.message.contains("thread not found"), "{}", e.message);
    assert!(turn_ends(&p)[0].is_error);
}

/// The same error on a later prompt, or on a new session's, is the turn's
/// alone.
#[test]
fn only_the_first_prompt_after_a_load_can_fail_the_resume() {
    let mut d = decoder("");
    let mut lines = transcript_of("codex-acp", "lost_rollout.2");
    // As a new session: the load's answer stands for session/new's.
    lines.retain(|(out, l)| *out || !l.contains("session/load"));
    let (p, _) = feed_lines(&mut d, &lines);
    assert!(!kinds(&p).contains(&"run_error"), "{:?}", kinds(&p));
    assert!(turn_ends(&p)[0].is_error);
}

/// codex-acp's only reject option ends the whole turn `cancelled`: with no
/// Stop sent, the user only refused the tool, and the turn ends as an
/// ordinary one (the tool's result says it failed).
#[test]
fn a_turn_cancelled_by_the_agent_after_a_refusal_is_no_interruption() {
    let mut d = decoder("");
    let (p, _) = feed_lines(&mut d, &transcript_of("codex-acp", "permission_reject"));
    let ends = turn_ends(&p);
    assert_eq!(ends.len(), 2);
    assert_eq!(ends[0].terminal_reason, "cancelled");
    assert_eq!(ends[0].subtype, "success");
    assert!(!ends[0].is_error);
    assert!(ends[0].usage.is_some());
    assert!(!kinds(&p).contains(&"permission_resolved"));
    let failed = p.iter().any(|p| match p {
        Payload::Result(r) => r.is_error,
        _ => false,
    });
    assert!(failed, "the refused tool's result is an error");
}

/// A Stop (our `session/cancel` copied) is an interruption, even with a
/// permission asked in the turn.
#[test]
fn a_stop_with_a_permission_pending_stays_an_interruption() {
    let mut d = decoder("");
    let (p, _) = feed_lines(
        &mut d,
        &transcript_of("codex-acp", "cancel_pending_permission"),
    );
    let ends = turn_ends(&p);
    assert_eq!(ends[0].subtype, "interrupted");
    assert!(ends[0].is_error);
}
