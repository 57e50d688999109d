//! What a ListSessions request asks for: its filters and order as a query
//! of the session index ([`crate::store::index`]), its page size, and the
//! page tokens that say where the next page starts.
//!
//! A token holds the place in the order of the page's last session (its
//! last activity, cwd and id: a keyset, so a page costs the same however
//! deep) and a fingerprint of the filters and order it was given out for:
//! used with others it is refused (INVALID_ARGUMENT) rather than read as a
//! place in an order it does not belong to. Opaque to clients; versioned
//! (`v2.`), and a `v1.` token of the time pages were by id alone still
//! continues an unfiltered listing by id.

use agent_harness_protocol::pb;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::store::{ListQuery, Order, Position};
use crate::validate;

/// Default ListSessions page size.
pub const LIST_DEFAULT_PAGE: usize = 100;
/// Largest ListSessions page size.
pub const LIST_MAX_PAGE: usize = 1000;
/// Longest text query, bytes.
pub const MAX_QUERY_BYTES: usize = 200;
/// The prefix of a page token of this format.
const TOKEN_PREFIX: &str = "v2.";
/// The prefix of a token given out when pages were by session id alone.
const OLD_TOKEN_PREFIX: &str = "v1.";

/// A parsed ListSessions request.
#[derive(Debug, Clone)]
pub struct Listing {
    /// The index query: filters, order, place; `limit` is one more than
    /// the page, to know whether another follows.
    pub query: ListQuery,
    /// Most sessions in the page.
    pub page_size: usize,
    /// The fingerprint of the filters and order (see the module docs).
    fingerprint: u64,
}

/// What a token holds.
#[derive(Serialize, Deserialize)]
struct Token {
    f: u64,
    p: Position,
}

impl Listing {
    /// Checks and reads `req` (INVALID_ARGUMENT naming the field).
    pub fn parse(req: &pb::ListSessionsRequest) -> Result<Self> {
        let page_size = match req.page_size as usize {
            0 => LIST_DEFAULT_PAGE,
            n => n.min(LIST_MAX_PAGE),
        };
        let text = req.query.trim();
        if text.len() > MAX_QUERY_BYTES {
            return Err(Error::invalid(
                "query",
                format!("longer than {MAX_QUERY_BYTES} bytes"),
            ));
        }
        if text.chars().any(char::is_control) {
            return Err(Error::invalid("query", "contains control characters"));
        }
        let mut statuses = Vec::with_capacity(req.statuses.len());
        for &s in &req.statuses {
            match pb::SessionStatus::try_from(s) {
                Ok(pb::SessionStatus::Unspecified) | Err(_) => {
                    return Err(Error::invalid("statuses", format!("{s} is not a status")));
                }
                Ok(_) => statuses.push(s),
            }
        }
        statuses.sort_unstable();
        statuses.dedup();
        let order = match pb::SessionOrder::try_from(req.order) {
            Ok(pb::SessionOrder::Unspecified | pb::SessionOrder::SessionId) => Order::SessionId,
            Ok(pb::SessionOrder::RecentActivity) => Order::RecentActivity,
            Ok(pb::SessionOrder::Cwd) => Order::Cwd,
            Err(_) => {
                return Err(Error::invalid(
                    "order",
                    format!("{} is not an order", req.order),
                ));
            }
        };
        let query = ListQuery {
            text: text.to_lowercase(),
            statuses,
            agent: req.agent.clone(),
            cwd: req.cwd.clone(),
            order,
            after: None,
            limit: page_size + 1,
        };
        let mut listing = Self {
            fingerprint: fingerprint(&query),
            query,
            page_size,
        };
        listing.query.after = listing.place(&req.page_token)?;
        Ok(listing)
    }

    /// Whether it lists every session by id: the order the metas are
    /// stored in, so no index is needed.
    pub fn by_id_unfiltered(&self) -> bool {
        let q = &self.query;
        q.order == Order::SessionId
            && q.text.is_empty()
            && q.statuses.is_empty()
            && q.agent.is_empty()
            && q.cwd.is_empty()
    }

    /// The token of the page after the one ending at `last`.
    pub fn next_token(&self, last: &Position) -> String {
        let token = Token {
            f: self.fingerprint,
            p: last.clone(),
        };
        // A struct of integers and strings cannot fail to serialize.
        let json = serde_json::to_vec(&token).unwrap_or_default();
        let mut out = String::with_capacity(TOKEN_PREFIX.len() + 2 * json.len());
        out.push_str(TOKEN_PREFIX);
        for b in json {
            out.push_str(&format!("{b:02x}"));
        }
        out
    }

    /// Where the page starts: after the place `token` holds.
    fn place(&self, token: &str) -> Result<Option<Position>> {
        if token.is_empty() {
            return Ok(None);
        }
        let bad = || {
            Error::invalid(
                "page_token",
                "not a token this server gave out (pass next_page_token unchanged)",
            )
        };
        if let Some(id) = token.strip_prefix(OLD_TOKEN_PREFIX) {
            validate::session_id(id).map_err(|_| bad())?;
            if !self.by_id_unfiltered() {
                return Err(Error::invalid(
                    "page_token",
                    "given out for other filters or another order (ask with the same ones, or from the first page)",
                ));
            }
            return Ok(Some(Position {
                session_id: id.to_owned(),
                ..Position::default()
            }));
        }
        let hex = token.strip_prefix(TOKEN_PREFIX).ok_or_else(bad)?;
        let bytes = unhex(hex).ok_or_else(bad)?;
        let token: Token = serde_json::from_slice(&bytes).map_err(|_| bad())?;
        if token.f != self.fingerprint {
            return Err(Error::invalid(
                "page_token",
                "given out for other filters or another order (ask with the same ones, or from the first page)",
            ));
        }
        Ok(Some(token.p))
    }
}

/// FNV-1a over the filters and order: stable across restarts and builds,
/// so a token outlives the server that gave it out.
fn fingerprint(q: &ListQuery) -> u64 {
    let text = format!(
        "{:?}\u{0}{}\u{0}{:?}\u{0}{}\u{0}{}",
        q.order, q.text, q.statuses, q.agent, q.cwd
    );
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.is_empty() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(token: &str, query: &str, order: pb::SessionOrder) -> pb::ListSessionsRequest {
        pb::ListSessionsRequest {
            page_token: token.into(),
            query: query.into(),
            order: order as i32,
            ..Default::default()
        }
    }

    #[test]
    fn a_token_continues_only_the_listing_it_was_given_for() {
        let recent = pb::SessionOrder::RecentActivity;
        let first = Listing::parse(&req("", " Fix ", recent)).unwrap();
        assert_eq!(first.query.text, "fix");
        let place = Position {
            updated_ns: 7,
            cwd: "/w".into(),
            session_id: "s1".into(),
        };
        let token = first.next_token(&place);
        let next = Listing::parse(&req(&token, "fix", recent)).unwrap();
        assert_eq!(next.query.after, Some(place));
        for (q, o) in [("fiz", recent), ("fix", pb::SessionOrder::Cwd)] {
            let err = Listing::parse(&req(&token, q, o)).unwrap_err();
            assert!(err.to_string().contains("page_token"), "{err}");
        }
        assert!(Listing::parse(&req("v1.s9", "", pb::SessionOrder::Unspecified)).is_ok());
        assert!(Listing::parse(&req("v1.s9", "x", pb::SessionOrder::Unspecified)).is_err());
        assert!(Listing::parse(&req("v2.zz", "", recent)).is_err());
        let long = "x".repeat(MAX_QUERY_BYTES + 1);
        assert!(Listing::parse(&req("", &long, recent)).is_err());
    }
}
