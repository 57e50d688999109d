//! What to call a session, where it runs and when it was active: the
//! latest `title_set`, else the first prompt; the latest run_start's cwd;
//! the times of the first and the newest event.

use crate::pb::{Event, InputSource, event::Payload};

/// Most characters of a title derived from a prompt (before the "…").
pub const DERIVED_TITLE_CHARS: usize = 80;

/// The title a prompt gives a session: its first non-blank line, whitespace
/// collapsed, cut to [`DERIVED_TITLE_CHARS`] characters with "…" when
/// longer. Empty for a blank prompt.
pub fn title_of_prompt(prompt: &str) -> String {
    let line = prompt.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    let words: Vec<&str> = line.split_whitespace().collect();
    let line = words.join(" ");
    if line.chars().count() <= DERIVED_TITLE_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(DERIVED_TITLE_CHARS).collect();
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// The session's title: the latest non-empty `title_set`'s title (an empty
/// one goes back to the derived title), else [`title_of_prompt`] of the
/// first prompt (a run_start's `config.prompt` or an `input_sent` from the
/// Start prompt or a user). Empty before any prompt.
pub fn title(events: &[Event]) -> String {
    let mut f = TitleFold::default();
    for e in events {
        f.apply(e);
    }
    f.title().to_owned()
}

/// [`title`], the latest run_start's cwd and the first and newest event
/// times, one event at a time. Serializable, as [`super::StatusFold`].
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TitleFold {
    chosen: Option<String>,
    derived: Option<String>,
    cwd: Option<String>,
    created_at: Option<pbjson_types::Timestamp>,
    updated_at: Option<pbjson_types::Timestamp>,
}

impl TitleFold {
    /// Applies the next event of the log.
    pub fn apply(&mut self, e: &Event) {
        if e.time.is_some() {
            if self.created_at.is_none() {
                self.created_at = e.time;
            }
            self.updated_at = e.time;
        }
        match &e.payload {
            Some(Payload::TitleSet(t)) => {
                self.chosen = (!t.title.is_empty()).then(|| t.title.clone());
            }
            Some(Payload::RunStart(rs)) => {
                if let Some(c) = &rs.config {
                    self.cwd = Some(c.cwd.clone());
                    self.offer(&c.prompt);
                }
            }
            Some(Payload::InputSent(i))
                if matches!(
                    InputSource::try_from(i.source),
                    Ok(InputSource::Initial | InputSource::User)
                ) =>
            {
                self.offer(&i.text);
            }
            _ => {}
        }
    }

    fn offer(&mut self, prompt: &str) {
        if self.derived.is_none() {
            let t = title_of_prompt(prompt);
            if !t.is_empty() {
                self.derived = Some(t);
            }
        }
    }

    /// See [`title`].
    pub fn title(&self) -> &str {
        self.chosen
            .as_deref()
            .or(self.derived.as_deref())
            .unwrap_or("")
    }

    /// The cwd of the latest run_start ("" before any).
    pub fn cwd(&self) -> &str {
        self.cwd.as_deref().unwrap_or("")
    }

    /// When the first event was appended.
    pub fn created_at(&self) -> Option<pbjson_types::Timestamp> {
        self.created_at
    }

    /// When the newest event was appended.
    pub fn updated_at(&self) -> Option<pbjson_types::Timestamp> {
        self.updated_at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prompt_titles_by_its_first_line_cut_to_eighty() {
        assert_eq!(
            title_of_prompt("\n  Fix   the\tbuild \nthen more"),
            "Fix the build"
        );
        assert_eq!(title_of_prompt("   \n\t"), "");
        let long = "word ".repeat(40);
        let t = title_of_prompt(&long);
        assert!(t.ends_with('…'), "{t}");
        assert_eq!(t.chars().count(), DERIVED_TITLE_CHARS);
        let wide = "é".repeat(100);
        assert_eq!(
            title_of_prompt(&wide).chars().count(),
            DERIVED_TITLE_CHARS + 1
        );
    }
}
