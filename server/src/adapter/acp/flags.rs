//! The ACP adapter's flag of `serve`: the agents the operator configures,
//! each a name and the command that runs it speaking the Agent Client
//! Protocol on stdio. The doc comment is its `--help` text;
//! [`AcpFlags::agents`] checks every entry and finds each program.

use std::path::PathBuf;

use agent_harness_protocol::vocab::agent;

use crate::adapter::claude::discover::{is_executable, on_path};

/// The operator's ACP agents.
#[derive(Debug, Clone, Default, PartialEq, clap::Args)]
pub struct AcpFlags {
    /// An agent spoken to over the Agent Client Protocol, as NAME=COMMAND
    /// (repeatable; e.g. 'gemini=gemini --acp'): `StartConfig.agent = NAME`
    /// runs COMMAND, split shell-style and run directly (no shell), so
    /// 'gemini=env HOME=/srv/gemini gemini --acp' gives it its own home.
    /// NAME is [a-z][a-z0-9_-]{0,31}, not claude or codex. The env variable
    /// takes several, separated by newlines or `;`.
    #[arg(
        long = "acp-agent",
        env = "AGENT_HARNESS_ACP_AGENTS",
        value_name = "NAME=COMMAND"
    )]
    pub acp_agent: Vec<String>,
}

/// One configured ACP agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcpAgentSpec {
    /// What `StartConfig.agent` names it by.
    pub name: String,
    /// The program: as written when it names a path, else found on PATH.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
}

/// Longest agent name.
const MAX_NAME: usize = 32;

/// Whether `name` is `[a-z][a-z0-9_-]{0,31}`.
pub fn name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    name.len() <= MAX_NAME
        && chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '_' | '-'))
}

impl AcpFlags {
    /// Every configured agent, in the order given; an error names the
    /// entry at fault (a bad name, a name twice, a command that does not
    /// split or whose program is not found).
    pub fn agents(&self) -> Result<Vec<AcpAgentSpec>, String> {
        let path = std::env::var_os("PATH");
        let mut out: Vec<AcpAgentSpec> = Vec::new();
        for entry in self
            .acp_agent
            .iter()
            .flat_map(|v| v.split(['\n', ';']))
            .map(str::trim)
            .filter(|e| !e.is_empty())
        {
            let spec = parse(entry, |program| {
                if program.contains('/') {
                    let p = PathBuf::from(program);
                    is_executable(&p).then_some(p)
                } else {
                    on_path(path.as_deref(), program)
                }
            })?;
            if out.iter().any(|a| a.name == spec.name) {
                return Err(format!(
                    "--acp-agent {:?}: the name {:?} is configured twice",
                    entry, spec.name
                ));
            }
            out.push(spec);
        }
        Ok(out)
    }
}

/// Parses one `NAME=COMMAND`, finding its program with `find`.
fn parse(entry: &str, find: impl Fn(&str) -> Option<PathBuf>) -> Result<AcpAgentSpec, String> {
    let fail = |why: String| format!("--acp-agent {entry:?}: {why}");
    let Some((name, command)) = entry.split_once('=') else {
        return Err(fail("expected NAME=COMMAND".into()));
    };
    let name = name.trim();
    if !name_ok(name) {
        return Err(fail(format!(
            "the name {name:?} is not [a-z][a-z0-9_-]{{0,31}}"
        )));
    }
    if name == agent::CLAUDE || name == agent::CODEX {
        return Err(fail(format!(
            "{name:?} is a built-in agent; choose another name"
        )));
    }
    let Some(mut argv) = shlex::split(command) else {
        return Err(fail(
            "the command has an unterminated quote or escape".into(),
        ));
    };
    if argv.is_empty() {
        return Err(fail("the command is empty".into()));
    }
    let program = argv.remove(0);
    let Some(found) = find(&program) else {
        return Err(fail(format!(
            "{program:?} is not an executable file{}",
            if program.contains('/') {
                ""
            } else {
                " on PATH"
            }
        )));
    };
    Ok(AcpAgentSpec {
        name: name.to_owned(),
        program: found,
        args: argv,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(p: &str) -> Option<PathBuf> {
        (p != "missing").then(|| PathBuf::from("/bin").join(p))
    }

    #[test]
    fn an_entry_is_a_name_and_a_command_split_shell_style() {
        let a = parse("gemini=env HOME='/srv/my home' gemini --acp", found).unwrap();
        assert_eq!(a.name, "gemini");
        assert_eq!(a.program, PathBuf::from("/bin/env"));
        assert_eq!(a.args, ["HOME=/srv/my home", "gemini", "--acp"]);
    }

    #[test]
    fn bad_entries_are_refused_naming_why() {
        for (entry, why) in [
            ("gemini", "NAME=COMMAND"),
            ("Gemini=gemini", "not [a-z]"),
            ("9x=gemini", "not [a-z]"),
            ("claude=gemini --acp", "built-in"),
            ("codex=codex-acp", "built-in"),
            ("g=", "empty"),
            ("g=gemini 'open", "unterminated"),
            ("g=missing --acp", "not an executable file on PATH"),
        ] {
            let err = parse(entry, found).unwrap_err();
            assert!(err.contains(why), "{entry}: {err}");
            assert!(err.starts_with("--acp-agent"), "{err}");
        }
        let long = format!("{}=gemini", "a".repeat(33));
        assert!(parse(&long, found).is_err());
        assert!(parse(&format!("{}=gemini", "a".repeat(32)), found).is_ok());
    }

    #[test]
    fn entries_split_on_newlines_and_semicolons_and_names_are_unique() {
        let flags = AcpFlags {
            acp_agent: vec!["a=/bin/sh -c x; b=/bin/sh\nc=/bin/sh".into()],
        };
        let names: Vec<_> = flags
            .agents()
            .unwrap()
            .into_iter()
            .map(|a| a.name)
            .collect();
        assert_eq!(names, ["a", "b", "c"]);
        let twice = AcpFlags {
            acp_agent: vec!["a=/bin/sh".into(), "a=/bin/sh".into()],
        };
        assert!(twice.agents().unwrap_err().contains("twice"));
        let not_exec = AcpFlags {
            acp_agent: vec!["a=/nonexistent/agent".into()],
        };
        assert!(
            not_exec
                .agents()
                .unwrap_err()
                .contains("not an executable file")
        );
    }

    #[test]
    fn the_flag_repeats() {
        use clap::Parser;
        #[derive(Parser)]
        struct Serve {
            #[command(flatten)]
            acp: AcpFlags,
        }
        let serve = Serve::try_parse_from([
            "serve",
            "--acp-agent",
            "a=/bin/sh",
            "--acp-agent",
            "b=/bin/sh -c 'echo hi'",
        ])
        .unwrap();
        let agents = serve.acp.agents().unwrap();
        assert_eq!(agents.len(), 2);
        assert_eq!(agents[1].args, ["-c", "echo hi"]);
    }
}
