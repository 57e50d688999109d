//! `agent-harness-load`: the end-to-end load tool (BENCHMARKS.md).
//!
//! Starts a real `agent-harness serve` (the release binary for the real
//! run) whose CLI is the stand-in `load-cli`, drives it over loopback
//! gRPC and grpc-web, runs the peers on the same machine in the same run,
//! and prints each measurement as a table, then the ratios (ours / peer).

mod ours;
mod peers;
mod server;
mod stats;

fn main() {
    println!("agent-harness-load: under construction");
}
