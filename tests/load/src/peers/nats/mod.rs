//! NATS JetStream, driven by the Go program in `tests/load/nats` (nats.go).
//!
//! [`Nats`] is a `nats-server` of its own: a free loopback port, JetStream
//! with file storage in a temp dir, and by default `sync_interval: always`
//! (fsync on every write: an acknowledged message is on disk, the same
//! durability as ours, where an event is visible only once its redb commit
//! is fsynced). Each measurement runs the Go driver `nats-load` once and
//! parses the one JSON object it prints; the server is killed on drop.
//!
//! ```ignore
//! let nats = Nats::start_in(dir, SyncPolicy::Always);   // fsync on every write
//! let rate = nats.publish(10, 10_000, 900);             // 10 publishers × 10,000 × 900 B
//! let f = nats.fanout_detail(ConsumerKind::Push, 1_000, 100.0, 1_000, 900);
//! // f.latency; f.received against f.expected (subscribers × events).
//! // JetStream's default sync (fsync every 2 minutes, so an acknowledged
//! // message can be lost on power failure): a publish figure only, reported
//! // as not durable.
//! let fast = Nats::start_in(dir, SyncPolicy::Default).publish(10, 10_000, 900);
//! ```
//!
//! - [`Nats::publish`]: `sessions` concurrent publishers, one connection and
//!   one subject each (`load.s<i>`), all in one file-storage stream, each
//!   publishing `events_per_session` messages with async publish and at
//!   most 256 unacknowledged; timed from the first publish to the last ack.
//!   The driver also checks that the stream then holds every message.
//! - [`Nats::fanout_detail`]: `subscribers` JetStream consumers on one
//!   subject (ephemeral push consumers, no acks, deliver-new; or ordered
//!   consumers, [`ConsumerKind`]), 100 to a connection; one publisher
//!   publishes `events` messages at `rate` per second, each stamped with its
//!   publish time and acknowledged by JetStream; every subscriber records
//!   receive − publish time. The run ends when every subscriber has every
//!   message, or 30 s after the last ack; [`Fanout`] has the received and
//!   expected counts and the set-up and publish times. nats-server caps a
//!   stream at 1,000 consumers by default; the driver gives its stream room
//!   for subscribers + 1,000.
//!
//! - [`Nats::replay`] (`replay.rs`): a stream of as many events as our
//!   replayed log, written, then read back whole with an ordered consumer
//!   after a restart (cold, page cache dropped) and again (warm).
//!
//! The methods block (they wait for a child process): from async code call
//! them in `tokio::task::spawn_blocking` or while nothing else is measured.
//!
//! Seen on the shared 2-core box (load 6–9, 2026-12-01): durable publish
//! 400–500 events/s whatever the number of publishers (1,000-event runs:
//! ~1,000/s), default sync 25,000–50,000/s; fan-out at 100 events/s keeps
//! up to a few hundred subscribers (300: p99 48 ms), is seconds late at
//! 1,000 and over a minute late at 10,000 (push consumers; all 10,000 are
//! created, in ~9 s, and given time every message arrives).
//! `./tests/load/run.sh` measures them again, next to ours.
//!
//! Binaries (both installed by `./tests/setup.sh`): `nats-server` is
//! `$NATS_SERVER_BIN` or `.tools/bin/nats-server`; the driver is
//! `$NATS_LOAD_BIN` or `.tools/bin/nats-load`, both relative to the repo
//! root (`$AGENT_HARNESS_ROOT`, else the checkout this crate was built in).

mod replay;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use crate::stats::{Latency, Rate};

/// How long `nats-server` may take to say it is ready.
const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// How long a SIGTERM may take to stop `nats-server` before SIGKILL.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);

/// The server's config file, in its temp dir.
const CONFIG: &str = "nats.conf";

/// When JetStream writes reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncPolicy {
    /// `sync_interval: always`: fsync on every write (durable, like ours).
    Always,
    /// No `sync_interval`: JetStream's default, fsync every 2 minutes.
    /// Not durable: an acknowledged message can be lost on power failure.
    Default,
}

