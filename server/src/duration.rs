//! Durations on the command line: "1500ms", "30s", "5m", "2h", read by
//! [`parse_duration`] and written back by [`format_duration`], so that a
//! default shown in `--help` is the subsystem's own constant.

use std::time::Duration;

/// A default duration as `--help` shows it and [`parse_duration`] reads it
/// ("30m", "50ms"), from the subsystem's own constant: each default is
/// written once, where it is used.
macro_rules! duration_default {
    ($d:expr) => {{
        static TEXT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
        TEXT.get_or_init(|| $crate::duration::format_duration($d))
            .as_str()
    }};
}
pub(crate) use duration_default;

/// Writes `d` the way [`parse_duration`] reads it, in the largest unit that
/// holds it whole: 1800 s is "30m", 50 ms is "50ms".
pub fn format_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 1000 != 0 {
        return format!("{ms}ms");
    }
    let secs = ms / 1000;
    match secs {
        0 => "0s".into(),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// Parses "1500ms", "30s", "5m", "2h" or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("invalid duration {s:?}: expected e.g. 30s, 5m, 1500ms"))?;
    let secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => value,
        "ms" => value / 1000.0,
        "m" | "min" | "mins" => value * 60.0,
        "h" | "hr" | "hours" => value * 3600.0,
        other => {
            return Err(format!(
                "invalid duration unit {other:?} in {s:?}: use ms, s, m or h"
            ));
        }
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(format!("invalid duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}
