//! The terminal client end to end: the built `agent-harness` binary run as
//! a subprocess (`ls`, `start`, `send`, `tail`, `stop`, `approve`, `deny`)
//! against the real server binary (`agent-harness serve`, a child process)
//! running the REAL claude CLI against the scripted Messages API, in relay
//! mode (permission prompts reach the client).
//!
//! What a user or a script relies on: the answer shows in `tail`, which
//! ends with the turn under `--until-idle`; `ls --json` is one proto3-JSON
//! session per line; a permission prompt printed by `tail` is answered by
//! the `approve` / `deny` it names; `stop` ends a turn mid-answer and
//! `tail` says so in its exit code, as it does a turn the API failed;
//! unknown sessions, missing tokens and untrusted certificates exit with
//! their documented codes.

#[path = "../support/mod.rs"]
mod support;

use std::path::Path;
use std::process::Stdio;

use agent_harness_fake_api::FakeApi;
use agent_harness_server::cli_client::exit;
use support::cli_grpc::WAIT;
use support::common::claude_bin;
use support::server_process::{self, ServerProcess};
use tokio::io::AsyncReadExt;
use tokio::process::{Child, ChildStdout, Command};

/// What one client command did.
#[derive(Debug)]
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// A server and what it runs on: the fake API, HOME, its working
/// directory (the sessions' cwd) and data dir.
struct World {
    api: FakeApi,
    home: tempfile::TempDir,
    work: tempfile::TempDir,
    data: tempfile::TempDir,
    marker: String,
}

impl World {
    async fn new() -> Self {
        Self {
            api: FakeApi::start().await,
            home: tempfile::tempdir().expect("home"),
            work: tempfile::tempdir().expect("work"),
            data: tempfile::tempdir().expect("data"),
            marker: uuid::Uuid::new_v4().to_string(),
        }
    }

    /// `serve` with `extra` flags, once it answers the client.
    async fn serve(&self, extra: &[&str]) -> Server {
        self.serve_as(extra, ServerProcess::url, Vec::new()).await
    }

    /// [`World::serve`] reached at `url` of the process, with
    /// `client_args` on every client command.
    async fn serve_as(
        &self,
        extra: &[&str],
        url: impl Fn(&ServerProcess) -> String,
        client_args: Vec<String>,
    ) -> Server {
        let claude = claude_bin();
        let process = server_process::spawn_with(
            &server_process::Spawn {
                claude_bin: &claude,
                api: &self.api,
                data: self.data.path(),
                home: self.home.path(),
                work: self.work.path(),
                log: self.data.path().join("server.log"),
                marker: &self.marker,
                store_url: None,
                node_id: None,
                node_lease: None,
                failpoint: None,
            },
            extra,
        );
        let server = Server {
            url: url(&process),
            process,
            client_args,
        };
        // Listening once the client gets any answer but "unavailable".
        let deadline = tokio::time::Instant::now() + WAIT;
        while server.run(&["ls"], &[]).await.code == i32::from(exit::UNAVAILABLE) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server did not answer:\n{}",
                server.process.log_text()
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        server
    }
}

struct Server {
    process: ServerProcess,
    /// `--server` of every command.
    url: String,
    /// More flags of every command.
    client_args: Vec<String>,
}

