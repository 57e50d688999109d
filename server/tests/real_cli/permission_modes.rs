//! The two non-default permission modes (`--permissions settings` and
//! `--permissions skip`), end to end against the REAL claude CLI (2.1.197):
//! the generated client talks gRPC to the server in-process (real redb file
//! in a tempdir), the server runs the CLI, and the CLI talks to the scripted
//! fake Messages API on loopback (zero tokens). The fixture is
//! `real_cli_grpc_support`; see tests/fake-api/README.md for the directives
//! (`WRITE path text`, `WRITEBASH`).
//!
//! What the real CLI does, measured here:
//! - skip: `--dangerously-skip-permissions` runs Write and Bash unasked
//!   (init reports `permissionMode: bypassPermissions`). As root the CLI
//!   refuses the flag ("cannot be used with root/sudo privileges") unless
//!   `IS_SANDBOX=1` is set, which the adapter adds.
//! - settings, no rule: nothing is relayed and nothing asks; a Write is
//!   denied by the CLI itself with an error tool_result ("Claude requested
//!   permissions to write to PATH, but you haven't granted it yet.") and
//!   the turn goes on. The result line lists the denied Write in
//!   `permission_denials` (so the turn_end does too), and likewise a Bash
//!   `touch` it blocks.
//! - settings + the user settings (`settings.json` of the CLI's
//!   configuration directory, `CLAUDE_CONFIG_DIR`) `{"permissions":{"allow":
//!   ["Write"]}}`: the Write runs unasked.
//! - settings + project settings let in (`--allow-project-settings`) + the
//!   cwd's `.claude/settings.json`: ignored (with a stderr warning) until
//!   the workspace is trusted, i.e. the configuration directory's
//!   `.claude.json` has `projects[CWD].hasTrustDialogAccepted: true`; then
//!   it is honoured.
//!
//! Every wait is bounded (the fixture's `WAIT`); a missing CLI fails the
//! test with the install command, it never skips.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli real_cli::permission_modes`.

use crate::support::cli_grpc;

use std::path::Path;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::adapter::claude::PermissionMode;
use cli_grpc::{AdapterChoice, Events, Harness, Setup, count, describe_all, kinds, tool_results};
use nix::sys::signal::{Signal as NixSignal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

/// The deny text of the CLI's own permission check for a Write in print
/// mode with no allow rule (2.1.197), after "write to <path>".
const NOT_GRANTED: &str = "but you haven't granted it yet.";

/// The start of the tool_result of a successful Write.
const CREATED: &str = "File created successfully at: ";

/// The skip mode, with the test's own `IS_SANDBOX` (this machine sets one)
/// kept from the CLI, so whatever the CLI sees comes from the server.
fn skip_setup(adapter: AdapterChoice) -> Setup {
    Setup {
        adapter,
        permissions: PermissionMode::Skip,
        strip_env: vec!["IS_SANDBOX".into()],
        ..Setup::default()
    }
}

/// The settings mode (no flag: the CLI's own settings decide).
fn settings_setup() -> Setup {
    Setup {
        permissions: PermissionMode::Settings,
        ..Setup::default()
    }
}

/// Whether this test runs as root: the owner of /proc/self is the
/// effective uid (the adapter decides the same way).
fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .expect("stat /proc/self")
}

/// The value of `key` in the environment the process `pid` was started
/// with.
fn environ_var(pid: u32, key: &str) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_else(|e| panic!("read /proc/{pid}/environ: {e}"));
    let prefix = format!("{key}=");
    raw.split(|b| *b == 0)
        .filter_map(|kv| std::str::from_utf8(kv).ok())
        .find_map(|kv| kv.strip_prefix(&prefix).map(str::to_owned))
}

