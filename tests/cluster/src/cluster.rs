//! What the proofs run against: one PostgreSQL, three agent-harness nodes
//! sharing its database, HAProxy and nginx in front of them, every one on
//! a loopback port of its own, each balancer started from the repository's
//! own config in `deploy/`.
//!
//! Every child process is killed when the test program exits, however it
//! exits: on drop, and by a watchdog per child that outlives a `kill -9`
//! of this program.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use agent_harness_protocol::pb::session_service_client::SessionServiceClient;
use tonic::transport::{Channel, Endpoint};

/// The proxies' idle timeouts in the test: short, so a stream that
/// outlives them is seen within seconds.
pub const PROXY_IDLE_TIMEOUT: Duration = Duration::from_secs(3);
/// The nodes' heartbeat: below every proxy idle timeout.
pub const HEARTBEAT: Duration = Duration::from_secs(1);
/// The nodes' `--node-lease`: short, so a takeover after a kill or a
/// pause is seen within seconds.
pub const NODE_LEASE: Duration = Duration::from_secs(2);
/// Longest wait for anything the test expects to happen.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Where the binaries and the repository are.
pub struct Paths {
    pub root: PathBuf,
    pub server_bin: PathBuf,
}

/// One agent-harness node.
pub struct Node {
    pub id: String,
    pub addr: SocketAddr,
    pub log: PathBuf,
    child: std::sync::Mutex<Option<Child>>,
    /// How to start it again after a kill.
    command: std::sync::Mutex<Command>,
}

/// One balancer front: where a client connects and the log of where each
/// request went.
#[derive(Clone, Debug)]
pub struct Front {
    pub name: &'static str,
    /// Native gRPC (HTTP/2, prior knowledge).
    pub h2: SocketAddr,
    /// grpc-web over HTTP/1.1.
    pub web: SocketAddr,
    pub log: PathBuf,
}

pub struct Cluster {
    pub nodes: Vec<Node>,
    pub haproxy: Front,
    pub nginx: Front,
    /// HAProxy and nginx.
    proxies: Vec<Child>,
    _pg: agent_harness_pg_temp::Cluster,
    pub dir: tempfile::TempDir,
}

pub fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a free port");
    l.local_addr().expect("local addr")
}

/// Kills `child` once this program has exited, even by `kill -9`, if it
/// still runs: the pid must still carry the child's start time (field 22
/// of /proc/PID/stat), or the watchdog would kill whatever process reused
/// the pid after the child was reaped.
fn watchdog(child: u32) {
    let me = std::process::id();
    let stat = |pid: u32| std::fs::read_to_string(format!("/proc/{pid}/stat")).ok();
    let start = stat(child)
        .and_then(|s| {
            s.rsplit_once(") ")
                .and_then(|(_, rest)| rest.split_whitespace().nth(19).map(str::to_owned))
        })
        .unwrap_or_default();
    Command::new("setsid")
        .args([
            "-f",
            "sh",
            "-c",
            &format!(
                "while kill -0 {me} 2>/dev/null; do sleep 0.3; done; \
                 s=$(sed 's/.*) //' /proc/{child}/stat 2>/dev/null | cut -d' ' -f20); \
                 [ -n \"$s\" ] && [ \"$s\" = \"{start}\" ] && kill -9 {child} 2>/dev/null"
            ),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("start a watchdog");
}

/// A balancer's binary: on PATH, or where Debian puts it (`/usr/sbin` is
/// not on every user's PATH).
fn tool(name: &str) -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|p| p.is_file());
    let sbin = Path::new("/usr/sbin").join(name);
    on_path
        .or_else(|| sbin.is_file().then_some(sbin))
        .unwrap_or_else(|| panic!("{name} not installed: run ./tests/setup.sh"))
}

fn spawn(cmd: &mut Command, log: &Path) -> Child {
    let out = std::fs::File::create(log).expect("log file");
    let err = out.try_clone().expect("log file");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    watchdog(child.id());
    child
}

