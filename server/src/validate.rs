//! Request validation: every check names the field it refuses, so a client
//! gets INVALID_ARGUMENT with something to fix instead of a vague failure.

use agent_harness_protocol::pb;

use crate::error::{Error, Result};

/// Longest session id accepted.
pub const MAX_SESSION_ID_LEN: usize = 128;
/// Longest permission request id accepted.
pub const MAX_REQUEST_ID_LEN: usize = 256;
/// Longest idempotency key accepted.
pub const MAX_IDEMPOTENCY_KEY_LEN: usize = 128;

/// Session ids are 1–128 characters of `[A-Za-z0-9._:-]`: safe in file
/// names, URLs, headers (`session-id` routing) and log lines.
pub fn session_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid("session_id", "must not be empty"));
    }
    if id.len() > MAX_SESSION_ID_LEN {
        return Err(Error::invalid(
            "session_id",
            format!("longer than {MAX_SESSION_ID_LEN} characters"),
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(Error::invalid(
            "session_id",
            format!("character {c:?} is not allowed (use A-Z a-z 0-9 . _ : -)"),
        ));
    }
    Ok(())
}

/// A permission request id as the CLI issued it: non-empty, bounded, no
/// control characters.
pub fn request_id(id: &str) -> Result<()> {
    if id.is_empty() {
        return Err(Error::invalid("request_id", "must not be empty"));
    }
    if id.len() > MAX_REQUEST_ID_LEN {
        return Err(Error::invalid(
            "request_id",
            format!("longer than {MAX_REQUEST_ID_LEN} characters"),
        ));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::invalid("request_id", "contains control characters"));
    }
    Ok(())
}

/// Most characters of a title a client sets (SetTitle).
pub const MAX_TITLE_CHARS: usize = 200;

