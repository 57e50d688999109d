//! The directive language both scripted APIs share: the first word of the latest user
//! prompt (or its second after `please`) picks what the fake model answers. The Messages
//! and the Responses readers find that prompt in their own request shapes and parse it here.

/// The directive found in the anchor message, with its arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Directive {
    /// The keyword, e.g. `BASH`.
    pub keyword: String,
    /// Everything after the keyword, trimmed.
    pub args: String,
}

/// Every keyword the script understands. A directive is the first word of a prompt text, or
/// the second when the first is `please` (the convention of the recorded transcripts).
pub const KEYWORDS: &[&str] = &[
    "TEXT",
    "SLOW",
    "SLOWTHENBASH",
    "THINK",
    "BASH",
    "FAILBASH",
    "SLOWBASH",
    "BGBASH",
    "WRITE",
    "WRITEBASH",
    "ESCBASH",
    "AGENT",
    "SPAWNSUB",
    "BGAGENT",
    "CHILDTASK",
    "BIG",
    "TOOL",
    "DEEPTOOL",
    "ERROR",
    "ERR400",
    "ERR529",
    "HANG",
    "CRONME",
    "CRONFIRED",
    "WAKEME",
    "WOKEN",
];

/// The directive of one prompt text: its first word, or its second after `please`.
pub fn parse_directive(text: &str) -> Option<Directive> {
    let text = text.trim_start();
    let (first, rest) = split_word(text);
    let (kw, args) = if first.eq_ignore_ascii_case("please") {
        split_word(rest.trim_start())
    } else {
        (first, rest)
    };
    KEYWORDS.contains(&kw).then(|| Directive {
        keyword: kw.to_owned(),
        args: args.trim().to_owned(),
    })
}

fn split_word(s: &str) -> (&str, &str) {
    match s.find(char::is_whitespace) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directive_is_first_word_or_after_please() {
        assert_eq!(parse_directive("TEXT hi there").unwrap().args, "hi there");
        assert_eq!(parse_directive("please BASH").unwrap().keyword, "BASH");
        assert_eq!(parse_directive("SLOW please").unwrap().keyword, "SLOW");
        assert!(parse_directive("Respond with TEXT ONLY").is_none());
        assert!(parse_directive("text hi").is_none());
    }
}
