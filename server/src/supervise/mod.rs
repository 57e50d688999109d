//! Process supervision: spawn a child in its own process group with pipes
//! (never a PTY) and a cleaned environment, read its stdout as bounded
//! lines, keep a bounded stderr tail, signal the whole group, and reap it.
//!
//! Every adapter that runs a real process goes through [`spawn`], so the
//! no-orphans rule (docs/ARCHITECTURE.md, "Children are ours") holds in one
//! place. That includes a server that dies without running any code of its
//! own (SIGKILL, OOM): each child asks the kernel to kill it when its parent
//! goes (`PR_SET_PDEATHSIG`), so a node that never comes back leaves no CLI
//! working on a session another node has taken over.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{self as nsig, Signal as NixSignal};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdin, Command};
use tokio::sync::{mpsc, oneshot};

use crate::process::{AdapterError, ExitInfo, Signal, StdoutLine};
use crate::tasks::Tasks;

mod exec_helper;
mod spawner;
mod sweep;
pub mod trampoline;

use self::spawner::{die_with_the_server, spawn_on_spawner};
pub use self::sweep::kill_marked;

/// Environment variables removed from the inherited environment by default:
/// they make a nested CLI think it runs under a debugger, inside another
/// Claude Code, or under a different entrypoint; and the store URL, whose
/// password would let any command an agent runs rewrite every log.
pub const DEFAULT_STRIP_ENV: &[&str] = &[
    "NODE_OPTIONS",
    "VSCODE_INSPECTOR_OPTIONS",
    "CLAUDECODE",
    "CLAUDE_CODE_ENTRYPOINT",
    "AGENT_HARNESS_STORE_URL",
];

/// Default cap on one stdout line (8 MiB): the reader stops buffering there
/// and the normalizer turns a longer line into a `run_error`. The one
/// definition; `--max-line-bytes` overrides it.
pub const DEFAULT_MAX_LINE_BYTES: usize = 8 * 1024 * 1024;

/// Bytes of an oversized line kept as its head.
pub const TOO_LONG_HEAD_BYTES: usize = 1024;

/// The stderr tail keeps at most this many bytes ...
pub const STDERR_TAIL_BYTES: usize = 4096;
/// ... and at most this many lines.
pub const STDERR_TAIL_LINES: usize = 40;

/// How long to wait for stderr to close after the process exited (a
/// grandchild may keep it open).
const STDERR_DRAIN: Duration = Duration::from_millis(500);

/// Stdout lines buffered between the reader and the consumer.
const STDOUT_CHANNEL: usize = 256;

/// What to run.
#[derive(Debug, Clone)]
pub struct ProcessSpec {
    /// The program.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Working directory; `None` inherits the server's.
    pub cwd: Option<PathBuf>,
    /// Variables set on top of the cleaned environment (they win).
    pub env: Vec<(String, String)>,
    /// Inherited variables to remove (see [`DEFAULT_STRIP_ENV`]).
    pub strip_env_keys: Vec<String>,
    /// Lines longer than this become [`StdoutLine::TooLong`].
    pub max_line_bytes: usize,
    /// Whether stdin is a pipe (interactive) or closed at once (one-shot).
    pub stdin: bool,
    /// The run this process belongs to: set in its environment as
    /// [`RUN_MARKER_ENV`] (after every other variable, so it always wins)
    /// and inherited by everything it starts, so what escapes its process
    /// group is still found and killed ([`kill_marked`]).
    pub run_marker: Option<String>,
    /// The set the process's reaper, readers and stdin writer are spawned
    /// in (the server's, so shutdown waits for the reaping).
    pub tasks: Tasks,
}

/// The variable that marks every process of one run (its value is the run
/// id): the CLI's Bash tool starts each command in a session of its own
/// (`setsid`: own process group), so a backgrounded command is outside the
/// CLI's group, but it inherits the CLI's environment.
pub const RUN_MARKER_ENV: &str = "AGENT_HARNESS_RUN_ID";

impl ProcessSpec {
    /// A spec with the default env stripping and line limit.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        Self {
            program: program.into(),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
            strip_env_keys: DEFAULT_STRIP_ENV.iter().map(|s| s.to_string()).collect(),
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            stdin: true,
            run_marker: None,
            tasks: Tasks::default(),
        }
    }
}