/// The kind of JetStream consumer each fan-out subscriber is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ConsumerKind {
    /// An ephemeral push consumer delivering to an inbox: no acks,
    /// deliver-new, consumer state in memory. The default: it holds 10,000
    /// subscribers on a 2-core box (late, but every message arrives).
    #[default]
    Push,
    /// An ordered consumer (nats.go `jetstream` package): ephemeral,
    /// pull-based, no acks, what the client offers for a live tail. Under
    /// overload its missed heartbeats reset every consumer at once, and the
    /// storm of API requests overflows the server's JetStream API queue (at
    /// 10,000 subscribers about a tenth of the messages came in 5 minutes).
    #[cfg_attr(not(test), allow(dead_code))] // the tests run both; the plan, push
    Ordered,
}

impl ConsumerKind {
    fn flag(self) -> &'static str {
        match self {
            Self::Ordered => "ordered",
            Self::Push => "push",
        }
    }
}

/// One fan-out run, as the driver reported it, or several pooled
/// ([`Fanout::pool`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Fanout {
    /// Receive − publish time over every message received (`n` = received).
    pub latency: Latency,
    /// Messages received, summed over the subscribers.
    pub received: u64,
    /// subscribers × events.
    pub expected: u64,
    /// Connections the subscribers were spread over.
    pub connections: u64,
    /// Creating and starting every consumer, seconds.
    pub setup_secs: f64,
    /// First publish to last publish ack, seconds: above events / rate when
    /// JetStream could not take the rate (the publisher's window of 256
    /// filled); the latencies count from each message's actual publish.
    pub publish_secs: f64,
    /// Runs pooled into these figures (1 for one run).
    pub rounds: usize,
    /// Every sample, when asked for (`samples` in [`Nats::fanout_detail`]),
    /// for [`Fanout::pool`]; not written to the report.
    #[serde(skip)]
    pub samples: Vec<Duration>,
}

impl Fanout {
    /// The runs of one row, interleaved with ours round by round, as one:
    /// counts and seconds summed, quantiles over every round's samples
    /// (each run asked for its samples).
    pub fn pool(rounds: Vec<Fanout>) -> Fanout {
        let mut all = Vec::new();
        let mut pooled = Fanout {
            latency: Latency::default(),
            received: 0,
            expected: 0,
            connections: 0,
            setup_secs: 0.0,
            publish_secs: 0.0,
            rounds: 0,
            samples: Vec::new(),
        };
        for r in rounds {
            assert_eq!(
                r.samples.len() as u64,
                r.latency.n,
                "a pooled JetStream round came without its samples"
            );
            pooled.received += r.received;
            pooled.expected += r.expected;
            pooled.connections = pooled.connections.max(r.connections);
            pooled.setup_secs += r.setup_secs;
            pooled.publish_secs += r.publish_secs;
            pooled.rounds += r.rounds;
            all.extend(r.samples);
        }
        pooled.latency = Latency::from_samples(all);
        pooled
    }
}

/// A running `nats-server` with JetStream; killed on drop.
pub struct Nats {
    child: Child,
    url: String,
    driver: PathBuf,
    server_bin: PathBuf,
    // Dropped after the server is killed (fields drop after `Drop::drop`).
    dir: tempfile::TempDir,
}

impl Nats {
    /// A server with `sync_interval: always` (durable), in a temp dir.
    #[cfg(test)]
    pub fn start() -> Self {
        Self::start_in(&std::env::temp_dir(), SyncPolicy::Always)
    }

