//! A crash point inside the group commit, for crash tests only.
//!
//! `AGENT_HARNESS_FAILPOINT=commit:<when>:<n>` makes the writer thread call
//! `std::process::abort()` at its `n`-th commit (counted from 1 since the
//! process started, every commit of any session):
//! - `before`: the batch's events are built and their seqs assigned, but
//!   nothing is written. Nobody saw them; after a restart they must be gone
//!   without a hole (the next append reuses their seqs).
//! - `after`: the redb transaction is committed (`Durability::Immediate`,
//!   on disk) and nothing is published yet: no subscriber saw the events
//!   and no appender got its reply. After a restart they must be there,
//!   whole, after exactly the events that were seen. This is the point that
//!   tells "durable before visible" apart from "visible before durable".
//!
//! Unset (the default) costs one branch per commit. An unparsable value is
//! reported on stderr and ignored. A torn write inside redb's own commit is
//! redb's to survive; its crash tests (and `log_store` here) cover that.

/// Where in the commit to abort.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum When {
    /// Before the store is written.
    Before,
    /// After the store committed, before anything is published.
    After,
}

/// The armed crash point, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Failpoint {
    when: When,
    at: u64,
}

/// The environment variable that arms it.
pub const FAILPOINT_ENV: &str = "AGENT_HARNESS_FAILPOINT";

impl Failpoint {
    /// The failpoint `AGENT_HARNESS_FAILPOINT` asks for, if any.
    pub(crate) fn from_env() -> Option<Self> {
        let raw = std::env::var(FAILPOINT_ENV).ok()?;
        let parsed = Self::parse(&raw);
        if parsed.is_none() {
            eprintln!("{FAILPOINT_ENV}={raw:?} is not commit:before|after:N; ignored");
        }
        parsed
    }

    fn parse(raw: &str) -> Option<Self> {
        let mut parts = raw.trim().split(':');
        if parts.next()? != "commit" {
            return None;
        }
        let when = match parts.next()? {
            "before" => When::Before,
            "after" => When::After,
            _ => return None,
        };
        let at = parts.next()?.parse().ok().filter(|n| *n > 0)?;
        parts.next().is_none().then_some(Self { when, at })
    }

    /// Aborts the process when commit number `commit` has reached `when`.
    pub(crate) fn check(&self, commit: u64, when: When) {
        if self.at == commit && self.when == when {
            eprintln!("{FAILPOINT_ENV}: aborting at commit {commit} ({when:?})");
            std::process::abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_only_the_documented_forms() {
        assert_eq!(
            Failpoint::parse("commit:after:3"),
            Some(Failpoint {
                when: When::After,
                at: 3
            })
        );
        assert_eq!(
            Failpoint::parse("commit:before:1"),
            Some(Failpoint {
                when: When::Before,
                at: 1
            })
        );
        for bad in [
            "",
            "commit",
            "commit:after",
            "commit:after:0",
            "commit:during:2",
            "x:after:2",
            "commit:after:2:3",
        ] {
            assert_eq!(Failpoint::parse(bad), None, "{bad}");
        }
    }
}
