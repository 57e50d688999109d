//! The write-time stamp the stand-in CLI puts in each text fragment it
//! streams, and its parser: shared by `load-cli`, which writes it, and the
//! load tool, which reads it.
//!
//! A stamp is `⟨t=<unix micros>⟩`. The server may coalesce several
//! fragments into one `delta`, and a block's text is its fragments joined,
//! so a reader finds every stamp in a string by its delimiters, wherever
//! the string was cut between fragments.

/// Opens a stamp.
const OPEN: &str = "⟨t=";
/// Closes a stamp.
const CLOSE: char = '⟩';

/// Bytes of a stamp (16 digits of microseconds: until the year 2286).
pub const STAMP_BYTES: usize = OPEN.len() + 16 + CLOSE.len_utf8();

/// The stamp for `micros` since the epoch.
pub fn stamp(micros: u64) -> String {
    format!("{OPEN}{micros}{CLOSE}")
}

/// Every stamp in `text`, in order, as microseconds since the epoch.
pub fn stamps(text: &str) -> impl Iterator<Item = u64> + '_ {
    text.split(OPEN).skip(1).filter_map(|rest| {
        let (digits, _) = rest.split_once(CLOSE)?;
        digits.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_found_in_joined_fragments() {
        let a = stamp(1_764_000_000_000_001);
        let b = stamp(1_764_000_000_000_002);
        assert_eq!(a.len(), STAMP_BYTES);
        let text = format!("{a}xxxx{b}yy");
        assert_eq!(
            stamps(&text).collect::<Vec<_>>(),
            [1_764_000_000_000_001, 1_764_000_000_000_002]
        );
        assert_eq!(stamps("load 1 t=5 xxx").count(), 0);
        assert_eq!(stamps("⟨t=12").count(), 0, "a cut stamp is no stamp");
    }
}
