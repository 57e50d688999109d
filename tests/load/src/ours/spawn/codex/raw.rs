//! Codex driven directly: `codex app-server --listen stdio://` spawned with
//! the adapter's argv, the same JSON-RPC handshake and turns the adapter
//! writes, and the same settings.

use super::super::raw::RawCli;
use super::*;
use crate::os::tree_rss;
use agent_harness_server::adapter::claude::PermissionMode;
use agent_harness_server::adapter::codex::{APP_SERVER_ARGS, approval_for};
use serde_json::json;

/// How to spawn it.
pub(super) struct RawCodex {
    pub(super) bin: PathBuf,
    /// HOME, the provider's key, CODEX_HOME.
    pub(super) env: Vec<(OsString, OsString)>,
    pub(super) work: PathBuf,
}

/// One round driven directly.
pub(super) struct Sample {
    pub(super) start_answer: Duration,
    /// Spawn → the thread/start reply (the thread started).
    pub(super) start_ready: Duration,
    pub(super) send_answer: Duration,
    /// RSS of the codex process tree after the first turn, bytes.
    pub(super) tree_rss: u64,
}

impl RawCodex {
    /// Spawn, handshake and `turn/start` `TEXT first <tag>`, timed to the
    /// first agentMessage; finish the turn, `turn/start` `TEXT again <tag>`
    /// timed likewise; finish that turn, close stdin and see it exit.
    pub(super) async fn round(&self, tag: &str, pause: Duration) -> Sample {
        let t0 = Instant::now();
        let mut cmd = Command::new(&self.bin);
        cmd.args(APP_SERVER_ARGS)
            .current_dir(&self.work)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        // As the server's Codex: none of the caller's Codex or OpenAI settings.
        for (key, _) in std::env::vars_os() {
            let k = key.to_string_lossy();
            if k.starts_with("CODEX_") || k.starts_with("OPENAI_") {
                cmd.env_remove(&key);
            }
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)));
        let mut child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", self.bin.display()));
        let mut c = Rpc {
            cli: RawCli::new(&mut child, tag),
        };
        c.send(&json!({"id": 1, "method": "initialize", "params": {
            "clientInfo": {"name": "agent-harness-load", "version": "0"},
        }}))
        .await;
        c.reply(1).await;
        c.send(&json!({"method": "initialized"})).await;
        let mut params = json!({"cwd": self.work.display().to_string()});
        if let Ok(Some(a)) = approval_for("", PermissionMode::default()) {
            params["approvalPolicy"] = json!(a.policy);
            params["sandbox"] = json!(a.sandbox);
            if let Some(config) = a.thread_config() {
                params["config"] = config;
            }
        }
        c.send(&json!({"id": 2, "method": "thread/start", "params": params}))
            .await;
        let thread = c.reply(2).await;
        let start_ready = t0.elapsed();
        let thread = thread
            .pointer("/thread/id")
            .and_then(Value::as_str)
            .unwrap_or_else(|| panic!("raw codex {tag}: thread/start answered {thread}"))
            .to_owned();
        c.turn(3, &thread, &format!("TEXT first {tag}")).await;
        let start_answer = c.answer(&format!("first {tag}")).await - t0;
        c.turn_end().await;
        let pid = child
            .id()
            .unwrap_or_else(|| panic!("raw codex {tag}: no pid"));
        let tree_rss = tree_rss(pid);

        tokio::time::sleep(pause).await;
        let t1 = Instant::now();
        c.turn(4, &thread, &format!("TEXT again {tag}")).await;
        let send_answer = c.answer(&format!("again {tag}")).await - t1;
        c.turn_end().await;

        // stdin EOF ends the app-server.
        drop(c);
        match tokio::time::timeout(WAIT, child.wait()).await {
            Ok(Ok(_)) => {}
            other => panic!("raw codex {tag}: did not exit after stdin EOF: {other:?}"),
        }
        Sample {
            start_answer,
            start_ready,
            send_answer,
            tree_rss,
        }
    }
}

/// The JSON-RPC lines of one app-server, over the raw CLI's pipes.
struct Rpc {
    cli: RawCli,
}

impl Rpc {
    async fn send(&mut self, msg: &Value) {
        self.cli.write(&format!("{msg}\n")).await;
    }

    async fn turn(&mut self, id: u64, thread: &str, text: &str) {
        self.send(&json!({"id": id, "method": "turn/start", "params": {
            "threadId": thread,
            "input": [{"type": "text", "text": text, "text_elements": []}],
        }}))
        .await;
    }

    /// Reads to the line matching `pred`, answering nothing (the fake
    /// scripts no approval); panics on a JSON-RPC error, EOF or timeout.
    async fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> (Value, Instant) {
        let tag = self.cli.tag.clone();
        loop {
            let line = match tokio::time::timeout(WAIT, self.cli.lines.next_line()).await {
                Ok(Ok(Some(l))) => l,
                Ok(Ok(None)) => panic!(
                    "raw codex {tag}: stdout closed before {what}; {}",
                    self.describe()
                ),
                Ok(Err(e)) => panic!("raw codex {tag}: reading stdout before {what}: {e}"),
                Err(_) => panic!(
                    "raw codex {tag}: no {what} within {WAIT:?}; {}",
                    self.describe()
                ),
            };
            let at = Instant::now();
            let v: Value = serde_json::from_str(&line).unwrap_or_else(|_| {
                panic!("raw codex {tag}: a stdout line that is not JSON: {line:?}")
            });
            self.cli.seen.push(v.clone());
            if pred(&v) {
                return (v, at);
            }
            if v.get("error").is_some() {
                panic!(
                    "raw codex {tag}: an error before {what}: {line}; {}",
                    self.describe()
                );
            }
        }
    }

    /// The result of request `id`.
    async fn reply(&mut self, id: u64) -> Value {
        let (v, _) = self
            .until(&format!("the reply to request {id}"), |v| {
                v["id"] == id && v.get("method").is_none() && v.get("result").is_some()
            })
            .await;
        v["result"].clone()
    }

    /// When the first completed agentMessage arrived; its text must be `expected`.
    async fn answer(&mut self, expected: &str) -> Instant {
        let (v, at) = self
            .until("an agentMessage", |v| {
                v["method"] == "item/completed" && v["params"]["item"]["type"] == "agentMessage"
            })
            .await;
        assert_eq!(
            v["params"]["item"]["text"].as_str().unwrap_or_default(),
            expected,
            "raw codex {}: the fake model's reply; {}",
            self.cli.tag,
            self.describe()
        );
        at
    }

    /// Reads to `turn/completed`, which must not have failed.
    async fn turn_end(&mut self) {
        let (v, _) = self
            .until("turn/completed", |v| v["method"] == "turn/completed")
            .await;
        let status = &v["params"]["turn"]["status"];
        assert!(
            status == "completed",
            "raw codex {}: the turn ended {status}; {}",
            self.cli.tag,
            self.describe()
        );
    }

    fn describe(&self) -> String {
        let methods: Vec<&str> = self
            .cli
            .seen
            .iter()
            .map(|v| v["method"].as_str().unwrap_or("reply"))
            .collect();
        let stderr = self
            .cli
            .stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        format!("stdout: [{}]; stderr tail: {stderr:?}", methods.join(" "))
    }
}
