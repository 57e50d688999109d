//! ListSessions: which sessions a page holds (the metas, by id, for an
//! unfiltered listing by id; else the session index, filtered and sorted by
//! the store), then each one's Session from its fold, exactly as GetSession
//! answers. Only the page's sessions are folded, never every stored one.

use agent_harness_protocol::pb;

use super::SessionManager;
use super::fold::FoldCell;
use crate::error::Result;
use crate::listing::Listing;
use crate::store::Position;

impl SessionManager {
    /// A page of stored sessions' derived state, by session id: the first
    /// `page_size` after `after` (from the first when `None`), and whether
    /// more follow. A session with state in memory costs the events appended
    /// since its last use; any other is folded from its log, page by page,
    /// without being kept (a walk over every session does not evict the
    /// ones in use).
    pub async fn list(
        &self,
        after: Option<&str>,
        page_size: usize,
    ) -> Result<(Vec<pb::Session>, bool)> {
        let mut metas = self.inner.logs.sessions(after, page_size + 1).await?;
        let more = metas.len() > page_size;
        metas.truncate(page_size);
        let ids: Vec<String> = metas.into_iter().map(|m| m.session_id).collect();
        Ok((self.sessions_of(&ids).await?, more))
    }

    /// The ListSessions page `listing` asks for: its sessions, the token
    /// of the next page ("" after the last) and how many sessions match.
    pub async fn list_sessions(&self, listing: &Listing) -> Result<pb::ListSessionsResponse> {
        let size = listing.page_size;
        let (sessions, next, total_size) = if listing.by_id_unfiltered() {
            let after = listing.query.after.as_ref().map(|p| p.session_id.as_str());
            let (sessions, more) = self.list(after, size).await?;
            let next = sessions.last().filter(|_| more).map(|s| Position {
                session_id: s.session_id.clone(),
                ..Position::default()
            });
            let total = self.inner.logs.session_count().await?;
            (sessions, next, total)
        } else {
            let mut page = self.inner.logs.list_index(listing.query.clone()).await?;
            let more = page.rows.len() > size;
            page.rows.truncate(size);
            // The place of the row, not of the fold read after it: the
            // next page continues the order the store sorted.
            let next = page.rows.last().filter(|_| more).map(|r| r.position());
            let ids: Vec<String> = page.rows.into_iter().map(|r| r.session_id).collect();
            (self.sessions_of(&ids).await?, next, page.total)
        };
        Ok(pb::ListSessionsResponse {
            sessions,
            next_page_token: next.map(|p| listing.next_token(&p)).unwrap_or_default(),
            total_size,
        })
    }

    /// The Session of each of `ids`, in order, as GetSession answers.
    async fn sessions_of(&self, ids: &[String]) -> Result<Vec<pb::Session>> {
        let mut out = Vec::with_capacity(ids.len());
        for sid in ids {
            let session = match self.inner.slots.get(sid) {
                Some(slot) => self.current(&slot, sid, |d| d.fold.session(sid)).await?,
                None => {
                    FoldCell::default()
                        .current(&self.inner.logs, sid, |d| d.fold.session(sid))
                        .await?
                }
            };
            out.push(session);
        }
        Ok(out)
    }
}
