//! The store's node lease and session ownership (see
//! [`crate::store::ownership`]), reached through the log so callers never
//! block an async task on the store.

use std::time::Duration;

use super::{EventLogs, LogError};
use crate::store::{Claim, Joined};

impl EventLogs {
    /// [`crate::store::Store::join_node`].
    pub async fn join_node(
        &self,
        node_id: &str,
        address: &str,
        lease: Duration,
    ) -> Result<Option<Joined>, LogError> {
        let (id, addr) = (node_id.to_owned(), address.to_owned());
        self.inner
            .shared
            .blocking(move |st| st.join_node(&id, &addr, lease))
            .await
    }

    /// [`crate::store::Store::renew_node`].
    pub async fn renew_node(&self, lease: Duration) -> Result<bool, LogError> {
        self.inner
            .shared
            .blocking(move |st| st.renew_node(lease))
            .await
    }

    /// [`crate::store::Store::leave_node`].
    pub async fn leave_node(&self) -> Result<(), LogError> {
        self.inner.shared.blocking(|st| st.leave_node()).await
    }

    /// [`crate::store::Store::claim_session`].
    pub async fn claim_session(&self, session_id: &str) -> Result<Claim, LogError> {
        let id = session_id.to_owned();
        self.inner
            .shared
            .blocking(move |st| st.claim_session(&id))
            .await
    }

    /// [`crate::store::Store::orphaned_sessions`].
    pub async fn orphaned_sessions(
        &self,
        grace: Duration,
        limit: usize,
    ) -> Result<Vec<String>, LogError> {
        self.inner
            .shared
            .blocking(move |st| st.orphaned_sessions(grace, limit))
            .await
    }
}
