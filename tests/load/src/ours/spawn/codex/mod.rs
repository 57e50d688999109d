//! What our server adds over driving Codex directly, both talking to the
//! scripted Responses API (`fake-messages-api --codex-home`) on loopback,
//! and what a live Codex session costs in memory:
//!
//! - **Start → first answer**. Ours: from sending `Start` (agent `codex`)
//!   to the first `content` event on a Subscribe stream opened (and caught
//!   up) before it. Raw: from spawning `codex app-server --listen stdio://`
//!   with the adapter's argv, writing the same handshake (`initialize`,
//!   `initialized`, `thread/start` with the same settings) and the same
//!   first `turn/start`, to its first `item/completed` agentMessage line.
//! - **Send → first answer**. On the live process (second turn). Ours:
//!   from sending `Send` to the first `content` event. Raw: from writing
//!   `turn/start` to the first `item/completed` agentMessage.
//! - **Memory per live session**. Ours: `n` Codex sessions started through
//!   the server, each idle after one turn with its process alive: the RSS
//!   of each codex process tree (the process and every descendant) and the
//!   server's RSS growth per session. Raw: the RSS of the directly driven
//!   codex tree after its first turn.
//!
//! One discarded warm-up of each, then the rounds interleave (ours, raw,
//! raw, ours, ...) as in the claude comparison, with the same pause before
//! the second input. Both use one CODEX_HOME (its config.toml written by
//! the fake) and one working directory. Every round checks the scripted
//! reply and panics with what it saw otherwise; nothing asserts on timings.

use super::*;

mod ours;
mod raw;

/// What to run.
#[derive(Debug, Clone)]
pub struct CodexOptions {
    /// The `agent-harness` binary (release for real figures).
    pub harness_bin: PathBuf,
    /// The real `codex` binary.
    pub codex_bin: PathBuf,
    /// The server's `--claude-bin` (unused here; the server wants one).
    pub claude_bin: PathBuf,
    /// `fake-messages-api`.
    pub fake_api_bin: PathBuf,
    /// Live sessions held for the memory figures.
    pub sessions: usize,
    /// As [`SpawnOptions::pause_before_send`].
    pub pause_before_send: Duration,
}

/// Memory of live Codex sessions.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CodexMemory {
    /// Live sessions held (idle after one turn, process alive).
    pub sessions: usize,
    /// Mean RSS of one session's codex process tree through the server, bytes.
    pub ours_tree_rss: f64,
    /// The largest of those, bytes.
    pub ours_tree_rss_max: u64,
    /// Mean RSS of the directly driven codex tree after its first turn, bytes.
    pub raw_tree_rss: f64,
    /// Server RSS before the sessions, bytes.
    pub server_rss_before: u64,
    /// Server RSS with all of them live, bytes.
    pub server_rss_after: u64,
    /// (after − before) / sessions, bytes.
    pub server_per_session: f64,
}

/// The figures.
#[derive(Debug, Clone, Serialize)]
pub struct CodexReport {
    /// `codex --version`.
    pub codex_version: String,
    /// Rounds timed (each: one of ours, one raw), after one warm-up each.
    pub rounds: usize,
    /// [`CodexOptions::pause_before_send`], ms.
    pub pause_before_send_ms: f64,
    /// Start → first content vs spawn → first agentMessage.
    pub start_to_answer: Compared,
    /// Send → first content vs turn/start → first agentMessage.
    pub send_to_answer: Compared,
    /// Start → run_ready on the stream vs spawn → the thread/start reply
    /// (the thread started; where a Start's time goes, before the model).
    pub start_to_ready: Compared,
    /// Memory per live session.
    pub memory: CodexMemory,
    /// `/proc/loadavg` (1, 5, 15 min) before and after.
    pub loadavg_before: [f64; 3],
    pub loadavg_after: [f64; 3],
}

impl CodexReport {
    /// Two small markdown tables.
    pub fn print(&self) {
        let l = |a: [f64; 3]| format!("{:.2} {:.2} {:.2}", a[0], a[1], a[2]);
        println!(
            "### Codex: ours (agent-harness) vs codex app-server driven directly\n\n\
             {} (`codex app-server --listen stdio://`), {} interleaved rounds (ours, raw, raw, \
             ours, ...), fake Responses API on loopback, second input {:.0} ms after the first \
             turn's end; load average {} before, {} after.\n",
            self.codex_version,
            self.rounds,
            self.pause_before_send_ms,
            l(self.loadavg_before),
            l(self.loadavg_after)
        );
        Compared::print_table(&[
            ("Start → first answer", &self.start_to_answer),
            ("Send → first answer", &self.send_to_answer),
            (
                "Start → run_ready vs spawn → thread/start reply",
                &self.start_to_ready,
            ),
        ]);
        let m = &self.memory;
        let mib = |b: f64| b / 1048576.0;
        println!(
            "\n| memory per live Codex session ({} held) | MiB |",
            m.sessions
        );
        println!("|---|--:|");
        println!(
            "| codex process tree through us, mean (max) | {:.1} ({:.1}) |",
            mib(m.ours_tree_rss),
            mib(m.ours_tree_rss_max as f64)
        );
        println!(
            "| codex process tree driven directly, after one turn, mean | {:.1} |",
            mib(m.raw_tree_rss)
        );
        println!(
            "| server RSS growth per session ({:.1} → {:.1} MiB) | {:.2} |",
            mib(m.server_rss_before as f64),
            mib(m.server_rss_after as f64),
            mib(m.server_per_session)
        );
    }
}

