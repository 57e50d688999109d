//! The commit feed: one connection LISTENing on the notice channel every
//! commit notifies in its transaction, fanned out to the logs through a
//! broadcast channel.
//!
//! A notice names the sessions of one commit (an empty one: too many to
//! name, re-check all). Notices sent while the connection was down are
//! gone, so after every (re)connect the feed sends [`CommitNotice::Lost`]:
//! readers then re-check what they follow, and nothing is missed.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::broadcast;
use tokio_postgres::AsyncMessage;

use super::super::CommitNotice;
use super::NOTICE_CHANNEL;
use super::connect::StoreUrl;

/// Backoff between reconnects: from the first to the last, doubling.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(5));

/// Notices a slow reader may fall behind by before it sees `Lagged`
/// (which it treats as `Lost`).
pub(super) const CAPACITY: usize = 1024;

/// Keeps one LISTEN connection open for as long as the runtime runs,
/// reconnecting with backoff.
pub(super) async fn listen(url: StoreUrl, tx: broadcast::Sender<CommitNotice>) {
    let mut wait = BACKOFF.0;
    loop {
        match url.config.connect(url.connector.clone()).await {
            Ok((client, mut connection)) => {
                let mut messages = futures::stream::poll_fn(move |cx| connection.poll_message(cx));
                // The LISTEN's reply comes through `messages`, so drive both.
                let statement = format!("LISTEN {NOTICE_CHANNEL}");
                let ok = {
                    let listening = client.batch_execute(&statement);
                    tokio::pin!(listening);
                    loop {
                        tokio::select! {
                            r = &mut listening => break r.is_ok(),
                            m = messages.next() => match m {
                                Some(Ok(AsyncMessage::Notification(n))) => forward(&tx, n.payload()),
                                Some(Ok(_)) => {}
                                Some(Err(_)) | None => break false,
                            },
                        }
                    }
                };
                if ok {
                    wait = BACKOFF.0;
                    let _ = tx.send(CommitNotice::Lost);
                    while let Some(Ok(m)) = messages.next().await {
                        if let AsyncMessage::Notification(n) = m {
                            forward(&tx, n.payload());
                        }
                    }
                    tracing::warn!(store = %url.redacted, "commit feed lost its connection; reconnecting");
                    // Anything after the last notice read may be gone.
                    let _ = tx.send(CommitNotice::Lost);
                }
                drop(client);
            }
            Err(e) => {
                tracing::debug!(store = %url.redacted, error = %super::describe(&e), "commit feed cannot connect yet");
            }
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(BACKOFF.1);
    }
}

fn forward(tx: &broadcast::Sender<CommitNotice>, payload: &str) {
    let notice = if payload.is_empty() {
        CommitNotice::Lost
    } else {
        CommitNotice::Sessions(payload.split('\n').map(str::to_owned).collect())
    };
    // No receiver yet is fine: nobody follows anything.
    let _ = tx.send(notice);
}
