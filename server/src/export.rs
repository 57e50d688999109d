//! `agent-harness export ID`: one session's log as JSON lines, for analysis
//! or support, read from the store itself rather than through a server.
//!
//! Each line is one event in the proto3 JSON mapping (as `history --json`
//! prints them), in seq order from 1, and each is the whole event: an event
//! the log keeps cut down (over the per-event budget, marked `truncated`)
//! is written in the whole form `ReadFullEvent` streams, so nothing a
//! client could fetch is left out.
//!
//! redb allows one process per file, so the export reads a redb store only
//! while no server holds it; the refusal says so and names the online way.
//! A PostgreSQL store is read beside running servers.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use agent_harness_protocol::pb;
use clap::Args;

use crate::error::{Error, Result};
use crate::store::{PostgresStore, RedbStore, Store, StoreError, redact_store_url};

/// Events read from the store per page.
const PAGE_EVENTS: usize = 1000;

/// `agent-harness export`.
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct ExportArgs {
    /// The session whose log is written.
    #[arg(value_name = "ID")]
    pub session: String,

    /// The server's data directory: its `events.redb` is read (the server
    /// must be stopped).
    #[arg(long, env = "AGENT_HARNESS_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// Read the log from this PostgreSQL store instead (as `serve
    /// --store-url`); servers may keep running.
    #[arg(long, env = "AGENT_HARNESS_STORE_URL", hide_env_values = true)]
    pub store_url: Option<String>,

    /// Write to FILE (created mode 0600; it holds every prompt and answer)
    /// instead of stdout.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
}

/// Runs `export`: the session's log to `--out` or stdout.
pub fn run(args: &ExportArgs) -> Result<()> {
    let store = open(args)?;
    // An unknown session leaves an existing `--out` file alone.
    known(&*store, &args.session)?;
    match &args.out {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(path)
                .map_err(|e| write_failed(path, &e))?;
            let mut out = std::io::BufWriter::new(file);
            let written = write_log(&*store, &args.session, &mut out)?;
            out.flush().map_err(|e| write_failed(path, &e))?;
            out.get_ref()
                .sync_all()
                .map_err(|e| write_failed(path, &e))?;
            eprintln!(
                "agent-harness: {written} events of session {} written to {}",
                args.session,
                path.display()
            );
        }
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            write_log(&*store, &args.session, &mut out)?;
            match out.flush() {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    return Err(Error::Internal(format!("writing to stdout: {e}")));
                }
                _ => {}
            }
        }
    }
    Ok(())
}

/// Writes every event of `session` to `out`, one JSON object a line, whole;
/// returns how many. An unknown session is an error (nothing written).
pub fn write_log(store: &dyn Store, session: &str, out: &mut impl Write) -> Result<u64> {
    known(store, session)?;
    let mut after = 0;
    let mut written = 0;
    loop {
        let page = store.read_range(session, after, PAGE_EVENTS)?;
        let Some(last) = page.last() else {
            return Ok(written);
        };
        after = last.seq;
        for event in page {
            let event = whole(store, session, event)?;
            let line = serde_json::to_string(&event)
                .map_err(|e| Error::Internal(format!("encoding event {}: {e}", event.seq)))?;
            match writeln!(out, "{line}") {
                Ok(()) => {}
                // A reader that closed the pipe (`export ID | head`) took
                // what it wanted.
                Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(written),
                Err(e) => {
                    return Err(Error::Internal(format!("writing event {}: {e}", event.seq)));
                }
            }
            written += 1;
        }
    }
}

/// Whether `session` is in the store.
fn known(store: &dyn Store, session: &str) -> Result<()> {
    match store.meta(session)? {
        Some(_) => Ok(()),
        None => Err(Error::UnknownSession {
            session_id: session.to_owned(),
        }),
    }
}

/// The whole form of `event`: itself, or for a cut one the form the store
/// keeps whole.
fn whole(store: &dyn Store, session: &str, event: pb::Event) -> Result<pb::Event> {
    if event.truncated.is_none() {
        return Ok(event);
    }
    Ok(store.read_full(session, event.seq)?.unwrap_or(event))
}

/// The store `args` name: PostgreSQL at `--store-url`, else the redb file
/// in `--data-dir`, which must exist (an export never creates a store).
fn open(args: &ExportArgs) -> Result<Box<dyn Store>> {
    if let Some(url) = &args.store_url {
        return Ok(Box::new(PostgresStore::open(url).map_err(|e| {
            Error::Storage(format!(
                "cannot read the store at {}: {e}",
                redact_store_url(url)
            ))
        })?));
    }
    let path = args.data_dir.join("events.redb");
    if !path.is_file() {
        return Err(Error::Config(format!(
            "no event store at {}: pass the server's --data-dir (or --store-url)",
            path.display()
        )));
    }
    RedbStore::open(&path)
        .map(|s| Box::new(s) as Box<dyn Store>)
        .map_err(|e| refused(&path, e))
}

/// Why the redb file could not be opened, with what to do when a running
/// server holds it.
fn refused(path: &Path, e: StoreError) -> Error {
    match e {
        StoreError::Redb(::redb::Error::DatabaseAlreadyOpen) => Error::Config(format!(
            "{} is open in a running server (redb lets one process hold it): stop the server \
             and export again, or read the log through the server: `agent-harness history ID \
             --json --server URL` prints every event (those cut down over the per-event \
             budget in their cut form; ReadFullEvent streams their whole form)",
            path.display()
        )),
        other => Error::Storage(format!("cannot read {}: {other}", path.display())),
    }
}

fn write_failed(path: &Path, e: &std::io::Error) -> Error {
    Error::Internal(format!("cannot write {}: {e}", path.display()))
}
