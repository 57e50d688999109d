//! Names the commit the binary is built from, for `agent-harness --version`
//! (`AGENT_HARNESS_COMMIT`): `AGENT_HARNESS_BUILD_COMMIT` when a packager
//! sets it; else `git rev-parse --short HEAD`, with `-dirty` when tracked
//! files differ from it; else the commit `cargo package` recorded in
//! `.cargo_vcs_info.json`; else `unknown` (a crate tarball built outside
//! git).
//!
//! The build script reruns when HEAD moves (a commit, a checkout) or a
//! source file of this crate changes, so the dirty mark is as of the last
//! build of the crate; edits elsewhere in the repository that do not
//! rebuild this crate do not refresh it. Nor does a switch to another
//! checkout (a git worktree) sharing the target directory: cargo keys the
//! build by paths relative to the workspace, so it keeps the other
//! checkout's result while the files that one watches are unchanged.
//!
//! Compiles the exec helper (`exec-helper/main.rs`, see there) into
//! `$OUT_DIR/exec-helper`, which the server embeds
//! (`src/supervise/exec_helper.rs`): a program with no C library, so it is
//! compiled here with flags of its own (no std, abort on panic, static, no
//! start files), by the same `rustc` for the same target. For a target the
//! helper has no system calls for (anything but Linux on x86_64) the file
//! is empty and the server starts its children through its own binary.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=AGENT_HARNESS_BUILD_COMMIT");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let commit = std::env::var("AGENT_HARNESS_BUILD_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty())
        .or_else(|| from_git(&manifest))
        .or_else(|| from_vcs_info(&manifest))
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=AGENT_HARNESS_COMMIT={commit}");
    build_exec_helper(&manifest);
}

/// How the helper is compiled: no std (the source says so), abort on
/// panic, no debug info or symbols, and linked static, with no C start
/// files or libraries and no build id.
const HELPER_FLAGS: &[&str] = &[
    "--edition=2024",
    "--crate-type=bin",
    "--crate-name=agent_harness_exec_helper",
    "-Copt-level=s",
    "-Cpanic=abort",
    "-Cdebuginfo=0",
    "-Cstrip=symbols",
    "-Crelocation-model=static",
    "-Clink-arg=-nostartfiles",
    "-Clink-arg=-nostdlib",
    "-Clink-arg=-static",
    "-Clink-arg=-Wl,--build-id=none",
];

/// `$OUT_DIR/exec-helper`: the helper for the target, or an empty file for
/// a target it is not written for. A failed compile for a target it is
/// written for fails the build, with rustc's own message.
fn build_exec_helper(manifest: &Path) {
    let source = manifest.join("exec-helper").join("main.rs");
    println!("cargo:rerun-if-changed={}", source.display());
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo")).join("exec-helper");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let supported =
        var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ARCH") == "x86_64";
    if !supported {
        std::fs::write(&out, b"").expect("write the empty exec helper");
        return;
    }
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let mut cmd = Command::new(rustc);
    cmd.args(HELPER_FLAGS).args(["--target", &var("TARGET")]);
    if let Ok(linker) = std::env::var("RUSTC_LINKER") {
        cmd.arg("-C").arg(format!("linker={linker}"));
    }
    let status = cmd
        .arg("-o")
        .arg(&out)
        .arg(&source)
        .status()
        .expect("run rustc for the exec helper");
    assert!(
        status.success(),
        "compiling the exec helper ({}) failed: {status}",
        source.display()
    );
}

/// The short commit of the repository this crate's files are tracked in,
/// `-dirty` when tracked files differ from it; `None` outside git, and for
/// a copy of the crate inside some other repository's tree (a `cargo
/// package` directory under `target/`), whose files that repository does
/// not track.
fn from_git(manifest: &Path) -> Option<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(manifest)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    git(&["ls-files", "--error-unmatch", "Cargo.toml"])?;
    let commit = git(&["rev-parse", "--short=10", "HEAD"]).filter(|c| !c.is_empty())?;
    // Not the index: `git status` (this script's too) rewrites it.
    rerun_if_exists(git(&["rev-parse", "--git-path", "HEAD"]), manifest);
    if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
        // The branch's own file; a packed branch gets one again on its next
        // commit, which only its directory's change shows.
        let loose = git(&["rev-parse", "--git-path", &head_ref]).map(|p| manifest.join(p));
        match loose {
            Some(file) if file.exists() => {
                rerun_if_exists(Some(file.display().to_string()), manifest)
            }
            Some(file) => rerun_if_exists(file.parent().map(|d| d.display().to_string()), manifest),
            None => {}
        }
        rerun_if_exists(git(&["rev-parse", "--git-path", "packed-refs"]), manifest);
    }
    let dirty =
        git(&["status", "--porcelain", "--untracked-files=no"]).is_some_and(|s| !s.is_empty());
    Some(if dirty {
        format!("{commit}-dirty")
    } else {
        commit
    })
}

/// A path git named (relative to `manifest` unless absolute), watched when
/// it exists: cargo treats a missing watched file as always changed.
fn rerun_if_exists(path: Option<String>, manifest: &Path) {
    let Some(path) = path else { return };
    let path = manifest.join(path);
    if path.exists() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// The commit `cargo package` wrote into the packaged crate.
fn from_vcs_info(manifest: &Path) -> Option<String> {
    let text = std::fs::read_to_string(manifest.join(".cargo_vcs_info.json")).ok()?;
    let at = text.find("\"sha1\"")?;
    let rest = &text[at + "\"sha1\"".len()..];
    let start = rest.find('"')? + 1;
    let sha: String = rest[start..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .take(10)
        .collect();
    let dirty = text.contains("\"dirty\": true") || text.contains("\"dirty\":true");
    (!sha.is_empty()).then(|| if dirty { format!("{sha}-dirty") } else { sha })
}
