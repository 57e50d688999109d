//! The launch policy end to end: what a client may put into the CLI's argv,
//! env and cwd, checked through the real gRPC API, the real manager and the
//! real interactive adapter, with a stand-in CLI (a shell script) that
//! records exactly what reached its process.
//!
//! Each refusal is checked three ways: the status (code and the field it
//! names), the log (the session does not exist, or its head is unchanged),
//! and the process (nothing was spawned). The control case runs the same
//! exploit with `LaunchPolicy::trust_clients()` and sees it reach the
//! process, so the refusals are the policy's doing and nothing else's.

use crate::support::server;

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use agent_harness_server::adapter::claude::interactive::default_args;
use agent_harness_server::launch::{LaunchPolicy, REDACTED};
use agent_harness_server::manager::ManagerOptions;
use agent_harness_server::store::Store;
use server::*;
use tonic::Code;
use tonic::transport::Channel;

type Client = SessionServiceClient<Channel>;

fn opts(policy: LaunchPolicy, max_live_runs: usize) -> ManagerOptions {
    ManagerOptions {
        launch: Arc::new(policy),
        max_live_runs,
        ..fast_opts()
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn env(kv: &[(&str, &str)]) -> HashMap<String, String> {
    kv.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// The policy `serve --allow-arg ... --allow-env ... --allowed-cwd ...` builds.
fn operator(args: &[&str], env: &[&str], cwds: &[&Path]) -> LaunchPolicy {
    let cwds: Vec<_> = cwds.iter().map(|p| p.to_path_buf()).collect();
    LaunchPolicy::from_operator(&strings(args), &strings(env), &cwds).expect("policy")
}

fn config(args: &[&str], env_kv: &[(&str, &str)]) -> pb::StartConfig {
    pb::StartConfig {
        prompt: "hi".into(),
        args: strings(args),
        env: env(env_kv),
        ..Default::default()
    }
}

async fn start_with(
    client: &mut Client,
    session: &str,
    config: pb::StartConfig,
) -> Result<pb::StartResponse, tonic::Status> {
    client
        .start(pb::StartRequest {
            idempotency_key: String::new(),
            session_id: session.into(),
            config: Some(config),
        })
        .await
        .map(|r| r.into_inner())
}

/// Starts `session` with `config` and waits for its process's init line
/// (so the stand-in's record is written); returns the subscription.
async fn start_ready(client: &mut Client, session: &str, config: pb::StartConfig) -> Sub {
    let mut sub = Sub::open(client, session, 0).await;
    start_with(client, session, config).await.expect("start");
    sub.until_kind("run_ready").await;
    sub
}

/// Stops the live run (the stand-in exits on the interrupt) and waits for
/// its run_end.
async fn stop_run(client: &mut Client, sub: &mut Sub, session: &str) {
    assert!(stop(client, session).await.expect("stop"));
    sub.until("run_end", is_run_end).await;
}

async fn assert_absent(client: &mut Client, session: &str) {
    let err = client
        .get_session(pb::GetSessionRequest {
            session_id: session.into(),
        })
        .await
        .expect_err("the session must not exist");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");
}

fn assert_refused(result: Result<pb::StartResponse, tonic::Status>, code: Code, field: &str) {
    let err = result.expect_err("must be refused");
    assert_eq!(err.code(), code, "{err:?}");
    assert!(
        err.message().contains(field),
        "{field} not named in {:?}",
        err.message()
    );
}

/// The run's own args: what follows the adapter's fixed argv.
fn run_args(spawn: &StandInSpawn) -> Vec<String> {
    let fixed = default_args();
    assert_eq!(spawn.args[..fixed.len()], fixed, "{spawn:?}");
    spawn.args[fixed.len()..].to_vec()
}

fn run_start_config(e: &pb::Event) -> &pb::StartConfig {
    match &e.payload {
        Some(Payload::RunStart(rs)) => rs.config.as_ref().expect("config"),
        _ => panic!("not a run_start: {e:?}"),
    }
}

#[tokio::test]
async fn the_exploit_is_refused_before_anything_is_appended_or_spawned() {
    let cli = StandInCli::new();
    let server = TestServer::spawning(cli.adapter(), opts(LaunchPolicy::default(), 32)).await;
    let mut client = server.client().await;
    let exploit = config(
        &["--dangerously-skip-permissions"],
        &[
            ("IS_SANDBOX", "1"),
            ("ANTHROPIC_BASE_URL", "http://evil.example"),
        ],
    );
    let got = start_with(&mut client, "s", exploit).await;
    assert_refused(got, Code::InvalidArgument, "config.args[0]");

    let got = start_with(&mut client, "s", config(&[], &[("IS_SANDBOX", "1")])).await;
    assert_refused(got, Code::InvalidArgument, "config.env.IS_SANDBOX");
    let got = start_with(
        &mut client,
        "s",
        config(&[], &[("ANTHROPIC_BASE_URL", "http://evil.example")]),
    )
    .await;
    assert_refused(got, Code::InvalidArgument, "config.env.ANTHROPIC_BASE_URL");
    // Both at once: the first is named, the other listed.
    let got = start_with(
        &mut client,
        "s",
        config(&[], &[("IS_SANDBOX", "1"), ("ANTHROPIC_BASE_URL", "x")]),
    )
    .await;
    let err = got.expect_err("refused");
    assert!(err.message().contains("IS_SANDBOX"), "{err:?}");

    assert_absent(&mut client, "s").await;
    assert!(server.stored_events("s").is_empty());
    assert!(cli.never_spawned(), "{:?}", cli.spawns());
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn every_other_spelling_is_refused_and_the_head_stays() {
    let cli = StandInCli::new();
    let server = TestServer::spawning(cli.adapter(), opts(LaunchPolicy::default(), 32)).await;
    let mut client = server.client().await;
    // A session with one ended run, so "nothing appended" is a head that stays.
    let mut sub = start_ready(&mut client, "s", config(&[], &[])).await;
    stop_run(&mut client, &mut sub, "s").await;
    let head = server.stored_events("s").len();
    assert_eq!(cli.spawns().len(), 1);

    let cases: &[(&[&str], usize)] = &[
        (&["--dangerously-skip-permissions=true"], 0),
        (&["--permission-mode=bypassPermissions"], 0),
        (&["--permission-mode", "bypassPermissions"], 0),
        (&["--allowedTools", "Bash"], 0),
        (&["--allowed-tools=Bash"], 0),
        (&["--model", "x", "--settings", "{}"], 2),
        // Abbreviations: the CLI would refuse them, the policy refuses first.
        (&["--dangerously"], 0),
        (&["--mod", "x"], 0),
        // Case matters: --Model is not --model.
        (&["--Model", "x"], 0),
        // Short flags, end of options, stray positionals.
        (&["-p"], 0),
        (&["--effort", "high", "-d"], 2),
        (&["--"], 0),
        (&["--", "--dangerously-skip-permissions"], 0),
        (&["mcp"], 0),
        (&["--model", "x", "mcp"], 2),
        (&["--model=x", "agents"], 1),
        // A value-taking flag without its value.
        (&["--max-turns"], 0),
        (&["--effort", "high", "--model"], 2),
        (&["--append-system-prompt", "--verbose"], 0),
        // Allowed by name but never with a flag smuggled in as its value.
        (&["--disallowedTools"], 0),
    ];
    for (args, at) in cases {
        let got = start_with(&mut client, "s", config(args, &[])).await;
        let field = format!("config.args[{at}]");
        let err = got.expect_err("refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{args:?}: {err:?}");
        assert!(err.message().contains(&field), "{args:?}: {err:?}");
        // Also on a fresh session: it never comes into existence.
        let got = start_with(&mut client, "fresh", config(args, &[])).await;
        assert_refused(got, Code::InvalidArgument, &field);
    }
    // The reasons say what to do.
    let err = start_with(&mut client, "s", config(&["--betas", "x"], &[]))
        .await
        .expect_err("refused");
    assert!(err.message().contains("--allow-arg"), "{err:?}");
    let err = start_with(&mut client, "s", config(&["--allowedTools"], &[]))
        .await
        .expect_err("refused");
    assert!(err.message().contains("never accepted"), "{err:?}");
    // model and resume become argv values too.
    for (field, bad) in [("config.model", "-p"), ("config.resume", "--fork-session")] {
        let mut c = config(&[], &[]);
        if field == "config.model" {
            c.model = bad.into();
        } else {
            c.resume = bad.into();
        }
        let got = start_with(&mut client, "s", c).await;
        assert_refused(got, Code::InvalidArgument, field);
    }

    assert_eq!(server.stored_events("s").len(), head, "nothing appended");
    assert_absent(&mut client, "fresh").await;
    assert_eq!(cli.spawns().len(), 1, "nothing spawned");
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn allowed_args_reach_the_process_exactly() {
    let cli = StandInCli::new();
    let policy = operator(&["--name", "--prompt-suggestions="], &[], &[]);
    let server = TestServer::spawning(cli.adapter(), opts(policy, 32)).await;
    let mut client = server.client().await;
    let args = [
        "--model",
        "opus",
        "--max-turns=3",
        "--disallowedTools",
        "Bash",
        "Edit",
        "--effort=high",
        "--append-system-prompt=-be brief",
        "--json-schema",
        "{\"type\":\"object\"}",
        "--name",
        "my run",
        "--prompt-suggestions=false",
    ];
    let mut c = config(&args, &[]);
    c.model = "claude-sonnet-4-5".into();
    let _sub = start_ready(&mut client, "s", c).await;
    let spawns = cli.spawns();
    assert_eq!(spawns.len(), 1);
    // Each value joined to its flag (no client string is a word of its
    // own); the typed settings come after the args: a model set with
    // SetModel (or config.model) wins over a `--model` in the args.
    let want = strings(&[
        "--model=opus",
        "--max-turns=3",
        "--disallowedTools=Bash",
        "--disallowedTools=Edit",
        "--effort=high",
        "--append-system-prompt=-be brief",
        "--json-schema={\"type\":\"object\"}",
        "--name=my run",
        "--prompt-suggestions=false",
        "--model=claude-sonnet-4-5",
    ]);
    assert_eq!(run_args(&spawns[0]), want);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn trusting_clients_lets_the_same_exploit_through() {
    // The control case: with the policy off, the exploit reaches the
    // process, so the refusals above are the policy's doing.
    let cli = StandInCli::new();
    let server = TestServer::spawning(cli.adapter(), opts(LaunchPolicy::trust_clients(), 32)).await;
    let mut client = server.client().await;
    let exploit = config(
        &[
            "--dangerously-skip-permissions",
            "--permission-mode",
            "bypassPermissions",
        ],
        &[
            ("IS_SANDBOX", "1"),
            ("ANTHROPIC_BASE_URL", "http://evil.example"),
        ],
    );
    let sub = start_ready(&mut client, "s", exploit).await;
    let spawns = cli.spawns();
    assert_eq!(spawns.len(), 1);
    assert_eq!(
        run_args(&spawns[0]),
        [
            "--dangerously-skip-permissions",
            "--permission-mode",
            "bypassPermissions"
        ]
    );
    assert_eq!(
        spawns[0].env.get("IS_SANDBOX").map(String::as_str),
        Some("1")
    );
    assert_eq!(
        spawns[0].env.get("ANTHROPIC_BASE_URL").map(String::as_str),
        Some("http://evil.example")
    );
    // Even trusted, env values stay out of the log.
    let recorded = run_start_config(&sub.events[0]);
    assert_eq!(recorded.env["ANTHROPIC_BASE_URL"], REDACTED);
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_cwd_outside_the_allowed_dirs_is_permission_denied() {
    let cli = StandInCli::new();
    let base = tempfile::tempdir().expect("temp dir");
    let inside = base.path().join("work");
    let outside = base.path().join("secrets");
    std::fs::create_dir_all(inside.join("project")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, inside.join("escape")).unwrap();
    // A sibling that merely shares the allowed dir's name as a prefix.
    std::fs::create_dir_all(base.path().join("work2")).unwrap();
    let policy = operator(&[], &[], &[&inside]);
    let server = TestServer::spawning(cli.adapter(), opts(policy, 32)).await;
    let mut client = server.client().await;

    for cwd in [
        outside.clone(),
        inside.join("escape"),
        inside.join("project/../../secrets"),
        base.path().join("work2"),
    ] {
        let mut c = config(&[], &[]);
        c.cwd = cwd.display().to_string();
        let got = start_with(&mut client, "s", c).await;
        assert_refused(got, Code::PermissionDenied, "config.cwd");
    }
    // An empty cwd is the server's own directory, which is not under it.
    let got = start_with(&mut client, "s", config(&[], &[])).await;
    assert_refused(got, Code::PermissionDenied, "config.cwd");
    assert_absent(&mut client, "s").await;
    assert!(cli.never_spawned());

    // Inside: the process starts in the resolved directory.
    let mut c = config(&[], &[]);
    c.cwd = format!("{}/./project", inside.display());
    let _sub = start_ready(&mut client, "s", c).await;
    let spawns = cli.spawns();
    let want = inside.join("project").canonicalize().unwrap();
    assert_eq!(Path::new(&spawns[0].cwd), want);
    server.shutdown().await.expect("shutdown");
}

/// Fails when any event of `events` carries `secret` anywhere.
fn assert_secret_free(events: &[pb::Event], secret: &str, whence: &str) {
    assert!(!events.is_empty(), "{whence}: no events");
    for e in events {
        assert!(
            !format!("{e:?}").contains(secret),
            "{whence}: event {} carries the secret: {e:?}",
            e.seq
        );
    }
}

#[tokio::test]
async fn env_values_stay_out_of_the_log_and_a_respawn_gets_them() {
    const SECRET: &str = "s3cret-value-4711";
    let cli = StandInCli::new();
    let policy = operator(&[], &["MY_TOKEN"], &[]);
    let server = TestServer::spawning(cli.adapter(), opts(policy, 32)).await;
    let mut client = server.client().await;
    let mut sub = start_ready(&mut client, "s", config(&[], &[("MY_TOKEN", SECRET)])).await;
    let first = cli.spawns();
    assert_eq!(
        first[0].env.get("MY_TOKEN").map(String::as_str),
        Some(SECRET)
    );
    // The name is recorded, its value is not.
    assert_eq!(run_start_config(&sub.events[0]).env["MY_TOKEN"], REDACTED);

    // The process exits; a Send respawns it with the real value.
    stop_run(&mut client, &mut sub, "s").await;
    let run = send(&mut client, "s", "again").await.expect("send");
    let ready = sub
        .until("second run_ready", |e| {
            kind(e) == "run_ready" && e.run_id == run
        })
        .await;
    assert_eq!(ready.run_id, run);
    let spawns = cli.spawns();
    assert_eq!(spawns.len(), 2);
    let second = spawns
        .iter()
        .find(|s| s.args.iter().any(|a| a.starts_with("--resume=")))
        .expect("the respawn resumes");
    assert_eq!(second.env.get("MY_TOKEN").map(String::as_str), Some(SECRET));

    // Not in Subscribe, History, GetSession or the store.
    assert_secret_free(&sub.events, SECRET, "subscribe");
    assert_secret_free(&history_all(&mut client, "s").await, SECRET, "history");
    assert_secret_free(&server.stored_events("s"), SECRET, "store");
    let session = get(&mut client, "s").await;
    assert!(!format!("{session:?}").contains(SECRET), "{session:?}");
    let listed = list(&mut client).await;
    assert!(!format!("{listed:?}").contains(SECRET));
    server.shutdown().await.expect("shutdown");
}

#[tokio::test]
async fn a_respawn_after_a_restart_gets_the_env_and_the_policy_of_now() {
    const SECRET: &str = "restart-secret-0815";
    let cli = StandInCli::new();
    let store: Arc<dyn Store> = crate::support::server::test_store();
    let unused = || crate::support::scripted::ScriptedAdapter::new(Default::default());
    let allow = || opts(operator(&[], &["MY_TOKEN"], &[]), 32);
    let server = TestServer::with_adapter(
        store.clone(),
        cli.adapter(),
        unused(),
        allow(),
        Default::default(),
    )
    .await;
    let mut client = server.client().await;
    let _sub = start_ready(&mut client, "s", config(&[], &[("MY_TOKEN", SECRET)])).await;
    // Shutdown ends the run (its run_end is the last event).
    server.shutdown().await.expect("shutdown");
    let events = store.read_range("s", 0, usize::MAX).unwrap();
    assert!(
        is_run_end(events.last().expect("events")),
        "{:?}",
        kinds(&events)
    );
    let head = events.len();

    // A server whose operator narrowed the policy: the recorded env is
    // refused on respawn, and nothing is appended or spawned.
    let narrowed = TestServer::with_adapter(
        store.clone(),
        cli.adapter(),
        unused(),
        opts(LaunchPolicy::default(), 32),
        Default::default(),
    )
    .await;
    let mut client = narrowed.client().await;
    let err = send(&mut client, "s", "again").await.expect_err("refused");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("config.env.MY_TOKEN"), "{err:?}");
    assert_eq!(store.read_range("s", 0, usize::MAX).unwrap().len(), head);
    assert_eq!(cli.spawns().len(), 1);
    narrowed.shutdown().await.expect("shutdown");

    // The same policy again: the respawn gets the value from the meta.
    let server = TestServer::with_adapter(
        store.clone(),
        cli.adapter(),
        unused(),
        allow(),
        Default::default(),
    )
    .await;
    let mut client = server.client().await;
    let mut sub = Sub::open(&mut client, "s", head as u64).await;
    let run = send(&mut client, "s", "again").await.expect("send");
    sub.until("run_ready", |e| kind(e) == "run_ready" && e.run_id == run)
        .await;
    let spawns = cli.spawns();
    assert_eq!(spawns.len(), 2);
    for s in &spawns {
        assert_eq!(s.env.get("MY_TOKEN").map(String::as_str), Some(SECRET));
    }
    assert_secret_free(&server.stored_events("s"), SECRET, "store");
    server.shutdown().await.expect("shutdown");
}

/// The env values a respawn needs are kept sealed with the operator's
/// secrets key: the bytes of `events.redb` never hold one, a server
/// restarted with the same key respawns with it, and a server with another
/// key refuses that Send with FAILED_PRECONDITION naming the key, appending
/// and spawning nothing.
#[tokio::test]
async fn env_values_are_sealed_in_the_store_and_open_only_with_their_key() {
    use agent_harness_server::secrets::SecretsKey;
    const SECRET: &str = "sealed-secret-value-2718";
    let dir = tempfile::tempdir().expect("data dir");
    let path = dir.path().join("events.redb");
    let cli = StandInCli::new();
    let key = |hex: &str| Arc::new(SecretsKey::from_hex(&hex.repeat(32), "test key").unwrap());
    let serve = |secrets: Arc<SecretsKey>| {
        let mopts = ManagerOptions {
            secrets,
            ..opts(operator(&[], &["MY_TOKEN"], &[]), 32)
        };
        TestServer::with_adapter(
            reopen_redb(&path),
            cli.adapter(),
            crate::support::scripted::ScriptedAdapter::new(Default::default()),
            mopts,
            Default::default(),
        )
    };
    let raw_has_secret = || {
        let bytes = std::fs::read(&path).expect("read events.redb");
        bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes())
    };

    let server = serve(key("a1")).await;
    let mut client = server.client().await;
    let _sub = start_ready(&mut client, "s", config(&[], &[("MY_TOKEN", SECRET)])).await;
    server.shutdown().await.expect("shutdown");
    assert!(
        !raw_has_secret(),
        "events.redb holds the env value in clear"
    );
    let head = get_head(&path, "s");

    // Another key: the Send that needs the value is refused cleanly.
    let server = serve(key("b2")).await;
    let mut client = server.client().await;
    let err = send(&mut client, "s", "again").await.expect_err("refused");
    assert_eq!(err.code(), Code::FailedPrecondition, "{err:?}");
    assert!(err.message().contains("secrets key"), "{err:?}");
    server.shutdown().await.expect("shutdown");
    assert_eq!(get_head(&path, "s"), head, "nothing appended");
    assert_eq!(cli.spawns().len(), 1, "nothing spawned");

    // The key that sealed it: the respawn gets the value.
    let server = serve(key("a1")).await;
    let mut client = server.client().await;
    let mut sub = Sub::open(&mut client, "s", head).await;
    let run = send(&mut client, "s", "again").await.expect("send");
    sub.until("run_ready", |e| kind(e) == "run_ready" && e.run_id == run)
        .await;
    let spawns = cli.spawns();
    assert_eq!(spawns.len(), 2);
    for s in &spawns {
        assert_eq!(s.env.get("MY_TOKEN").map(String::as_str), Some(SECRET));
    }
    server.shutdown().await.expect("shutdown");
    assert!(
        !raw_has_secret(),
        "events.redb holds the env value in clear"
    );
}

/// The last stored seq of `session` in the redb file at `path`.
fn get_head(path: &Path, session: &str) -> u64 {
    let events = reopen_redb(path)
        .read_range(session, 0, usize::MAX)
        .unwrap();
    events.last().map_or(0, |e| e.seq)
}

#[tokio::test]
async fn max_live_runs_caps_starts_and_respawns() {
    let cli = StandInCli::new();
    let server = TestServer::spawning(cli.adapter(), opts(LaunchPolicy::default(), 1)).await;
    let mut client = server.client().await;
    let mut a = start_ready(&mut client, "a", config(&[], &[])).await;

    // A second live run on another session: refused, nothing appended.
    let got = start_with(&mut client, "b", config(&[], &[])).await;
    assert_refused(got, Code::ResourceExhausted, "--max-live-runs");
    assert_absent(&mut client, "b").await;
    assert_eq!(cli.spawns().len(), 1);

    // Once a's run has ended, b may start.
    stop_run(&mut client, &mut a, "a").await;
    let mut b = start_ready(&mut client, "b", config(&[], &[])).await;

    // Now a respawning Send on a is the one beyond the cap.
    let head = server.stored_events("a").len();
    let err = send(&mut client, "a", "again").await.expect_err("refused");
    assert_eq!(err.code(), Code::ResourceExhausted, "{err:?}");
    assert_eq!(server.stored_events("a").len(), head, "nothing appended");
    assert_eq!(cli.spawns().len(), 2);

    stop_run(&mut client, &mut b, "b").await;
    let run = send(&mut client, "a", "again").await.expect("send");
    a.until("run_ready", |e| kind(e) == "run_ready" && e.run_id == run)
        .await;
    assert_eq!(cli.spawns().len(), 3);
    server.shutdown().await.expect("shutdown");
}

/// The session's new args: what follows the adapter's argv and the
/// `--resume=<id>` every respawn and fork starts with.
fn after_resume(spawn: &StandInSpawn) -> (String, Vec<String>) {
    let args = run_args(spawn);
    let resume = args[0]
        .strip_prefix("--resume=")
        .unwrap_or_else(|| panic!("{args:?}"));
    (resume.to_owned(), args[1..].to_vec())
}

/// SetModel, SetPermissionMode and a fork's `message_uuid` are the other
/// ways a request's strings reach the CLI's argv. A hostile value is
/// refused (and records nothing), the operator's permission ceiling holds
/// for a change as for a Start, a change made while no process runs
/// reaches the next spawn as exactly one typed flag, and a fork's
/// `message_uuid` is the server's to fill: a client's value never reaches
/// the process.
#[tokio::test]
async fn settings_and_a_fork_put_only_typed_flags_into_the_argv() {
    let cli = StandInCli::new();
    let server = TestServer::spawning(cli.adapter(), opts(operator(&[], &[], &[]), 32)).await;
    let mut client = server.client().await;
    let mut sub = start_ready(&mut client, "src", config(&[], &[])).await;
    stop_run(&mut client, &mut sub, "src").await;
    let head = get(&mut client, "src").await.head_seq;

    let long = "m".repeat(300);
    for model in [
        "--dangerously-skip-permissions",
        "opus --dangerously-skip-permissions",
        // A subcommand's name would start the subcommand (or make CLI
        // 2.1.197 skip its input) at every later spawn; `cc://` makes the
        // CLI parse its subcommands.
        "mcp",
        "update",
        "cc://x",
        "-m",
        "opus\0x",
        "opus\n--verbose",
        long.as_str(),
    ] {
        let err = client
            .set_model(pb::SetModelRequest {
                session_id: "src".into(),
                model: model.into(),
                idempotency_key: String::new(),
            })
            .await
            .expect_err("a hostile model is refused");
        assert_eq!(err.code(), Code::InvalidArgument, "{model:?}: {err:?}");
        assert!(err.message().contains("model"), "{model:?}: {err:?}");
    }
    let mode = |mode: &str| pb::SetPermissionModeRequest {
        session_id: "src".into(),
        mode: mode.into(),
        idempotency_key: String::new(),
    };
    for (m, code) in [
        ("bypassPermissions", Code::PermissionDenied),
        ("acceptEdits", Code::PermissionDenied),
        ("--dangerously-skip-permissions", Code::InvalidArgument),
        ("plan --verbose", Code::InvalidArgument),
    ] {
        let err = client.set_permission_mode(mode(m)).await.unwrap_err();
        assert_eq!(err.code(), code, "{m:?}: {err:?}");
    }
    assert_eq!(
        get(&mut client, "src").await.head_seq,
        head,
        "the refusals recorded nothing"
    );

    let r = client
        .set_model(pb::SetModelRequest {
            session_id: "src".into(),
            model: "claude-opus-4-8".into(),
            idempotency_key: String::new(),
        })
        .await
        .expect("SetModel")
        .into_inner();
    assert_eq!(r.applied(), pb::SettingApplied::NextSpawn);
    let r = client
        .set_permission_mode(mode("plan"))
        .await
        .expect("SetPermissionMode")
        .into_inner();
    assert_eq!(r.applied(), pb::SettingApplied::NextSpawn);
    assert_eq!(r.seq, head + 2);

    // The next spawn gets them, after the resume, as typed flags.
    let first = cli.spawns();
    assert_eq!(first.len(), 1);
    send(&mut client, "src", "again").await.expect("send");
    sub.until_kind("run_ready").await;
    let respawn = cli
        .spawns()
        .into_iter()
        .find(|s| s.args.iter().any(|a| a.starts_with("--resume=")))
        .expect("the respawn");
    let (resume, rest) = after_resume(&respawn);
    assert!(resume.starts_with("stand-in-"), "{resume}");
    assert_eq!(
        rest,
        strings(&["--model=claude-opus-4-8", "--permission-mode=plan"])
    );
    stop_run(&mut client, &mut sub, "src").await;

    // A fork: the client's message_uuid is dropped; at_seq must name an
    // assistant message of the source.
    let fork = |at_seq: u64| pb::StartConfig {
        prompt: "hi".into(),
        fork: Some(pb::Fork {
            from_session_id: "src".into(),
            at_seq,
            message_uuid: "--dangerously-skip-permissions".into(),
        }),
        ..Default::default()
    };
    for at_seq in [1, 10_000] {
        let got = start_with(&mut client, "fork", fork(at_seq)).await;
        assert_refused(got, Code::InvalidArgument, "config.fork.at_seq");
    }
    assert_absent(&mut client, "fork").await;
    let fsub = start_ready(&mut client, "fork", fork(0)).await;
    let forked = cli
        .spawns()
        .into_iter()
        .find(|s| s.args.contains(&"--fork-session".to_owned()))
        .expect("the fork's spawn");
    let (_, rest) = after_resume(&forked);
    assert_eq!(
        rest,
        strings(&[
            "--fork-session",
            "--model=claude-opus-4-8",
            "--permission-mode=plan"
        ]),
        "the source's settings, and no client uuid"
    );
    let recorded = run_start_config(&fsub.events[0]);
    let f = recorded.fork.as_ref().expect("fork recorded");
    assert_eq!(
        (f.from_session_id.as_str(), f.message_uuid.as_str()),
        ("src", "")
    );
    server.shutdown().await.expect("shutdown");
}
