//! One round with the CLI spawned directly: its stdin and stdout, and
//! its threads' CPU time from schedstat.

use super::*;

/// One round of the CLI spawned directly.
pub(super) struct RawSample {
    pub(super) start_ready: Duration,
    pub(super) send_content: Duration,
    pub(super) boot: Sched,
    pub(super) turn: Sched,
}

/// On-CPU and run-queue wait ms of a process's live threads so far
/// (`/proc/PID/task/*/schedstat`; zero where unreadable).
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sched {
    pub(super) cpu: f64,
    pub(super) wait: f64,
}

impl Sched {
    pub(super) fn of(pid: u32) -> Self {
        let mut sum = Self::default();
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
            return sum;
        };
        for task in tasks.flatten() {
            let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
            let mut fields = text
                .split_whitespace()
                .map(|v| v.parse::<f64>().unwrap_or(0.0));
            sum.cpu += fields.next().unwrap_or(0.0) / 1e6;
            sum.wait += fields.next().unwrap_or(0.0) / 1e6;
        }
        sum
    }

    pub(super) fn since(self, before: Self) -> Self {
        Self {
            cpu: self.cpu - before.cpu,
            wait: self.wait - before.wait,
        }
    }
}

/// Spawn the CLI as the server does, write `TEXT ready <tag>` and time its
/// system/init; finish the turn, write `TEXT again <tag>` and time its
/// first assistant line; finish that turn, close stdin and see it exit.
pub(super) async fn raw_round(
    claude_bin: &Path,
    env: &[(OsString, OsString)],
    work: &Path,
    tag: &str,
    pause: Duration,
) -> RawSample {
    let t0 = Instant::now();
    let mut cmd = Command::new(claude_bin);
    cmd.args(default_args())
        .current_dir(work)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    for key in DEFAULT_STRIP_ENV {
        cmd.env_remove(key);
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)));
    // As long as the server's (a UUID).
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    cmd.env(RUN_MARKER_ENV, format!("raw-{nanos:032x}"));
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", claude_bin.display()));
    let mut cli = RawCli::new(&mut child, tag);
    cli.write(&user_line(&format!("TEXT ready {tag}"))).await;
    let (init, init_at) = cli
        .until("system/init", |v| {
            v["type"] == "system" && v["subtype"] == "init"
        })
        .await;
    let start_ready = init_at - t0;
    let pid = child
        .id()
        .unwrap_or_else(|| panic!("raw {tag}: the CLI has no pid"));
    let boot = Sched::of(pid);
    let session = init["session_id"].as_str().unwrap_or_default().to_owned();
    assert!(
        !session.is_empty(),
        "raw {tag}: init without a session_id: {init}"
    );
    let mark = cli.seen.len();
    cli.result().await;
    cli.expect_text(mark, &session, &format!("ready {tag}"));

    let mark = cli.seen.len();
    tokio::time::sleep(pause).await;
    let before = Sched::of(pid);
    let t1 = Instant::now();
    cli.write(&user_line(&format!("TEXT again {tag}"))).await;
    let (_, content_at) = cli.until("assistant", |v| v["type"] == "assistant").await;
    let send_content = content_at - t1;
    let turn = Sched::of(pid).since(before);
    cli.result().await;
    cli.expect_text(mark, &session, &format!("again {tag}"));

    // Idle stdin EOF: the CLI exits 0 within tens of ms.
    drop(cli);
    match tokio::time::timeout(WAIT, child.wait()).await {
        Ok(Ok(s)) if s.success() => {}
        other => panic!("raw {tag}: the CLI did not exit 0 after stdin EOF: {other:?}"),
    }
    RawSample {
        start_ready,
        send_content,
        boot,
        turn,
    }
}

/// The raw CLI's pipes and the stdout lines read so far.
pub(super) struct RawCli {
    pub(super) tag: String,
    pub(super) stdin: ChildStdin,
    pub(super) lines: Lines<BufReader<ChildStdout>>,
    pub(super) stderr: Arc<Mutex<String>>,
    pub(super) seen: Vec<Value>,
}

