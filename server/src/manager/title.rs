//! Naming a session (SetTitle): a `title_set` event, recorded whether or
//! not a process lives and never shown to the CLI. Derive folds it into
//! `Session.title`; an empty title goes back to the one derived from the
//! first prompt.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;

use super::SessionManager;
use super::receipts::{Keyed, KeyedExt};
use super::run::{Record, RunCmd};
use crate::error::{Error, Result};

impl SessionManager {
    /// Records `title` (already validated: trimmed, one line, bounded) as
    /// the session's `title_set` and returns its seq. With a live run, the
    /// run appends it in order with its own events; without one, the
    /// manager does, holding the session's claim. A keyed repeat returns
    /// the first call's seq and appends nothing.
    pub async fn set_title(&self, request: pb::SetTitleRequest) -> Result<pb::SetTitleResponse> {
        let session_id = request.session_id.as_str();
        let Some(slot) = self.known_slot(session_id).await? else {
            return Err(Error::unknown_session(session_id));
        };
        let (slot, title) = (&slot, request.title.as_str());
        self.idempotent(&request, |keyed| async move {
            let seq = self
                .record_title(session_id, slot, title, keyed.as_ref())
                .await?;
            Ok(pb::SetTitleResponse { seq })
        })
        .await
    }

    async fn record_title(
        &self,
        session_id: &str,
        slot: &std::sync::Arc<super::slot::Slot>,
        title: &str,
        keyed: Option<&Keyed>,
    ) -> Result<u64> {
        let payload = || {
            Payload::TitleSet(pb::TitleSet {
                title: title.to_owned(),
            })
        };
        let cmd = |reply| RunCmd::Record {
            record: Box::new(Record {
                payload: payload(),
                keyed: keyed.cloned(),
            }),
            reply,
        };
        match self.run_records_or_claim(session_id, slot, cmd).await? {
            Ok(answered) => Ok(answered.seq),
            Err(claim) => {
                self.commit_claimed(session_id, slot, claim, payload(), |seq| {
                    keyed.put(|| pb::SetTitleResponse { seq })
                })
                .await
            }
        }
    }
}
