//! Accessors of an agent's JSON: a missing or mistyped field reads as its
//! empty value, so a newer or older agent's lines still map.

use serde_json::{Map, Value};

pub(crate) fn str_of(obj: &Map<String, Value>, key: &str) -> String {
    obj.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

pub(crate) fn str_at(v: &Value, key: &str) -> String {
    v.get(key)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

pub(crate) fn u64_at(v: &Value, key: &str) -> u64 {
    v.get(key).map(as_u64).unwrap_or(0)
}

/// Numbers may arrive as floats (`12.0`); negative or absent is 0.
pub(crate) fn as_u64(v: &Value) -> u64 {
    v.as_u64()
        .or_else(|| v.as_f64().filter(|f| *f >= 0.0).map(|f| f as u64))
        .unwrap_or(0)
}

pub(crate) fn f64_at(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// A string as itself, anything else as its JSON text.
pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => crate::nesting::json_text(other),
    }
}