/// A running, supervised process.
pub struct Supervised {
    /// OS pid, which is also the process group id.
    pub pid: u32,
    /// Start time from /proc/PID/stat (clock ticks since boot).
    pub start_time: Option<u64>,
    /// Stdout lines; ends when stdout closes.
    pub stdout: mpsc::Receiver<StdoutLine>,
    /// Resolves once the process has been reaped.
    pub exited: oneshot::Receiver<ExitInfo>,
    /// Queue for stdin; `None` when the spec asked for no stdin.
    pub stdin: Option<StdinWriter>,
    /// Signals the group while the process is alive.
    pub group: ProcessGroup,
}

/// Signals a supervised process group, and knows whether it is still alive,
/// so a signal never reaches a pid the kernel has since reused.
#[derive(Debug, Clone)]
pub struct ProcessGroup {
    pid: u32,
    alive: Arc<AtomicBool>,
}

impl ProcessGroup {
    /// The group id (= the leader's pid).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// True until the leader has been reaped.
    pub fn alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Send `signal` to every process in the group.
    pub fn signal(&self, signal: Signal) -> Result<(), AdapterError> {
        if !self.alive() {
            return Err(AdapterError::NotRunning);
        }
        killpg(self.pid, to_nix(signal)).map_err(|e| AdapterError::Write(format!("killpg: {e}")))
    }
}

/// Most lines queued for a child's stdin beyond what its pipe holds. A
/// child that stops reading gets no more: the next line is refused with
/// [`AdapterError::InputQueueFull`] (RESOURCE_EXHAUSTED to the caller), so
/// memory stays bounded by `STDIN_QUEUE_LINES` × the request size limit.
pub const STDIN_QUEUE_LINES: usize = 64;

/// A bounded queue of lines for the child's stdin, drained by a writer
/// task, so callers never block on a full pipe.
#[derive(Debug)]
pub struct StdinWriter {
    tx: Mutex<Option<mpsc::Sender<Vec<u8>>>>,
}

impl StdinWriter {
    fn start(mut stdin: ChildStdin, tasks: &Tasks) -> Self {
        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(STDIN_QUEUE_LINES);
        // Runs to completion: ends when the queue is closed (close_stdin /
        // drop), dropping the pipe, or on the first write error (the child
        // is gone).
        tasks.spawn("stdin writer", async move {
            while let Some(bytes) = rx.recv().await {
                if let Err(e) = stdin.write_all(&bytes).await {
                    tracing::debug!(error = %e, "stdin write failed");
                    break;
                }
                if let Err(e) = stdin.flush().await {
                    tracing::debug!(error = %e, "stdin flush failed");
                    break;
                }
            }
        });
        Self {
            tx: Mutex::new(Some(tx)),
        }
    }

    /// Queue one line; a newline is appended. Refused with
    /// [`AdapterError::InputQueueFull`] when the child has stopped reading.
    pub fn send_line(&self, line: &str) -> Result<(), AdapterError> {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.queue(bytes)
    }

    /// Queue `text` exactly as it is (no newline), e.g. a whole prompt
    /// read to the end of input. Refused as [`StdinWriter::send_line`].
    pub fn send_text(&self, text: &str) -> Result<(), AdapterError> {
        self.queue(text.as_bytes().to_vec())
    }

