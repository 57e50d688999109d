//! The agents' checks: the claude CLI (found, its version against the
//! versions the tests run, logged in as the server's CLIs will be), and
//! Codex and the ACP agents when configured.

use std::path::Path;
use std::time::Duration;

use super::Check;
use crate::adapter::claude::discover::find_claude;
use crate::config::{AdapterKind, ServeConfig};

/// The claude CLI releases the test suites run: the pin of
/// `tests/tools/package.json`, then the newest checked
/// (`tests/tools/newest`). `server/tests/doctor.rs` keeps them equal.
pub const TESTED_CLAUDE: [&str; 2] = ["2.1.197", "2.1.332"];

/// The Codex releases the test suites run, likewise.
pub const TESTED_CODEX: [&str; 2] = ["0.169.0", "0.171.0"];

/// How long an agent binary may take to answer `--version` or
/// `auth status` (a first run may unpack itself).
const PROBE_TIMEOUT: Duration = Duration::from_secs(30);

/// The claude CLI and its login; with `--adapter cassette:FILE`, the file.
pub(super) async fn claude(config: &ServeConfig) -> Vec<Check> {
    if let AdapterKind::Cassette(file) = &config.adapter {
        return vec![match std::fs::File::open(file) {
            Ok(_) => Check::ok(
                "claude CLI",
                format!(
                    "not needed: --adapter cassette:{} replays a recording",
                    file.display()
                ),
            ),
            Err(e) => Check::fail(
                "cassette",
                format!(
                    "cannot read {}: {e}: fix the path of --adapter cassette:FILE",
                    file.display()
                ),
            ),
        }];
    }
    let bin = match find_claude(config.claude.claude_bin.as_deref()) {
        Ok(bin) => bin,
        Err(e) => return vec![Check::fail("claude CLI", e.to_string())],
    };
    let mut out = vec![
        version_check(
            "claude CLI",
            &bin,
            &TESTED_CLAUDE,
            "npm install -g @anthropic-ai/claude-code@",
        )
        .await,
    ];
    out.push(login(config, &bin).await);
    out
}

/// `BIN --version` against the tested releases: ok for one of them or one
/// between them, warn outside them (with the install line of the newest),
/// fail when the binary does not answer.
async fn version_check(what: &'static str, bin: &Path, tested: &[&str; 2], install: &str) -> Check {
    let out = match probe(bin, &["--version"], &[]).await {
        Ok(out) => out,
        Err(e) => {
            return Check::fail(
                what,
                format!(
                    "{} does not run ({e}): reinstall it, or name a working one",
                    bin.display()
                ),
            );
        }
    };
    let Some((text, version)) = out
        .stdout
        .split_whitespace()
        .find_map(|word| parse_version(word).map(|v| (word.to_owned(), v)))
    else {
        return Check::fail(
            what,
            format!(
                "`{} --version` printed no version ({:?}): is it the right program?",
                bin.display(),
                out.stdout.trim()
            ),
        );
    };
    let [pinned, newest] = tested.map(|t| parse_version(t).expect("a tested version parses"));
    let place = bin.display();
    let range = format!("{} and {}", tested[0], tested[1]);
    let install_newest = format!("`{install}{}`", tested[1]);
    if version == pinned || version == newest {
        Check::ok(what, format!("{place}, version {text} (tested)"))
    } else if version > pinned && version < newest {
        Check::ok(
            what,
            format!("{place}, version {text} (between the releases tested, {range})"),
        )
    } else if version < pinned {
        Check::warn(
            what,
            format!(
                "{place}, version {text}: older than any release tested ({range}); \
                 upgrade: {install_newest}"
            ),
        )
    } else {
        Check::warn(
            what,
            format!(
                "{place}, version {text}: newer than the releases tested ({range}); it \
                 usually works, and if sessions misbehave install the newest tested: \
                 {install_newest}"
            ),
        )
    }
}

/// `1.2.3` (a leading `v` allowed) as numbers.
fn parse_version(word: &str) -> Option<(u64, u64, u64)> {
    let mut parts = word.trim_start_matches('v').split('.');
    let mut next = || parts.next()?.parse::<u64>().ok();
    let v = (next()?, next()?, next()?);
    parts.next().is_none().then_some(v)
}

