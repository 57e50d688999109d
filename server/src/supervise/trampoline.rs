//! The exec trampoline: how the `agent-harness` binary starts a child
//! without forking the server.
//!
//! A child must die with the server (`PR_SET_PDEATHSIG`, see
//! [`super::spawner`]), and only the child itself can ask for that: with
//! std, that means code run between fork and exec, and code there makes std
//! fork the whole server (copying its page tables, and leaving every page
//! it writes afterwards to a copy-on-write fault). Instead, the server
//! starts a trampoline with `posix_spawn` (a vfork: nothing is copied) as
//! `<trampoline> __exec-child <server pid> <program> <argv0> <args>...`,
//! which asks for the signal, checks that the server is still its parent,
//! and execs the program in place (same pid, same process group, same
//! pipes, environment and directory).
//!
//! The trampoline is the embedded exec helper ([`super::exec_helper`]: a
//! few kilobytes with no C library, run from a sealed in-memory file) where
//! the host runs it, which [`enable`] checks once. Elsewhere it is this
//! binary itself (`/proc/self/exe`): [`exec_if_asked`], the first thing
//! `main` runs, does the same work, with no runtime started and nothing
//! else run, at the cost of the binary's dynamic loading and start-up.
//!
//! The program is resolved on the server's side ([`resolve`]), as exec
//! would resolve it in the child, so a missing or non-executable CLI is
//! still the spawn's own error (`claude: No such file or directory`), not a
//! child that exits 127.
//!
//! Only the server binary turns this on ([`enable`]): a test binary or
//! another program using the library is not `agent-harness`, and its
//! children are forked with the signal set between fork and exec.

use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::OnceLock;

use nix::sys::signal::Signal as NixSignal;
use nix::unistd::AccessFlags;

/// The first argument that makes the binary the trampoline. Not a
/// subcommand: it is read before the command line is parsed.
pub const EXEC_CHILD_ARG: &str = "__exec-child";

/// The binary that started us, as the kernel knows it: still the same
/// file after the installed one was replaced or removed.
const SELF_EXE: &str = "/proc/self/exe";

/// Exit code of a trampoline that could not exec (as a shell's).
const EXEC_FAILED: u8 = 127;

/// The trampoline children start through, once [`enable`] chose it.
static TRAMPOLINE: OnceLock<Trampoline> = OnceLock::new();

#[derive(Debug)]
enum Trampoline {
    /// The embedded exec helper.
    Helper(super::exec_helper::Installed),
    /// This binary, because the helper cannot run here (why).
    SelfExe(String),
}

/// Starts every later child through a trampoline: the exec helper where it
/// runs, else this binary ([`exec_if_asked`] must run first in its
/// `main`). Called by the `agent-harness` binary only, before its runtime
/// starts (the helper's check runs a child). [`how`] says which, for the
/// log.
pub fn enable() {
    TRAMPOLINE.get_or_init(|| match super::exec_helper::install() {
        Ok(helper) => Trampoline::Helper(helper),
        Err(why) => Trampoline::SelfExe(why),
    });
}

/// Whether children are started through the trampoline.
pub(super) fn enabled() -> bool {
    TRAMPOLINE.get().is_some()
}

/// The trampoline's program: the helper's in-memory file, or this binary.
pub(super) fn program() -> &'static Path {
    match TRAMPOLINE.get() {
        Some(Trampoline::Helper(helper)) => helper.path(),
        _ => Path::new(SELF_EXE),
    }
}

/// How children start, in a sentence for the server's log at start; `None`
/// when the trampoline is not enabled (not the `agent-harness` binary).
pub fn how() -> Option<String> {
    Some(match TRAMPOLINE.get()? {
        Trampoline::Helper(_) => "children start through the embedded exec helper".to_string(),
        Trampoline::SelfExe(why) => {
            format!("children start through this binary (the embedded exec helper cannot: {why})")
        }
    })
}

/// When this process was started as the trampoline: become the program
/// (never returns then, unless the exec fails). `None` otherwise: run as
/// usual.
pub fn exec_if_asked() -> Option<ExitCode> {
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(EXEC_CHILD_ARG)) {
        return None;
    }
    Some(exec_child(args))
}

fn exec_child(mut args: impl Iterator<Item = OsString>) -> ExitCode {
    let fail = |what: &str| {
        eprintln!("agent-harness {EXEC_CHILD_ARG}: {what}");
        ExitCode::from(EXEC_FAILED)
    };
    let server = args
        .next()
        .and_then(|pid| pid.to_str()?.parse::<i32>().ok())
        .map(nix::unistd::Pid::from_raw);
    let (Some(server), Some(program), Some(argv0)) = (server, args.next(), args.next()) else {
        return fail("usage: __exec-child <server pid> <program> <argv0> [args]...");
    };
    if let Err(e) = nix::sys::prctl::set_pdeathsig(NixSignal::SIGKILL) {
        return fail(&format!("PR_SET_PDEATHSIG: {e}"));
    }
    // The server may have died before the prctl: we were re-parented
    // already and no signal will come. Run nothing for a dead server.
    if nix::unistd::getppid() != server {
        return fail("the server that started this child is gone");
    }
    // `exec` also resets the signal mask and SIGPIPE, which Rust's start-up
    // set to ignored, as std does for every child it starts.
    let e = std::process::Command::new(&program)
        .arg0(argv0)
        .args(args)
        .exec();
    fail(&format!("exec {}: {e}", Path::new(&program).display()))
}

