//! The session index: one row per session with what ListSessions filters
//! and sorts on (title, cwd, agent, status, first and last activity), so a
//! filtered, sorted page is found without folding every stored log.
//!
//! A row is a cache of values derived from the log, never a second source
//! of truth: the log's writer computes it from the session's fold after
//! applying a commit's events and writes it in the SAME transaction as
//! those events ([`super::Commit::index`]), keyed by the head it reflects.
//! A store refuses to replace a row with one of an older head, so a row
//! written late (a rebuild racing a commit of another node sharing the
//! store) never moves it back. The row also carries the fold's state
//! ([`IndexFold`]), so the next commit goes on from it: O(1) per event,
//! whether or not the writer still caches the session. Rows missing or
//! behind their log (a store written before the index existed, a row
//! that does not decode) are rebuilt from the logs at start-up
//! (`EventLogs::rebuild_index`). Deleting a session deletes its row.

use std::cmp::Ordering;

use agent_harness_protocol::derive::{StatusFold, TitleFold};
use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use serde::{Deserialize, Serialize};

/// The version of [`IndexRow`]'s stored form: a row of another version
/// reads as missing, so a server that derives differently rebuilds it.
pub const INDEX_VERSION: u32 = 1;

/// What the index derives from a session's log, one event at a time.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct IndexFold {
    status: StatusFold,
    title: TitleFold,
    /// The agent of the latest run_start, as `Fold::agent` says it.
    agent: Option<String>,
}

impl IndexFold {
    /// Applies the next event of the log.
    pub fn apply(&mut self, e: &pb::Event) {
        self.status.apply(e);
        self.title.apply(e);
        if let Some(Payload::RunStart(rs)) = &e.payload {
            self.agent = Some(agent_harness_protocol::vocab::agent::of_run(&rs.agent).to_owned());
        }
    }

    /// The highest seq applied (0 for an empty log).
    pub fn head(&self) -> u64 {
        self.status.head_seq()
    }

    /// The row of `session_id` in this state.
    pub fn row(&self, session_id: &str) -> IndexRow {
        IndexRow {
            v: INDEX_VERSION,
            session_id: session_id.to_owned(),
            head_seq: self.head(),
            title: self.title.title().to_owned(),
            cwd: self.title.cwd().to_owned(),
            agent: self.agent.clone().unwrap_or_default(),
            status: pb::SessionStatus::from(self.status.status()) as i32,
            created_ns: nanos(self.title.created_at()),
            updated_ns: nanos(self.title.updated_at()),
            fold: self.clone(),
        }
    }
}

/// A timestamp as nanoseconds since the epoch (0 when unset).
fn nanos(t: Option<pbjson_types::Timestamp>) -> i64 {
    t.map_or(0, |t| {
        t.seconds
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(t.nanos))
    })
}

/// One session's row of the index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IndexRow {
    /// [`INDEX_VERSION`] when written.
    #[serde(default)]
    pub v: u32,
    /// The session.
    pub session_id: String,
    /// The head of the log the row reflects.
    pub head_seq: u64,
    /// `Session.title`.
    pub title: String,
    /// `Session.cwd`.
    pub cwd: String,
    /// `Session.agent`.
    pub agent: String,
    /// `Session.status` (a `pb::SessionStatus`).
    pub status: i32,
    /// `Session.created_at`, nanoseconds since the epoch (0: unset).
    pub created_ns: i64,
    /// `Session.updated_at`, nanoseconds since the epoch (0: unset).
    pub updated_ns: i64,
    /// The fold the row was taken from, to go on from.
    pub fold: IndexFold,
}

impl IndexRow {
    /// The stored form.
    pub fn encode(&self) -> Vec<u8> {
        // A struct of strings, integers and options cannot fail to serialize.
        serde_json::to_vec(self).unwrap_or_default()
    }

    /// A stored row; `None` (read as missing, so rebuilt) when it does not
    /// decode or is of another version.
    pub fn decode(session_id: &str, bytes: &[u8]) -> Option<Self> {
        match serde_json::from_slice::<Self>(bytes) {
            Ok(row) if row.v == INDEX_VERSION => Some(row),
            Ok(_) => None,
            Err(e) => {
                tracing::warn!(session_id, error = %e, "stored index row cannot be decoded; rebuilt from the log");
                None
            }
        }
    }

    /// A stored row as a listing reads it: everything but the fold (left
    /// empty; a listing orders and names sessions, it folds nothing), so
    /// reading every row skips the fold's timestamps. `None` as [`decode`](Self::decode).
    pub fn decode_listed(session_id: &str, bytes: &[u8]) -> Option<Self> {
        #[derive(Deserialize)]
        struct Listed {
            #[serde(default)]
            v: u32,
            head_seq: u64,
            title: String,
            cwd: String,
            agent: String,
            status: i32,
            created_ns: i64,
            updated_ns: i64,
        }
        let l: Listed = serde_json::from_slice(bytes).ok()?;
        (l.v == INDEX_VERSION).then(|| Self {
            v: l.v,
            session_id: session_id.to_owned(),
            head_seq: l.head_seq,
            title: l.title,
            cwd: l.cwd,
            agent: l.agent,
            status: l.status,
            created_ns: l.created_ns,
            updated_ns: l.updated_ns,
            fold: IndexFold::default(),
        })
    }

