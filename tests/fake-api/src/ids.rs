//! Unique ids in the real API's shapes (`msg_…`, `toolu_…`, `req_…`).

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A number unique within this process and unlikely to repeat across processes: the start
/// time in nanoseconds plus a counter.
pub fn unique_number() -> u64 {
    static BASE: OnceLock<u64> = OnceLock::new();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let base = *BASE.get_or_init(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    base.wrapping_add(NEXT.fetch_add(1, Ordering::Relaxed))
}

/// `msg_fake…`
pub fn message_id() -> String {
    format!("msg_fake{}", unique_number())
}

/// `toolu_fake…`
pub fn tool_use_id() -> String {
    format!("toolu_fake{}", unique_number())
}

/// `req_fake…`, sent as the `request-id` header and in error bodies.
pub fn request_id() -> String {
    format!("req_fake{}", unique_number())
}

/// `<prefix>fake…`, for the Responses API's ids: `resp_`, `msg_`, `rs_`, `fc_`, `call_`.
pub fn prefixed(prefix: &str) -> String {
    format!("{prefix}fake{}", unique_number())
}
