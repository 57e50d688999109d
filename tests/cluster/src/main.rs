//! The cluster test (`tests/cluster/run.sh`): starts the cluster once, runs
//! every proof of [`proofs::ALL`] against it (or those whose name contains
//! an argument), prints one line per proof, and exits non-zero if any
//! failed, after printing the tail of every process's log.
//! `agent-harness-cluster measure …` instead measures the cluster with one
//! node and with three ([`measure`]).
//!
//! Environment: `AGENT_HARNESS_ROOT` (the repository; default: the current
//! directory) and `AGENT_HARNESS_BIN` (the server binary; default:
//! `target/debug/agent-harness`).

mod cluster;
mod measure;
mod proofs;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

#[tokio::main]
async fn main() -> ExitCode {
    let root = std::env::var_os("AGENT_HARNESS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::current_dir().expect("current dir"));
    let server_bin = std::env::var_os("AGENT_HARNESS_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target/debug/agent-harness"));
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let paths = cluster::Paths { root, server_bin };
    if filters.first().is_some_and(|f| f == "measure") {
        measure::main(&paths, &filters[1..]).await;
        return ExitCode::SUCCESS;
    }

    let t = Instant::now();
    let c = Arc::new(cluster::Cluster::start(&paths).await);
    println!(
        "cluster up in {:.1}s: nodes {}, haproxy {}, nginx {} (grpc-web {})",
        t.elapsed().as_secs_f64(),
        c.nodes
            .iter()
            .map(|n| format!("{}={}", n.id, n.addr))
            .collect::<Vec<_>>()
            .join(" "),
        c.haproxy.h2,
        c.nginx.h2,
        c.nginx.web
    );
    let mut failed = Vec::new();
    for (name, proof) in proofs::ALL {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        let t = Instant::now();
        match tokio::spawn(proof(c.clone())).await {
            Ok(()) => println!("ok   {name} ({:.1}s)", t.elapsed().as_secs_f64()),
            Err(_) => {
                println!("FAIL {name}");
                failed.push(*name);
            }
        }
    }
    if failed.is_empty() {
        println!("cluster: every proof passed");
        return ExitCode::SUCCESS;
    }
    for entry in walk(c.dir.path()) {
        if entry.extension().is_some_and(|e| e == "log") {
            let text = std::fs::read_to_string(&entry).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            println!("--- {} (last 40 lines)", entry.display());
            for l in &lines[lines.len().saturating_sub(40)..] {
                println!("{l}");
            }
        }
    }
    println!("cluster: FAILED: {failed:?}");
    ExitCode::FAILURE
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
