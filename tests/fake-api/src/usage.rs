//! Token numbers that look like the real API's: estimated from the request size (about four
//! characters a token), with the prompt prefix reported as cache creation on the first call
//! of a conversation and as a cache read afterwards, the way prompt caching behaves.

use serde_json::{Value, json};

/// Token counts of one API call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Uncached input tokens (after the last cache breakpoint).
    pub input_tokens: u64,
    /// Input tokens written to the cache by this call.
    pub cache_creation_input_tokens: u64,
    /// Input tokens read from the cache.
    pub cache_read_input_tokens: u64,
    /// Output tokens of the reply.
    pub output_tokens: u64,
}

impl Usage {
    /// Estimates the input side of a `POST /v1/messages` body; `output_tokens` starts at 1,
    /// as in a real `message_start`. The CLI marks the system prompt and the newest message
    /// as cache breakpoints, so nearly all input is cached: the first call of a conversation
    /// writes it all, later calls read everything up to the previous assistant turn and write
    /// the rest.
    pub fn for_request(body: &Value) -> Self {
        let len = |v: Option<&Value>| v.map_or(0, |v| v.to_string().len() as u64 / 4);
        let prefix = len(body.get("system")) + len(body.get("tools"));
        let empty = Vec::new();
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        let sizes: Vec<u64> = messages.iter().map(|m| len(Some(m))).collect();
        let split = messages
            .iter()
            .rposition(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
            .unwrap_or(0);
        let (read, written) = if split == 0 {
            (0, prefix + sizes.iter().sum::<u64>())
        } else {
            (
                prefix + sizes[..split].iter().sum::<u64>(),
                sizes[split..].iter().sum(),
            )
        };
        Self {
            input_tokens: 3 + messages.len() as u64 % 7,
            cache_creation_input_tokens: written,
            cache_read_input_tokens: read,
            output_tokens: 1,
        }
    }

    /// All input tokens, for `count_tokens`.
    pub fn total_input(&self) -> u64 {
        self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens
    }

    /// The `usage` object of `message_start` and of a non-streaming message.
    pub fn to_json(self) -> Value {
        json!({
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.cache_creation_input_tokens,
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": self.output_tokens,
            "service_tier": "standard",
        })
    }

    /// The cumulative `usage` of `message_delta`.
    pub fn delta_json(self) -> Value {
        json!({
            "input_tokens": self.input_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
            "output_tokens": self.output_tokens,
        })
    }
}