/// The embedded exec helper's path in this process, installed on first
/// use, for tests that run it as the server would (the same path
/// [`enable`] gives children). Panics when it cannot run on this host.
#[cfg(any(test, feature = "test-util"))]
pub fn exec_helper_for_tests() -> &'static Path {
    static ONE: OnceLock<super::exec_helper::Installed> = OnceLock::new();
    ONE.get_or_init(|| super::exec_helper::install().expect("the exec helper runs on this host"))
        .path()
}

/// The trampoline's command line: the trampoline ([`program`]), asked to
/// become `program` (already resolved, see [`resolve`]) with `argv0` and
/// `args` for this process (the server) as its parent.
pub(super) fn command(program: &Path, argv0: &OsStr, args: &[OsString]) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(self::program());
    cmd.arg(EXEC_CHILD_ARG)
        .arg(nix::unistd::getpid().to_string())
        .arg(program)
        .arg(argv0)
        .args(args);
    cmd
}

/// Where exec would find `program` in a child that runs in `cwd` with the
/// search path `path` (the child's `PATH`; `None`: unset, glibc's default):
/// a name with a slash as it is (relative to `cwd`), else the first
/// executable file of that name in the path's directories (an empty entry
/// is the working directory). The error is the one exec would have given:
/// not found, or found but not executable.
pub(super) fn resolve(
    program: &Path,
    cwd: Option<&Path>,
    path: Option<&OsStr>,
) -> std::io::Result<PathBuf> {
    let in_cwd = |p: &Path| match cwd {
        Some(cwd) if p.is_relative() => cwd.join(p),
        _ => p.to_path_buf(),
    };
    let executable = |p: &Path| -> std::io::Result<()> {
        let meta = std::fs::metadata(p)?;
        if !meta.is_file() {
            return Err(std::io::ErrorKind::PermissionDenied.into());
        }
        nix::unistd::access(p, AccessFlags::X_OK).map_err(std::io::Error::from)
    };
    if program.as_os_str().as_bytes().contains(&b'/') {
        let p = in_cwd(program);
        executable(&p)?;
        return Ok(p);
    }
    if program.as_os_str().is_empty() {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    let path = path.unwrap_or(OsStr::new("/bin:/usr/bin"));
    // As execvp: a directory where the file exists but may not be run
    // makes the error "permission denied" unless a later one has it.
    let mut denied = None;
    for dir in path.as_bytes().split(|b| *b == b':') {
        let dir = if dir.is_empty() {
            Path::new(".")
        } else {
            Path::new(OsStr::from_bytes(dir))
        };
        let candidate = in_cwd(&dir.join(program));
        match executable(&candidate) {
            Ok(()) => return Ok(candidate),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => denied = Some(e),
        }
    }
    Err(denied.unwrap_or_else(|| std::io::Error::from_raw_os_error(nix::libc::ENOENT)))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn file(dir: &Path, name: &str, mode: u32) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn a_name_is_found_in_the_first_directory_of_the_path_that_has_it() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let want = file(b.path(), "cli", 0o755);
        file(a.path(), "other", 0o755);
        let path = std::env::join_paths([a.path(), b.path()]).unwrap();
        let got = resolve(Path::new("cli"), None, Some(&path)).unwrap();
        assert_eq!(got, want);
        // The first one that has it wins.
        let first = file(a.path(), "cli", 0o755);
        assert_eq!(resolve(Path::new("cli"), None, Some(&path)).unwrap(), first);
    }

    #[test]
    fn a_missing_program_is_not_found_and_one_that_may_not_run_is_denied() {
        let a = tempfile::tempdir().unwrap();
        let path = a.path().as_os_str();
        let e = resolve(Path::new("cli"), None, Some(path)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::ENOENT), "{e}");
        assert_eq!(
            e.to_string(),
            "No such file or directory (os error 2)",
            "the message std's spawn gave"
        );
        file(a.path(), "cli", 0o644);
        let e = resolve(Path::new("cli"), None, Some(path)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        // A directory of that name is not a program.
        std::fs::create_dir(a.path().join("dir")).unwrap();
        let e = resolve(Path::new("dir"), None, Some(path)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::PermissionDenied, "{e}");
        let e = resolve(Path::new("/nonexistent/prog"), None, Some(path)).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{e}");
    }

    #[test]
    fn a_relative_path_and_an_empty_path_entry_are_read_in_the_childs_directory() {
        let cwd = tempfile::tempdir().unwrap();
        std::fs::create_dir(cwd.path().join("bin")).unwrap();
        let want = file(&cwd.path().join("bin"), "cli", 0o755);
        let got = resolve(Path::new("bin/cli"), Some(cwd.path()), None).unwrap();
        assert_eq!(got, want);
        let got = resolve(
            Path::new("cli"),
            Some(&cwd.path().join("bin")),
            Some(OsStr::new(":")),
        );
        assert_eq!(got.unwrap(), cwd.path().join("bin").join("./cli"));
    }

    #[test]
    fn no_path_searches_the_default_directories() {
        let got = resolve(Path::new("sh"), None, None).unwrap();
        assert!(
            got == Path::new("/bin/sh") || got == Path::new("/usr/bin/sh"),
            "{got:?}"
        );
    }
}