/// Waits until `addr` accepts connections (the process behind it is up).
async fn listening(addr: SocketAddr, what: &str, log: &Path) {
    let deadline = Instant::now() + PATIENCE;
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if Instant::now() > deadline {
            let tail = std::fs::read_to_string(log).unwrap_or_default();
            panic!("{what} never listened on {addr}; its log:\n{tail}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `text` with each `${NAME}` of `vars` replaced; every one must occur.
fn render(text: &str, vars: &[(&str, String)]) -> String {
    let mut out = text.to_owned();
    for (name, value) in vars {
        let token = format!("${{{name}}}");
        assert!(out.contains(&token), "{token} is not in the config");
        out = out.replace(&token, value);
    }
    out
}

fn secs(d: Duration) -> String {
    format!("{}s", d.as_secs())
}

impl Node {
    fn start(paths: &Paths, dir: &Path, url: &str, cassette: &Path, n: usize) -> Self {
        let id = format!("node{n}");
        let addr = free_port();
        let data = dir.join(&id);
        std::fs::create_dir_all(&data).unwrap();
        let log = dir.join(format!("{id}.log"));
        let mut cmd = Command::new(&paths.server_bin);
        cmd.args(["serve", "--listen", &addr.to_string()])
            .arg("--data-dir")
            .arg(&data)
            .args(["--store-url", url, "--node-id", &id])
            .arg(format!("--adapter=cassette:{}", cassette.display()))
            // A turn spread over a few hundred milliseconds: streams see it
            // arrive event by event.
            .args(["--cassette-timescale", "0.3"])
            .args(["--heartbeat", &secs(HEARTBEAT)])
            .args(["--proxy-idle-timeout", &secs(PROXY_IDLE_TIMEOUT)])
            .args(["--max-sessions-per-minute", "0", "--max-live-runs", "256"])
            .args(["--node-lease", &secs(NODE_LEASE)])
            .args(["--log", "info"]);
        let child = spawn(&mut cmd, &log);
        Self {
            id,
            addr,
            log,
            child: std::sync::Mutex::new(Some(child)),
            command: std::sync::Mutex::new(cmd),
        }
    }

    /// Starts a killed node again, same flags and data dir, its log
    /// appended to; waits until it listens. A running node is left as it is.
    pub async fn restart(&self) {
        {
            let mut child = self.child.lock().unwrap();
            if child.is_some() {
                return;
            }
            let out = std::fs::OpenOptions::new()
                .append(true)
                .open(&self.log)
                .expect("node log");
            let err = out.try_clone().expect("node log");
            let mut cmd = self.command.lock().unwrap();
            let started = cmd
                .stdout(out)
                .stderr(err)
                .spawn()
                .unwrap_or_else(|e| panic!("restart {}: {e}", self.id));
            watchdog(started.id());
            *child = Some(started);
        }
        listening(self.addr, &self.id, &self.log).await;
    }

    /// Sends `signal` to the node's process (SIGSTOP, SIGCONT).
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        let child = self.child.lock().unwrap();
        let pid = child.as_ref().expect("a running node").id();
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal)
            .unwrap_or_else(|e| panic!("{signal} to {}: {e}", self.id));
    }

    /// `kill -9`, and wait for the exit.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap().take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    pub async fn client(&self) -> SessionServiceClient<Channel> {
        connect(self.addr).await
    }

    /// The value of the counter or gauge `name` in the node's `GET /metrics`.
    pub async fn metric(&self, name: &str) -> u64 {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut conn = tokio::net::TcpStream::connect(self.addr)
            .await
            .unwrap_or_else(|e| panic!("connect to {}: {e}", self.id));
        let head = format!(
            "GET /metrics HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.addr
        );
        conn.write_all(head.as_bytes()).await.expect("ask /metrics");
        let mut answer = Vec::new();
        tokio::time::timeout(PATIENCE, conn.read_to_end(&mut answer))
            .await
            .expect("a /metrics answer")
            .expect("read /metrics");
        let text = String::from_utf8_lossy(&answer);
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("{}: no {name} in /metrics:\n{text}", self.id))
    }
}

pub async fn connect(addr: SocketAddr) -> SessionServiceClient<Channel> {
    let channel = Endpoint::from_shared(format!("http://{addr}"))
        .expect("uri")
        .connect()
        .await
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    SessionServiceClient::new(channel)
}

impl Cluster {
    /// The proofs' cluster: three nodes.
    pub async fn start(paths: &Paths) -> Self {
        Self::with_nodes(paths, 3).await
    }

