//! What the launch policy knows about the claude CLI's command line and
//! environment: each flag's arity, the flags a client may pass by default,
//! and the flags and variables that are never accepted (they decide who
//! answers permission prompts, where the API is, or reach outside the
//! process). Kept apart from the policy's logic so a new CLI release is a
//! change to these lists only.

/// How many values a flag takes (as the CLI's `--help` shows it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arity {
    /// A switch: `--flag`.
    Switch,
    /// One value: `--flag VALUE` or `--flag=VALUE`.
    Value,
    /// One or more values: `--flag A B C` (or `--flag=A`).
    Variadic,
}

/// The flags a client may pass without any `--allow-arg`: they choose the
/// model, bound the run and shape the prompt, and can only narrow what the
/// tools may do (`--disallowedTools`).
pub const DEFAULT_ARGS: &[&str] = &[
    "--model",
    "--fallback-model",
    "--max-turns",
    "--append-system-prompt",
    "--system-prompt",
    "--effort",
    "--max-budget-usd",
    "--json-schema",
    "--disallowedTools",
    "--disallowed-tools",
];

/// The arity of the flags this server knows (from `claude --help` of CLI
/// 2.1.197 and 2.1.332; `--max-turns` is hidden there but takes a value).
/// An allowed flag not listed here may only be passed bare or as
/// `--flag=value`: a value in the next token would be ambiguous (the CLI
/// might read it as a prompt or a subcommand).
pub const KNOWN_ARITY: &[(&str, Arity)] = &[
    ("--model", Arity::Value),
    ("--fallback-model", Arity::Value),
    ("--max-turns", Arity::Value),
    ("--append-system-prompt", Arity::Value),
    ("--system-prompt", Arity::Value),
    ("--effort", Arity::Value),
    ("--max-budget-usd", Arity::Value),
    ("--json-schema", Arity::Value),
    ("--disallowedTools", Arity::Variadic),
    ("--disallowed-tools", Arity::Variadic),
    // Not in the default set; their arity for when an operator allows them.
    ("--name", Arity::Value),
    ("--betas", Arity::Variadic),
    ("--brief", Arity::Switch),
    ("--disable-slash-commands", Arity::Switch),
    ("--exclude-dynamic-system-prompt-sections", Arity::Switch),
    ("--ax-screen-reader", Arity::Switch),
    ("--no-chrome", Arity::Switch),
    ("--autocompact", Arity::Value),
    ("--restricted", Arity::Switch),
    ("--system-prompt-snapshot", Arity::Value),
];

/// The flags of the CLI's `--help` that are neither in [`DEFAULT_ARGS`] nor
/// in [`NEVER_ARGS`]: a client may pass them only when the operator allows
/// them (`--allow-arg`). Every long flag the pinned and the newest CLI's
/// `--help` lists is in one of the three lists (a test checks it), so a
/// flag a new CLI release adds is classified before anyone can allow it.
pub const OPERATOR_ARGS: &[&str] = &[
    "--name",
    "--betas",
    "--brief",
    "--disable-slash-commands",
    "--exclude-dynamic-system-prompt-sections",
    "--ax-screen-reader",
    "--no-chrome",
    // Adds `prompt_suggestion` lines after each turn.
    "--prompt-suggestions",
    // CLI 2.1.332: the auto-compact window, fewer tools, how the system
    // prompt is cached.
    "--autocompact",
    "--restricted",
    "--system-prompt-snapshot",
];

/// The CLI's subcommands (`claude --help`, "Commands:", of the pinned and
/// the newest CLI; a test checks the list is complete). A word of the argv
/// equal to one can start it instead of a session (`claude mcp`), and CLI
/// 2.1.197 stops reading its input when the argv holds the word `mcp`
/// anywhere; so every value the server puts into the argv is joined to its
/// flag (`--model=VALUE`), and a model may not be named like one.
pub const SUBCOMMANDS: &[&str] = &[
    "agents",
    "attach",
    "auth",
    "auto-mode",
    "doctor",
    "gateway",
    "import",
    "install",
    "kill",
    "logs",
    "mcp",
    "plugin",
    "plugins",
    "project",
    "purge",
    "respawn",
    "rm",
    "setup-token",
    "stop",
    "ultrareview",
    "update",
    "upgrade",
];

