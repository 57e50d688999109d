//! Which user messages the claude CLI reads as a slash command, and the
//! operator's allowlist of those a client may send.
//!
//! A slash command is not a prompt: the CLI runs it itself, before and
//! outside the permission relay. `/config permissionMode=acceptEdits`
//! writes the CLI's settings (every later run starts in that mode),
//! `/heapdump` writes files, skills and plugin commands run whatever they
//! define. So a client's text is data: a message the CLI would take as a
//! command is refused unless its command name is on the allowlist
//! ([`DEFAULT_SLASH_COMMANDS`] plus `--allow-slash-command`).
//!
//! What the CLI (2.1.197 and 2.1.332, stream-json input) takes as a command:
//! the message's text when it is a plain string, or else the text of its
//! **last** content block when that block is a text block (earlier blocks
//! never are), when that text starts with `/` as its very first character
//! (leading whitespace makes it a prompt). The command name runs up to the
//! first whitespace (JavaScript's `\s`). The CLI then looks the name up among
//! its commands, skills and plugins; a name it does not know is sent to the
//! model as a prompt (or answered "Unknown command"), but which names it
//! knows depends on its configuration, so every name counts here, except
//! an empty one (`/ text`) and one holding a `/` (`/tmp/x is a file`,
//! `//x`): no command name has one, and the CLI sends those to the model.
//!
//! The escape for a message that must begin with `/`: begin it with a space
//! (or any whitespace); the CLI then reads it as a prompt.

use std::collections::BTreeSet;

use pbjson_types::Struct;

use crate::adapter::claude::stream_json::last_text;
use crate::error::{Error, Result};

/// The commands a client may send without `--allow-slash-command`: they
/// read the conversation (`/context`: what fills the context window) or
/// rewrite only the conversation's own transcript (`/compact`: summarize
/// it), and write no settings, no other file and change no permission.
pub const DEFAULT_SLASH_COMMANDS: &[&str] = &["compact", "context"];

/// The request fields a user message comes in: its text and its content
/// blocks ("input" and "content_blocks" for Send, "config.prompt" and
/// "config.content_blocks" for Start).
#[derive(Debug, Clone, Copy)]
pub struct InputFields {
    /// The text's field.
    pub text: &'static str,
    /// The content blocks' field (an index is appended).
    pub blocks: &'static str,
}

/// The allowlist of slash commands. Cheap to clone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlashCommands {
    allowed: BTreeSet<String>,
}

impl Default for SlashCommands {
    fn default() -> Self {
        Self {
            allowed: DEFAULT_SLASH_COMMANDS
                .iter()
                .map(|c| (*c).to_owned())
                .collect(),
        }
    }
}

/// JavaScript's `\s`, which ends the CLI's command name (Rust's
/// `char::is_whitespace` differs: it has U+0085 and lacks U+FEFF).
fn js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// The command name the CLI reads in `text`, or `None` when it reads
/// `text` as a prompt (see the module docs). A name followed by `(MCP)` is
/// an MCP prompt: the name comes back with it (`name (MCP)`), as the CLI
/// looks it up.
pub fn command_name(text: &str) -> Option<String> {
    let rest = text.strip_prefix('/')?;
    let end = rest.find(js_space).unwrap_or(rest.len());
    let name = &rest[..end];
    if name.is_empty() || name.contains('/') {
        return None;
    }
    let args = rest[end..].trim_matches(js_space);
    let mcp = args
        .strip_prefix("(MCP)")
        .is_some_and(|after| after.is_empty() || after.starts_with(js_space));
    Some(if mcp {
        format!("{name} (MCP)")
    } else {
        name.to_owned()
    })
}

/// `[A-Za-z0-9_][A-Za-z0-9:_-]*`: the CLI's form of a command name.
fn name_ok(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, ':' | '_' | '-'))
}

impl SlashCommands {
    /// [`DEFAULT_SLASH_COMMANDS`] plus the operator's `allowed`
    /// (`--allow-slash-command`, with or without the leading `/`).
    pub fn with_allowed(mut self, allowed: &[String]) -> Result<Self> {
        for raw in allowed {
            let name = raw.trim();
            let name = name.strip_prefix('/').unwrap_or(name);
            if !name_ok(name) {
                return Err(Error::Config(format!(
                    "--allow-slash-command {raw:?}: not a command name \
                     ([A-Za-z0-9_][A-Za-z0-9:_-]*, e.g. compact or /compact)"
                )));
            }
            self.allowed.insert(name.to_owned());
        }
        Ok(self)
    }

    /// The allowed command names, sorted.
    pub fn allowed(&self) -> impl Iterator<Item = &str> {
        self.allowed.iter().map(String::as_str)
    }