impl RawCli {
    pub(super) fn new(child: &mut Child, tag: &str) -> Self {
        let stdin = child.stdin.take().expect("piped stdin");
        let lines = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut err = child.stderr.take().expect("piped stderr");
        let tail = stderr.clone();
        // Drained as the server does; its tail goes into panic messages.
        tokio::spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = vec![0u8; 4096];
            while let Ok(n) = err.read(&mut buf).await {
                if n == 0 {
                    break;
                }
                let mut t = tail.lock().unwrap_or_else(|e| e.into_inner());
                t.push_str(&String::from_utf8_lossy(&buf[..n]));
                if t.len() > 4096 {
                    let cut = t.len() - 4096;
                    let cut = (cut..t.len()).find(|i| t.is_char_boundary(*i)).unwrap_or(0);
                    t.drain(..cut);
                }
            }
        });
        Self {
            tag: tag.into(),
            stdin,
            lines,
            stderr,
            seen: Vec::new(),
        }
    }

    pub(super) async fn write(&mut self, line: &str) {
        let tag = &self.tag;
        self.stdin
            .write_all(line.as_bytes())
            .await
            .unwrap_or_else(|e| panic!("raw {tag}: write stdin: {e}"));
        self.stdin
            .flush()
            .await
            .unwrap_or_else(|e| panic!("raw {tag}: flush stdin: {e}"));
    }

    /// Reads to the first JSON line matching `pred`; panics on a `result`
    /// (the turn ended) that does not match, on EOF and on timeout.
    pub(super) async fn until(
        &mut self,
        what: &str,
        pred: impl Fn(&Value) -> bool,
    ) -> (Value, Instant) {
        loop {
            let line = match tokio::time::timeout(WAIT, self.lines.next_line()).await {
                Ok(Ok(Some(l))) => l,
                Ok(Ok(None)) => panic!(
                    "raw {}: stdout closed before {what}; {}",
                    self.tag,
                    self.describe()
                ),
                Ok(Err(e)) => panic!("raw {}: reading stdout before {what}: {e}", self.tag),
                Err(_) => panic!(
                    "raw {}: no {what} within {WAIT:?}; {}",
                    self.tag,
                    self.describe()
                ),
            };
            let at = Instant::now();
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                panic!("raw {}: a stdout line that is not JSON: {line:?}", self.tag)
            };
            self.seen.push(v.clone());
            if pred(&v) {
                return (v, at);
            }
            if v["type"] == "result" {
                panic!(
                    "raw {}: the turn ended before {what}: {line}; {}",
                    self.tag,
                    self.describe()
                );
            }
        }
    }

    /// Reads to the turn's `result`, which must not be an error.
    pub(super) async fn result(&mut self) {
        let (r, _) = self.until("result", |v| v["type"] == "result").await;
        assert!(
            r["is_error"] == false,
            "raw {}: the turn failed: {r}; {}",
            self.tag,
            self.describe()
        );
    }

    /// The text of the assistant lines seen from `from` on is `expected`,
    /// and they belong to `session`.
    pub(super) fn expect_text(&self, from: usize, session: &str, expected: &str) {
        let assistant: Vec<&Value> = self.seen[from..]
            .iter()
            .filter(|v| v["type"] == "assistant")
            .collect();
        assert!(
            assistant.iter().all(|v| v["session_id"] == session),
            "raw {}: an assistant line of another session than {session}; {}",
            self.tag,
            self.describe()
        );
        let text: String = assistant
            .iter()
            .filter_map(|v| v["message"]["content"].as_array())
            .flatten()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect();
        assert_eq!(
            text,
            expected,
            "raw {}: the fake model's reply; {}",
            self.tag,
            self.describe()
        );
    }

    pub(super) fn describe(&self) -> String {
        let kinds: Vec<String> = self
            .seen
            .iter()
            .map(|v| {
                let t = v["type"].as_str().unwrap_or("?");
                match v["subtype"].as_str() {
                    Some(s) => format!("{t}/{s}"),
                    None => t.to_owned(),
                }
            })
            .collect();
        let stderr = self
            .stderr
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        format!("stdout: [{}]; stderr tail: {stderr:?}", kinds.join(" "))
    }
}
