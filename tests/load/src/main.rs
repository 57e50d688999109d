//! `agent-harness-load`: the end-to-end load tool (BENCHMARKS.md).
//!
//! Starts a real `agent-harness serve` (the release binary for the real
//! run) whose CLI is the stand-in `load-cli`, drives it over loopback
//! gRPC and grpc-web, runs the peers on the same machine in the same run,
//! and prints each measurement as a table, then the ratios (ours / peer).
//! The throughput, fan-out and replay rows run twice: on redb (the
//! default store) and on PostgreSQL (`--store-url`), by default a
//! throwaway PostgreSQL this tool starts.
//!
//! `--quick` runs every measurement with tiny counts: a smoke check for CI
//! that every path works and every event arrives. It asserts delivery,
//! never timings.

mod goals;
mod os;
mod ours;
mod peers;
mod plan;
mod report;
mod server;
mod stats;

use std::path::PathBuf;

use clap::Parser;

/// The command line.
#[derive(Debug, Parser)]
#[command(about = "End-to-end load test of agent-harness, side by side with its peers")]
pub struct Args {
    /// Tiny counts: a smoke check that every measurement runs (no timing is asserted).
    #[arg(long)]
    pub quick: bool,
    /// The `agent-harness` binary (default: next to this one).
    #[arg(long)]
    pub server_bin: Option<PathBuf>,
    /// The stand-in CLI (default: `load-cli` next to this one).
    #[arg(long)]
    pub cli_bin: Option<PathBuf>,
    /// Also write every figure as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Our server only (no NATS, SQLite, raw PostgreSQL or fsync loop).
    #[arg(long)]
    pub no_peers: bool,
    /// Skip the rows of our server on PostgreSQL (and the raw PostgreSQL peer).
    #[arg(long)]
    pub no_postgres: bool,
    /// Run the PostgreSQL rows on this database (an empty one; the runs
    /// leave their tables in it) instead of a throwaway PostgreSQL.
    #[arg(long, env = "AGENT_HARNESS_LOAD_STORE_URL", hide_env_values = true)]
    pub store_url: Option<String>,
    /// Only these of our measurements (repeatable; default all):
    /// throughput, fanout, deltas, idle, replay, spawn, codex.
    #[arg(long, value_parser = ["throughput", "fanout", "deltas", "idle", "replay", "spawn", "codex"])]
    pub only: Vec<String>,
    /// Rounds of the spawn comparison (default 20; 2 with --quick).
    #[arg(long)]
    pub spawn_rounds: Option<usize>,
    /// Put the server's data dir for the spawn comparison here instead
    /// (e.g. /dev/shm, to take the fsync out of it).
    #[arg(long)]
    pub spawn_data_dir: Option<PathBuf>,
    /// The real claude CLI for the spawn comparison (default $CLAUDE_BIN,
    /// then tests/tools/node_modules/.bin/claude).
    #[arg(long)]
    pub claude_bin: Option<PathBuf>,
    /// The real codex binary for the Codex comparison (default $CODEX_BIN).
    #[arg(long)]
    pub codex_bin: Option<PathBuf>,
    /// Rounds of the Codex comparison (default 20; 2 with --quick).
    #[arg(long)]
    pub codex_rounds: Option<usize>,
    /// Live Codex sessions held for its memory figures (default 10; 2 with --quick).
    #[arg(long)]
    pub codex_sessions: Option<usize>,
    /// The throughput rows' session counts (repeatable; default 1, 10 and
    /// 100): one row alone, to profile it.
    #[arg(long, value_parser = at_least_one)]
    pub sessions: Vec<usize>,
    /// Only the fan-out rows with these subscriber counts (repeatable;
    /// default every row, grpc-web's included): one row alone, to profile it.
    #[arg(long, value_parser = at_least_one)]
    pub subscribers: Vec<usize>,
    /// CLI lines per throughput row (default 1,000,000; 2,000 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub throughput_lines: Option<u64>,
    /// Subscribers decode every message into the generated types, as a
    /// real client does, instead of reading only the fields measured from
    /// its bytes (the default, as the JetStream driver reads its 8-byte
    /// stamp; with --quick each message is read both ways and compared).
    #[arg(long)]
    pub full_decode: bool,
}

/// A count of at least one (a row of no sessions measures nothing).
fn at_least_one(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

impl Args {
    /// Whether our measurement `what` runs.
    pub fn runs(&self, what: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|o| o == what)
    }

    /// Whether the rows of our server on PostgreSQL run.
    pub fn runs_postgres(&self) -> bool {
        !self.no_postgres
            && ["throughput", "fanout", "replay"]
                .iter()
                .any(|w| self.runs(w))
    }
}

fn main() {
    if let Ok(spec) = std::env::var(ours::ceiling::SERVE_ENV) {
        ours::ceiling::serve_main(&spec);
    }
    let args = Args::parse();
    ours::set_decode(if args.full_decode {
        ours::Decode::Full
    } else if args.quick {
        ours::Decode::LeanChecked
    } else {
        ours::Decode::Lean
    });
    // Before anything is measured, not half an hour into the run.
    if args.runs_postgres() && args.store_url.is_none() && !agent_harness_pg_temp::installed() {
        eprintln!(
            "agent-harness-load: {} (or pass --no-postgres)",
            agent_harness_pg_temp::NOT_INSTALLED
        );
        std::process::exit(2);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    // Interrupted (Ctrl-C, SIGTERM): stop the servers this run started.
    runtime.spawn(async {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate()).expect("SIGTERM handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        eprintln!("agent-harness-load: interrupted; stopping the servers it started");
        os::kill_tracked();
        std::process::exit(130);
    });
    let results = runtime.block_on(plan::run(&args));
    report::print(&results);
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&results).expect("serialize results");
        std::fs::write(path, json).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }
}

#[cfg(test)]
mod args_tests {
    use clap::Parser;

    use super::Args;

    #[test]
    fn a_throughput_row_of_nothing_is_refused() {
        for bad in [
            &["load", "--sessions", "0"][..],
            &["load", "--sessions", "x"],
            &["load", "--throughput-lines", "0"],
            &["load", "--subscribers", "0"],
        ] {
            let err = Args::try_parse_from(bad).expect_err("refused");
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ValueValidation,
                "{bad:?}"
            );
        }
        let ok = Args::try_parse_from(["load", "--sessions", "1", "--sessions", "100"]).unwrap();
        assert_eq!(ok.sessions, vec![1, 100]);
    }

    #[test]
    fn subscribers_keep_only_their_fanout_rows() {
        let args = Args::try_parse_from(["load", "--subscribers", "100"]).unwrap();
        let mut sizes = crate::plan::Sizes::new(false);
        sizes.keep_fanout(&args.subscribers);
        let kept: Vec<_> = sizes.fanout.iter().map(|r| (r.0, r.1)).collect();
        assert_eq!(kept, vec![(100, 100.0)]);
        assert_eq!(sizes.web.map(|r| r.0), Some(100));
        sizes.keep_fanout(&[1]);
        assert!(sizes.fanout.is_empty() && sizes.web.is_none(), "{sizes:?}");
    }
}
