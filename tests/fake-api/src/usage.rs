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
        let empty = Vec::new();
        let messages = body
            .get("messages")
            .and_then(Value::as_array)
            .unwrap_or(&empty);
        Self::estimate(&[body.get("system"), body.get("tools")], messages, |m| {
            m.get("role").and_then(Value::as_str) == Some("assistant")
        })
    }

    /// The estimate behind [`Usage::for_request`] for any request shape: `prefix` is what
    /// comes before the conversation (system prompt, tools), `items` the conversation, and
    /// `from_model` tells the model's own items from the rest. Everything up to the model's
    /// latest item counts as read from the cache, as prompt caching behaves.
    pub fn estimate(
        prefix: &[Option<&Value>],
        items: &[Value],
        from_model: impl Fn(&Value) -> bool,
    ) -> Self {
        let len = |v: Option<&Value>| v.map_or(0, |v| v.to_string().len() as u64 / 4);
        let prefix: u64 = prefix.iter().map(|v| len(*v)).sum();
        let sizes: Vec<u64> = items.iter().map(|m| len(Some(m))).collect();
        let split = items.iter().rposition(from_model).unwrap_or(0);
        let (read, written) = if split == 0 {
            (0, prefix + sizes.iter().sum::<u64>())
        } else {
            (
                prefix + sizes[..split].iter().sum::<u64>(),
                sizes[split..].iter().sum(),
            )
        };
        Self {
            input_tokens: 3 + items.len() as u64 % 7,
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

    /// The `usage` object of an OpenAI Responses API `response.completed`: `input_tokens`
    /// counts the cached part too, which `input_tokens_details.cached_tokens` names.
    pub fn responses_json(self) -> Value {
        json!({
            "input_tokens": self.total_input(),
            "input_tokens_details": {"cached_tokens": self.cache_read_input_tokens},
            "output_tokens": self.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.total_input() + self.output_tokens,
        })
    }
}
