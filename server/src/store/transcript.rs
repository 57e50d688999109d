//! The CLI's own record of a conversation, kept beside the log so that the
//! conversation moves with the session to another node.
//!
//! The CLI writes a conversation to `<config dir>/projects/<cwd-slug>/<id>.jsonl`
//! on the disk of the node that ran it; `--resume <id>` elsewhere would find
//! nothing. Every spawn passes `--session-mirror`, and the CLI then repeats
//! each line it appends to such a file in a `transcript_mirror {filePath,
//! entries}` frame on stdout. The normalizer takes those frames aside (they
//! are never log events), the run commits their entries with the events of
//! the same stdout batch, and every [`Store`](super::Store) keeps them in
//! order per session, in the same transaction, deleted with the session.
//! Before a spawn that resumes a conversation whose file this node lacks,
//! [`crate::adapter::claude::transcript`] writes the file back from them.
//!
//! Bounds: one frame is one stdout line, so it is at most the run's line
//! limit (`--max-line-bytes`; a longer line is a `line_too_large` error and
//! its entries are lost); each entry is stored only up to
//! [`MAX_ENTRY_BYTES`]. An entry over it is stored as a gap (an empty
//! line: the CLI never writes one), and a file with a gap is never written
//! back (a conversation missing a message would resume wrong), so its
//! resume takes the `resume_failed` path as if nothing were stored.

/// Longest transcript entry kept (its JSON text). A larger one is stored as
/// a gap, see the module documentation.
pub const MAX_ENTRY_BYTES: usize = 4 * 1024 * 1024;

/// One line of one of the CLI's conversation files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TranscriptEntry {
    /// The session whose run wrote it.
    pub session_id: String,
    /// The file, relative to the CLI's configuration directory
    /// (`projects/<cwd-slug>/<conversation>.jsonl`), see [`relative_path`].
    pub path: String,
    /// The line, JSON; empty for a gap (an entry over [`MAX_ENTRY_BYTES`]).
    pub line: String,
}

impl TranscriptEntry {
    /// Whether it stands for an entry that was too large to keep.
    pub fn is_gap(&self) -> bool {
        self.line.is_empty()
    }
}

/// The part of the CLI's `filePath` from its last `projects` component on:
/// the same on every node whose sessions run in the same folder, whatever
/// each node's configuration directory is. `None` for a path without that
/// component, or with a component that is not a plain name (`..`).
pub fn relative_path(file_path: &str) -> Option<String> {
    use std::path::{Component, Path};
    let comps: Vec<Component<'_>> = Path::new(file_path).components().collect();
    let start = comps.iter().rposition(|c| c.as_os_str() == "projects")?;
    let rest = &comps[start..];
    if rest.len() < 3 || !rest.iter().all(|c| matches!(c, Component::Normal(_))) {
        return None;
    }
    let parts: Vec<&str> = rest
        .iter()
        .map(|c| c.as_os_str().to_str())
        .collect::<Option<_>>()?;
    Some(parts.join("/"))
}

/// The lines of file `path` among `entries`, in order, when it can be
/// written back whole: `None` when it has none or has a gap.
pub fn file_lines<'a>(entries: &'a [TranscriptEntry], path: &str) -> Option<Vec<&'a str>> {
    let mut lines = Vec::new();
    for e in entries.iter().filter(|e| e.path == path) {
        if e.is_gap() {
            return None;
        }
        lines.push(e.line.as_str());
    }
    (!lines.is_empty()).then_some(lines)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_taken_from_the_last_projects_component() {
        assert_eq!(
            relative_path("/home/u/projects/x/.claude/projects/-tmp-w/abc.jsonl").as_deref(),
            Some("projects/-tmp-w/abc.jsonl")
        );
        assert_eq!(relative_path("/tmp/abc.jsonl"), None);
        assert_eq!(relative_path("/c/projects/../abc.jsonl"), None);
        assert_eq!(relative_path("/c/projects/abc.jsonl"), None);
    }

    #[test]
    fn a_file_with_a_gap_is_not_written_back() {
        let e = |path: &str, line: &str| TranscriptEntry {
            session_id: "s".into(),
            path: path.into(),
            line: line.into(),
        };
        let entries = [e("p/a", "1"), e("p/b", "x"), e("p/a", "2"), e("p/b", "")];
        assert_eq!(file_lines(&entries, "p/a"), Some(vec!["1", "2"]));
        assert_eq!(file_lines(&entries, "p/b"), None);
        assert_eq!(file_lines(&entries, "p/c"), None);
    }
}
