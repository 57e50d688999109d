//! `agent-harness doctor`: whether this machine can serve with these flags,
//! checked without serving and without changing anything the server keeps.
//! It takes `serve`'s flags (and environment), so an operator can put
//! `doctor` where `serve` stands in a command line or a unit file.
//!
//! Each check is one line, `ok`, `warn` or `fail`, and every line that is
//! not `ok` says what to do about it in words a user acts on. Any `fail`
//! makes the exit code 1: `serve` would refuse to start, or every session
//! would fail.

mod agents;
mod host;

use std::io::Write;

use crate::config::ServeConfig;

pub use self::agents::{TESTED_CLAUDE, TESTED_CODEX};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Nothing to do.
    Ok,
    /// Serving works, but something is likely to bite later.
    Warn,
    /// `serve` would not start, or sessions would fail.
    Fail,
}

impl Level {
    fn label(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Warn => "warn",
            Level::Fail => "fail",
        }
    }
}

/// One line of the report: what was checked, how it came out, and what was
/// found or what to do.
#[derive(Debug, Clone)]
pub struct Check {
    /// How it came out.
    pub level: Level,
    /// What was checked (`claude CLI`, `data dir`, ...).
    pub what: &'static str,
    /// What was found, and for warn and fail what to do.
    pub detail: String,
}

impl Check {
    fn ok(what: &'static str, detail: impl Into<String>) -> Self {
        Self {
            level: Level::Ok,
            what,
            detail: detail.into(),
        }
    }

    fn warn(what: &'static str, detail: impl Into<String>) -> Self {
        Self {
            level: Level::Warn,
            what,
            detail: detail.into(),
        }
    }

    fn fail(what: &'static str, detail: impl Into<String>) -> Self {
        Self {
            level: Level::Fail,
            what,
            detail: detail.into(),
        }
    }
}

/// Every check, in the order the report shows them.
pub async fn checks(config: &ServeConfig) -> Vec<Check> {
    let mut out = vec![match config.check() {
        Ok(()) => Check::ok("flags", "consistent"),
        Err(e) => Check::fail("flags", e.to_string()),
    }];
    out.extend(agents::claude(config).await);
    out.extend(agents::codex(config).await);
    out.extend(agents::acp(config));
    out.push(host::data_dir(&config.data_dir));
    out.push(host::port(config.listen));
    out.push(host::token_file(config));
    out.extend(host::secrets_key(config));
    out.extend(host::tls(config));
    if let Some(url) = &config.store_url {
        out.push(store(url).await);
    }
    out
}

/// The `doctor` subcommand: runs the checks, prints one line each and a
/// summary to stdout; exit code 1 when any failed.
pub async fn run(config: &ServeConfig) -> std::process::ExitCode {
    let checks = checks(config).await;
    let mut out = std::io::stdout().lock();
    for check in &checks {
        let _ = writeln!(
            out,
            "{:<5} {}: {}",
            check.level.label(),
            check.what,
            check.detail
        );
    }
    let count = |level| checks.iter().filter(|c| c.level == level).count();
    let (failed, warned) = (count(Level::Fail), count(Level::Warn));
    let _ = match (failed, warned) {
        (0, 0) => writeln!(out, "\nEverything checked is in order."),
        (0, w) => writeln!(
            out,
            "\nNo failures; {w} warning{}: serve will start, but see above.",
            plural(w)
        ),
        (f, w) => writeln!(
            out,
            "\n{f} failure{} and {w} warning{}: fix the lines marked fail before serving.",
            plural(f),
            plural(w)
        ),
    };
    if failed > 0 {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// `--store-url`: connects (without migrating anything) and names the
/// database's version.
async fn store(url: &crate::config::StoreUrl) -> Check {
    match crate::store::probe_postgres(url.expose()).await {
        Ok(version) => Check::ok("store", format!("{url}: PostgreSQL {version}")),
        Err(e) => Check::fail(
            "store",
            format!(
                "{e}: start the database or fix --store-url (host, port, user, password, \
                 sslmode)"
            ),
        ),
    }
}