impl Server {
    /// The client command `args` with `env` set (no token or server from
    /// the test's own environment).
    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut cmd = Command::new(server_process::server_bin());
        cmd.args(args)
            .arg("--server")
            .arg(&self.url)
            .args(&self.client_args)
            .env_remove("AGENT_HARNESS_SERVER")
            .env_remove("AGENT_HARNESS_TOKEN")
            .env_remove("AGENT_HARNESS_TOKEN_FILE")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        cmd
    }

    async fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Ran {
        let out = tokio::time::timeout(WAIT, self.command(args, env).output())
            .await
            .unwrap_or_else(|_| panic!("agent-harness {args:?} within {WAIT:?}"))
            .expect("run agent-harness");
        Ran {
            code: out.status.code().expect("exited"),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Runs `args` and asserts it succeeded.
    async fn ok(&self, args: &[&str]) -> String {
        let ran = self.run(args, &[]).await;
        assert_eq!(ran.code, 0, "agent-harness {args:?}: {ran:?}");
        ran.stdout
    }

    /// `tail` as a running child, its stdout read line by line.
    fn tail(&self, args: &[&str]) -> Tail {
        let mut child = self
            .command(args, &[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tail");
        let stdout = child.stdout.take().expect("stdout");
        Tail {
            child,
            stdout,
            text: String::new(),
            read: 0,
        }
    }
}

/// A running `tail` and what it printed so far.
struct Tail {
    child: Child,
    stdout: ChildStdout,
    text: String,
    /// The bytes of `text` that [`Tail::line_where`] has looked at.
    read: usize,
}

impl Tail {
    /// Reads more output; false at its end.
    async fn more(&mut self, what: &str) -> bool {
        let mut buf = [0u8; 4096];
        let n = tokio::time::timeout(WAIT, self.stdout.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("{what} within {WAIT:?}; so far:\n{}", self.text))
            .expect("read tail");
        self.text.push_str(&String::from_utf8_lossy(&buf[..n]));
        n > 0
    }

    /// Reads until the output (partial lines included: live typing has no
    /// newline until its text is recorded) satisfies `pred`.
    async fn until(&mut self, what: &str, pred: impl Fn(&str) -> bool) {
        while !pred(&self.text) {
            assert!(
                self.more(what).await,
                "tail ended before {what}:\n{}",
                self.text
            );
        }
    }

    /// Reads until a whole line not looked at yet satisfies `pred`;
    /// returns it.
    async fn line_where(&mut self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        loop {
            while let Some(end) = self.text[self.read..].find('\n') {
                let line = self.text[self.read..self.read + end].to_owned();
                self.read += end + 1;
                if pred(&line) {
                    return line;
                }
            }
            assert!(
                self.more(what).await,
                "tail ended before {what}:\n{}",
                self.text
            );
        }
    }

    /// Waits for the exit; the code and everything it printed.
    async fn finish(mut self) -> (i32, String) {
        while self.more("the end of tail").await {}
        let status = self.child.wait().await.expect("tail exits");
        (status.code().expect("exited"), self.text)
    }
}

/// The request id of a `? permission REQ: ...` line.
fn request_id(line: &str) -> String {
    line.strip_prefix("? permission ")
        .and_then(|rest| rest.split_once(':'))
        .map(|(id, _)| id.to_owned())
        .unwrap_or_else(|| panic!("not a permission line: {line}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_started_followed_answered_and_stopped_from_the_shell() {
    let world = World::new().await;
    let server = world.serve(&[]).await;

    // start, then tail until the turn ends: the answer is shown once.
    let started = server
        .ok(&["start", "s1", "TEXT hello from the shell"])
        .await;
    assert!(started.starts_with("started s1 (run "), "{started}");
    let (code, out) = server.tail(&["tail", "s1", "--until-idle"]).finish().await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("> TEXT hello from the shell"), "{out}");
    assert_eq!(
        out.matches("hello from the shell").count(),
        2,
        "prompt and answer once each: {out}"
    );
    assert!(out.contains("-- turn ended: ok"), "{out}");

    // send, the message read from stdin.
    let mut send = server.command(&["send", "s1", "-"], &[]);
    let mut child = send
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("send");
    {
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"TEXT second answer").await.expect("write");
    }
    let sent = child.wait_with_output().await.expect("send runs");
    assert!(sent.status.success(), "{sent:?}");
    let (code, out) = server.tail(&["tail", "s1", "--until-idle"]).finish().await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("second answer"), "{out}");

    // ls --json: one proto3-JSON Session per line.
    let listed = server.ok(&["ls", "--json"]).await;
    let sessions: Vec<serde_json::Value> = listed
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(sessions.len(), 1, "{listed}");
    assert_eq!(sessions[0]["sessionId"], "s1");
    assert_eq!(sessions[0]["status"], "SESSION_STATUS_IDLE");
    assert_eq!(sessions[0]["title"], "TEXT hello from the shell");

    // title: renames it (SetTitle); ls shows the new name, an empty one goes
    // back to the first prompt's.
    server.ok(&["title", "s1", "Shell session"]).await;
    let listed = server.ok(&["ls", "--json"]).await;
    let renamed: serde_json::Value =
        serde_json::from_str(listed.lines().next().expect("a line")).expect("JSON");
    assert_eq!(renamed["title"], "Shell session", "{listed}");
    let too_long = "x".repeat(201);
    let refused = server.run(&["title", "s1", &too_long], &[]).await;
    assert_eq!(refused.code, 1, "an over-long title is a usage error");
    let table = server.ok(&["ls"]).await;
    assert!(table.contains("Shell session"), "{table}");
    server.ok(&["title", "s1", ""]).await;
    let listed = server.ok(&["ls", "--json"]).await;
    let cleared: serde_json::Value =
        serde_json::from_str(listed.lines().next().expect("a line")).expect("JSON");
    assert_eq!(cleared["title"], "TEXT hello from the shell", "{listed}");
    let table = server.ok(&["ls"]).await;
    assert!(table.starts_with("ID "), "{table}");
    assert!(
        table.lines().nth(1).unwrap_or_default().starts_with("s1 "),
        "{table}"
    );

    // A permission prompt, approved with the command tail prints.
    let head = server
        .ok(&["history", "s1", "--json"])
        .await
        .lines()
        .count();
    server.ok(&["send", "s1", "WRITE allowed.txt yes"]).await;
    let mut tail = server.tail(&[
        "tail",
        "s1",
        "--until-idle",
        "--after-seq",
        &head.to_string(),
    ]);
    let prompt = tail
        .line_where("the permission prompt", |l| l.starts_with("? permission "))
        .await;
    let approve = tail
        .line_where("the approve command", |l| l.contains("approve"))
        .await;
    let allowed = request_id(&prompt);
    let id = allowed.clone();
    assert_eq!(
        approve.trim(),
        format!(
            "allow: agent-harness approve s1 {id} --server {}",
            server.url
        ),
        "a server found by flag is named"
    );
    // The suggested command, run as printed.
    let suggested: Vec<&str> = approve
        .trim()
        .strip_prefix("allow: agent-harness ")
        .expect("a command")
        .split_whitespace()
        .collect();
    let approved = Command::new(server_process::server_bin())
        .args(&suggested)
        .env_remove("AGENT_HARNESS_SERVER")
        .output()
        .await
        .expect("approve");
    assert!(approved.status.success(), "{approved:?}");
    assert_eq!(
        String::from_utf8_lossy(&approved.stdout).trim(),
        format!("allowed {id}")
    );
    let (code, out) = tail.finish().await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("-- permission {id} allowed")),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(world.work.path().join("allowed.txt"))
            .expect("written")
            .trim(),
        "yes"
    );

    // ... and one denied, with a reason: nothing written.
    let head = server
        .ok(&["history", "s1", "--json"])
        .await
        .lines()
        .count();
    server.ok(&["send", "s1", "WRITE denied.txt no"]).await;
    let mut tail = server.tail(&[
        "tail",
        "s1",
        "--until-idle",
        "--after-seq",
        &head.to_string(),
    ]);
    let prompt = tail
        .line_where("the second prompt", |l| l.starts_with("? permission "))
        .await;
    let id = request_id(&prompt);
    assert_ne!(id, allowed, "a new request");
    let denied = server.ok(&["deny", "s1", &id, "not now"]).await;
    assert_eq!(denied.trim(), format!("denied {id}"));
    let (code, out) = tail.finish().await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("-- permission {id} denied")), "{out}");
    assert!(!Path::new(&world.work.path().join("denied.txt")).exists());
    // Answering it again: no such pending request.
    let again = server.run(&["approve", "s1", &id], &[]).await;
    assert_eq!(again.code, i32::from(exit::NOT_FOUND), "{again:?}");

    // Stop mid-answer: tail shows the answer being typed, then exits 6.
    server.ok(&["send", "s1", "SLOW 300 100"]).await;
    let mut tail = server.tail(&["tail", "s1", "--until-idle"]);
    tail.until("typing under way", |t| t.contains("tick 1 "))
        .await;
    assert_eq!(server.ok(&["stop", "s1"]).await.trim(), "stopping");
    let (code, out) = tail.finish().await;
    assert_eq!(code, i32::from(exit::TURN_STOPPED), "{out}");
    assert_eq!(
        out.matches("tick 1 ").count(),
        1,
        "typed, then completed in place: {out}"
    );
    assert!(out.contains("-- stop requested"), "{out}");

    // A turn the API fails: exit 5.
    server.ok(&["send", "s1", "ERR400"]).await;
    let (code, out) = server.tail(&["tail", "s1", "--until-idle"]).finish().await;
    assert_eq!(code, i32::from(exit::TURN_FAILED), "{out}");

    // Unknown sessions: exit 2, the server's message on stderr.
    for args in [
        &["send", "nosuch", "hi"][..],
        &["tail", "nosuch"],
        &["stop", "nosuch"],
        &["history", "nosuch"],
    ] {
        let ran = server.run(args, &[]).await;
        assert_eq!(ran.code, i32::from(exit::NOT_FOUND), "{args:?}: {ran:?}");
        assert!(ran.stderr.contains("NOT_FOUND"), "{args:?}: {ran:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ls_filters_sorts_and_limits_on_the_server() {
    let world = World::new().await;
    let server = world.serve(&[]).await;
    let project = world.work.path().join("proj");
    std::fs::create_dir(&project).expect("project dir");
    let project = project.to_str().expect("utf-8").to_owned();
    for (id, prompt, cwd) in [
        ("b-alpha", "TEXT alpha one", None),
        ("a-beta", "TEXT beta", Some(project.as_str())),
        ("c-alpha", "TEXT alpha two", None),
    ] {
        let mut args = vec!["start", id, prompt];
        if let Some(cwd) = cwd {
            args.extend(["--cwd", cwd]);
        }
        server.ok(&args).await;
        let (code, out) = server.tail(&["tail", id, "--until-idle"]).finish().await;
        assert_eq!(code, 0, "{out}");
    }
    let ids = |listed: String| -> Vec<String> {
        listed
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
                v["sessionId"].as_str().expect("an id").to_owned()
            })
            .collect()
    };
    // --query: title, id or cwd, case-insensitive.
    let alpha = ids(server
        .ok(&["ls", "--query", "ALPHA", "--order", "id", "--json"])
        .await);
    assert_eq!(alpha, ["b-alpha", "c-alpha"]);
    // --order id, and recent (the default): the newest activity first.
    let by_id = ids(server.ok(&["ls", "--order", "id", "--json"]).await);
    assert_eq!(by_id, ["a-beta", "b-alpha", "c-alpha"]);
    let recent = ids(server.ok(&["ls", "--json"]).await);
    assert_eq!(recent, ["c-alpha", "a-beta", "b-alpha"]);
    // --cwd: one project; --status and --agent filter on the server.
    let in_project = ids(server.ok(&["ls", "--cwd", &project, "--json"]).await);
    assert_eq!(in_project, ["a-beta"]);
    let idle = ids(server
        .ok(&["ls", "--status", "idle", "--order", "id", "--json"])
        .await);
    assert_eq!(idle, by_id);
    let streaming = server.ok(&["ls", "--status", "streaming", "--json"]).await;
    assert_eq!(streaming, "", "no session is streaming");
    let codex = server.ok(&["ls", "--agent", "codex", "--json"]).await;
    assert_eq!(codex, "", "no session runs codex");
    // --limit stops after that many sessions.
    let first = ids(server
        .ok(&["ls", "--order", "id", "--limit", "2", "--json"])
        .await);
    assert_eq!(first, ["a-beta", "b-alpha"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_a_token_needs_it_from_a_file_or_the_environment() {
    let world = World::new().await;
    let token_file = world.data.path().join("token");
    agent_harness_server::token::write(&token_file, "s3cret-token").expect("token");
    let token_arg = token_file.to_str().expect("utf-8 path");
    let server = world.serve(&["--auth-token-file", token_arg]).await;

    let without = server.run(&["ls"], &[]).await;
    assert_eq!(without.code, i32::from(exit::DENIED), "{without:?}");
    assert!(without.stderr.contains("UNAUTHENTICATED"), "{without:?}");
    let wrong = server
        .run(&["ls"], &[("AGENT_HARNESS_TOKEN", "not-the-token")])
        .await;
    assert_eq!(wrong.code, i32::from(exit::DENIED), "{wrong:?}");

    let with_file = server.run(&["ls", "--token-file", token_arg], &[]).await;
    assert_eq!(with_file.code, 0, "{with_file:?}");
    let with_env = server
        .run(
            &["ls", "--json"],
            &[("AGENT_HARNESS_TOKEN", "s3cret-token")],
        )
        .await;
    assert_eq!(with_env.code, 0, "{with_env:?}");
    // A tail is refused at once, not retried for ever.
    let tail = server.run(&["tail", "s1"], &[]).await;
    assert_eq!(tail.code, i32::from(exit::DENIED), "{tail:?}");

    // A token file others may read is refused before any call.
    let loose = world.data.path().join("loose");
    std::fs::write(&loose, "s3cret-token").expect("write");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let refused = server
        .run(&["ls", "--token-file", loose.to_str().expect("utf-8")], &[])
        .await;
    assert_eq!(refused.code, i32::from(exit::USAGE), "{refused:?}");
    assert!(refused.stderr.contains("chmod 600"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_server_is_checked_against_the_ca_file() {
    let world = World::new().await;
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
    let (cert_file, key_file) = (
        world.data.path().join("cert.pem"),
        world.data.path().join("key.pem"),
    );
    std::fs::write(&cert_file, cert.cert.pem()).expect("cert");
    std::fs::write(&key_file, cert.signing_key.serialize_pem()).expect("key");
    let (cert_arg, key_arg) = (
        cert_file.to_str().expect("utf-8"),
        key_file.to_str().expect("utf-8"),
    );
    let server = world
        .serve_as(
            &["--tls-cert", cert_arg, "--tls-key", key_arg],
            |p| format!("https://localhost:{}", p.addr().port()),
            vec!["--ca-file".into(), cert_arg.into()],
        )
        .await;
    let listed = server.run(&["ls", "--json"], &[]).await;
    assert_eq!(listed.code, 0, "{listed:?}");

    // Without the CA the certificate is not trusted: nothing is sent.
    let bare = Command::new(server_process::server_bin())
        .args(["ls", "--server", &server.url])
        .env_remove("AGENT_HARNESS_CA_FILE")
        .output()
        .await
        .expect("run");
    assert_eq!(
        bare.status.code(),
        Some(i32::from(exit::UNAVAILABLE)),
        "{bare:?}"
    );

    // A CA file with a plain-text server is a usage error.
    let plain = Command::new(server_process::server_bin())
        .args([
            "ls",
            "--server",
            "http://127.0.0.1:1",
            "--ca-file",
            cert_arg,
        ])
        .output()
        .await
        .expect("run");
    assert_eq!(
        plain.status.code(),
        Some(i32::from(exit::USAGE)),
        "{plain:?}"
    );
}