    /// `count` nodes behind the same balancer configs. The configs name
    /// three servers; with fewer nodes the names share them in turn, so one
    /// node is one node behind an unchanged HAProxy.
    pub async fn with_nodes(paths: &Paths, count: usize) -> Self {
        assert!((1..=3).contains(&count), "1 to 3 nodes");
        let dir = tempfile::Builder::new()
            .prefix("agent-harness-cluster-")
            .tempdir()
            .expect("temp dir");
        let pg = agent_harness_pg_temp::Cluster::start();
        let url = pg.fresh_database();
        let cassette = paths.root.join("cassettes/follow_up.cassette.jsonl");
        let nodes: Vec<Node> = (1..=count)
            .map(|n| Node::start(paths, dir.path(), &url, &cassette, n))
            .collect();
        for node in &nodes {
            listening(node.addr, &node.id, &node.log).await;
        }
        let node_vars = |vars: &mut Vec<(&str, String)>| {
            for (name, node) in ["AH_NODE1", "AH_NODE2", "AH_NODE3"]
                .iter()
                .zip(nodes.iter().cycle())
            {
                vars.push((name, node.addr.to_string()));
            }
            vars.push(("AH_IDLE_TIMEOUT", secs(PROXY_IDLE_TIMEOUT)));
        };

        // HAProxy: the deploy file as it is (it reads its ports from the
        // environment), after a global section that logs to stdout.
        let front = free_port();
        let global = dir.path().join("haproxy-global.cfg");
        std::fs::write(&global, "global\n    log stdout format raw local0\n").unwrap();
        let mut vars = vec![("AH_FRONT", front.to_string())];
        node_vars(&mut vars);
        let deploy = paths.root.join("deploy/haproxy.cfg");
        let text = std::fs::read_to_string(&deploy).expect("deploy/haproxy.cfg");
        // Only checks that every variable is used; HAProxy substitutes them.
        render(&text, &vars);
        let haproxy = Front {
            name: "haproxy",
            h2: front,
            web: front,
            log: dir.path().join("haproxy.log"),
        };
        let mut cmd = Command::new(tool("haproxy"));
        cmd.arg("-db")
            .arg("-f")
            .arg(&global)
            .arg("-f")
            .arg(&deploy)
            .envs(vars.iter().map(|(k, v)| (*k, v.as_str())));
        let haproxy_child = spawn(&mut cmd, &haproxy.log);
        listening(front, "haproxy", &haproxy.log).await;

        // nginx: the deploy file rendered, included in a minimal main config
        // that keeps every file nginx writes in the temp dir.
        let (h2, web) = (free_port(), free_port());
        let mut vars = vec![
            ("AH_FRONT_H2", h2.to_string()),
            ("AH_FRONT_WEB", web.to_string()),
        ];
        node_vars(&mut vars);
        let text = std::fs::read_to_string(paths.root.join("deploy/nginx.conf"))
            .expect("deploy/nginx.conf");
        let ngx = dir.path().join("nginx");
        std::fs::create_dir_all(&ngx).unwrap();
        std::fs::write(ngx.join("agent-harness.conf"), render(&text, &vars)).unwrap();
        let nginx = Front {
            name: "nginx",
            h2,
            web,
            log: ngx.join("access.log"),
        };
        let d = ngx.display();
        let main = format!(
            "daemon off;\nmaster_process off;\npid {d}/nginx.pid;\nerror_log {d}/error.log info;\n\
             events {{ worker_connections 1024; }}\n\
             http {{\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  \
             fastcgi_temp_path {d}/fastcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n  \
             include {d}/agent-harness.conf;\n  access_log {} agent_harness;\n}}\n",
            nginx.log.display()
        );
        std::fs::write(ngx.join("nginx.conf"), main).unwrap();
        let mut cmd = Command::new(tool("nginx"));
        cmd.arg("-p")
            .arg(&ngx)
            .arg("-c")
            .arg(ngx.join("nginx.conf"))
            .arg("-e")
            .arg(ngx.join("error.log"));
        let nginx_child = spawn(&mut cmd, &ngx.join("stdout.log"));
        listening(h2, "nginx", &ngx.join("error.log")).await;
        listening(web, "nginx", &ngx.join("error.log")).await;

        Self {
            nodes,
            haproxy,
            nginx,
            proxies: vec![haproxy_child, nginx_child],
            _pg: pg,
            dir,
        }
    }

    pub fn fronts(&self) -> [Front; 2] {
        [self.haproxy.clone(), self.nginx.clone()]
    }

    /// The node listening on `addr`.
    pub fn node_at(&self, addr: &str) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.addr.to_string() == addr)
            .unwrap_or_else(|| panic!("no node at {addr}"))
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for node in &self.nodes {
            node.kill();
        }
        for child in &mut self.proxies {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
