//! A stored conversation written back into the CLI's configuration
//! directory before a run resumes it (see [`crate::store::transcript`]).
//!
//! `--resume <id>` reads `<config dir>/projects/<cwd-slug>/<id>.jsonl` (and
//! the subagent files under `<cwd-slug>/<id>/`). On a node that never ran
//! the conversation, or whose disk lost it, the files are missing; written
//! from the store at the same relative path they give the resumed CLI every
//! earlier message. A file this node has is left alone when it has at least
//! as many lines as the store (it is the CLI's own, and may hold lines its
//! last run wrote after its last commit); one with fewer is a stale copy
//! (the session ran on another node since) and is replaced. A file stored
//! with a gap is not written (the resume then fails as it would with
//! nothing stored, and the session starts a new conversation).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use crate::store::TranscriptEntry;
use crate::store::transcript::file_lines;

/// Whether stored file `path` (relative to the configuration directory)
/// belongs to conversation `resume_id`: `projects/<slug>/<id>.jsonl` or a
/// file under `projects/<slug>/<id>/`.
fn of_conversation(path: &str, resume_id: &str) -> bool {
    let mut parts = path.split('/');
    let (Some("projects"), Some(_slug), Some(name)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    name == format!("{resume_id}.jsonl") || name == resume_id
}

/// Writes each file of conversation `resume_id` that `entries` hold whole
/// and `config_dir` lacks or has fewer lines of: directories created 0700,
/// files 0600, each written to a temporary name and renamed, so a CLI
/// never reads half a file. Returns the files written.
pub fn restore(
    config_dir: &Path,
    resume_id: &str,
    entries: &[TranscriptEntry],
) -> std::io::Result<Vec<PathBuf>> {
    let mut paths: Vec<&str> = entries
        .iter()
        .map(|e| e.path.as_str())
        .filter(|p| of_conversation(p, resume_id))
        .collect();
    paths.sort_unstable();
    paths.dedup();
    let mut written = Vec::new();
    for path in paths {
        let rel = Path::new(path);
        if !rel.components().all(|c| matches!(c, Component::Normal(_))) {
            continue;
        }
        let target = config_dir.join(rel);
        let Some(lines) = file_lines(entries, path) else {
            tracing::warn!(path, "stored transcript has a gap; not written back");
            continue;
        };
        if line_count(&target)? >= lines.len() {
            continue;
        }
        let Some(dir) = target.parent() else {
            continue;
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)?;
        let tmp = dir.join(format!(
            ".{}.restoring",
            target.file_name().unwrap_or_default().to_string_lossy()
        ));
        let _ = std::fs::remove_file(&tmp);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        let mut text = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
        for line in lines {
            text.push_str(line);
            text.push('\n');
        }
        file.write_all(text.as_bytes())?;
        file.sync_all()?;
        std::fs::rename(&tmp, &target)?;
        written.push(target);
    }
    Ok(written)
}

/// The lines of the file at `path`; 0 when there is none.
fn line_count(path: &Path) -> std::io::Result<usize> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(bytes
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .count()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn entry(path: &str, line: &str) -> TranscriptEntry {
        TranscriptEntry {
            session_id: "s".into(),
            path: path.into(),
            line: line.into(),
        }
    }

    #[test]
    fn the_conversations_files_are_written_once_private_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        let entries = [
            entry("projects/-w/c1.jsonl", r#"{"a":1}"#),
            entry("projects/-w/c2.jsonl", r#"{"other":1}"#),
            entry("projects/-w/c1/subagents/agent-x.jsonl", r#"{"sub":1}"#),
            entry("projects/-w/c1.jsonl", r#"{"b":2}"#),
        ];
        let written = restore(dir.path(), "c1", &entries).unwrap();
        assert_eq!(written.len(), 2, "{written:?}");
        let main = dir.path().join("projects/-w/c1.jsonl");
        assert_eq!(
            std::fs::read_to_string(&main).unwrap(),
            "{\"a\":1}\n{\"b\":2}\n"
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&main), 0o600);
        assert_eq!(mode(&dir.path().join("projects")), 0o700);
        assert!(!dir.path().join("projects/-w/c2.jsonl").exists());
        // A file with as many lines is the CLI's own: left alone.
        std::fs::write(&main, "mine\nmine too\n").unwrap();
        assert!(restore(dir.path(), "c1", &entries).unwrap().is_empty());
        assert_eq!(std::fs::read_to_string(&main).unwrap(), "mine\nmine too\n");
        // One with fewer is a stale copy (the session ran elsewhere since).
        std::fs::write(&main, "{\"a\":1}\n").unwrap();
        assert_eq!(
            restore(dir.path(), "c1", &entries).unwrap(),
            vec![main.clone()]
        );
        assert_eq!(
            std::fs::read_to_string(&main).unwrap(),
            "{\"a\":1}\n{\"b\":2}\n"
        );
        assert_eq!(mode(&main), 0o600);
    }

    #[test]
    fn a_file_with_a_gap_or_nothing_stored_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let entries = [
            entry("projects/-w/c1.jsonl", r#"{"a":1}"#),
            entry("projects/-w/c1.jsonl", ""),
        ];
        assert!(restore(dir.path(), "c1", &entries).unwrap().is_empty());
        assert!(restore(dir.path(), "c9", &entries).unwrap().is_empty());
        assert!(!dir.path().join("projects").exists());
    }
}
