//! The exec helper, embedded: a program of a few kilobytes with no C
//! library and no dynamic loader (`server/exec-helper/main.rs`, compiled by
//! the build script) that asks for `PR_SET_PDEATHSIG`, checks that the
//! server is still its parent and execs the CLI in place: the trampoline's
//! work ([`super::trampoline`]) for a fraction of what starting the
//! server's own binary costs (its dynamic loader, relocations and glibc's
//! start-up, paid again for every session started).
//!
//! [`install`] puts it in an in-memory file (`memfd_create`), sealed so
//! that nothing can change it afterwards, and children are started as
//! `/proc/self/fd/<n>`: the child has the server's descriptor until its
//! own exec (the descriptor is close-on-exec, so neither the helper nor
//! the CLI keeps it). It then runs the helper once with no arguments (which
//! exits 0) to make sure this host lets it run: a kernel set to refuse to
//! execute in-memory files (`vm.memfd_noexec=2`), no `/proc`, or an
//! architecture the helper is not built for, and the binary starts its
//! children through itself as before.

use std::ffi::CStr;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::sys::memfd::{MFdFlags, memfd_create};

/// The helper as built for this target; empty for an architecture it has
/// no system calls for (see the build script).
static HELPER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/exec-helper"));

/// The in-memory file's name (as `/proc/<pid>/fd` and `/proc/<pid>/maps`
/// show it: `memfd:agent-harness-exec`).
const NAME: &CStr = c"agent-harness-exec";

/// `MFD_EXEC` (Linux 6.3): the file may be executed even where the kernel
/// makes in-memory files non-executable unless asked (`vm.memfd_noexec=1`).
/// Older kernels refuse the flag; the file is then created without it.
const MFD_EXEC: u32 = 0x10;

/// The helper, ready to start children through. Lives as long as the
/// server: its descriptor is what the path names.
#[derive(Debug)]
pub(super) struct Installed {
    _file: OwnedFd,
    path: PathBuf,
}

impl Installed {
    /// What a child is started as (`/proc/self/fd/<n>`).
    pub(super) fn path(&self) -> &Path {
        &self.path
    }
}

/// Writes the helper into a sealed in-memory file and checks that it runs
/// on this host. The error says why not, for the log.
pub(super) fn install() -> Result<Installed, String> {
    if HELPER.is_empty() {
        return Err(format!(
            "not built for this architecture ({})",
            std::env::consts::ARCH
        ));
    }
    let file = create().map_err(|e| format!("memfd_create: {e}"))?;
    let mut writer = std::fs::File::from(file);
    writer
        .write_all(HELPER)
        .map_err(|e| format!("writing the helper: {e}"))?;
    let file = OwnedFd::from(writer);
    let seals = SealFlag::F_SEAL_SHRINK
        | SealFlag::F_SEAL_GROW
        | SealFlag::F_SEAL_WRITE
        | SealFlag::F_SEAL_SEAL;
    fcntl(&file, FcntlArg::F_ADD_SEALS(seals)).map_err(|e| format!("sealing the helper: {e}"))?;
    let path = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    let status = Command::new(&path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("running the helper: {e}"))?;
    if !status.success() {
        return Err(format!("the helper's check ended with {status}"));
    }
    Ok(Installed { _file: file, path })
}

/// The in-memory file, close-on-exec and sealable; executable where the
/// kernel knows `MFD_EXEC`.
fn create() -> nix::Result<OwnedFd> {
    let flags = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING;
    match memfd_create(NAME, flags | MFdFlags::from_bits_retain(MFD_EXEC)) {
        Err(Errno::EINVAL) => memfd_create(NAME, flags),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn the_helper_is_a_static_program_with_no_loader() {
        assert_eq!(&HELPER[..4], b"\x7fELF", "an ELF file");
        // e_type at offset 16: ET_EXEC (2), not a position-independent
        // executable the kernel would hand to a loader.
        assert_eq!(u16::from_le_bytes([HELPER[16], HELPER[17]]), 2);
        assert!(
            !HELPER.windows(b"ld-linux".len()).any(|w| w == b"ld-linux"),
            "names no dynamic loader"
        );
        assert!(HELPER.len() < 64 * 1024, "{} bytes", HELPER.len());
    }

    #[test]
    fn the_file_is_sealed_against_writes() {
        let helper = install().expect("the helper runs on this host");
        let e = std::fs::OpenOptions::new()
            .write(true)
            .open(helper.path())
            .and_then(|mut f| f.write_all(b"#!/bin/sh\n"));
        assert!(e.is_err(), "a sealed helper took a write");
        assert_eq!(std::fs::read(helper.path()).unwrap(), HELPER, "unchanged");
    }
}