    fn queue(&self, bytes: Vec<u8>) -> Result<(), AdapterError> {
        let guard = self.tx.lock().unwrap_or_else(|e| e.into_inner());
        let Some(tx) = guard.as_ref() else {
            return Err(AdapterError::Write("stdin is closed".into()));
        };
        tx.try_send(bytes).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => AdapterError::InputQueueFull(format!(
                "the process is not reading its input ({STDIN_QUEUE_LINES} messages are queued); \
                 retry when it has caught up, or Stop it"
            )),
            mpsc::error::TrySendError::Closed(_) => {
                AdapterError::Write("the process no longer reads stdin".into())
            }
        })
    }

    /// Close stdin once the queued lines are written.
    pub fn close(&self) {
        self.tx.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// The `PATH` the child gets: the spec's, none when the spec strips it, or
/// the server's.
fn child_path(spec: &ProcessSpec) -> Option<OsString> {
    if let Some((_, v)) = spec.env.iter().rev().find(|(k, _)| k == "PATH") {
        return Some(v.into());
    }
    if spec.strip_env_keys.iter().any(|k| k == "PATH") {
        return None;
    }
    std::env::var_os("PATH")
}

/// Spawn `spec` supervised: own process group, pipes, cleaned env,
/// kill-on-drop, killed by the kernel when the server dies, bounded stdout
/// lines, stderr tail, reaped exit. The spawn happens on the spawner
/// thread ([`spawner`]), through a trampoline in the `agent-harness`
/// binary ([`trampoline`]); the rest runs in the caller's
/// runtime.
pub async fn spawn(spec: &ProcessSpec) -> Result<Supervised, AdapterError> {
    let spawn_failed =
        |e: std::io::Error| AdapterError::Spawn(format!("{}: {e}", spec.program.display()));
    let mut cmd = if trampoline::enabled() {
        let program = trampoline::resolve(
            &spec.program,
            spec.cwd.as_deref(),
            child_path(spec).as_deref(),
        )
        .map_err(spawn_failed)?;
        trampoline::command(&program, spec.program.as_os_str(), &spec.args)
    } else {
        let mut cmd = Command::new(&spec.program);
        cmd.args(&spec.args);
        die_with_the_server(&mut cmd);
        cmd
    };
    cmd.stdin(if spec.stdin {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .process_group(0)
    .kill_on_drop(true);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    for key in &spec.strip_env_keys {
        cmd.env_remove(key);
    }
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let Some(marker) = &spec.run_marker {
        cmd.env(RUN_MARKER_ENV, marker);
    }
    let run_marker = spec.run_marker.clone();
    let mut child = spawn_on_spawner(cmd).await?.map_err(|e| {
        if trampoline::enabled() {
            // The program was found: what failed is starting this binary.
            AdapterError::Spawn(format!(
                "{}: starting it through {}: {e}",
                spec.program.display(),
                trampoline::program().display()
            ))
        } else {
            spawn_failed(e)
        }
    })?;
    let pid = child
        .id()
        .ok_or_else(|| AdapterError::Spawn("child exited before its pid was read".into()))?;
    let start_time = process_start_time(pid);
    let alive = Arc::new(AtomicBool::new(true));

    let stdin = child
        .stdin
        .take()
        .map(|s| StdinWriter::start(s, &spec.tasks));
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");

    let (line_tx, line_rx) = mpsc::channel(STDOUT_CHANNEL);
    // Runs to completion: ends at the end of stdout, which the reaper's
    // kills bring about.
    let tasks = &spec.tasks;
    tasks.spawn(
        "stdout reader",
        read_lines(stdout, spec.max_line_bytes, line_tx),
    );

    let tail = Arc::new(Mutex::new(StderrTail::default()));
    // Runs to completion, as the stdout reader; the reaper waits for it
    // (bounded by STDERR_DRAIN) to take the tail.
    let stderr_task = tasks.spawn(
        "stderr reader",
        read_stderr(stderr, tail.clone(), tasks.clone()),
    );

    let (exit_tx, exit_rx) = oneshot::channel();
    let guard = GroupGuard {
        pid,
        alive: alive.clone(),
    };
    // The reaper owns the Child: it waits, records how the process ended,
    // then clears whatever the CLI left behind in its group. If the runtime
    // drops this task first, the guard kills the group. Runs to completion:
    // a reaper must reap, kill the stragglers and sweep the marker, so
    // shutdown waits for it.
    tasks.spawn("reaper", async move {
        let status = child.wait().await;
        guard.alive.store(false, Ordering::SeqCst);
        // Stragglers (a backgrounded Bash, a subagent's shell) must not
        // outlive the CLI. The group id cannot be reused while any member
        // exists, so this reaches only our processes.
        let _ = killpg(pid, NixSignal::SIGKILL);
        // ... nor what left the group (a Bash command in its own session).
        if let Some(marker) = run_marker {
            sweep::sweep(marker).await;
        }
        let _ = tokio::time::timeout(STDERR_DRAIN, stderr_task).await;
        let stderr_tail = tail.lock().unwrap_or_else(|e| e.into_inner()).text();
        let info = match status {
            Ok(s) => ExitInfo {
                code: s.code(),
                signal: s.signal().map(signal_name),
                stderr_tail,
            },
            Err(e) => ExitInfo {
                code: None,
                signal: None,
                stderr_tail: format!("{stderr_tail}\n(wait failed: {e})"),
            },
        };
        drop(guard);
        let _ = exit_tx.send(info);
    });

    Ok(Supervised {
        pid,
        start_time,
        stdout: line_rx,
        exited: exit_rx,
        stdin,
        group: ProcessGroup { pid, alive },
    })
}

/// Kills the group when dropped while the leader is still alive.
struct GroupGuard {
    pid: u32,
    alive: Arc<AtomicBool>,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.alive.swap(false, Ordering::SeqCst) {
            let _ = killpg(self.pid, NixSignal::SIGKILL);
        }
    }
}

/// Read `reader` as lines of at most `max` bytes. A longer line is sent as
/// [`StdoutLine::TooLong`] with its first [`TOO_LONG_HEAD_BYTES`]; the rest
/// is skipped without being buffered.
pub async fn read_lines<R: AsyncRead + Unpin>(reader: R, max: usize, tx: mpsc::Sender<StdoutLine>) {
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let head_cap = TOO_LONG_HEAD_BYTES.min(max);
    // The kept bytes of the current line, its true length so far, and
    // whether it already went over the limit (then only the head is kept).
    let mut buf: Vec<u8> = Vec::new();
    let mut total = 0usize;
    let mut overflow = false;
    loop {
        let chunk = match reader.fill_buf().await {
            Ok(c) => c,
            Err(e) => {
                tracing::debug!(error = %e, "stdout read failed");
                break;
            }
        };
        if chunk.is_empty() {
            break;
        }
        let (part, newline) = match memchr::memchr(b'\n', chunk) {
            Some(i) => (&chunk[..i], true),
            None => (chunk, false),
        };
        let used = part.len() + usize::from(newline);
        total += part.len();
        if !overflow && buf.len() + part.len() > max {
            overflow = true;
            let room = head_cap.saturating_sub(buf.len()).min(part.len());
            buf.extend_from_slice(&part[..room]);
            buf.truncate(head_cap);
        } else if !overflow {
            buf.extend_from_slice(part);
        }
        reader.consume(used);
        if newline {
            let line = finish_line(std::mem::take(&mut buf), total, overflow);
            total = 0;
            overflow = false;
            if tx.send(line).await.is_err() {
                return;
            }
        }
    }
    if total > 0 {
        let _ = tx.send(finish_line(buf, total, overflow)).await;
    }
}

fn finish_line(bytes: Vec<u8>, len: usize, overflow: bool) -> StdoutLine {
    let text = match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    if overflow {
        StdoutLine::TooLong { head: text, len }
    } else {
        StdoutLine::Line(text)
    }
}

/// The last lines of stderr, bounded in lines and bytes.
#[derive(Debug, Default)]
struct StderrTail {
    lines: VecDeque<String>,
    bytes: usize,
}

impl StderrTail {
    fn push(&mut self, line: String) {
        let line = if line.len() > STDERR_TAIL_BYTES {
            let mut cut = line.len() - STDERR_TAIL_BYTES;
            while !line.is_char_boundary(cut) {
                cut += 1;
            }
            line[cut..].to_string()
        } else {
            line
        };
        self.bytes += line.len() + 1;
        self.lines.push_back(line);
        while self.lines.len() > STDERR_TAIL_LINES || self.bytes > STDERR_TAIL_BYTES {
            match self.lines.pop_front() {
                Some(l) => self.bytes -= l.len() + 1,
                None => break,
            }
        }
    }

    fn text(&self) -> String {
        self.lines.iter().cloned().collect::<Vec<_>>().join("\n")
    }
}

async fn read_stderr<R: AsyncRead + Unpin + Send + 'static>(
    reader: R,
    tail: Arc<Mutex<StderrTail>>,
    tasks: Tasks,
) {
    let (tx, mut rx) = mpsc::channel(16);
    // Reuse the bounded line reader so a huge stderr line cannot grow
    // memory. Runs to completion: ends at the end of stderr.
    tasks.spawn("stderr lines", read_lines(reader, STDERR_TAIL_BYTES, tx));
    while let Some(line) = rx.recv().await {
        let text = match line {
            StdoutLine::Line(l) => l,
            StdoutLine::TooLong { head, len } => format!("{head}… ({len} bytes)"),
        };
        tracing::debug!(target: "agent_harness::child_stderr", "{text}");
        tail.lock().unwrap_or_else(|e| e.into_inner()).push(text);
    }
}

fn to_nix(signal: Signal) -> NixSignal {
    match signal {
        Signal::Int => NixSignal::SIGINT,
        Signal::Term => NixSignal::SIGTERM,
        Signal::Kill => NixSignal::SIGKILL,
    }
}

fn killpg(pid: u32, signal: NixSignal) -> nix::Result<()> {
    let pid = i32::try_from(pid).map_err(|_| nix::errno::Errno::EINVAL)?;
    if pid <= 1 {
        // Never signal init or "every process" by accident.
        return Err(nix::errno::Errno::EINVAL);
    }
    nsig::killpg(Pid::from_raw(pid), signal)
}

/// "SIGKILL" for 9; "SIG<n>" for numbers nix does not know.
pub fn signal_name(signo: i32) -> String {
    NixSignal::try_from(signo)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("SIG{signo}"))
}