    /// A server whose store is a new temp dir under `parent` (put it on the
    /// disk ours writes to), with this sync policy.
    pub fn start_in(parent: &Path, sync: SyncPolicy) -> Self {
        let server_bin = tool("NATS_SERVER_BIN", "nats-server");
        let driver = tool("NATS_LOAD_BIN", "nats-load");
        warn_if_stale(&driver);
        let dir = tempfile::Builder::new()
            .prefix("nats-peer-")
            .tempdir_in(parent)
            .unwrap_or_else(|e| panic!("temp dir under {}: {e}", parent.display()));
        let port = free_port();
        std::fs::write(
            dir.path().join(CONFIG),
            config_text(port, &dir.path().join("jetstream"), sync),
        )
        .expect("write nats.conf");
        let child = spawn(&server_bin, dir.path());
        Self {
            child,
            url: format!("nats://127.0.0.1:{port}"),
            driver,
            server_bin,
            dir,
        }
    }

    /// Stops the server the way an operator would (SIGTERM: JetStream
    /// writes its state out and closes its files), calls `stopped` while it
    /// is down, and starts it again on the same store, config and port.
    pub fn restart(&mut self, stopped: impl FnOnce()) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let pid = Pid::from_raw(self.child.id() as i32);
        let _ = kill(pid, Signal::SIGTERM);
        // A watchdog, woken by the exit (the sender dropped) or the timeout.
        let (exited, exit) = mpsc::channel::<()>();
        let watchdog = std::thread::spawn(move || {
            if exit.recv_timeout(STOP_TIMEOUT) == Err(mpsc::RecvTimeoutError::Timeout) {
                eprintln!("nats-server did not stop in {STOP_TIMEOUT:?} after SIGTERM: killing it");
                let _ = kill(pid, Signal::SIGKILL);
            }
        });
        let _ = self.child.wait();
        drop(exited);
        let _ = watchdog.join();
        self.kill();
        stopped();
        self.child = spawn(&self.server_bin, self.dir.path());
    }

    /// The server's pid (for `server::proc_rss` / `proc_cpu_secs`).
    #[cfg(test)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its data dir (store, config, log).
    #[cfg(test)]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// `sessions` publishers × `events_per_session` messages of `payload`
    /// bytes, async with acks; first publish to last ack.
    pub fn publish(&self, sessions: usize, events_per_session: u64, payload: usize) -> Rate {
        let out: PublishOut = self.run(
            "publish",
            &[
                ("-sessions", sessions.to_string()),
                ("-events", events_per_session.to_string()),
                ("-payload", payload.to_string()),
            ],
        );
        assert_eq!(
            out.measure, "publish",
            "nats-load answered another measurement"
        );
        let want = sessions as u64 * events_per_session;
        assert_eq!(
            out.events, want,
            "nats-load published {} of {want} messages",
            out.events
        );
        Rate {
            events: out.events,
            secs: out.secs,
        }
    }

    /// `subscribers` consumers of `kind` (100 per connection), `events`
    /// messages of `payload` bytes published at `rate` per second:
    /// receive − publish latency and the counts, and with `samples` every
    /// sample (for [`Fanout::pool`]).
    pub fn fanout_detail(
        &self,
        kind: ConsumerKind,
        (subscribers, rate, events): (usize, f64, u64),
        payload: usize,
        samples: bool,
    ) -> Fanout {
        let mut args = vec![
            ("-kind", kind.flag().to_string()),
            ("-subscribers", subscribers.to_string()),
            ("-rate", rate.to_string()),
            ("-events", events.to_string()),
            ("-payload", payload.to_string()),
        ];
        if samples {
            // A Go bool flag takes its value in the same argument.
            args.push(("-samples=true", String::new()));
        }
        let out: FanoutOut = self.run("fanout", &args);
        assert_eq!(
            out.measure, "fanout",
            "nats-load answered another measurement"
        );
        if out.received < out.expected {
            eprintln!(
                "nats fanout: {} subscribers received {} of {} messages",
                subscribers, out.received, out.expected
            );
        }
        let l = out.latency_ms;
        Fanout {
            latency: Latency {
                n: l.n,
                p50: l.p50,
                p99: l.p99,
                p999: l.p999,
                max: l.max,
            },
            received: out.received,
            expected: out.expected,
            connections: out.connections,
            setup_secs: out.setup_secs,
            publish_secs: out.publish_secs,
            rounds: 1,
            samples: out
                .samples_ns
                .iter()
                .map(|&ns| Duration::from_nanos(ns.max(0) as u64))
                .collect(),
        }
    }

    /// Runs the driver once; its stderr passes through, its stdout is the
    /// one JSON object.
    fn run<T: for<'de> Deserialize<'de>>(&self, measure: &str, args: &[(&str, String)]) -> T {
        let mut cmd = Command::new(&self.driver);
        cmd.arg(measure).args(["-url", &self.url]);
        for (k, v) in args {
            cmd.arg(k);
            if !v.is_empty() {
                cmd.arg(v);
            }
        }
        let output = cmd
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", self.driver.display()));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{} {measure} failed ({}); see its stderr above. nats-server's log: {}",
            self.driver.display(),
            output.status,
            self.dir.path().join("nats-server.log").display()
        );
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "{} {measure} printed no result JSON ({e}): {stdout:?}",
                self.driver.display()
            )
        })
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        crate::os::untrack(self.child.id());
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
    }
}

