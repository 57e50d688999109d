//! The comparisons that run real agent CLIs: spawn overhead against the
//! claude CLI spawned directly, and Codex against its app-server driven
//! directly.

use crate::Args;
use crate::server::sibling;

/// The spawn comparison: the real CLI against the scripted Messages API,
/// through our server and spawned directly.
pub(super) async fn run_spawn(args: &Args) -> crate::ours::spawn::SpawnReport {
    use crate::ours::spawn::{SpawnOptions, measure};
    let opts = SpawnOptions {
        harness_bin: args
            .server_bin
            .clone()
            .unwrap_or_else(|| sibling("agent-harness")),
        claude_bin: claude_bin(args),
        fake_api_bin: sibling("fake-messages-api"),
        server_args: Vec::new(),
        tmp_dir: None,
        data_dir_in: args.spawn_data_dir.clone(),
        pause_before_send: std::time::Duration::from_millis(200),
    };
    require(&[&opts.harness_bin, &opts.claude_bin, &opts.fake_api_bin]);
    let rounds = args.spawn_rounds.unwrap_or(if args.quick { 2 } else { 20 });
    measure(&opts, rounds).await
}

/// The claude CLI the server is given (and the spawn comparison runs).
fn claude_bin(args: &Args) -> std::path::PathBuf {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    args.claude_bin
        .clone()
        .or_else(|| std::env::var_os("CLAUDE_BIN").map(Into::into))
        .unwrap_or_else(|| root.join("tests/tools/node_modules/.bin/claude"))
}

/// The Codex comparison: the real codex app-server against the scripted
/// Responses API, through our server and driven directly; then memory per
/// live Codex session.
pub(super) async fn run_codex(args: &Args) -> crate::ours::spawn::codex::CodexReport {
    use crate::ours::spawn::codex::{CodexOptions, measure};
    let opts = CodexOptions {
        harness_bin: args
            .server_bin
            .clone()
            .unwrap_or_else(|| sibling("agent-harness")),
        codex_bin: args
            .codex_bin
            .clone()
            .or_else(|| std::env::var_os("CODEX_BIN").map(Into::into))
            .unwrap_or_else(|| {
                panic!(
                    "the Codex comparison needs --codex-bin or CODEX_BIN (tests/setup.sh writes it)"
                )
            }),
        claude_bin: claude_bin(args),
        fake_api_bin: sibling("fake-messages-api"),
        sessions: args
            .codex_sessions
            .unwrap_or(if args.quick { 2 } else { 10 }),
        pause_before_send: std::time::Duration::from_millis(200),
    };
    require(&[&opts.harness_bin, &opts.codex_bin, &opts.fake_api_bin]);
    let rounds = args.codex_rounds.unwrap_or(if args.quick { 2 } else { 20 });
    measure(&opts, rounds).await
}

/// Stops the run when a binary a comparison needs is missing.
fn require(bins: &[&std::path::PathBuf]) {
    for bin in bins {
        assert!(
            bin.exists(),
            "{} is missing (build or install it)",
            bin.display()
        );
    }
}
