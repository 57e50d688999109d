//! The `agent-harness` binary: parse flags, set up tracing, run (the
//! server's commands), or run a terminal client command.

use agent_harness_server::cli_client;
use agent_harness_server::config::{Cli, Command};
use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli_client::parse_failed(e),
    };
    let result = match cli.command {
        // The client is quiet: what it has to say is its output and its
        // exit code.
        Command::Client(command) => return cli_client::run(command).await,
        Command::Serve(config) => {
            init_tracing(&config.log);
            agent_harness_server::run(*config, shutdown_signal()).await
        }
        Command::Record(config) => {
            init_tracing("info");
            agent_harness_server::record::run(config).await
        }
        Command::Export(args) => agent_harness_server::export::run(&args),
        Command::Token(config) => {
            init_tracing("info");
            agent_harness_server::token::run(&config.out)
        }
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent-harness: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Tracing to stderr, filtered by `filter` (`serve --log`).
fn init_tracing(filter: &str) {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
}

/// Resolves on SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