#[derive(Deserialize)]
struct PublishOut {
    measure: String,
    events: u64,
    secs: f64,
}

#[derive(Deserialize)]
struct FanoutOut {
    measure: String,
    received: u64,
    expected: u64,
    connections: u64,
    setup_secs: f64,
    publish_secs: f64,
    latency_ms: LatencyOut,
    /// With `-samples` only.
    #[serde(default)]
    samples_ns: Vec<i64>,
}

#[derive(Deserialize)]
struct LatencyOut {
    n: u64,
    p50: f64,
    p99: f64,
    p999: f64,
    max: f64,
}

/// The server's config: loopback only, JetStream on file storage under
/// `store`, and the sync policy.
fn config_text(port: u16, store: &Path, sync: SyncPolicy) -> String {
    // A JSON string is a valid quoted string in the NATS config format.
    let store = serde_json::to_string(&store.to_string_lossy()).expect("store path");
    let sync = match sync {
        SyncPolicy::Always => "  sync_interval: always\n",
        SyncPolicy::Default => "",
    };
    format!(
        "listen: \"127.0.0.1:{port}\"\nserver_name: load_peer\n\
         jetstream {{\n  store_dir: {store}\n{sync}}}\n"
    )
}

/// Starts `nats-server` on the config in `dir`, appending its log to
/// `dir/nats-server.log`, and waits until it says it is ready.
fn spawn(server_bin: &Path, dir: &Path) -> Child {
    let log_path = dir.join("nats-server.log");
    let mut child = Command::new(server_bin)
        .arg("-c")
        .arg(dir.join(CONFIG))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", server_bin.display()));
    crate::os::track(child.id());

    // The server logs to stderr: copy it to a file, and say when it is
    // ready (listening, JetStream up) or gone.
    let stderr = child.stderr.take().expect("piped stderr");
    let (ready_tx, ready_rx) = mpsc::channel::<()>();
    let mut log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .expect("open nats-server.log");
    std::thread::spawn(move || {
        let mut ready = Some(ready_tx);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(log, "{line}");
            if line.contains("Server is ready") {
                if let Some(tx) = ready.take() {
                    let _ = tx.send(());
                }
            }
        }
        // EOF: the server exited (dropping `ready` wakes the waiter).
    });
    if let Err(e) = ready_rx.recv_timeout(READY_TIMEOUT) {
        let exit = child.try_wait().ok().flatten();
        let _ = child.kill();
        let _ = child.wait();
        crate::os::untrack(child.id());
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        panic!(
            "nats-server ({}) never said it was ready ({e}; exit: {exit:?}). Its log:\n{log}",
            server_bin.display()
        );
    }
    child
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr").port()
}

