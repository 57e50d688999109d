//! Partial-message conformance vectors: every `tests/vectors/partial/*.json`
//! file is a Subscribe stream plus the partial blocks expected after every
//! message (format in `tests/vectors/README.md`). This feeds each stream to
//! [`Partial::apply`] and reports every mismatch with its file and step.

mod vector_files;

use std::path::{Path, PathBuf};

use agent_harness_protocol::partial::{Partial, PartialBlock};
use agent_harness_protocol::pb::SubscribeResponse;
use serde_json::{Map, Value, json};

/// Fewer files than this means the vectors went missing, not that all passed.
const MIN_VECTORS: usize = 8;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/partial")
}

/// A block as the vectors write it: `messageId`, `index`, `blockType` and
/// `text` always; `runId`, `toolName`, `toolUseId`, `parentToolUseId` when
/// not empty.
fn block_json(b: &PartialBlock) -> Value {
    let mut m = Map::new();
    if !b.run_id.is_empty() {
        m.insert("runId".to_owned(), json!(b.run_id));
    }
    m.insert("messageId".to_owned(), json!(b.message_id));
    m.insert("index".to_owned(), json!(b.index));
    m.insert("blockType".to_owned(), json!(b.block_type.as_str_name()));
    m.insert("text".to_owned(), json!(b.text));
    for (key, value) in [
        ("toolName", &b.tool_name),
        ("toolUseId", &b.tool_use_id),
        ("parentToolUseId", &b.parent_tool_use_id),
    ] {
        if !value.is_empty() {
            m.insert(key.to_owned(), json!(value));
        }
    }
    Value::Object(m)
}

fn check_file(path: &Path, failures: &mut Vec<String>) {
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    let steps = doc["steps"].as_array().expect("steps");
    let expect = doc["expect"].as_array().expect("expect");
    let afters: Vec<u64> = expect
        .iter()
        .map(|c| c["after"].as_u64().unwrap())
        .collect();
    assert_eq!(
        afters,
        (0..=steps.len() as u64).collect::<Vec<_>>(),
        "{file}: a checkpoint after every step, in order, from 0"
    );

    let mut partial = Partial::new();
    for (i, checkpoint) in expect.iter().enumerate() {
        if i > 0 {
            let raw = &steps[i - 1];
            let msg: SubscribeResponse = serde_json::from_value(raw.clone())
                .unwrap_or_else(|e| panic!("{file} step {i}: {e}"));
            // Canonical proto3 JSON, exactly what pbjson writes, so every
            // port parses the same thing.
            let again = serde_json::to_value(&msg).unwrap();
            if &again != raw {
                failures.push(format!(
                    "{file} step {i}: not canonical: {raw} re-serializes as {again}"
                ));
            }
            partial.apply(msg.kind.as_ref().expect("a kind"));
        }
        let got: Vec<Value> = partial.blocks().iter().map(block_json).collect();
        let want = checkpoint["blocks"].as_array().expect("blocks");
        if got != *want {
            failures.push(format!(
                "{file} @after={i}: expected {}, got {}",
                Value::Array(want.clone()),
                Value::Array(got)
            ));
        }
    }
}

#[test]
fn every_partial_vector_matches() {
    let n = vector_files::check_every_file(&vectors_dir(), MIN_VECTORS, check_file);
    println!("{n} partial vectors passed");
}