/// A SetTitle title: trimmed (the returned slice), one line without control
/// characters, at most [`MAX_TITLE_CHARS`] characters. Empty after the trim
/// is allowed: it goes back to the derived title.
pub fn title(title: &str) -> Result<&str> {
    let title = title.trim();
    if let Some(c) = title
        .chars()
        .find(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
    {
        return Err(Error::invalid(
            "title",
            format!("character {c:?} is not allowed (one line, no control characters)"),
        ));
    }
    let n = title.chars().count();
    if n > MAX_TITLE_CHARS {
        return Err(Error::invalid(
            "title",
            format!("{n} characters, more than {MAX_TITLE_CHARS}"),
        ));
    }
    Ok(title)
}

/// An `idempotency_key`: empty (no key, `None`) or 1–128 printable ASCII
/// characters without spaces (a UUID, a ULID, base64 or hex of random bytes).
pub fn idempotency_key(key: &str) -> Result<Option<&str>> {
    if key.is_empty() {
        return Ok(None);
    }
    if key.len() > MAX_IDEMPOTENCY_KEY_LEN {
        return Err(Error::invalid(
            "idempotency_key",
            format!("longer than {MAX_IDEMPOTENCY_KEY_LEN} bytes"),
        ));
    }
    if let Some(c) = key.chars().find(|c| !c.is_ascii_graphic()) {
        return Err(Error::invalid(
            "idempotency_key",
            format!("character {c:?} is not allowed (printable ASCII without spaces)"),
        ));
    }
    Ok(Some(key))
}

/// A StartConfig's syntax: env names must be settable, args must not carry NUL bytes (they cannot be passed to
/// exec), model and resume must be plain names. What the operator allows
/// (args, env, cwd) is the launch policy's, checked by the manager
/// ([`crate::launch`]), which also checks that cwd exists (after the
/// policy, so a refused path never tells whether it exists).
pub fn start_config(config: &pb::StartConfig) -> Result<()> {
    for (k, v) in &config.env {
        if k.is_empty() || k.contains('=') || k.contains('\0') {
            return Err(Error::invalid(
                "config.env",
                format!("{k:?} is not a valid variable name"),
            ));
        }
        if v.contains('\0') {
            return Err(Error::invalid(
                "config.env",
                format!("value of {k:?} contains a NUL byte"),
            ));
        }
    }
    if config.args.iter().any(|a| a.contains('\0')) {
        return Err(Error::invalid(
            "config.args",
            "an argument contains a NUL byte",
        ));
    }
    if config.prompt.contains('\0') {
        return Err(Error::invalid("config.prompt", "contains a NUL byte"));
    }
    // Both become argv values (--model, --resume): plain names only.
    crate::launch::check_model(&config.model)?;
    crate::launch::check_resume(&config.resume)?;
    nesting("config.content_blocks", &config.content_blocks)?;
    Ok(())
}

/// A Send needs something to send.
pub fn send_input(input: &str, content_blocks: &[pbjson_types::Struct]) -> Result<()> {
    if input.is_empty() && content_blocks.is_empty() {
        return Err(Error::invalid(
            "input",
            "must not be empty (give input or content_blocks)",
        ));
    }
    Ok(())
}

/// Structs a client gives (content blocks, an updated input) are stored in
/// the log: nested deeper than [`crate::nesting::MAX_JSON_DEPTH`] levels
/// they are refused, naming the field, rather than stored cut.
pub fn nesting<'a>(
    field: &str,
    structs: impl IntoIterator<Item = &'a pbjson_types::Struct>,
) -> Result<()> {
    let max = crate::nesting::MAX_JSON_DEPTH;
    for (i, s) in structs.into_iter().enumerate() {
        let depth = crate::nesting::struct_depth(s);
        if depth > max {
            return Err(Error::invalid(
                field.to_owned(),
                format!("[{i}] nests {depth} levels; at most {max} are accepted"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids() {
        assert!(session_id("demo").is_ok());
        assert!(session_id("a.b_c:d-E9").is_ok());
        assert!(session_id(&"x".repeat(128)).is_ok());
        for bad in ["", "a b", "a/b", "é", &"x".repeat(129)] {
            let err = session_id(bad).unwrap_err().to_string();
            assert!(err.contains("session_id"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn model_and_resume_are_named_apart() {
        let field = |c: pb::StartConfig| match start_config(&c).unwrap_err() {
            Error::InvalidField { field, .. } => field.into_owned(),
            other => panic!("{other:?}"),
        };
        let model = pb::StartConfig {
            model: "a\0b".into(),
            ..Default::default()
        };
        assert_eq!(field(model), "config.model");
        let resume = pb::StartConfig {
            resume: "--x".into(),
            ..Default::default()
        };
        assert_eq!(field(resume), "config.resume");
    }

    #[test]
    fn idempotency_keys() {
        assert_eq!(idempotency_key("").unwrap(), None);
        let uuid = "0b6f7c2e-5d1a-4f3e-9c8b-2a1d0e9f8c7b";
        assert_eq!(idempotency_key(uuid).unwrap(), Some(uuid));
        assert!(idempotency_key(&"k".repeat(128)).is_ok());
        for bad in ["a b", "a\nb", "é", "tab\t", &"k".repeat(129)] {
            let err = idempotency_key(bad).unwrap_err().to_string();
            assert!(err.contains("idempotency_key"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn titles_are_trimmed_one_line_and_bounded() {
        assert_eq!(title("  Fix the build \t").unwrap(), "Fix the build");
        assert_eq!(title("   ").unwrap(), "");
        assert!(title(&"é".repeat(MAX_TITLE_CHARS)).is_ok());
        for bad in [
            "a\nb",
            "a\u{7}b",
            "a\u{2028}b",
            &"t".repeat(MAX_TITLE_CHARS + 1),
        ] {
            let err = title(bad).unwrap_err().to_string();
            assert!(err.contains("title"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn send_needs_content() {
        assert!(send_input("", &[]).is_err());
        assert!(send_input("hi", &[]).is_ok());
    }
}
