//! The two trampolines a child can start through (supervise::trampoline),
//! run as the server runs them: the embedded exec helper and the
//! `agent-harness` binary itself (`__exec-child`, where the helper cannot
//! run). Each must ask for the parent-death signal, refuse to run anything
//! for a server that is gone, and become the program in place, and say
//! why when it cannot.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};

use agent_harness_server::supervise::trampoline::{EXEC_CHILD_ARG, exec_helper_for_tests};

/// Both trampolines, named for the assertion messages: the helper where it
/// is built (x86_64 Linux; elsewhere the binary is the only trampoline).
fn trampolines() -> Vec<(&'static str, &'static Path)> {
    let mut all = vec![("the binary", Path::new(env!("CARGO_BIN_EXE_agent-harness")))];
    if cfg!(target_arch = "x86_64") {
        all.push(("the exec helper", exec_helper_for_tests()));
    }
    all
}

/// `trampoline __exec-child <this process> program argv0 args...`.
fn through(trampoline: &Path, program: &str, argv0: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new(trampoline);
    cmd.arg(EXEC_CHILD_ARG)
        .arg(std::process::id().to_string())
        .arg(program)
        .arg(argv0)
        .args(args);
    cmd
}

/// Runs `cmd`, which must fail to start its program: exit 127; its stderr.
fn refused(cmd: &mut Command, name: &str) -> String {
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(127), "{name}: {out:?}");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn the_program_runs_in_place_with_its_argv0_arguments_and_environment() {
    let script = "tr '\\0' ' ' < /proc/$$/cmdline; echo $0 $FOO $PPID";
    for (name, trampoline) in trampolines() {
        let out = through(
            trampoline,
            "/bin/sh",
            "custom-argv0",
            &["-c", script, "zero"],
        )
        .env("FOO", "bar")
        .output()
        .unwrap();
        assert!(out.status.success(), "{name}: {out:?}");
        // In place: the shell's parent is this process, not a trampoline
        // waiting beside it.
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            format!(
                "custom-argv0 -c {script} zero zero bar {}\n",
                std::process::id()
            ),
            "{name}"
        );
    }
}

#[test]
fn a_program_that_cannot_run_is_exit_127_with_the_reason_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    for (name, trampoline) in trampolines() {
        let stderr = refused(
            &mut through(trampoline, "/nonexistent/cli", "cli", &[]),
            name,
        );
        assert_eq!(
            stderr,
            "agent-harness __exec-child: exec /nonexistent/cli: No such file or directory (os error 2)\n",
            "{name}"
        );
        let stderr = refused(
            &mut through(trampoline, dir.path().to_str().unwrap(), "cli", &[]),
            name,
        );
        assert!(
            stderr.ends_with(": Permission denied (os error 13)\n"),
            "{name}: {stderr}"
        );
    }
}

#[test]
fn a_child_whose_server_is_not_its_parent_runs_nothing() {
    let witness = tempfile::tempdir().unwrap();
    let touched = witness.path().join("ran");
    for (name, trampoline) in trampolines() {
        let mut cmd = Command::new(trampoline);
        cmd.args([EXEC_CHILD_ARG, "1", "/usr/bin/touch", "touch"])
            .arg(&touched);
        assert_eq!(
            refused(&mut cmd, name),
            "agent-harness __exec-child: the server that started this child is gone\n",
            "{name}"
        );
        assert!(!touched.exists(), "{name}: the program ran");
        // Too few arguments, or a pid that is not one (not a number, past
        // any pid): the usage.
        for args in [
            &[EXEC_CHILD_ARG, "1"][..],
            &[EXEC_CHILD_ARG, "x1", "/bin/true", "true"],
            &[EXEC_CHILD_ARG, "99999999999", "/bin/true", "true"],
        ] {
            let stderr = refused(Command::new(trampoline).args(args), name);
            assert!(
                stderr.contains("usage: __exec-child"),
                "{name}: {args:?}: {stderr}"
            );
        }
    }
}

/// What the server passes on (the CLI's arguments carry a user's prompt
/// and paths) reaches the program byte for byte, however it looks: empty,
/// spaces and a newline, a leading dash, the trampoline's own marker, and
/// bytes that are not UTF-8.
#[test]
fn arguments_reach_the_program_byte_for_byte() {
    let odd: [&OsStr; 6] = [
        OsStr::new(""),
        OsStr::new("two words\nand a line"),
        OsStr::new("--dangerously-skip-permissions"),
        OsStr::new(EXEC_CHILD_ARG),
        OsStr::from_bytes(b"\xff\xfe not utf-8"),
        OsStr::new("$(touch /tmp/never) `id` ; |"),
    ];
    for (name, trampoline) in trampolines() {
        let mut cmd = Command::new(trampoline);
        cmd.arg(EXEC_CHILD_ARG)
            .arg(std::process::id().to_string())
            .args(["/bin/sh", "sh", "-c", "printf '%s\\0' \"$@\"", "sh"])
            .args(odd);
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{name}: {out:?}");
        let mut want = Vec::new();
        for arg in odd {
            want.extend_from_slice(arg.as_bytes());
            want.push(0);
        }
        assert_eq!(out.stdout, want, "{name}");
    }
}

/// The parent-death signal follows the thread that started the child:
/// when that thread ends, the kernel kills the child. The child says it
/// runs (after the trampoline's exec) before the thread ends, so the signal
/// was asked for by then; without it, the child would sleep a minute and
/// exit 0.
#[test]
fn the_child_is_killed_when_the_thread_that_started_it_ends() {
    for (name, trampoline) in trampolines() {
        let mut child = std::thread::spawn(move || {
            let mut child = through(
                trampoline,
                "/bin/sh",
                "sh",
                &["-c", "echo up; exec sleep 60"],
            )
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
            let mut line = String::new();
            BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut line)
                .unwrap();
            assert_eq!(line, "up\n");
            child
        })
        .join()
        .unwrap();
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(9), "{name}: {status:?}");
    }
}
