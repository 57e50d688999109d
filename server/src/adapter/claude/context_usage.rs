//! `get_context_usage`, the CLI's control request for how full the context
//! window is: the request the harness writes, and the CLI's answer as the
//! RPC's response message.

use agent_harness_protocol::pb;

/// The control request asking the CLI for its context usage.
pub fn request() -> serde_json::Value {
    serde_json::json!({"subtype": "get_context_usage"})
}

/// The CLI's `get_context_usage` answer as the response message: the
/// figures it names, and the rest (without the display grid) as `raw`.
pub fn response(mut answer: serde_json::Value) -> pb::GetContextUsageResponse {
    let n = |v: &serde_json::Value, k: &str| {
        v.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0)
    };
    let categories = answer
        .get("categories")
        .and_then(serde_json::Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let text = |k: &str| {
                        c.get(k)
                            .and_then(serde_json::Value::as_str)
                            .unwrap_or_default()
                            .to_owned()
                    };
                    let name = text("name");
                    // CLI 2.1.197 names no kind: it lists the used
                    // categories and "Free space".
                    let kind = match (text("kind"), name.as_str()) {
                        (k, _) if !k.is_empty() => k,
                        (_, "Free space") => "free".into(),
                        (_, "Autocompact buffer") => "buffer".into(),
                        _ => "used".into(),
                    };
                    pb::ContextCategory {
                        tokens: n(c, "tokens") as u64,
                        name,
                        kind,
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let resp = pb::GetContextUsageResponse {
        total_tokens: n(&answer, "totalTokens") as u64,
        max_tokens: n(&answer, "maxTokens") as u64,
        raw_max_tokens: n(&answer, "rawMaxTokens") as u64,
        percentage: n(&answer, "percentage"),
        categories,
        raw: None,
    };
    if let Some(obj) = answer.as_object_mut() {
        obj.remove("gridRows");
    }
    pb::GetContextUsageResponse {
        raw: crate::nesting::to_struct(&answer),
        ..resp
    }
}