/// Writes `value` as JSON to `path`, creating its directory.
fn write_json(path: &Path, value: &Value) {
    std::fs::create_dir_all(path.parent().expect("a parent dir")).expect("create the dir");
    std::fs::write(path, serde_json::to_vec_pretty(value).expect("JSON"))
        .unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// The settings that allow every Write without asking.
fn allow_write() -> Value {
    json!({"permissions": {"allow": ["Write"]}})
}

/// Asserts the permission relay took no part: no permission_requested or
/// permission_resolved event, and nothing pending.
async fn assert_no_permission_events(h: &Harness, session: &str, events: &[pb::Event]) {
    let relayed = count(events, |p| {
        matches!(
            p,
            Payload::PermissionRequested(_) | Payload::PermissionResolved(_)
        )
    });
    assert_eq!(
        relayed,
        0,
        "nothing may be relayed in this mode:\n{}",
        describe_all(events)
    );
    assert_eq!(h.get(session).await.pending_permissions, 0);
}

/// The one tool_use block named `tool` in `events`, and its tool_result.
fn tool_call(events: &[pb::Event], tool: &str) -> (pb::ContentBlock, pb::ToolResult) {
    let uses: Vec<pb::ContentBlock> = events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::Content(c)) => Some(c.blocks.clone()),
            _ => None,
        })
        .flatten()
        .filter(|b| b.r#type == "tool_use" && b.tool_name == tool)
        .collect();
    assert_eq!(
        uses.len(),
        1,
        "one {tool} tool_use:\n{}",
        describe_all(events)
    );
    let call = uses.into_iter().next().expect("one");
    let result = tool_results(events)
        .into_iter()
        .find(|r| r.tool_use_id == call.tool_use_id)
        .unwrap_or_else(|| {
            panic!(
                "no tool_result for {}:\n{}",
                call.tool_use_id,
                describe_all(events)
            )
        });
    (call, result)
}

/// A string field of a tool_use block's input.
fn input_str(block: &pb::ContentBlock, field: &str) -> String {
    match block
        .input
        .as_ref()
        .and_then(|i| i.fields.get(field))
        .and_then(|v| v.kind.as_ref())
    {
        Some(pbjson_types::value::Kind::StringValue(s)) => s.clone(),
        other => panic!("{field} is not a string in {block:?}: {other:?}"),
    }
}

/// Waits for the turn after `after` to end without error and returns the
/// events since `after`.
async fn turn_ok(ev: &Events, after: u64) -> (pb::Event, Vec<pb::Event>) {
    let (end_ev, end) = ev.turn_end_after(after).await;
    assert!(!end.is_error, "the turn ends without error: {end:?}");
    (end_ev, ev.since(after))
}

/// Asserts the turn in `events` wrote `file` (`hello\n`) in the cwd through
/// a successful Write, unasked.
async fn assert_written(h: &Harness, session: &str, events: &[pb::Event], file: &str) {
    let path = h.work.path().join(file);
    let (call, result) = tool_call(events, "Write");
    assert_eq!(input_str(&call, "file_path"), path.display().to_string());
    assert!(!result.is_error, "{result:?}");
    assert!(result.text.starts_with(CREATED), "{result:?}");
    assert_eq!(
        std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("the CLI wrote {}: {e}", path.display())),
        "hello\n"
    );
    assert_no_permission_events(h, session, events).await;
}

/// Asserts the turn in `events` had its Write of `file` denied by the CLI
/// itself: an error tool_result with the CLI's own text, nothing written,
/// nothing relayed.
async fn assert_denied_by_cli(h: &Harness, session: &str, events: &[pb::Event], file: &str) {
    let path = h.work.path().join(file);
    let (_, result) = tool_call(events, "Write");
    assert!(result.is_error, "{result:?}");
    assert_eq!(
        result.text,
        format!(
            "Claude requested permissions to write to {}, {NOT_GRANTED}",
            path.display()
        )
    );
    assert!(!path.exists(), "{} must not be written", path.display());
    assert_no_permission_events(h, session, events).await;
}

/// Asserts the turn_end `end` lists the one `tool` call in `events` as
/// denied, with its tool_use id and input: the only trace of a denial the
/// CLI made by itself, since nothing was relayed.
fn assert_listed_as_denied(end: &pb::Event, events: &[pb::Event], tool: &str) {
    let Some(Payload::TurnEnd(turn)) = &end.payload else {
        panic!("not a turn_end: {end:?}");
    };
    let (call, _) = tool_call(events, tool);
    assert_eq!(
        turn.permission_denials,
        [pb::PermissionDenial {
            tool_name: tool.into(),
            tool_use_id: call.tool_use_id.clone(),
            tool_input: call.input.clone(),
        }],
        "{turn:?}"
    );
}

