//! `agent-harness completions SHELL` and `agent-harness man [COMMAND]`:
//! generated from the clap definitions the binary parses with (handed in
//! as a `clap::Command`), so they list exactly the commands and flags it
//! takes, with the `--help` text. Each is built whole in memory and
//! written by the caller, so a closed pipe (`| head`) is the caller's
//! error to ignore, not a panic inside the generator.

/// The completion script of `shell` for `cli`.
pub fn completions(shell: clap_complete::Shell, mut cli: clap::Command) -> Vec<u8> {
    let name = cli.get_name().to_owned();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cli, name, &mut out);
    out
}

/// The man page (roff) of `cli`, or of its subcommand `command`. An
/// unknown command is an error naming the known ones.
pub fn man(mut cli: clap::Command, command: Option<&str>) -> Result<Vec<u8>, String> {
    // Built, every subcommand knows its full name (`agent-harness serve`),
    // which its page's title and synopsis show.
    cli.build();
    let page = match command {
        None => cli,
        Some(name) => match cli.find_subcommand(name) {
            Some(sub) => sub.clone(),
            None => {
                let known: Vec<&str> = cli
                    .get_subcommands()
                    .map(clap::Command::get_name)
                    .filter(|n| *n != "help")
                    .collect();
                return Err(format!("no command {name:?}: one of {}", known.join(", ")));
            }
        },
    };
    let mut out = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut out)
        .map_err(|e| format!("writing the man page: {e}"))?;
    Ok(out)
}