/// Flags never accepted from a client, and a start-up error in
/// `--allow-arg` (so is any prefix of one, and any spelling that differs
/// only in case, `-` or `_`, e.g. `--allowedtools`, `--dangerously`).
pub const NEVER_ARGS: &[&str] = &[
    // Turn permission checks off or widen what tools may do, or decide who
    // answers permission requests (the server relays them to its clients).
    "--dangerously-skip-permissions",
    "--allow-dangerously-skip-permissions",
    "--permission-mode",
    "--permission-prompt-tool",
    // CLI 2.1.332: "host" or "none" decides who answers prompts.
    "--permission-prompts",
    "--allowedTools",
    "--allowed-tools",
    "--add-dir",
    // Load settings, hooks, MCP servers, plugins, agents or tool sets: each
    // can run commands or widen permissions.
    "--settings",
    "--setting-sources",
    "--mcp-config",
    "--strict-mcp-config",
    "--plugin-dir",
    "--plugin-dir-no-mcp",
    "--plugin-url",
    // Hidden flags (not in `--help`) of CLI 2.1.197 and 2.1.332: managed
    // (policy) settings, channel servers (MCP), system prompts read from a
    // file the server can read, and auto mode.
    "--managed-settings",
    "--channels",
    "--dangerously-load-development-channels",
    "--system-prompt-file",
    "--append-system-prompt-file",
    "--enable-auto-mode",
    "--agents",
    "--agent",
    "--tools",
    // Write or fetch files, or reach outside the process: debug logs to a
    // chosen path, downloads, worktrees, tmux, the IDE, Chrome, remote
    // control, background agents, PRs.
    "--debug",
    "--debug-file",
    "--file",
    "--worktree",
    "--tmux",
    "--ide",
    "--chrome",
    "--remote-control",
    "--remote-control-session-name-prefix",
    // Hidden: remote control's short spelling, remote sessions, a session
    // mirror, the browser's network.
    "--rc",
    "--remote",
    "--session-mirror",
    "--dangerously-allow-browser-network-access",
    "--bg",
    "--background",
    "--from-pr",
    // CLI 2.1.332: cloud sessions, self-hosted environments, the desktop
    // app, teleport sessions.
    "--cloud",
    "--environment",
    "--desktop",
    "--teleport",
    // Owned by the server: which conversation a run continues (its log
    // decides), the transport and its stream format, what the CLI prints,
    // where it persists, and how it starts.
    "--continue",
    "--resume",
    "--resume-session-at",
    "--fork-session",
    "--session-id",
    "--sdk-url",
    "--input-format",
    "--output-format",
    "--print",
    "--verbose",
    "--include-partial-messages",
    "--include-hook-events",
    // CLI 2.1.332: changes how subagent output is framed.
    "--forward-subagent-text",
    "--replay-user-messages",
    "--no-session-persistence",
    "--bare",
    "--safe-mode",
    // Hidden: run the setup hooks (and exit), maintenance mode, rewind the
    // files of a conversation at start; the thinking budget is a typed
    // setting (`config.max_thinking_tokens`, SetMaxThinkingTokens).
    "--init",
    "--init-only",
    "--maintenance",
    "--rewind-files",
    "--thinking",
    "--max-thinking-tokens",
    "--help",
    "--version",
];