/// Runs one warm-up of each, `rounds` interleaved rounds, then the memory
/// of `opts.sessions` live sessions.
pub async fn measure(opts: &CodexOptions, rounds: usize) -> CodexReport {
    let loadavg_before = loadavg();
    let root = tempfile::tempdir().expect("a temp dir");
    let [home, work, data, codex_home] =
        ["home", "work", "data", "codex-home"].map(|d| root.path().join(d));
    for d in [&home, &work, &data] {
        std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("create {}: {e}", d.display()));
    }
    let mut fake_args: Vec<OsString> = vec!["--codex-home".into()];
    fake_args.push(codex_home.clone().into());
    let api = FakeApiProcess::start_with(&opts.fake_api_bin, &fake_args).await;
    let env = codex_env(&home);
    let mut server_args: Vec<OsString> = vec!["--codex-bin".into(), opts.codex_bin.clone().into()];
    server_args.push("--codex-home".into());
    server_args.push(codex_home.clone().into());
    let server = Server::start(&ServerOptions {
        bin: opts.harness_bin.clone(),
        data_dir: data,
        claude_bin: opts.claude_bin.clone(),
        env: env.clone(),
        args: server_args,
    })
    .await;
    let client = server.connect().await.rpc;
    let raw = raw::RawCodex {
        bin: opts.codex_bin.clone(),
        env: env
            .iter()
            .cloned()
            .chain([("CODEX_HOME".into(), codex_home.clone().into())])
            .collect(),
        work: work.clone(),
    };

    let pause = opts.pause_before_send;
    ours::round(&client, "codex-warmup", &work, "warmup", pause).await;
    raw.round("warmup", pause).await;
    let mut o = Vec::with_capacity(rounds);
    let mut r = Vec::with_capacity(rounds);
    for i in 0..rounds {
        let tag = i.to_string();
        let session = format!("codex-{i}");
        if i % 2 == 0 {
            o.push(ours::round(&client, &session, &work, &tag, pause).await);
            r.push(raw.round(&tag, pause).await);
        } else {
            r.push(raw.round(&tag, pause).await);
            o.push(ours::round(&client, &session, &work, &tag, pause).await);
        }
    }

    let held = ours::hold(&client, &server, &work, opts.sessions).await;
    server.stop();
    drop(api);

    let raw_tree_rss = if r.is_empty() {
        0.0
    } else {
        r.iter().map(|s| s.tree_rss as f64).sum::<f64>() / r.len() as f64
    };
    CodexReport {
        codex_version: codex_version(&opts.codex_bin),
        rounds,
        pause_before_send_ms: pause.as_secs_f64() * 1e3,
        start_to_answer: Compared::new(
            o.iter().map(|s| s.start_answer).collect(),
            r.iter().map(|s| s.start_answer).collect(),
        ),
        send_to_answer: Compared::new(
            o.iter().map(|s| s.send_answer).collect(),
            r.iter().map(|s| s.send_answer).collect(),
        ),
        start_to_ready: Compared::new(
            o.iter().map(|s| s.start_ready).collect(),
            r.iter().map(|s| s.start_ready).collect(),
        ),
        memory: CodexMemory {
            raw_tree_rss,
            ..held
        },
        loadavg_before,
        loadavg_after: loadavg(),
    }
}

/// Codex's environment against the fake besides `CODEX_HOME` (which the
/// server gets as `--codex-home`): given to the server, whose Codex
/// inherits it, and to the raw codex.
fn codex_env(home: &Path) -> Vec<(OsString, OsString)> {
    vec![
        ("HOME".into(), home.into()),
        // The key variable the fake's provider block names (any value).
        ("FAKE_API_KEY".into(), "test".into()),
    ]
}

/// `codex --version`'s line ("" when it cannot say).
fn codex_version(bin: &Path) -> String {
    std::process::Command::new(bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default()
}
