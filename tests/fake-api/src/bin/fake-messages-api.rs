//! `fake-messages-api`: the scripted Messages API (and the Responses and Gemini APIs beside
//! it) as a process, for test scripts in other languages. Prints
//! `listening http://127.0.0.1:PORT` as its first stdout line; with `--gemini-home`, the
//! environment Gemini CLI needs as the second.

use agent_harness_fake_api::FakeApi;
use clap::Parser;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use tokio::io::AsyncReadExt;
use tracing_subscriber::EnvFilter;

/// A scripted local Anthropic Messages API for running the real claude CLI with zero tokens.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// Address to bind. Loopback by default; the fake has no authentication.
    #[arg(long, default_value = "127.0.0.1")]
    host: IpAddr,
    /// Port to bind; 0 picks a free one (read it from the first stdout line).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Also exit when stdin reaches EOF, so a parent that dies takes the server with it.
    #[arg(long)]
    exit_on_stdin_eof: bool,
    /// Also write a Codex configuration directory here (created if missing): its
    /// `config.toml` points Codex at this server's Responses API, so a suite in another
    /// language gives the harness `--codex-home DIR` and `FAKE_API_KEY` in its environment.
    #[arg(long, value_name = "DIR")]
    codex_home: Option<std::path::PathBuf>,
    /// Also write a Gemini CLI home here (created if missing): its `.gemini/settings.json`
    /// selects API-key auth and turns telemetry and update checks off. Gemini CLI then runs
    /// against this server with `HOME=DIR`, `GEMINI_API_KEY` (any value),
    /// `GOOGLE_GEMINI_BASE_URL=<this server's URL>` and `GEMINI_CLI_NO_RELAUNCH=true` (else
    /// it restarts itself as a child process); the second stdout line,
    /// `gemini-env KEY=VALUE ...`, spells them (values quoted for a shell when needed), e.g.
    /// for the harness's `--acp-agent 'gemini=env KEY=VALUE ... gemini --acp'`.
    #[arg(long, value_name = "DIR")]
    gemini_home: Option<std::path::PathBuf>,
}

/// `value` as one shell word: as is when it has only characters no shell treats
/// specially, else single-quoted.
fn shell_word(value: &str) -> String {
    let plain = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if plain {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', "'\\''"))
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::io::Result<()> {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
    let api = FakeApi::bind(SocketAddr::new(args.host, args.port))?;
    // Written before the address is printed: a reader of the first line finds it ready.
    if let Some(dir) = &args.codex_home {
        api.codex_home(dir)?;
    }
    if let Some(dir) = &args.gemini_home {
        api.gemini_home(dir)?;
    }
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening {}", api.base_url())?;
        if let Some(dir) = &args.gemini_home {
            let env: Vec<String> = api
                .gemini_env(dir)
                .iter()
                .map(|(k, v)| format!("{k}={}", shell_word(v)))
                .collect();
            writeln!(out, "gemini-env {}", env.join(" "))?;
        }
        out.flush()?;
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let stdin_eof = async {
        if !args.exit_on_stdin_eof {
            return std::future::pending().await;
        }
        let mut stdin = tokio::io::stdin();
        let mut buf = [0u8; 1024];
        while !matches!(stdin.read(&mut buf).await, Ok(0) | Err(_)) {}
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM, stopping"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT, stopping"),
        _ = stdin_eof => tracing::info!("stdin closed, stopping"),
    }
    drop(api);
    Ok(())
}
