//! A live run's handle on its session's live-typing board (see
//! [`crate::partial`]): what the CLI is writing, never stored.

use std::sync::Arc;

use super::resident::SessionLog;
use super::{EventLogs, LogError};

/// A live run's hold on its session's live-typing board; see
/// [`EventLogs::typing`].
pub struct Typing {
    session: Arc<SessionLog>,
}

impl Typing {
    /// Changes the CLI wrote after every committed event and before any
    /// uncommitted one: published at once (see [`crate::partial::Board::publish`]).
    pub fn publish(&self, run_id: &str, changes: &[crate::partial::Change]) {
        let head = *self.session.head.borrow();
        self.session.board.publish(run_id, changes, head);
    }

    /// Before a batch's events are committed: closes the blocks it
    /// completes. Returns the head before the commit, for
    /// [`Typing::publish_after`].
    pub fn close(&self, changes: &[crate::partial::Change]) -> u64 {
        let head = *self.session.head.borrow();
        self.session.board.close(changes, head);
        head
    }

    /// After the batch's events are committed: all its changes.
    pub fn publish_after(&self, run_id: &str, changes: &[crate::partial::Change], before: u64) {
        let head = *self.session.head.borrow();
        self.session
            .board
            .publish_after(run_id, changes, before, head);
    }

    /// The run ended.
    pub fn clear(&self, run_id: &str) {
        self.session.board.clear(run_id);
    }
}

impl EventLogs {
    /// The live-typing board of `session_id`, for its run task (see
    /// [`crate::partial`]). Holding the handle keeps the session in memory,
    /// so subscribers and the run share one board.
    pub async fn typing(&self, session_id: &str) -> Result<Typing, LogError> {
        let session = self
            .inner
            .shared
            .load(session_id, true)
            .await?
            .ok_or(LogError::Closed)?;
        Ok(Typing { session })
    }
}
