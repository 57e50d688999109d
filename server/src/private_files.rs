//! Files only the server's own user may read: the data dir (created 0700),
//! the event store in it (0600), the secrets key (0600), and the token
//! file, which the server refuses when others can read it.
//!
//! An existing data dir keeps the mode the operator gave it (it may be a
//! shared mount point), with a warning when group or others may use it;
//! the store file is the server's own, so a looser one is made 0600 (also
//! with a warning). Everything secret inside the dir is 0600 either way.

use std::fs::OpenOptions;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// A data dir or secret file the server refuses, with the fix in its
/// message; where it surfaces it is a configuration error
/// ([`crate::error::Error::Config`]). The store uses this module too, so it
/// keeps its own error rather than the server's.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(String);

type Result<T> = std::result::Result<T, Refused>;

/// Mode of the data dir when the server creates it.
pub const DIR_MODE: u32 = 0o700;
/// Mode of the files the server keeps (the store, the secrets key).
pub const FILE_MODE: u32 = 0o600;
/// Group and others may read or write: a secret in such a file is not the
/// owner's alone.
const SHARED_BITS: u32 = 0o066;

/// Creates `dir` (and missing parents) with mode 0700. An existing one
/// keeps its mode; a warning names it when group or others may use it.
/// [`Refused`] naming `flag` when it cannot be created.
pub fn ensure_dir(dir: &Path, flag: &str) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(|e| Refused(format!("cannot create {flag} {}: {e}", dir.display())))?;
    let mode = std::fs::metadata(dir)
        .map_err(|e| Refused(format!("{flag} {}: {e}", dir.display())))?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        tracing::warn!(
            dir = %dir.display(),
            mode = format!("{:o}", mode & 0o777),
            "{flag} may be listed or entered by group or others; the server's files in it are \
             0600, but `chmod 700` it unless it is shared on purpose"
        );
    }
    Ok(())
}

/// Creates `path` empty with mode 0600 when it does not exist; an existing
/// file that group or others may access is made 0600 (with a warning; only
/// a warning when its mode cannot be changed), so whatever is written into
/// it stays the owner's.
pub fn ensure_file(path: &Path) -> std::io::Result<()> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(path)?;
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        let was = format!("{:o}", mode & 0o777);
        // A file of another owner cannot be changed; it still opens.
        match file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE)) {
            Ok(()) => tracing::warn!(
                file = %path.display(),
                was,
                "made the file 0600: group or others could access it"
            ),
            Err(e) => tracing::warn!(
                file = %path.display(),
                was,
                error = %e,
                "group or others can access the file and its mode cannot be changed; `chmod 600` it"
            ),
        }
    }
    Ok(())
}

/// Refuses a secret file (`flag` names it) that group or others may read
/// or write: [`Refused`] with the fix.
pub fn check_owner_only(path: &Path, flag: &str) -> Result<()> {
    let mode = std::fs::metadata(path)
        .map_err(|e| Refused(format!("cannot read {flag} {}: {e}", path.display())))?
        .permissions()
        .mode();
    if mode & SHARED_BITS != 0 {
        return Err(Refused(format!(
            "{flag} {file} may be read or written by group or others (mode {mode:o}); a secret \
             must be its owner's alone: `chmod 600 {file}` (`agent-harness token --out FILE` \
             writes one so)",
            file = path.display(),
            mode = mode & 0o777
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn a_new_dir_is_0700_and_an_existing_one_keeps_its_mode() {
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("a/b");
        ensure_dir(&dir, "--data-dir").unwrap();
        assert_eq!(mode(&dir), 0o700);
        let shared = base.path().join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o755)).unwrap();
        ensure_dir(&shared, "--data-dir").unwrap();
        assert_eq!(mode(&shared), 0o755, "the operator's choice stays");
    }

    #[test]
    fn a_file_is_created_0600_and_a_looser_one_tightened() {
        let base = tempfile::tempdir().unwrap();
        let new = base.path().join("new");
        ensure_file(&new).unwrap();
        assert_eq!(mode(&new), 0o600);
        let loose = base.path().join("loose");
        std::fs::write(&loose, "kept").unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o644)).unwrap();
        ensure_file(&loose).unwrap();
        assert_eq!(mode(&loose), 0o600);
        assert_eq!(std::fs::read_to_string(&loose).unwrap(), "kept");
    }

    #[test]
    fn a_secret_file_others_can_read_is_refused() {
        let base = tempfile::tempdir().unwrap();
        let f = base.path().join("tok");
        std::fs::write(&f, "x").unwrap();
        for (m, ok) in [
            (0o600, true),
            (0o400, true),
            (0o700, true),
            (0o640, false),
            (0o604, false),
            (0o622, false),
        ] {
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(m)).unwrap();
            let got = check_owner_only(&f, "--auth-token-file");
            assert_eq!(got.is_ok(), ok, "{m:o}: {got:?}");
            if let Err(e) = got {
                let msg = e.to_string();
                assert!(
                    msg.contains("--auth-token-file") && msg.contains("chmod 600"),
                    "{msg}"
                );
            }
        }
    }
}
