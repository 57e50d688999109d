//! The `agent-harness` binary: parse flags, set up tracing, run.

use agent_harness_server::cli_client;
use agent_harness_server::config::{Cli, Command};
use clap::Parser;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli_client::parse_failed(e),
    };
    let filter = match cli.command {
        Command::Client(command) => return cli_client::run(command).await,
        Command::Serve(ref c) => c.log.clone(),
        Command::Record(_) | Command::Token(_) => "info".to_owned(),
    };
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr)
        .init();
    let result = match cli.command {
        Command::Serve(config) => agent_harness_server::run(*config, shutdown_signal()).await,
        Command::Record(config) => agent_harness_server::record::run(config).await,
        Command::Token(config) => agent_harness_server::token::run(&config.out),
        Command::Client(_) => unreachable!("run above"),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent-harness: {e}");
            std::process::ExitCode::FAILURE
        }
    }
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