/// 1. `--permissions skip` (interactive): `WRITE out.txt hello` runs with no
///    permission_requested, the file is in the session cwd, the turn ends
///    idle with the process alive, and init reports bypassPermissions. As
///    root the CLI only accepts the flag with `IS_SANDBOX=1`, which must
///    come from the server (the test's own value is stripped). A follow-up
///    Bash that would need approval (`touch`) runs unasked too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_mode_writes_and_runs_bash_without_asking() {
    let (h, ev, started) = Harness::started(
        skip_setup(AdapterChoice::Interactive),
        "skip",
        "WRITE out.txt hello",
    )
    .await;
    let (_, ready) = ev.run_ready_after(0).await;
    assert_eq!(ready.permission_mode, "bypassPermissions", "{ready:?}");
    let (first_end, evs) = turn_ok(&ev, 0).await;
    assert_written(&h, "skip", &evs, "out.txt").await;
    let sandbox = environ_var(ready.pid, "IS_SANDBOX");
    if running_as_root() {
        assert_eq!(
            sandbox.as_deref(),
            Some("1"),
            "the server sets IS_SANDBOX=1 as root"
        );
    } else {
        assert_eq!(sandbox, None, "IS_SANDBOX is only for root");
    }
    let s = h.assert_idle("skip", true).await;
    assert_eq!(s.run_id, started.run_id);

    // Bash `touch made-by-bash-<n>` asks in the default mode; here it runs.
    let run = h.send("skip", "WRITEBASH").await;
    assert_eq!(run, started.run_id, "the same process");
    let (_, after) = turn_ok(&ev, first_end.seq).await;
    let (call, result) = tool_call(&after, "Bash");
    assert!(!result.is_error, "{result:?}");
    let command = input_str(&call, "command");
    let made = command
        .strip_prefix("touch ")
        .unwrap_or_else(|| panic!("a touch command: {command:?}"));
    assert!(
        h.work.path().join(made).is_file(),
        "Bash ran `{command}` in the cwd"
    );
    assert_no_permission_events(&h, "skip", &after).await;
    h.assert_idle("skip", true).await;
    h.finish("skip", &ev).await;
}

/// 2. `--permissions skip` with the one-shot adapter: the `--print`
///    process writes the file unasked and exits 0 (COMPLETED); without the
///    server's `IS_SANDBOX=1` it would exit 1 at once as root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_mode_one_shot_writes_and_completes() {
    let (h, ev, started) = Harness::started(
        skip_setup(AdapterChoice::OneShot),
        "skip1",
        "WRITE once.txt hello",
    )
    .await;
    let (end_ev, end) = ev.run_end_after(0).await;
    assert_eq!(end_ev.run_id, started.run_id);
    assert_eq!(end.reason(), pb::RunEndReason::Completed, "{end:?}");
    assert_eq!(end.exit_code, Some(0), "{end:?}");
    let evs = ev.snapshot();
    let (_, ready) = ev.run_ready_after(0).await;
    assert_eq!(ready.permission_mode, "bypassPermissions", "{ready:?}");
    assert_eq!(
        count(&evs, |p| matches!(p, Payload::TurnEnd(t) if !t.is_error)),
        1,
        "{:?}",
        kinds(&evs)
    );
    assert_written(&h, "skip1", &evs, "once.txt").await;
    h.assert_idle("skip1", false).await;
    h.finish("skip1", &ev).await;
}

