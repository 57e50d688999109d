//! The scripted Gemini API (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse` and
//! `:generateContent`), which the real `gemini` CLI talks to through
//! `GOOGLE_GEMINI_BASE_URL` (see [`crate::gemini`]). It answers from the same script as the
//! Messages and Responses APIs: [`input`] reads a request into the shared
//! [`Position`](crate::Position), [`crate::script`] picks the reply, and [`stream`] writes it
//! in this API's wire format.

pub mod input;
pub mod stream;

/// The name of Gemini CLI's shell tool; the script's `Bash` calls go out as this function
/// call when the request declares it (see [`stream::ShellTool`]).
pub const SHELL_TOOL: &str = "run_shell_command";

/// What a Gemini API path asks for: `/v1beta/models/<model>:<method>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The model named in the path.
    pub model: String,
    /// `streamGenerateContent`, `generateContent`, `countTokens`, ...
    pub method: String,
}

impl Call {
    /// Reads a request path (the query is ignored); `None` for any other path.
    pub fn of_path(path: &str) -> Option<Call> {
        let path = path.split('?').next()?;
        let rest = path
            .strip_prefix("/v1beta/models/")
            .or_else(|| path.strip_prefix("/v1/models/"))?;
        let (model, method) = rest.rsplit_once(':')?;
        Some(Call {
            model: model.to_owned(),
            method: method.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_names_model_and_method() {
        let c =
            Call::of_path("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse").unwrap();
        assert_eq!(
            (c.model.as_str(), c.method.as_str()),
            ("gemini-2.5-pro", "streamGenerateContent")
        );
        assert!(Call::of_path("/v1/responses").is_none());
    }
}
