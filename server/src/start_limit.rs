//! `--max-sessions-per-minute`: how fast one client may create sessions.
//!
//! Every new session costs disk (its log stays until it is deleted) and a
//! CLI process, so a Start that would create one takes a token from its
//! peer's bucket: up to the limit at once, then one more every
//! `60 s / limit`. An empty bucket answers RESOURCE_EXHAUSTED with the time
//! until the next token, and the Start appends nothing. Starts of sessions
//! that exist (a new run, a retried Start) take nothing.
//!
//! Buckets are keyed by the peer's IP address (an IPv6 peer by its /64, the
//! block one host usually holds), not by connection: a client cannot get a
//! fresh bucket by reconnecting. Behind a reverse proxy every client shares
//! the proxy's address, so there the limit is for all of them together.
//! The map holds only buckets that are not full (a full bucket is the same
//! as none), so it is bounded by the peers active within the last minute.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// Default of `--max-sessions-per-minute`: far more than a person starts,
/// far fewer than a script filling the disk.
pub const DEFAULT_MAX_SESSIONS_PER_MINUTE: u32 = 60;

/// Past this many buckets, full ones are dropped.
const PRUNE_AT: usize = 4096;

/// The per-peer buckets (see the module docs). Uses tokio's clock, so
/// tests run it on paused time.
#[derive(Debug)]
pub struct StartLimit {
    /// Tokens per minute and bucket size; 0 = unlimited.
    per_minute: u32,
    buckets: Mutex<HashMap<Option<IpAddr>, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

impl StartLimit {
    /// A limit of `per_minute` new sessions per peer; 0 = unlimited.
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute,
            buckets: Mutex::default(),
        }
    }

    /// The limit (0 = none).
    pub fn per_minute(&self) -> u32 {
        self.per_minute
    }

    /// Whether there is a limit at all.
    pub fn enabled(&self) -> bool {
        self.per_minute > 0
    }

    /// Takes one token from `peer`'s bucket (`None`: a peer with no known
    /// address; they share one). `Err` with the time until the next token.
    pub fn take(&self, peer: Option<IpAddr>) -> Result<(), Duration> {
        if !self.enabled() {
            return Ok(());
        }
        let cap = f64::from(self.per_minute);
        let per_sec = cap / 60.0;
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|p| p.into_inner());
        if buckets.len() >= PRUNE_AT {
            buckets.retain(|_, b| refilled(b, now, per_sec, cap) < cap);
        }
        let key = peer.map(block);
        let b = buckets.entry(key).or_insert(Bucket {
            tokens: cap,
            at: now,
        });
        b.tokens = refilled(b, now, per_sec, cap);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            return Ok(());
        }
        Err(Duration::from_secs_f64((1.0 - b.tokens) / per_sec))
    }
}

fn refilled(b: &Bucket, now: Instant, per_sec: f64, cap: f64) -> f64 {
    let secs = now.saturating_duration_since(b.at).as_secs_f64();
    (b.tokens + secs * per_sec).min(cap)
}

/// The address a bucket is kept for: an IPv4 address (or an IPv4-mapped
/// IPv6 one) as itself, any other IPv6 address as its /64.
fn block(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let s = v6.segments();
                IpAddr::V6(std::net::Ipv6Addr::new(s[0], s[1], s[2], s[3], 0, 0, 0, 0))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_peer_gets_the_limit_at_once_then_one_token_per_interval() {
        let limit = StartLimit::new(6);
        let a = Some("10.0.0.1".parse().unwrap());
        let b = Some("10.0.0.2".parse().unwrap());
        for _ in 0..6 {
            assert_eq!(limit.take(a), Ok(()));
        }
        let wait = limit.take(a).unwrap_err();
        assert_eq!(wait.as_secs(), 10, "{wait:?}");
        assert_eq!(limit.take(b), Ok(()), "another peer has its own bucket");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(limit.take(a), Ok(()));
        assert!(limit.take(a).is_err());
        assert!(StartLimit::new(0).take(a).is_ok(), "0 = unlimited");
    }

    #[tokio::test(start_paused = true)]
    async fn ipv6_peers_share_their_64_and_full_buckets_are_pruned() {
        let limit = StartLimit::new(1);
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let other: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        assert!(limit.take(Some(one)).is_ok());
        assert!(limit.take(Some(other)).is_err(), "same /64");
        tokio::time::advance(Duration::from_secs(60)).await;
        for i in 0..PRUNE_AT as u32 {
            let _ = limit.take(Some(IpAddr::V4(i.into())));
        }
        let n = limit.buckets.lock().unwrap().len();
        assert!(n <= PRUNE_AT, "{n}");
    }
}
