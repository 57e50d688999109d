//! The binary explaining itself, run as a user runs it (the built
//! `agent-harness`, a child process with an environment of the test's
//! making): `--version` names the commit, `completions` and `man` print
//! what the clap definitions hold, and `doctor` says ok, warn or fail for
//! each thing `serve` needs, with what to fix, exiting 1 on any fail: no
//! claude CLI on PATH (the install line), the real CLI with and without a
//! login, a token file others may read, a data dir that cannot be made, a
//! busy port, a store that does not answer and one that does. A shell
//! script stands in for the CLI where the real one cannot be made to say
//! it: versions outside the tested ones, a login only in the server's CLI
//! directory. And the log lines `serve` writes, as text or as JSON.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use agent_harness_fake_api::cli::claude_bin;
use agent_harness_server::doctor::{TESTED_CLAUDE, TESTED_CODEX};

/// What one run of the binary did.
#[derive(Debug)]
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Ran {
    /// The report line of `what` (`claude CLI`, `port`, ...).
    fn line(&self, what: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| {
                l.get(6..)
                    .is_some_and(|rest| rest.starts_with(&format!("{what}:")))
            })
            .unwrap_or_else(|| panic!("no {what:?} line in:\n{}", self.stdout))
    }
}

/// Runs `agent-harness ARGS` with only `env` (and `HOME`) in its
/// environment: no CLAUDE_BIN, no API key, a PATH without the CLI unless
/// the test gives one.
fn run(home: &Path, args: &[&str], env: &[(&str, &str)]) -> Ran {
    let out = Command::new(env!("CARGO_BIN_EXE_agent-harness"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .envs(env.iter().copied())
        .current_dir(home)
        .output()
        .expect("run agent-harness");
    Ran {
        code: out.status.code().expect("exited"),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// `doctor` with a data dir of the test and a port nobody holds.
fn doctor(home: &Path, extra: &[&str], env: &[(&str, &str)]) -> Ran {
    let data = home.join("data");
    let mut args = vec![
        "doctor",
        "--data-dir",
        data.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    run(home, args.as_slice(), env)
}

fn home() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[test]
fn version_names_the_commit_it_was_built_from() {
    let dir = home();
    for flag in ["--version", "-V"] {
        let ran = run(dir.path(), &[flag], &[]);
        assert_eq!(ran.code, 0, "{ran:?}");
        let line = ran.stdout.trim();
        let version = env!("CARGO_PKG_VERSION");
        let commit = line
            .strip_prefix(&format!("agent-harness {version} (commit "))
            .and_then(|rest| rest.strip_suffix(')'))
            .unwrap_or_else(|| panic!("{line:?}"));
        // Built in this repository's checkout: its HEAD, maybe dirty.
        let head = Command::new("git")
            .args(["rev-parse", "--short=10", "HEAD"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
        match head {
            Some(head) => assert!(
                commit == head || commit == format!("{head}-dirty"),
                "{commit:?} is not HEAD {head:?}"
            ),
            None => assert_eq!(commit, "unknown"),
        }
    }
}

#[test]
fn completions_cover_every_command_in_every_shell() {
    let dir = home();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let ran = run(dir.path(), &["completions", shell], &[]);
        assert_eq!(ran.code, 0, "{shell}: {ran:?}");
        // fish names long flags without their dashes.
        for word in ["serve", "doctor", "tail", "data-dir", "until-idle"] {
            assert!(ran.stdout.contains(word), "{shell} completions lack {word}");
        }
    }
    let ran = run(dir.path(), &["completions", "tcsh"], &[]);
    assert_eq!(ran.code, 2, "{ran:?}");
}

#[test]
fn man_pages_are_roff_from_the_help_text() {
    let dir = home();
    let ran = run(dir.path(), &["man"], &[]);
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(ran.stdout.contains(".TH agent-harness 1"), "{}", ran.stdout);
    for sub in ["agent\\-harness\\-serve(1)", "agent\\-harness\\-doctor(1)"] {
        assert!(ran.stdout.contains(sub), "{sub} missing:\n{}", ran.stdout);
    }
    let serve = run(dir.path(), &["man", "serve"], &[]);
    assert_eq!(serve.code, 0, "{serve:?}");
    assert!(
        serve.stdout.contains(".TH agent-harness-serve 1"),
        "{}",
        serve.stdout
    );
    // A flag of serve's own, one of a flattened subsystem's, a default.
    for flag in ["\\-\\-data\\-dir", "\\-\\-claude\\-bin", "127.0.0.1:50051"] {
        assert!(serve.stdout.contains(flag), "{flag} missing");
    }
    let unknown = run(dir.path(), &["man", "nope"], &[]);
    assert_eq!(unknown.code, 1, "{unknown:?}");
    assert!(
        unknown.stderr.contains("nope") && unknown.stderr.contains("doctor"),
        "{unknown:?}"
    );
}

#[test]
fn without_the_cli_doctor_says_what_to_install() {
    let dir = home();
    let ran = doctor(dir.path(), &[], &[]);
    assert_eq!(ran.code, 1, "{ran:?}");
    let line = ran.line("claude CLI");
    assert!(line.starts_with("fail "), "{line}");
    for fix in ["npm install -g @anthropic-ai/claude-code", "--claude-bin"] {
        assert!(line.contains(fix), "{line}");
    }
    // The rest is still checked, and in order here.
    assert!(ran.line("data dir").starts_with("ok "), "{}", ran.stdout);
    assert!(ran.line("port").starts_with("ok "), "{}", ran.stdout);
    assert!(ran.stdout.contains("1 failure"), "{}", ran.stdout);
    // A named binary that is not one says so.
    let ran = doctor(dir.path(), &["--claude-bin", "/nonexistent/claude"], &[]);
    let line = ran.line("claude CLI");
    assert!(
        line.starts_with("fail ") && line.contains("/nonexistent/claude"),
        "{line}"
    );
}

#[test]
fn the_real_cli_is_found_versioned_and_asked_whether_it_is_logged_in() {
    let dir = home();
    let bin = claude_bin();
    let bin = bin.to_str().unwrap();
    let logged_out = doctor(dir.path(), &[], &[("CLAUDE_BIN", bin)]);
    assert_eq!(logged_out.code, 1, "{logged_out:?}");
    let cli = logged_out.line("claude CLI");
    assert!(cli.starts_with("ok ") && cli.contains(bin), "{cli}");
    assert!(
        cli.contains(&format!("version {} (tested)", TESTED_CLAUDE[0])),
        "{cli}"
    );
    let login = logged_out.line("claude login");
    assert!(
        login.starts_with("fail ") && login.contains("not logged in"),
        "{login}"
    );
    for fix in ["claude auth login", "ANTHROPIC_API_KEY"] {
        assert!(login.contains(fix), "{login}");
    }
    // Nothing of the server's was made: no data dir, no CLI config in it.
    assert!(!dir.path().join("data").exists());

    let with_key = doctor(
        dir.path(),
        &[],
        &[("CLAUDE_BIN", bin), ("ANTHROPIC_API_KEY", "sk-ant-test")],
    );
    assert_eq!(with_key.code, 0, "{with_key:?}");
    let login = with_key.line("claude login");
    assert!(
        login.starts_with("ok ") && login.contains("ANTHROPIC_API_KEY"),
        "{login}"
    );
    assert!(with_key.stdout.contains("Everything checked is in order"));
}

/// A stand-in claude: `--version` prints `version`; `auth status` says
/// logged in only with `CLAUDE_CONFIG_DIR` set (the server's directory).
fn scripted_claude(dir: &Path, version: &str) -> PathBuf {
    let bin = dir.join(format!("claude-{version}"));
    std::fs::write(
        &bin,
        format!(
            "#!/bin/sh\n\
             if [ \"$1\" = --version ]; then echo '{version} (Claude Code)'; exit 0; fi\n\
             if [ -n \"$CLAUDE_CONFIG_DIR\" ]; then echo '{{\"loggedIn\":true,\"authMethod\":\"claude.ai\"}}'; exit 0; fi\n\
             echo '{{\"loggedIn\":false,\"authMethod\":\"none\"}}'; exit 1\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

#[test]
fn versions_outside_the_tested_ones_warn_with_the_install_line() {
    let dir = home();
    let newest = format!(
        "npm install -g @anthropic-ai/claude-code@{}",
        TESTED_CLAUDE[1]
    );
    for (version, level, says) in [
        ("2.0.1", "warn ", "older than any release tested"),
        ("9.0.0", "warn ", "newer than the releases tested"),
        ("2.1.250", "ok ", "between the releases tested"),
        (TESTED_CLAUDE[1], "ok ", "(tested)"),
    ] {
        let bin = scripted_claude(dir.path(), version);
        let ran = doctor(dir.path(), &["--claude-bin", bin.to_str().unwrap()], &[]);
        let line = ran.line("claude CLI");
        assert!(line.starts_with(level) && line.contains(says), "{line}");
        assert_eq!(line.starts_with("warn "), line.contains(&newest), "{line}");
    }
}

#[test]
fn a_login_in_the_servers_cli_directory_counts() {
    let dir = home();
    let bin = scripted_claude(dir.path(), TESTED_CLAUDE[0]);
    let flag = ["--claude-bin", bin.to_str().unwrap()];
    // Before serve has made the directory: asked with the operator's login.
    let ran = doctor(dir.path(), &flag, &[]);
    let line = ran.line("claude login");
    assert!(
        line.starts_with("fail ") && line.contains("not logged in"),
        "{line}"
    );
    // Once it holds a login, asked there.
    let cli_dir = dir.path().join("data/claude");
    std::fs::create_dir_all(&cli_dir).unwrap();
    std::fs::write(cli_dir.join(".credentials.json"), "{}").unwrap();
    let ran = doctor(dir.path(), &flag, &[]);
    assert_eq!(ran.code, 0, "{ran:?}");
    let line = ran.line("claude login");
    assert!(
        line.starts_with("ok ")
            && line.contains("logged in (claude.ai)")
            && line.contains(cli_dir.to_str().unwrap()),
        "{line}"
    );
}

#[test]
fn a_token_file_others_can_read_fails_and_an_owner_only_one_passes() {
    let dir = home();
    let token = dir.path().join("token");
    std::fs::write(&token, "abc\n").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let flag = ["--auth-token-file", token.to_str().unwrap()];
    let ran = doctor(dir.path(), &flag, &[]);
    assert_eq!(ran.code, 1, "{ran:?}");
    let line = ran.line("token file");
    assert!(
        line.starts_with("fail ") && line.contains("mode 644") && line.contains("chmod 600"),
        "{line}"
    );
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    let ran = doctor(dir.path(), &flag, &[]);
    assert!(ran.line("token file").starts_with("ok "), "{}", ran.stdout);
    // Without one, a non-loopback address is refused.
    let ran = run(
        dir.path(),
        &["doctor", "--data-dir", "data", "--listen", "0.0.0.0:0"],
        &[],
    );
    let line = ran.line("token file");
    assert!(
        line.starts_with("fail ") && line.contains("agent-harness token"),
        "{line}"
    );
}

#[test]
fn a_data_dir_that_cannot_be_made_or_written_fails() {
    let dir = home();
    // Under a regular file: no user can create it, root neither.
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    let under_file = file.join("data");
    let ran = run(
        dir.path(),
        &[
            "doctor",
            "--data-dir",
            under_file.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    );
    assert_eq!(ran.code, 1, "{ran:?}");
    let line = ran.line("data dir");
    assert!(
        line.starts_with("fail ")
            && line.contains("is not a directory")
            && line.contains("--data-dir"),
        "{line}"
    );
    // A directory this user may not write into (root may write anywhere).
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o500)).unwrap();
    let ran = run(
        dir.path(),
        &[
            "doctor",
            "--data-dir",
            locked.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    );
    let line = ran.line("data dir").to_owned();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
    if is_root() {
        assert!(line.starts_with("ok "), "{line}");
    } else {
        assert!(
            line.starts_with("fail ") && line.contains("not writable"),
            "{line}"
        );
    }
    // One group and others may enter: a warning with the chmod.
    let shared = dir.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ran = run(
        dir.path(),
        &[
            "doctor",
            "--data-dir",
            shared.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ],
        &[],
    );
    let line = ran.line("data dir");
    assert!(
        line.starts_with("warn ") && line.contains("chmod 700"),
        "{line}"
    );
}

#[test]
fn a_busy_port_fails_naming_it() {
    let dir = home();
    let held = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    let data = dir.path().join("data");
    let ran = run(
        dir.path(),
        &[
            "doctor",
            "--data-dir",
            data.to_str().unwrap(),
            "--listen",
            &addr,
        ],
        &[],
    );
    assert_eq!(ran.code, 1, "{ran:?}");
    let line = ran.line("port");
    assert!(
        line.starts_with("fail ") && line.contains(&addr) && line.contains("in use"),
        "{line}"
    );
    drop(held);
}

#[test]
fn the_store_url_is_connected_to_and_never_shown_with_its_password() {
    let dir = home();
    // Nothing listens on port 1.
    let ran = doctor(
        dir.path(),
        &["--store-url", "postgres://app:s3cret@127.0.0.1:1/log"],
        &[],
    );
    assert_eq!(ran.code, 1, "{ran:?}");
    let line = ran.line("store");
    assert!(
        line.starts_with("fail ") && line.contains("127.0.0.1:1"),
        "{line}"
    );
    assert!(!ran.stdout.contains("s3cret"), "{}", ran.stdout);
    if !agent_harness_pg_temp::installed() {
        eprintln!("PostgreSQL is not installed: the reachable store is not checked");
        return;
    }
    let cluster = agent_harness_pg_temp::Cluster::start();
    let url = cluster.fresh_database();
    let ran = doctor(dir.path(), &["--store-url", &url], &[]);
    let line = ran.line("store");
    assert!(
        line.starts_with("ok ") && line.contains("PostgreSQL"),
        "{line}"
    );
}

#[test]
fn the_tested_versions_are_the_ones_the_suites_install() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let pinned = |dir: &str, package: &str| -> String {
        let path: PathBuf = root.join(dir).join("package.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json["dependencies"][package]
            .as_str()
            .unwrap_or_else(|| panic!("{package} in {}", path.display()))
            .to_owned()
    };
    assert_eq!(
        [
            pinned("tests/tools", "@anthropic-ai/claude-code"),
            pinned("tests/tools/newest", "@anthropic-ai/claude-code")
        ],
        TESTED_CLAUDE,
        "doctor's tested claude versions must follow the suites' pins"
    );
    assert_eq!(
        [
            pinned("tests/tools", "@openai/codex"),
            pinned("tests/tools/newest", "@openai/codex")
        ],
        TESTED_CODEX,
        "doctor's tested codex versions must follow the suites' pins"
    );
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `serve` on a free port and a fresh data dir with `extra` flags, until it
/// has opened its store; then SIGTERM. Its stderr lines, all of them.
fn serve_log_lines(home: &Path, extra: &[&str]) -> Vec<String> {
    use std::io::BufRead;
    use std::process::Stdio;
    let data = home.join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_agent-harness"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .args(extra)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .current_dir(home)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run serve");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let _ = tx.send(line.unwrap());
        }
    });
    let mut lines = Vec::new();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !lines
        .iter()
        .any(|l: &String| l.contains("event store open"))
    {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => lines.push(line),
            Err(e) => {
                let _ = child.kill();
                panic!("no \"event store open\" line ({e}): {lines:#?}");
            }
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "serve after SIGTERM: {status:?}");
    reader.join().unwrap();
    lines.extend(rx.try_iter());
    lines
}

#[test]
fn serve_writes_one_json_object_per_log_line_when_asked() {
    let home = home();
    let lines = serve_log_lines(home.path(), &["--log-format", "json"]);
    assert!(lines.len() >= 3, "{lines:#?}");
    let mut messages = Vec::new();
    for line in &lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        for key in ["timestamp", "level", "target"] {
            assert!(v[key].is_string(), "{key} in {line}");
        }
        assert!(
            ["ERROR", "WARN", "INFO", "DEBUG", "TRACE"].contains(&v["level"].as_str().unwrap()),
            "{line}"
        );
        messages.push(
            v["fields"]["message"]
                .as_str()
                .expect("a message")
                .to_owned(),
        );
    }
    assert!(
        messages.iter().any(|m| m == "event store open"),
        "{messages:?}"
    );
    // The shutdown is logged too, in the same format.
    assert!(
        messages.iter().any(|m| m.starts_with("shutting down")),
        "{messages:?}"
    );

    // The default is text: the same start-up, not JSON.
    let home = self::home();
    let text = serve_log_lines(home.path(), &[]);
    let open = text
        .iter()
        .find(|l| l.contains("event store open"))
        .unwrap();
    assert!(
        serde_json::from_str::<serde_json::Value>(open).is_err(),
        "{open}"
    );
    assert!(open.contains("INFO"), "{open}");

    // An unknown format is refused before anything starts, naming the choices.
    let bad = run(home.path(), &["serve", "--log-format", "yaml"], &[]);
    assert_eq!(bad.code, 2, "{bad:?}");
    assert!(
        bad.stderr.contains("text") && bad.stderr.contains("json"),
        "{}",
        bad.stderr
    );
}
