//! `agent-harness-pg-temp`: starts a throwaway PostgreSQL, prints the URL of
//! its `postgres` database on stdout, and keeps it until stdin closes or the
//! process is ended (the watchdog then stops the server and removes its
//! files). `tests/run-all.sh` runs the client suites against it.

use std::io::{Read, Write};

fn main() {
    if !agent_harness_pg_temp::installed() {
        eprintln!("{}", agent_harness_pg_temp::NOT_INSTALLED);
        std::process::exit(2);
    }
    let cluster = agent_harness_pg_temp::Cluster::start();
    let mut out = std::io::stdout();
    writeln!(out, "{}", cluster.url("postgres")).expect("stdout");
    out.flush().expect("stdout");
    // Until stdin reaches its end (the caller closed it or went away).
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
}
