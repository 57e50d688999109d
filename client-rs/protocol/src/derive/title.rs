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
    use crate::pb;

    fn ev(seq: u64, secs: i64, payload: Payload) -> Event {
        Event {
            seq,
            time: Some(pbjson_types::Timestamp {
                seconds: secs,
                nanos: 0,
            }),
            payload: Some(payload),
            ..Default::default()
        }
    }

    fn start(prompt: &str, cwd: &str) -> Payload {
        Payload::RunStart(pb::RunStart {
            config: Some(pb::StartConfig {
                prompt: prompt.into(),
                cwd: cwd.into(),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn input(text: &str, source: InputSource) -> Payload {
        Payload::InputSent(pb::InputSent {
            text: text.into(),
            source: source as i32,
            ..Default::default()
        })
    }

    fn named(title: &str) -> Payload {
        Payload::TitleSet(pb::TitleSet {
            title: title.into(),
        })
    }

    #[test]
    fn the_first_prompt_titles_until_a_title_is_set_and_an_empty_one_goes_back() {
        let mut log = vec![
            ev(1, 10, start("", "/a")),
            ev(2, 11, input("wake up", InputSource::Wakeup)),
            ev(3, 12, input("  \n", InputSource::User)),
            ev(4, 13, input("Port the parser\nto Rust", InputSource::User)),
            ev(5, 14, input("later prompt", InputSource::User)),
        ];
        assert_eq!(title(&log), "Port the parser");
        log.push(ev(6, 15, named("Parser port")));
        assert_eq!(title(&log), "Parser port");
        log.push(ev(7, 16, start("respawn prompt", "/b")));
        assert_eq!(title(&log), "Parser port");
        log.push(ev(8, 17, named("")));
        assert_eq!(title(&log), "Port the parser");
        let mut f = TitleFold::default();
        for e in &log {
            f.apply(e);
        }
        assert_eq!(f.cwd(), "/b");
        assert_eq!(f.created_at().map(|t| t.seconds), Some(10));
        assert_eq!(f.updated_at().map(|t| t.seconds), Some(17));
    }

    #[test]
    fn a_title_set_before_any_prompt_and_an_empty_log() {
        assert_eq!(title(&[]), "");
        let f = TitleFold::default();
        assert_eq!((f.cwd(), f.created_at()), ("", None));
        assert_eq!(title(&[ev(1, 1, named("Named first"))]), "Named first");
        // The Start prompt's input_sent titles a log whose run_start was cut.
        let cut = ev(1, 1, Payload::RunStart(pb::RunStart::default()));
        assert_eq!(
            title(&[cut, ev(2, 2, input("from input", InputSource::Initial))]),
            "from input"
        );
    }

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