    /// Its title, id and cwd lowercased, one line each: what a text query
    /// looks in (a query holds no control character, so it never matches
    /// across two of them).
    pub fn haystack(&self) -> String {
        format!(
            "{}\n{}\n{}",
            self.title.to_lowercase(),
            self.session_id.to_lowercase(),
            self.cwd.to_lowercase()
        )
    }

    /// Where it stands in a page order.
    pub fn position(&self) -> Position {
        Position {
            updated_ns: self.updated_ns,
            cwd: self.cwd.clone(),
            session_id: self.session_id.clone(),
        }
    }
}

/// The order of a listing (see `SessionOrder`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Order {
    /// By session id.
    #[default]
    SessionId,
    /// Newest activity first, then session id.
    RecentActivity,
    /// By cwd, then newest activity first, then session id.
    Cwd,
}

/// A place in an order: the sort keys of the last row of a page.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The row's `updated_ns`.
    pub updated_ns: i64,
    /// The row's cwd.
    pub cwd: String,
    /// The row's session id.
    pub session_id: String,
}

/// What to list: filters, order, where to start and how many.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Lowercased text the title, id or cwd must contain ("": any).
    pub text: String,
    /// Statuses (`pb::SessionStatus`) a row may have (empty: any).
    pub statuses: Vec<i32>,
    /// The agent a row must have ("": any).
    pub agent: String,
    /// The cwd a row must have ("": any).
    pub cwd: String,
    /// The order.
    pub order: Order,
    /// Only rows after this place in the order (`None`: from the first).
    pub after: Option<Position>,
    /// Most rows returned.
    pub limit: usize,
}

/// A page of the index (see [`super::Store::list_index`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListPage {
    /// Up to `limit` rows after the query's place, in its order; a
    /// store may leave their folds empty (see [`IndexRow::decode_listed`]).
    pub rows: Vec<IndexRow>,
    /// How many rows match the filters, wherever they are in the order.
    pub total: u64,
}

impl ListQuery {
    /// Whether `row` passes the filters.
    pub fn matches(&self, row: &IndexRow) -> bool {
        (self.statuses.is_empty() || self.statuses.contains(&row.status))
            && (self.agent.is_empty() || self.agent == row.agent)
            && (self.cwd.is_empty() || self.cwd == row.cwd)
            && (self.text.is_empty() || row.haystack().contains(&self.text))
    }

    /// How two places compare in the query's order.
    pub fn cmp(&self, a: &Position, b: &Position) -> Ordering {
        let recent = || b.updated_ns.cmp(&a.updated_ns);
        let id = || a.session_id.cmp(&b.session_id);
        match self.order {
            Order::SessionId => id(),
            Order::RecentActivity => recent().then_with(id),
            Order::Cwd => a.cwd.cmp(&b.cwd).then_with(recent).then_with(id),
        }
    }

    /// The page of `rows` (every row of a store, any order): the stores
    /// that filter in process (memory, redb) answer with this.
    pub fn select<'a>(&self, rows: impl IntoIterator<Item = &'a IndexRow>) -> ListPage {
        let mut total = 0;
        let mut page: Vec<(Position, &IndexRow)> = Vec::new();
        for row in rows {
            if !self.matches(row) {
                continue;
            }
            total += 1;
            let pos = row.position();
            if self
                .after
                .as_ref()
                .is_some_and(|after| self.cmp(&pos, after) != Ordering::Greater)
            {
                continue;
            }
            page.push((pos, row));
        }
        let by = |a: &(Position, &IndexRow), b: &(Position, &IndexRow)| self.cmp(&a.0, &b.0);
        if page.len() > self.limit && self.limit > 0 {
            page.select_nth_unstable_by(self.limit - 1, by);
        }
        page.truncate(self.limit);
        page.sort_unstable_by(by);
        ListPage {
            rows: page.into_iter().map(|(_, r)| r.clone()).collect(),
            total,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(id: &str, cwd: &str, updated_ns: i64) -> IndexRow {
        IndexRow {
            session_id: id.into(),
            cwd: cwd.into(),
            updated_ns,
            title: format!("Title {id}"),
            ..IndexFold::default().row(id)
        }
    }

    #[test]
    fn a_page_is_filtered_ordered_and_continues_after_its_place() {
        let rows = vec![
            row("a", "/y", 3),
            row("b", "/x", 1),
            row("c", "/x", 3),
            row("d", "/y", 2),
        ];
        let ids =
            |p: &ListPage| -> Vec<String> { p.rows.iter().map(|r| r.session_id.clone()).collect() };
        let mut q = ListQuery {
            order: Order::RecentActivity,
            limit: 2,
            ..ListQuery::default()
        };
        let first = q.select(&rows);
        assert_eq!(
            (ids(&first), first.total),
            (vec!["a".into(), "c".into()], 4)
        );
        q.after = Some(first.rows[1].position());
        assert_eq!(ids(&q.select(&rows)), ["d", "b"]);
        q.order = Order::Cwd;
        q.after = None;
        q.limit = 10;
        assert_eq!(ids(&q.select(&rows)), ["c", "b", "a", "d"]);
        q.text = "title c".into();
        let one = q.select(&rows);
        assert_eq!((ids(&one), one.total), (vec!["c".into()], 1));
        q.text = "/Y".to_lowercase();
        assert_eq!(ids(&q.select(&rows)), ["a", "d"]);
    }
}