/// 3. `--permissions settings` with no allow rule: the CLI denies the Write
///    itself (error tool_result with its own text) without relaying
///    anything, the model goes on, and the turn ends without error. A Bash
///    `touch` (which asks in the relay mode) is blocked the same way on the
///    same process. Each turn_end lists its denied call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_mode_without_a_rule_denies_without_asking() {
    let (h, ev, started) = Harness::started(settings_setup(), "deny", "WRITE out.txt hello").await;
    let (_, ready) = ev.run_ready_after(0).await;
    assert_eq!(ready.permission_mode, "default", "{ready:?}");
    let (first_end, evs) = turn_ok(&ev, 0).await;
    assert_denied_by_cli(&h, "deny", &evs, "out.txt").await;
    assert_listed_as_denied(&first_end, &evs, "Write");
    h.assert_idle("deny", true).await;

    let run = h.send("deny", "WRITEBASH").await;
    assert_eq!(run, started.run_id, "the same process");
    let (second_end, after) = turn_ok(&ev, first_end.seq).await;
    assert_listed_as_denied(&second_end, &after, "Bash");
    let (call, result) = tool_call(&after, "Bash");
    let command = input_str(&call, "command");
    let made = command.strip_prefix("touch ").expect("a touch command");
    // 2.1.197's text: "touch in '<cwd>/<file>' was blocked. For security,
    // Claude Code may only create or modify files in the allowed working
    // directories for this session: '<cwd>'." (even inside the cwd);
    // 2.1.332's: "touch in '<cwd>/<file>' needs approval. ...".
    assert!(result.is_error, "{result:?}");
    assert!(
        result.text.contains(made)
            && (result.text.contains("was blocked") || result.text.contains("needs approval")),
        "{result:?}"
    );
    assert!(
        !h.work.path().join(made).exists(),
        "`{command}` did not run"
    );
    assert_no_permission_events(&h, "deny", &after).await;
    h.assert_idle("deny", true).await;
    h.finish("deny", &ev).await;
}

/// 4. `--permissions settings` with the configuration directory's
///    `settings.json` allowing Write: the write succeeds with no prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_mode_honours_the_user_settings_allow_rule() {
    let h = Harness::with(settings_setup()).await;
    write_json(&h.config_dir().join("settings.json"), &allow_write());
    let ev = h.subscribe("user").await;
    h.start_session("user", "WRITE out.txt hello").await;
    let (_, evs) = turn_ok(&ev, 0).await;
    assert_written(&h, "user", &evs, "out.txt").await;
    h.assert_idle("user", true).await;
    h.finish("user", &ev).await;
}

/// 5. `--permissions settings` and `--allow-project-settings`, with the
///    allow rule in the session cwd's `.claude/settings.json`: the CLI
///    ignores it (and says so on stderr, which reaches run_end.stderr_tail)
///    while the workspace is untrusted. Once the configuration directory's
///    `.claude.json` marks the cwd trusted, the next run (a Send that
///    resumes the session) honours it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settings_mode_honours_a_project_allow_rule_only_in_a_trusted_workspace() {
    let h = Harness::with(Setup {
        project_settings: true,
        ..settings_setup()
    })
    .await;
    write_json(&h.work.path().join(".claude/settings.json"), &allow_write());
    let ev = h.subscribe("proj").await;
    let started = h.start_session("proj", "WRITE untrusted.txt hello").await;
    let (_, ready) = ev.run_ready_after(0).await;
    let (first_end, evs) = turn_ok(&ev, 0).await;
    assert_denied_by_cli(&h, "proj", &evs, "untrusted.txt").await;

    // End the process between turns so the CLI reads the trust anew.
    kill(Pid::from_raw(ready.pid as i32), NixSignal::SIGTERM).expect("SIGTERM the CLI");
    let (end_ev, end) = ev.run_end_after(first_end.seq).await;
    assert_eq!(end_ev.run_id, started.run_id);
    assert!(
        end.stderr_tail.contains("has not been trusted"),
        "the CLI explains why the project rule was ignored: {end:?}"
    );
    h.assert_idle("proj", false).await;

    // The CLI's own state file: keep what it wrote, mark the cwd trusted.
    // The CLI keys projects by its cwd, i.e. the canonical path.
    let state = h.config_dir().join(".claude.json");
    let mut config: Value = std::fs::read(&state)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_else(|| json!({}));
    let cwd = h.work.path().canonicalize().expect("canonical cwd");
    config["projects"][cwd.display().to_string()]["hasTrustDialogAccepted"] = json!(true);
    write_json(&state, &config);

    let run = h.send("proj", "WRITE trusted.txt hello").await;
    assert_ne!(run, started.run_id, "a new run");
    let (_, after) = turn_ok(&ev, end_ev.seq).await;
    assert_written(&h, "proj", &after, "trusted.txt").await;
    h.assert_idle("proj", true).await;
    h.finish("proj", &ev).await;
}
