//! A throwaway PostgreSQL server from Debian's package, for the tests and
//! the load tool: `initdb --auth=trust` in a temp dir, a random port on
//! 127.0.0.1, `fsync=on`, its unix socket in the temp dir, and a fresh
//! database on request.
//!
//! PostgreSQL refuses to run as root: as root the server runs as `nobody`
//! (the temp dir handed to it). A watchdog process stops the server and
//! removes its dir once the process that started it has exited, however it
//! exits, so no postgres outlives its user.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// The one line a test fails with when the package is missing.
pub const NOT_INSTALLED: &str = "PostgreSQL not installed: run ./tests/setup.sh";

/// The test binary's PostgreSQL server.
pub struct Cluster {
    bin: PathBuf,
    /// Holds `data/`, `sock/` and the log.
    dir: PathBuf,
    pub port: u16,
    /// The user the server runs as (`None`: the current one).
    user: Option<&'static str>,
    /// Server options beyond the usual (TLS).
    extra: String,
}

static NEXT_DB: AtomicU32 = AtomicU32::new(0);

/// The newest installed PostgreSQL's bin dir.
fn bin_dir() -> Option<PathBuf> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .filter_map(|e| {
            let v = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("postgres").exists().then_some((v, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, b)| b)
}

/// Whether a PostgreSQL server is installed (else [`Cluster::start`]
/// panics with [`NOT_INSTALLED`]).
pub fn installed() -> bool {
    bin_dir().is_some()
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective user.
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

impl Cluster {
    /// A server of its own.
    pub fn start() -> Self {
        Self::launch(false)
    }

    /// A server of its own that also accepts TLS, with a self-signed
    /// certificate for `localhost`; the path of that certificate (PEM).
    pub fn start_tls() -> (Self, PathBuf) {
        let cluster = Self::launch(true);
        let ca = cluster.dir.join("server.crt");
        (cluster, ca)
    }

    fn launch(tls: bool) -> Self {
        let Some(bin) = bin_dir() else {
            panic!("{NOT_INSTALLED}");
        };
        let dir = tempfile::Builder::new()
            .prefix("agent-harness-pg-")
            .tempdir()
            .expect("temp dir")
            .keep();
        std::fs::create_dir(dir.join("sock")).unwrap();
        let mut extra = String::new();
        if tls {
            use std::os::unix::fs::PermissionsExt;
            let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
            let (crt, key) = (dir.join("server.crt"), dir.join("server.key"));
            std::fs::write(&crt, cert.cert.pem()).unwrap();
            std::fs::write(&key, cert.signing_key.serialize_pem()).unwrap();
            // PostgreSQL refuses a key others may read.
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
            extra = format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                crt.display(),
                key.display()
            );
        }
        let user = is_root().then_some("nobody");
        if let Some(user) = user {
            let ok = Command::new("chown")
                .args(["-R", &format!("{user}:"), dir.to_str().unwrap()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "chown {} to {user}", dir.display());
        }
        // The watchdog first, so even a failed start leaves nothing behind.
        let pid = std::process::id();
        let pg_ctl = bin.join("pg_ctl");
        let data = dir.join("data");
        let stop = as_user(
            user,
            &format!(
                "{} -D {} stop -m immediate -w >/dev/null 2>&1",
                pg_ctl.display(),
                data.display()
            ),
        );
        // `setsid -f` forks it off in a session of its own and returns at
        // once: the watchdog outlives this process and its process group.
        Command::new("setsid")
            .args([
                "-f",
                "sh",
                "-c",
                &format!(
                    "while kill -0 {pid} 2>/dev/null; do sleep 0.3; done; {stop}; rm -rf {}",
                    dir.display()
                ),
            ])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("the postgres watchdog");
        let initdb = format!(
            "{} -D {} --auth=trust -U postgres --no-sync -E UTF8 --locale=C >{}/initdb.log 2>&1",
            bin.join("initdb").display(),
            data.display(),
            dir.display()
        );
        run(user, &initdb, &dir);
        let port = free_port();
        let cluster = Self {
            bin,
            dir,
            port,
            user,
            extra,
        };
        cluster.start_server();
        cluster
    }

    /// Starts the server (again) on its port, waiting until it accepts.
    pub fn start_server(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=400 \
             -c shared_buffers=32MB{}",
            self.port,
            self.dir.join("sock").display(),
            self.extra
        );
        let start = format!(
            "{} -D {} -l {}/server.log -w -t 60 -o '{opts}' start >/dev/null",
            self.bin.join("pg_ctl").display(),
            self.dir.join("data").display(),
            self.dir.display()
        );
        run(self.user, &start, &self.dir);
    }

    /// Kills the server as a crash would (`stop -m immediate`).
    pub fn kill_server(&self) {
        let stop = format!(
            "{} -D {} stop -m immediate -w >/dev/null",
            self.bin.join("pg_ctl").display(),
            self.dir.join("data").display()
        );
        run(self.user, &stop, &self.dir);
    }

    /// The URL of database `db`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// A new empty database, its URL.
    pub fn fresh_database(&self) -> String {
        let n = NEXT_DB.fetch_add(1, Ordering::Relaxed);
        let name = format!("t{}_{n}", std::process::id());
        self.sql("postgres", &format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Runs `statements` in database `db` (on a thread of its own, so it
    /// works from inside a test's runtime too).
    pub fn sql(&self, db: &str, statements: &str) {
        let url = self.url(db);
        let statements = statements.to_owned();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                    .await
                    .unwrap_or_else(|e| panic!("connecting to {url}: {e}"));
                tokio::spawn(conn);
                client
                    .batch_execute(&statements)
                    .await
                    .unwrap_or_else(|e| panic!("{statements}: {e:?}"));
            })
        })
        .join()
        .expect("sql");
    }
}

/// `cmd` as a shell line run by `user` (or as is).
fn as_user(user: Option<&str>, cmd: &str) -> String {
    match user {
        Some(u) => format!("runuser -u {u} -- sh -c \"{cmd}\""),
        None => cmd.to_owned(),
    }
}

fn run(user: Option<&str>, cmd: &str, dir: &Path) {
    let status = match user {
        Some(u) => Command::new("runuser")
            .args(["-u", u, "--", "sh", "-c", cmd])
            .current_dir(dir)
            .status(),
        None => Command::new("sh")
            .args(["-c", cmd])
            .current_dir(dir)
            .status(),
    };
    let ok = status.is_ok_and(|s| s.success());
    if !ok {
        let log = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        panic!(
            "`{cmd}` failed\n{}\n{}",
            log("initdb.log"),
            log("server.log")
        );
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}