/// Whether the CLIs the server runs will be logged in, as the CLI itself
/// answers `auth status`: in the server's CLI configuration directory when
/// it holds a login already, else (or when that one is logged out and
/// lacks the credentials file `serve` would copy) with the operator's own
/// login, which `serve` copies there on its first start. An API key in
/// the environment counts either way: the CLIs inherit it.
async fn login(config: &ServeConfig, bin: &Path) -> Check {
    let dir = config
        .claude
        .claude_config_dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join("claude"));
    let dir = std::path::absolute(&dir).unwrap_or(dir);
    let server_has_login =
        dir.join(".credentials.json").exists() || dir.join(".claude.json").exists();
    let mut said = Vec::new();
    if server_has_login {
        match auth_status(bin, Some(&dir)).await {
            Ok(Some(how)) => {
                return Check::ok("claude login", format!("{how}, in {}", dir.display()));
            }
            Ok(None) => said.push(format!("not logged in with {}", dir.display())),
            Err(e) => said.push(e),
        }
    }
    if !dir.join(".credentials.json").exists() {
        match auth_status(bin, None).await {
            Ok(Some(how)) => {
                let whose = if server_has_login {
                    "your login, which serve copies into"
                } else {
                    "your login, which serve copies on its first start into"
                };
                return Check::ok("claude login", format!("{how} ({whose} {})", dir.display()));
            }
            Ok(None) => said.push("not logged in as this user".into()),
            Err(e) => said.push(e),
        }
    }
    Check::fail(
        "claude login",
        format!(
            "{}: log in as the user the server runs as (`claude auth login`; serve copies \
             ~/.claude/.credentials.json into {} when that has none), or set \
             ANTHROPIC_API_KEY (or CLAUDE_CODE_OAUTH_TOKEN from `claude setup-token`) in the \
             server's environment",
            said.join("; "),
            dir.display()
        ),
    )
}

/// `claude auth status --json`: `Some(how)` when logged in, `None` when
/// not; an error when the CLI did not answer in JSON. `config_dir` is the
/// `CLAUDE_CONFIG_DIR` to ask with; `None` keeps this process's.
async fn auth_status(bin: &Path, config_dir: Option<&Path>) -> Result<Option<String>, String> {
    let env: Vec<(&str, &std::ffi::OsStr)> = config_dir
        .map(|d| vec![("CLAUDE_CONFIG_DIR", d.as_os_str())])
        .unwrap_or_default();
    let out = probe(bin, &["auth", "status", "--json"], &env)
        .await
        .map_err(|e| format!("`claude auth status` did not run: {e}"))?;
    let status: serde_json::Value = serde_json::from_str(out.stdout.trim()).map_err(|_| {
        format!(
            "`claude auth status --json` did not answer in JSON ({:?})",
            out.stdout.trim()
        )
    })?;
    if status.get("loggedIn").and_then(serde_json::Value::as_bool) != Some(true) {
        return Ok(None);
    }
    let field = |k: &str| status.get(k).and_then(serde_json::Value::as_str);
    let mut how = format!(
        "logged in ({}",
        field("authMethod").unwrap_or("unknown method")
    );
    if let Some(source) = field("apiKeySource") {
        how.push_str(&format!(" from {source}"));
    }
    how.push(')');
    Ok(Some(how))
}

/// Codex, when enabled (`--codex-bin`, `CODEX_BIN`, or found).
pub(super) async fn codex(config: &ServeConfig) -> Option<Check> {
    match crate::adapter::codex::find_codex(config.codex.codex_bin.as_deref()) {
        Err(e) => Some(Check::fail(
            "codex",
            format!("{e}: fix the path, or leave it out to run without Codex sessions"),
        )),
        Ok(None) => None,
        Ok(Some(bin)) => Some(
            version_check(
                "codex",
                &bin,
                &TESTED_CODEX,
                "npm install -g @openai/codex@",
            )
            .await,
        ),
    }
}

/// Each `--acp-agent`: its name and command, or the entry at fault.
pub(super) fn acp(config: &ServeConfig) -> Vec<Check> {
    match config.acp.agents() {
        Err(e) => vec![Check::fail(
            "ACP agent",
            format!("{e}: fix or remove that --acp-agent"),
        )],
        Ok(agents) => agents
            .into_iter()
            .map(|a| {
                Check::ok(
                    "ACP agent",
                    format!("{}: {} {}", a.name, a.program.display(), a.args.join(" ")),
                )
            })
            .collect(),
    }
}

/// What a probe printed.
struct Probed {
    stdout: String,
}

/// Runs `bin ARGS` as the server would run it (its environment cleaned the
/// same way, `env` set on top), stdin closed, killed past
/// [`PROBE_TIMEOUT`].
async fn probe(
    bin: &Path,
    args: &[&str],
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<Probed, String> {
    let mut cmd = tokio::process::Command::new(bin);
    cmd.args(args)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    for key in crate::supervise::DEFAULT_STRIP_ENV {
        cmd.env_remove(key);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = tokio::time::timeout(PROBE_TIMEOUT, cmd.output())
        .await
        .map_err(|_| format!("no answer in {}s", PROBE_TIMEOUT.as_secs()))?
        .map_err(|e| e.to_string())?;
    Ok(Probed {
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
    })
}