    /// Refuses the message of `text` and `content_blocks` when the CLI
    /// would read it as a slash command that is not allowed:
    /// [`Error::InvalidField`] naming the text's field, or the content
    /// block's (`content_blocks[N]`).
    pub fn check(&self, fields: InputFields, text: &str, content_blocks: &[Struct]) -> Result<()> {
        let Some((block, text)) = last_text(text, content_blocks) else {
            return Ok(());
        };
        let Some(name) = command_name(text) else {
            return Ok(());
        };
        if self.allowed.contains(&name) {
            return Ok(());
        }
        let field = match block {
            Some(i) => format!("{}[{i}]", fields.blocks),
            None => fields.text.to_owned(),
        };
        Err(Error::invalid(
            field,
            format!(
                "the CLI would run {:?} as a slash command, which this server does not allow \
                 (allowed: {}; the operator adds one with --allow-slash-command). To send text \
                 that begins with '/', begin it with a space",
                format!("/{name}").chars().take(64).collect::<String>(),
                self.allowed
                    .iter()
                    .map(|c| format!("/{c}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::adapter::UserInput;

    const SEND: InputFields = InputFields {
        text: "input",
        blocks: "content_blocks",
    };

    fn text_block(text: &str) -> Struct {
        serde_json::from_value(serde_json::json!({"type": "text", "text": text})).unwrap()
    }

    fn image_block() -> Struct {
        serde_json::from_value(serde_json::json!({"type": "image", "source": {
            "type": "base64", "media_type": "image/png", "data": "AAAA"}}))
        .unwrap()
    }

    fn text(t: &str) -> UserInput {
        UserInput {
            text: t.into(),
            ..Default::default()
        }
    }

    impl SlashCommands {
        fn check_input(&self, fields: InputFields, input: &UserInput) -> Result<()> {
            self.check(fields, &input.text, &input.content_blocks)
        }
    }

    fn refused_field(r: Result<()>) -> String {
        match r {
            Err(Error::InvalidField { field, .. }) => field.into_owned(),
            other => panic!("expected INVALID_ARGUMENT, got {other:?}"),
        }
    }

    /// Each input as the real CLI (2.1.197 and 2.1.332) was seen to read
    /// it: `Some(name)` ran (or was looked up as) a command, `None` went to
    /// the model as a prompt.
    #[test]
    fn names_what_the_cli_reads_as_a_command() {
        for (input, name) in [
            ("/context", Some("context")),
            ("/context extra args", Some("context")),
            ("/context\nmore lines", Some("context")),
            ("/context\u{a0}x", Some("context")),
            ("/config permissionMode=acceptEdits", Some("config")),
            ("/Context", Some("Context")),
            ("/nonexistent-xyz", Some("nonexistent-xyz")),
            ("/tmp", Some("tmp")),
            ("/x (MCP)", Some("x (MCP)")),
            ("/x (MCP) arg", Some("x (MCP)")),
            ("/x (MCP)arg", Some("x")),
            // U+0085 is not JavaScript whitespace: the name goes on.
            ("/context\u{85}x", Some("context\u{85}x")),
            ("  /context", None),
            ("\n/context", None),
            ("\t/context", None),
            ("\u{a0}/context", None),
            ("\u{feff}/context", None),
            ("\u{200b}/context", None),
            ("/ context", None),
            ("/", None),
            ("//context", None),
            ("/context/", None),
            ("/tmp/foo is a path", None),
            ("please look at /etc/passwd", None),
            ("\\/context", None),
            ("\u{ff0f}context", None),
        ] {
            assert_eq!(command_name(input).as_deref(), name, "{input:?}");
        }
    }

    #[test]
    fn refuses_commands_off_the_allowlist_and_names_the_field() {
        let slash = SlashCommands::default();
        assert_eq!(
            refused_field(slash.check_input(SEND, &text("/config permissionMode=acceptEdits"))),
            "input"
        );
        assert_eq!(
            refused_field(slash.check_input(SEND, &text("/heapdump"))),
            "input"
        );
        for ok in [
            "/context",
            "/compact keep the API notes",
            " /config x",
            "/tmp/a is a file",
            "hi /config",
            "",
        ] {
            slash.check_input(SEND, &text(ok)).expect(ok);
        }
        let err = slash
            .check_input(SEND, &text("/config"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--allow-slash-command") && err.contains("begin it with a space"),
            "{err}"
        );
    }

    #[test]
    fn only_the_last_block_counts_and_the_text_goes_last() {
        let slash = SlashCommands::default();
        let blocks = |b: Vec<Struct>, t: &str| UserInput {
            text: t.into(),
            content_blocks: b,
            ..Default::default()
        };
        // The text is written after the blocks: it is the last block.
        slash
            .check_input(SEND, &blocks(vec![text_block("/config x")], "hi"))
            .unwrap();
        assert_eq!(
            refused_field(slash.check_input(SEND, &blocks(vec![text_block("hi")], "/config x"))),
            "input"
        );
        assert_eq!(
            refused_field(slash.check_input(
                SEND,
                &blocks(vec![text_block("hi"), text_block("/config x")], "")
            )),
            "content_blocks[1]"
        );
        assert_eq!(
            refused_field(slash.check_input(
                SEND,
                &blocks(vec![image_block(), text_block("/config x")], "")
            )),
            "content_blocks[1]"
        );
        // A last block that is not text: the CLI runs no command.
        slash
            .check_input(
                SEND,
                &blocks(vec![text_block("/config x"), image_block()], ""),
            )
            .unwrap();
        slash
            .check_input(
                SEND,
                &blocks(vec![text_block("/config x"), text_block("hi")], ""),
            )
            .unwrap();
    }

    #[test]
    fn the_operator_adds_commands() {
        let slash = SlashCommands::default()
            .with_allowed(&["/usage".into(), "review".into()])
            .unwrap();
        assert_eq!(
            slash.allowed().collect::<Vec<_>>(),
            ["compact", "context", "review", "usage"]
        );
        slash.check_input(SEND, &text("/usage")).unwrap();
        assert!(slash.check_input(SEND, &text("/config")).is_err());
        for bad in ["", "/", "a b", "-x", "a/b", "x (MCP)"] {
            let err = SlashCommands::default()
                .with_allowed(&[bad.into()])
                .unwrap_err()
                .to_string();
            assert!(err.contains("--allow-slash-command"), "{bad:?}: {err}");
        }
    }
}
