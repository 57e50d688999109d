//! The `agent-harness` binary: parse flags, set up tracing, run (the
//! server's commands), or run a terminal client command.

use agent_harness_server::cli_client;
use agent_harness_server::config::{Cli, Command, LogFormat};
use agent_harness_server::supervise::trampoline;
use clap::{CommandFactory, Parser};

/// jemalloc, not glibc's malloc: at 100 sessions writing flat out glibc's
/// allocator was about a sixth of the server's samples; with jemalloc the
/// server takes about a fifth less CPU per event, writes 15-20% more
/// events a second, and holds no more memory per idle subscriber
/// (BENCHMARKS.md, "jemalloc as the server's allocator"). mimalloc was as
/// fast but held twice the memory per idle subscriber.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    // Started by the server to become one of its children (a CLI): that
    // and nothing else (supervise::trampoline).
    if let Some(code) = trampoline::exec_if_asked() {
        return code;
    }
    trampoline::enable();
    match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime.block_on(run()),
        Err(e) => {
            eprintln!("agent-harness: starting the runtime: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return cli_client::parse_failed(e),
    };
    let result = match cli.command {
        // The client is quiet: what it has to say is its output and its
        // exit code.
        Command::Client(command) => return cli_client::run(command).await,
        Command::Serve(config) => {
            init_tracing(&config.log, config.log_format);
            agent_harness_server::run(*config, shutdown_signal()).await
        }
        Command::Record(config) => {
            init_tracing("info", LogFormat::Text);
            agent_harness_server::record::run(config).await
        }
        Command::Export(args) => agent_harness_server::export::run(&args),
        Command::Token(config) => {
            init_tracing("info", LogFormat::Text);
            agent_harness_server::token::run(&config.out)
        }
        // What the binary says about itself: stdout only, no tracing.
        Command::Doctor(config) => return agent_harness_server::doctor::run(&config).await,
        Command::Completions(config) => print(&agent_harness_server::manual::completions(
            config.shell,
            Cli::command(),
        )),
        Command::Man(config) => {
            agent_harness_server::manual::man(Cli::command(), config.command.as_deref())
                .map_err(agent_harness_server::error::Error::Config)
                .and_then(|page| print(&page))
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

/// Writes `bytes` to stdout; a reader that went away (`| head`) is not an
/// error.
fn print(bytes: &[u8]) -> Result<(), agent_harness_server::error::Error> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(
            agent_harness_server::error::Error::Internal(format!("writing to stdout: {e}")),
        ),
        _ => Ok(()),
    }
}

/// Tracing to stderr, filtered by `filter` (`serve --log`), written as
/// `format` says (`serve --log-format`).
fn init_tracing(filter: &str, format: LogFormat) {
    let fmt = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => fmt.init(),
        LogFormat::Json => fmt.json().init(),
    }
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed at the call,
/// before start-up: a signal that arrives while the store opens or sessions
/// are recovered is a graceful shutdown once serving starts, not the
/// default action's abrupt exit.
fn shutdown_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    let mut int = signal(SignalKind::interrupt()).expect("install SIGINT handler");
    async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}