/// The repo root: `$AGENT_HARNESS_ROOT` (tests/setup.sh's env.sh), else the
/// checkout this crate was built from.
fn repo_root() -> PathBuf {
    std::env::var_os("AGENT_HARNESS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
}

/// `$var`, else `.tools/bin/<name>` under the repo root; must exist.
fn tool(var: &str, name: &str) -> PathBuf {
    let path = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".tools/bin").join(name));
    assert!(
        path.is_file(),
        "{name} not found at {} (set ${var} or run ./tests/setup.sh, which installs \
         nats-server v2.15.2 and builds tests/load/nats into .tools/bin)",
        path.display()
    );
    path
}

/// Warns when a source of the Go driver is newer than the built driver.
fn warn_if_stale(driver: &Path) {
    let mtime = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(built) = mtime(driver) else { return };
    let src = repo_root().join("tests/load/nats");
    let Ok(entries) = std::fs::read_dir(&src) else {
        return;
    };
    let newest = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "go")
                || p.file_name()
                    .is_some_and(|n| n == "go.mod" || n == "go.sum")
        })
        .filter_map(|p| mtime(&p))
        .max()
        .unwrap_or(SystemTime::UNIX_EPOCH);
    if newest > built {
        eprintln!(
            "warning: {} is older than its sources in {}: rerun ./tests/setup.sh",
            driver.display(),
            src.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_has_file_storage_and_the_sync_policy() {
        let store = Path::new("/tmp/x y/jetstream");
        let always = config_text(4222, store, SyncPolicy::Always);
        assert!(always.contains("listen: \"127.0.0.1:4222\""), "{always}");
        assert!(
            always.contains("store_dir: \"/tmp/x y/jetstream\""),
            "{always}"
        );
        assert!(always.contains("sync_interval: always"), "{always}");
        let default = config_text(4222, store, SyncPolicy::Default);
        assert!(!default.contains("sync_interval"), "{default}");
    }

    /// End to end, small: needs `./tests/setup.sh` (nats-server, nats-load).
    #[test]
    fn publish_and_fanout_against_a_real_server() {
        let nats = Nats::start();
        let rate = nats.publish(2, 50, 900);
        assert_eq!(rate.events, 100);
        assert!(rate.secs > 0.0, "{rate:?}");
        for kind in [ConsumerKind::Ordered, ConsumerKind::Push] {
            let f = nats.fanout_detail(kind, (3, 200.0, 20), 900, false);
            assert_eq!((f.received, f.expected), (60, 60), "{kind:?}: {f:?}");
            assert_eq!(f.latency.n, 60);
            assert!(
                f.latency.p50 > 0.0 && f.latency.max >= f.latency.p99,
                "{f:?}"
            );
            assert!(f.samples.is_empty(), "samples not asked for: {f:?}");
        }
        // Two rounds with their samples, pooled: the driver's quantiles
        // are the samples', and the pool's are over both rounds.
        let rounds: Vec<Fanout> = (0..2)
            .map(|_| nats.fanout_detail(ConsumerKind::Push, (2, 200.0, 15), 900, true))
            .collect();
        let mut both = Vec::new();
        for r in &rounds {
            assert_eq!((r.received, r.samples.len()), (30, 30), "{r:?}");
            let own = Latency::from_samples(r.samples.clone());
            assert!((own.p50 - r.latency.p50).abs() < 1e-3, "{own:?} {r:?}");
            assert!((own.max - r.latency.max).abs() < 1e-3, "{own:?} {r:?}");
            both.extend(r.samples.iter().copied());
        }
        let pooled = Fanout::pool(rounds);
        let want = Latency::from_samples(both);
        assert_eq!(
            (pooled.received, pooled.expected, pooled.rounds),
            (60, 60, 2)
        );
        assert_eq!(pooled.latency.n, 60);
        assert!((pooled.latency.p50 - want.p50).abs() < 1e-9, "{pooled:?}");
        assert!((pooled.latency.p99 - want.p99).abs() < 1e-9, "{pooled:?}");
        let pid = nats.pid();
        let dir = nats.dir().to_path_buf();
        drop(nats);
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "nats-server outlived Nats"
        );
        assert!(!dir.exists(), "the temp dir outlived the server");
    }
}