/// A process's start time in clock ticks since boot (/proc/PID/stat field
/// 22), or `None` when the process does not exist.
pub fn process_start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Field 22 of a /proc/PID/stat line. The command name (field 2) is in
/// parentheses and may itself contain spaces and parentheses, so counting
/// starts after the last ')'.
pub fn parse_start_time(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After ')' come fields 3, 4, ...; field 22 is the 20th of them.
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Kill a process group recorded by an earlier server instance: what is
/// left of it, whether or not its leader still lives. Returns true when a
/// SIGKILL reached at least one process.
///
/// - The leader lives with the recorded start time: the group is ours.
/// - The pid names a process with another start time: the pid was reused,
///   and group `pid` (if any) is the new process's; nothing is killed.
/// - No process has the pid: the leader is gone, but its group may not be
///   (a backgrounded Bash of the CLI outlives it). Linux does not reuse a
///   number while a process group of that id exists, and a new group's id
///   is its own leader's pid; so whatever is in group `pid` now is what the
///   recorded leader left behind.
pub fn kill_recorded_group(pid: u32, start_time: u64) -> bool {
    match process_start_time(pid) {
        Some(t) if t != start_time => false,
        Some(_) => killpg(pid, NixSignal::SIGKILL).is_ok(),
        // Zombies waiting for whoever adopted them are members too; only a
        // running member is worth (and counts as) a kill.
        None => group_has_running_members(pid) && killpg(pid, NixSignal::SIGKILL).is_ok(),
    }
}

/// What recovery kills for a run a previous server left live: what is left
/// of its recorded process group ([`kill_recorded_group`], when the pid
/// was recorded) and every process carrying the run's marker
/// ([`kill_marked`]: commands that left the group, and the whole run when a
/// crash came before its pid was recorded). True when anything was killed.
pub fn kill_recorded_run(recorded: Option<(u32, u64)>, run_id: &str) -> bool {
    let group = recorded.is_some_and(|(pid, start)| kill_recorded_group(pid, start));
    let marked = !run_id.is_empty() && kill_marked(run_id) > 0;
    group || marked
}

/// Whether a process that is not a zombie is in process group `pgid`
/// (fields 3 and 5 of /proc/PID/stat: state and process group).
fn group_has_running_members(pgid: u32) -> bool {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return false;
    };
    procs.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        let Some(close) = stat.rfind(')') else {
            return false;
        };
        let mut fields = stat[close + 1..].split_whitespace();
        let state = fields.next();
        let group = fields.nth(1).and_then(|g| g.parse::<u32>().ok());
        group == Some(pgid) && state != Some("Z")
    })
}
