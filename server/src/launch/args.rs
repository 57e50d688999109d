//! A client's `config.args` against the launch policy: each token checked
//! (see the module docs of [`super`]) and each value joined to its flag.

use super::cli_vocabulary::never_arg;
use super::{Arity, LaunchPolicy};
use crate::error::{Error, Result};

impl LaunchPolicy {
    /// Checks a client's `config.args` (see the module docs).
    /// [`Error::InvalidField`] naming `config.args[N]`, the offending token.
    pub fn check_args(&self, args: &[String]) -> Result<()> {
        self.joined_args(args).map(drop)
    }

    /// [`LaunchPolicy::check_args`], returning the args as they reach the
    /// argv: each value joined to its flag (`--flag=VALUE`, one token per
    /// value of a variadic flag). Trusting client args, they pass as given.
    pub fn joined_args(&self, args: &[String]) -> Result<Vec<String>> {
        /// What the next token may be.
        #[derive(Clone, Copy)]
        enum Next {
            /// A flag.
            Flag,
            /// The value of the flag at this index (which takes one).
            Value { flag: usize, variadic: bool },
            /// More values of the variadic flag at this index, or a flag.
            MoreValues { flag: usize },
        }
        let field = |i: usize| format!("config.args[{i}]");
        let needs_value = |i: usize| {
            Error::invalid(
                field(i),
                format!(
                    "{} needs a value: give it in the next argument, or as {}=VALUE (needed \
                     when the value starts with '-')",
                    args[i], args[i]
                ),
            )
        };
        let mut next = Next::Flag;
        let mut out: Vec<String> = Vec::with_capacity(args.len());
        for (i, tok) in args.iter().enumerate() {
            if tok.contains('\0') {
                return Err(Error::invalid(field(i), "contains a NUL byte"));
            }
            if !tok.starts_with('-') {
                next = match next {
                    Next::Value {
                        flag,
                        variadic: false,
                    } => {
                        out.push(format!("{}={tok}", args[flag]));
                        Next::Flag
                    }
                    Next::Value {
                        flag,
                        variadic: true,
                    }
                    | Next::MoreValues { flag } => {
                        out.push(format!("{}={tok}", args[flag]));
                        Next::MoreValues { flag }
                    }
                    Next::Flag if self.trust_args => {
                        out.push(tok.clone());
                        Next::Flag
                    }
                    Next::Flag => {
                        return Err(Error::invalid(
                            field(i),
                            format!(
                                "{tok:?} is not the value of a flag that takes one; the CLI \
                                 would read it as a subcommand or a prompt (send prompts with \
                                 config.prompt; give a value as --flag=VALUE)"
                            ),
                        ));
                    }
                };
                continue;
            }
            if let Next::Value { flag, .. } = next {
                return Err(needs_value(flag));
            }
            next = Next::Flag;
            if self.trust_args {
                out.push(tok.clone());
                continue;
            }
            if tok == "--" {
                return Err(Error::invalid(
                    field(i),
                    "\"--\" is never accepted from a client: what follows it would reach the \
                     CLI as a prompt",
                ));
            }
            if !tok.starts_with("--") {
                return Err(Error::invalid(
                    field(i),
                    format!(
                        "{tok:?}: short flags are never accepted from a client; use the long \
                         spelling of an allowed flag"
                    ),
                ));
            }
            let (name, value) = match tok.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (tok.as_str(), None),
            };
            let Some(arity) = self.args.get(name) else {
                let reason = match never_arg(name) {
                    Some(never) => format!(
                        "{name} is never accepted from a client{}: it turns permissions off \
                         or widens them, loads code or settings, or is owned by the server",
                        if never == name {
                            String::new()
                        } else {
                            format!(" (it spells or abbreviates {never})")
                        }
                    ),
                    None => format!(
                        "{name} is not an allowed flag (flags are matched exactly; \
                         abbreviations are not accepted); the operator can allow it with \
                         --allow-arg={name}"
                    ),
                };
                return Err(Error::invalid(field(i), reason));
            };
            match (arity, value) {
                (Some(Arity::Switch), Some(_)) => {
                    return Err(Error::invalid(field(i), format!("{name} takes no value")));
                }
                // Pushed with each of its values.
                (Some(Arity::Value), None) => {
                    next = Next::Value {
                        flag: i,
                        variadic: false,
                    }
                }
                (Some(Arity::Variadic), None) => {
                    next = Next::Value {
                        flag: i,
                        variadic: true,
                    }
                }
                _ => out.push(tok.clone()),
            }
        }
        match next {
            Next::Value { flag, .. } => Err(needs_value(flag)),
            _ => Ok(out),
        }
    }
}
