//! Every long flag and subcommand the real CLI's `--help` lists (the one
//! under test and the newest release) is classified by the launch policy:
//! allowed by default, allowed only by the operator, or never accepted;
//! and every subcommand is known (a model may not be named like one). A
//! flag a new CLI release adds fails here until someone decides which it
//! is, so nobody can allow it by accident.
//!
//! Run: `cargo test -p agent-harness-server --test real_cli cli_vocabulary::`.

use std::collections::BTreeSet;
use std::path::Path;

use agent_harness_server::launch::{
    DEFAULT_ARGS, KNOWN_ARITY, NEVER_ARGS, OPERATOR_ARGS, SUBCOMMANDS,
};

use crate::support::common::{claude_bin, claude_bin_newest};

/// The long flags of the "Options:" section and the names of the
/// "Commands:" section of `claude --help`.
fn help_vocabulary(bin: &Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let home = tempfile::tempdir().expect("home");
    let out = std::process::Command::new(bin)
        .arg("--help")
        .env("HOME", home.path())
        .env_remove("CLAUDE_CONFIG_DIR")
        .output()
        .expect("claude --help");
    assert!(out.status.success(), "{} --help: {out:?}", bin.display());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (_, rest) = text.split_once("\nOptions:\n").expect("an Options section");
    let (options, commands) = rest
        .split_once("\nCommands:\n")
        .expect("a Commands section");
    let mut flags = BTreeSet::new();
    for line in options.lines() {
        // `  -c, --continue  ...`, `  --allowedTools, --allowed-tools <tools...>`;
        // description lines are indented further.
        let Some(head) = line.strip_prefix("  ").filter(|l| l.starts_with('-')) else {
            continue;
        };
        let spelled = head.split("  ").next().unwrap_or_default();
        for word in spelled.split([',', ' ']) {
            if word.starts_with("--") {
                flags.insert(word.to_owned());
            }
        }
    }
    let mut names = BTreeSet::new();
    for line in commands.lines() {
        let Some(head) = line
            .strip_prefix("  ")
            .filter(|l| l.starts_with(|c: char| c.is_ascii_lowercase()))
        else {
            continue;
        };
        let spelled = head.split_whitespace().next().unwrap_or_default();
        names.extend(spelled.split('|').map(str::to_owned));
    }
    assert!(
        flags.len() > 40 && names.len() > 5,
        "parsed too little of:\n{text}"
    );
    (flags, names)
}

#[test]
fn every_cli_flag_and_subcommand_is_classified() {
    let never: BTreeSet<&str> = NEVER_ARGS.iter().copied().collect();
    let default: BTreeSet<&str> = DEFAULT_ARGS.iter().copied().collect();
    let operator: BTreeSet<&str> = OPERATOR_ARGS.iter().copied().collect();
    assert!(default.is_disjoint(&never) && operator.is_disjoint(&never));
    assert!(default.is_disjoint(&operator));
    for (flag, _) in KNOWN_ARITY {
        assert!(
            default.contains(flag) || operator.contains(flag),
            "{flag} has an arity but no class"
        );
    }
    let mut bins = vec![claude_bin(), claude_bin_newest()];
    bins.dedup();
    for bin in bins {
        let (flags, commands) = help_vocabulary(&bin);
        let unclassified: Vec<&String> = flags
            .iter()
            .filter(|f| {
                let f = f.as_str();
                !(default.contains(f) || operator.contains(f) || never.contains(f))
            })
            .collect();
        assert!(
            unclassified.is_empty(),
            "{} --help lists flags the launch policy does not classify: {unclassified:?}; add \
             each to DEFAULT_ARGS, OPERATOR_ARGS or NEVER_ARGS (server/src/launch/cli_vocabulary.rs)",
            bin.display()
        );
        let unknown: Vec<&String> = commands
            .iter()
            .filter(|c| !SUBCOMMANDS.contains(&c.as_str()))
            .collect();
        assert!(
            unknown.is_empty(),
            "{} --help lists subcommands SUBCOMMANDS lacks: {unknown:?}",
            bin.display()
        );
    }
}