/// Environment variables never accepted from a client, and a start-up error
/// in `--allow-env` (compared case-insensitively): they turn the sandbox
/// check off, move the home, search path, shell or temp dir, or make a
/// shell run code.
pub const NEVER_ENV: &[&str] = &[
    "IS_SANDBOX",
    "HOME",
    "PATH",
    "SHELL",
    "ENV",
    "PROMPT_COMMAND",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "IFS",
    "CDPATH",
    "GLOBIGNORE",
    "TMPDIR",
    "USER",
    "LOGNAME",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    // Shell start-up files and loaders: zsh reads $ZDOTDIR/.zshenv, glibc
    // loads gconv modules from GCONV_PATH and locales from LOCPATH,
    // GLIBC_TUNABLES steers the allocator, Perl's older search path, the
    // zsh function path.
    "ZDOTDIR",
    "FPATH",
    "GCONV_PATH",
    "LOCPATH",
    "GLIBC_TUNABLES",
    "HOSTALIASES",
    "PERLLIB",
    // Programs a tool runs on its own: pagers and editors (git, man, less
    // input filters), the browser.
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "LESSOPEN",
    "LESSCLOSE",
    "BROWSER",
];

/// Prefixes of environment variables never accepted from a client (compared
/// case-insensitively): the CLI's own configuration and credentials
/// (`ANTHROPIC_*`: the API endpoint and key; `CLAUDE_*`: `CLAUDE_CODE_*`,
/// `CLAUDE_CONFIG_DIR`), runtimes that load code from the environment
/// (Node, Bun, the dynamic linker, bash functions, git, Python, Perl, Ruby,
/// Java, npm), telemetry endpoints, cloud credentials and the providers
/// the CLI can be pointed at, config dirs, TLS trust, ssh agents.
pub const NEVER_ENV_PREFIXES: &[&str] = &[
    "ANTHROPIC_",
    "CLAUDE_",
    "NODE_",
    "BUN_",
    "NPM_CONFIG_",
    "LD_",
    "DYLD_",
    "BASH_",
    "GIT_",
    "PYTHON",
    "PERL5",
    "RUBY",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "OTEL_",
    "AWS_",
    "GOOGLE_",
    "CLOUD_ML_",
    "VERTEX_",
    "XDG_",
    "SSL_",
    "SSH_",
    // Build tools that run a program the variable names (RUSTC_WRAPPER,
    // CARGO_TARGET_*_RUNNER, a toolchain override), OpenSSL's config (it
    // loads engines), Lua's start-up code, Ruby gems' load path.
    "RUSTC",
    "RUSTDOC",
    "RUSTUP_",
    "CARGO_",
    "OPENSSL_",
    "LUA_",
    "GEM_",
];

pub(super) fn arity_of(flag: &str) -> Option<Arity> {
    KNOWN_ARITY
        .iter()
        .find(|(f, _)| *f == flag)
        .map(|(_, a)| *a)
}

/// A flag name compared loosely: `-` and `_` removed, lowercased.
fn loose(flag: &str) -> String {
    flag.chars()
        .filter(|c| !matches!(c, '-' | '_'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The never-accepted flag `flag` names or abbreviates (loosely compared).
/// A flag this server classifies as safe or operator-allowed is its own
/// flag, not an abbreviation (`--system-prompt` of `--system-prompt-file`).
pub(super) fn never_arg(flag: &str) -> Option<&'static str> {
    let l = loose(flag);
    if l.is_empty() {
        return None;
    }
    if let Some(exact) = NEVER_ARGS.iter().copied().find(|n| loose(n) == l) {
        return Some(exact);
    }
    if DEFAULT_ARGS
        .iter()
        .chain(OPERATOR_ARGS)
        .any(|f| loose(f) == l)
    {
        return None;
    }
    NEVER_ARGS
        .iter()
        .copied()
        .find(|n| loose(n).starts_with(&l))
}

/// Whether `word` names a CLI subcommand (ASCII case-insensitive).
pub(super) fn subcommand(word: &str) -> bool {
    SUBCOMMANDS.iter().any(|c| c.eq_ignore_ascii_case(word))
}

/// Whether `key` is never accepted (case-insensitive).
pub(super) fn never_env(key: &str) -> bool {
    let up = key.to_ascii_uppercase();
    NEVER_ENV.contains(&up.as_str()) || NEVER_ENV_PREFIXES.iter().any(|p| up.starts_with(p))
}
