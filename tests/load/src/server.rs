//! The server under test: a real `agent-harness serve` process on a fresh
//! loopback port and data dir, with what the load tool reads off it from
//! outside (RSS and CPU time from `/proc`, `/metrics` over HTTP).

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use tonic::transport::{Channel, Endpoint};

/// The largest message the tool's clients send or accept.
pub const MAX_MESSAGE_BYTES: usize = 4 * 1024 * 1024;

/// One HTTP/2 connection to the server: the generated client on it, and
/// the channel itself for the lean subscriber (`ours::lean`). Derefs to
/// the generated client.
#[derive(Clone)]
pub struct Conn {
    /// The generated client.
    pub rpc: SessionServiceClient<Channel>,
    /// The connection.
    pub channel: Channel,
}

impl Conn {
    /// A new HTTP/2 connection to the gRPC server at `addr`.
    pub async fn at(addr: SocketAddr) -> Self {
        let channel = Endpoint::from_shared(format!("http://{addr}"))
            .expect("uri")
            .tcp_nodelay(true)
            .connect()
            .await
            .expect("connect to the server");
        Conn {
            rpc: SessionServiceClient::new(channel.clone())
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES),
            channel,
        }
    }
}

impl std::ops::Deref for Conn {
    type Target = SessionServiceClient<Channel>;

    fn deref(&self) -> &Self::Target {
        &self.rpc
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.rpc
    }
}

/// How to start the server.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The `agent-harness` binary.
    pub bin: PathBuf,
    /// Its `--data-dir` (kept across restarts by the caller).
    pub data_dir: PathBuf,
    /// Its `--claude-bin`.
    pub claude_bin: PathBuf,
    /// Environment added to the server's (the CLI inherits it).
    pub env: Vec<(OsString, OsString)>,
    /// Further `serve` arguments.
    pub args: Vec<OsString>,
}

/// A running server; SIGTERM and wait on drop.
pub struct Server {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
}

fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr")
}

impl Server {
    /// Starts it and waits until it accepts gRPC connections.
    pub async fn start(opts: &ServerOptions) -> Self {
        let addr = free_port();
        let mut cmd = Command::new(&opts.bin);
        cmd.args(["serve", "--listen", &addr.to_string(), "--data-dir"])
            .arg(&opts.data_dir)
            .arg("--claude-bin")
            .arg(&opts.claude_bin);
        // Quiet unless the caller's args set `--log` (clap refuses it twice).
        if !opts.args.iter().any(|a| {
            let a = a.to_string_lossy();
            a == "--log" || a.starts_with("--log=")
        }) {
            cmd.args(["--log", "warn"]);
        }
        cmd
            // Room for the largest fan-out measured: 10,000 subscribers.
            .args(["--max-streams", "20000", "--max-live-runs", "256"])
            // Every session's process stays between its turns, as measured
            // before the cap on idle processes existed.
            .args(["--max-idle-runs", "256"])
            // Load runs create sessions far faster than any client should.
            .args(["--max-sessions-per-minute", "0"])
            .args(&opts.args)
            .envs(opts.env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null());
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {}: {e}", opts.bin.display()));
        crate::os::track(child.id());
        let server = Self { child, addr };
        let deadline = Instant::now() + Duration::from_secs(60);
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the server never listened on {addr}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        server
    }

    /// The server's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A new HTTP/2 connection (each has its own stream limit and socket).
    pub async fn connect(&self) -> Conn {
        Conn::at(self.addr).await
    }

    /// Resident set size, bytes (`VmRSS`).
    pub fn rss_bytes(&self) -> u64 {
        proc_rss(self.pid())
    }

    /// Peak resident set size so far, bytes (`VmHWM`).
    pub fn peak_rss_bytes(&self) -> u64 {
        proc_status_kib(self.pid(), "VmHWM:") * 1024
    }

    /// User + system CPU time used so far, seconds.
    pub fn cpu_secs(&self) -> f64 {
        proc_cpu_secs(self.pid())
    }

    /// The body of `GET /metrics`.
    pub async fn metrics(&self) -> String {
        http_get(self.addr, "/metrics").await
    }

    /// SIGTERM, then wait for the exit.
    pub fn stop(mut self) {
        self.terminate();
    }

    fn terminate(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
        crate::os::untrack(self.child.id());
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.terminate();
        }
    }
}

/// `VmRSS` of a process, bytes.
pub fn proc_rss(pid: u32) -> u64 {
    proc_status_kib(pid, "VmRSS:") * 1024
}

/// A `kB` field of `/proc/<pid>/status` (0 when unreadable).
fn proc_status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0)
}

/// utime + stime of a process, seconds (clock ticks of 1/100 s).
pub fn proc_cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The command name is in parentheses and may hold spaces: count from after it.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After ')': state is field 3 of stat(5), so utime (14) and stime (15) are 11 and 12 here.
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (ticks(11) + ticks(12)) / 100.0
}

/// One HTTP/1.1 GET on loopback; the body.
pub async fn http_get(addr: SocketAddr, path: &str) -> String {
    use http_body_util::BodyExt;
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect for GET");
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
        .await
        .expect("HTTP/1.1 handshake");
    tokio::spawn(conn);
    let req = http::Request::get(path)
        .header("host", addr.to_string())
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .expect("request");
    let resp = sender.send_request(req).await.expect("GET");
    assert!(resp.status().is_success(), "GET {path}: {}", resp.status());
    let body = resp.into_body().collect().await.expect("body").to_bytes();
    String::from_utf8_lossy(&body).into_owned()
}

/// Sum of a Prometheus metric's samples whose name and labels start with
/// `prefix` (`name` alone, or `name{label="v"`).
pub fn metric(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| {
            l.strip_prefix(prefix)
                .is_some_and(|r| r.starts_with(' ') || r.starts_with('{') || r.starts_with(','))
                || (prefix.contains('{') && l.starts_with(prefix))
        })
        .filter_map(|l| l.rsplit_once(' ').and_then(|(_, v)| v.parse::<f64>().ok()))
        .sum()
}

/// Built binaries next to this one (`target/<profile>/`).
pub fn sibling(name: &str) -> PathBuf {
    let me = std::env::current_exe().expect("current exe");
    me.parent().unwrap_or(Path::new(".")).join(name)
}
