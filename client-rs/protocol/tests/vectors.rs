//! Conformance vectors: every `tests/vectors/*.json` file is a log plus the
//! derived values expected after chosen prefixes of it (format in
//! `tests/vectors/README.md`). This runs the public derive functions on each
//! prefix and reports every mismatch with its file and checkpoint.

mod vector_files;

use std::path::{Path, PathBuf};

use agent_harness_protocol::derive::{self, classify};
use agent_harness_protocol::pb::Event;
use serde_json::{Map, Value};

/// Fewer files than this means the vectors went missing, not that all passed.
const MIN_VECTORS: usize = 40;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

/// JSON equality that treats numbers by value (a Struct's `60` comes back
/// from prost as the double `60.0`).
fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_eq(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

struct Checker<'a> {
    file: &'a str,
    after: u64,
    failures: &'a mut Vec<String>,
}

impl Checker<'_> {
    fn fail(&mut self, what: &str, expected: &Value, got: &Value) {
        self.failures.push(format!(
            "{} @after={}: {what}: expected {expected}, got {got}",
            self.file, self.after
        ));
    }

    fn eq(&mut self, what: &str, expected: &Value, got: Value) {
        if !json_eq(expected, &got) {
            self.fail(what, expected, &got);
        }
    }

    /// Compares only the keys the vector gives (optional detail fields).
    fn subset(&mut self, what: &str, expected: &Value, got: &Map<String, Value>) {
        let Some(exp) = expected.as_object() else {
            self.fail(what, expected, &Value::Object(got.clone()));
            return;
        };
        for (k, v) in exp {
            match got.get(k) {
                Some(g) if k == "costUsd" => {
                    let (a, b) = (v.as_f64().unwrap_or(f64::NAN), g.as_f64().unwrap_or(0.0));
                    if (a - b).abs() > 1e-9 {
                        self.fail(&format!("{what}.{k}"), v, g);
                    }
                }
                Some(g) => {
                    if !json_eq(v, g) {
                        self.fail(&format!("{what}.{k}"), v, g);
                    }
                }
                None => self.fail(&format!("{what}.{k} (unknown key)"), v, &Value::Null),
            }
        }
    }

    fn list(&mut self, what: &str, expected: &Value, got: Vec<Map<String, Value>>) {
        let Some(exp) = expected.as_array() else {
            self.fail(what, expected, &Value::Null);
            return;
        };
        if exp.len() != got.len() {
            let got = Value::Array(got.into_iter().map(Value::Object).collect());
            self.fail(&format!("{what} (length)"), expected, &got);
            return;
        }
        for (i, (e, g)) in exp.iter().zip(&got).enumerate() {
            self.subset(&format!("{what}[{i}]"), e, g);
        }
    }
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn opt_str(s: Option<&str>) -> Value {
    s.map_or(Value::Null, |s| Value::String(s.to_owned()))
}

/// A time as the vectors give it: Unix milliseconds, null for none.
fn unix_ms(t: Option<pbjson_types::Timestamp>) -> Value {
    t.map_or(Value::Null, |t| {
        (t.seconds * 1000 + i64::from(t.nanos) / 1_000_000).into()
    })
}

fn check_checkpoint(c: &mut Checker<'_>, exp: &Map<String, Value>, events: &[Event]) {
    for key in ["status", "processAlive"] {
        if !exp.contains_key(key) {
            c.fail(
                &format!("{key} (required key missing)"),
                &Value::Null,
                &Value::Null,
            );
        }
    }
    for (key, want) in exp {
        match key.as_str() {
            "after" => {}
            "status" => c.eq(key, want, derive::status(events).as_str().into()),
            "processAlive" => c.eq(key, want, derive::process_alive(events).into()),
            "usage" => {
                let u = derive::usage(events);
                let got = obj(serde_json::json!({
                    "inputTokens": u.input_tokens,
                    "outputTokens": u.output_tokens,
                    "cacheCreationInputTokens": u.cache_creation_input_tokens,
                    "cacheReadInputTokens": u.cache_read_input_tokens,
                    "costUsd": u.cost_usd,
                    "contextTokens": u.context_tokens,
                    "contextWindow": u.context_window,
                    "turns": u.turns,
                }));
                c.subset(key, want, &got);
            }
            "activity" => {
                let a = derive::activity(events);
                let got = obj(serde_json::json!({
                    "kind": a.kind.as_str(),
                    "toolName": a.tool_name,
                    "label": a.label,
                }));
                c.subset(key, want, &got);
            }
            "backgroundTasks" => {
                let got = derive::background_tasks(events)
                    .into_iter()
                    .map(|t| {
                        obj(serde_json::json!({
                            "taskId": t.task_id,
                            "taskType": t.task_type,
                            "description": t.description,
                            "status": t.status.as_str(),
                            "toolUseId": t.tool_use_id,
                            "summary": t.summary,
                            "outputFile": t.output_file,
                            "subagentType": t.subagent_type,
                            "error": t.error,
                            "lastToolName": t.last_tool_name,
                            "totalTokens": t.total_tokens,
                            "toolUses": t.tool_uses,
                        }))
                    })
                    .collect();
                c.list(key, want, got);
            }
            "hasRunningBackgroundTasks" => c.eq(
                key,
                want,
                derive::has_running_background_tasks(events).into(),
            ),
            "pendingPermissions" => {
                let ids: Vec<Value> = derive::pending_permissions(events)
                    .into_iter()
                    .map(|p| p.request_id.into())
                    .collect();
                c.eq(key, want, Value::Array(ids));
            }
            "scheduledWakeup" => match (want, derive::scheduled_wakeup(events)) {
                (Value::Null, None) => {}
                (w, Some(s)) if w.is_object() => {
                    let got = obj(serde_json::json!({
                        "kind": s.kind.as_str(),
                        "toolUseId": s.tool_use_id,
                        "toolName": s.tool_name,
                        "scheduledForMs": s.scheduled_for_ms,
                        "delaySeconds": s.delay_seconds,
                        "cronId": s.cron_id,
                        "cron": s.cron,
                        "humanSchedule": s.human_schedule,
                        "prompt": s.prompt,
                        "reason": s.reason,
                        "recurring": s.recurring,
                        "durable": s.durable,
                    }));
                    c.subset(key, w, &got);
                }
                (w, got) => c.fail(key, w, &Value::String(format!("{got:?}"))),
            },
            "pendingMessages" => {
                let texts: Vec<Value> = classify::pending_messages(events)
                    .into_iter()
                    .map(|m| m.text.into())
                    .collect();
                c.eq(key, want, Value::Array(texts));
            }
            "planOutcomes" => {
                let got = derive::plan_outcomes(events)
                    .into_iter()
                    .map(|p| {
                        obj(serde_json::json!({
                            "toolUseId": p.tool_use_id,
                            "plan": p.plan,
                            "decision": p.decision.as_str(),
                        }))
                    })
                    .collect();
                c.list(key, want, got);
            }
            "settings" => {
                let s = derive::settings(events);
                let got = serde_json::json!({
                    "model": opt_str(s.model.as_deref()),
                    "permissionMode": opt_str(s.permission_mode.as_deref()),
                    "maxThinkingTokens": s.max_thinking_tokens,
                });
                c.eq(key, want, got);
            }
            "resumeId" => c.eq(key, want, opt_str(derive::resume_id(events).as_deref())),
            "contextLost" => c.eq(
                key,
                want,
                derive::context_lost(events).map_or(
                    Value::Null,
                    |l| serde_json::json!({"resumeId": l.resume_id, "seq": l.seq}),
                ),
            ),
            "runId" => c.eq(
                key,
                want,
                opt_str(derive::derive_all(events).run_id.as_deref()),
            ),
            "headSeq" => c.eq(key, want, derive::derive_all(events).head_seq.into()),
            "turnInProgress" => c.eq(
                key,
                want,
                derive::derive_all(events).turn_in_progress.into(),
            ),
            "turns" => {
                let got: Vec<Value> = classify::group_events(events)
                    .iter()
                    .map(|t| {
                        serde_json::json!([
                            t.start.map(|e| e.seq),
                            t.end.map(|e| e.seq),
                            t.events.len()
                        ])
                    })
                    .collect();
                c.eq(key, want, Value::Array(got));
            }
            "toolCalls" => {
                let got = classify::group_events(events)
                    .iter()
                    .flat_map(|t| &t.tool_calls)
                    .map(|call| {
                        obj(serde_json::json!({
                            "toolUseId": call.tool_use_id,
                            "toolName": call.tool_name,
                            "kind": call.kind.as_str(),
                            "isError": call.result.map(|r| r.is_error),
                        }))
                    })
                    .collect();
                c.list(key, want, got);
            }
            "subagentChildren" => {
                let got: Map<String, Value> = classify::subagent_children(events)
                    .into_iter()
                    .map(|(parent, evs)| {
                        let seqs: Vec<Value> = evs.iter().map(|e| e.seq.into()).collect();
                        (parent, Value::Array(seqs))
                    })
                    .collect();
                c.eq(key, want, Value::Object(got));
            }
            "title" => c.eq(key, want, derive::title(events).into()),
            "cwd" => c.eq(key, want, derive::derive_all(events).cwd.into()),
            "createdAt" => c.eq(key, want, unix_ms(derive::derive_all(events).created_at)),
            "updatedAt" => c.eq(key, want, unix_ms(derive::derive_all(events).updated_at)),
            other => c.fail(&format!("unknown expect key {other}"), want, &Value::Null),
        }
    }
}

fn check_file(path: &Path, failures: &mut Vec<String>) {
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    let doc: Value = match std::fs::read_to_string(path)
        .map_err(|e| e.to_string())
        .and_then(|s| serde_json::from_str(&s).map_err(|e| e.to_string()))
    {
        Ok(v) => v,
        Err(e) => return failures.push(format!("{file}: unreadable: {e}")),
    };
    for key in ["name", "description"] {
        if !doc[key].is_string() {
            failures.push(format!("{file}: missing string `{key}`"));
        }
    }
    let raw = doc["events"].as_array().cloned().unwrap_or_default();
    let mut events = Vec::with_capacity(raw.len());
    for (i, r) in raw.iter().enumerate() {
        match serde_json::from_value::<Event>(r.clone()) {
            Ok(e) => {
                // The vectors must be canonical proto3 JSON, exactly what
                // pbjson writes, so every port can read them with its own
                // protobuf JSON codec.
                let back = serde_json::to_value(&e).expect("serialize event");
                if !json_eq(&back, r) {
                    failures.push(format!(
                        "{file}: event {i} is not canonical proto3 JSON:\n  file: {r}\n  pbjson: {back}"
                    ));
                }
                if e.seq != i as u64 + 1 {
                    failures.push(format!("{file}: event {i} has seq {}", e.seq));
                }
                events.push(e);
            }
            Err(err) => failures.push(format!("{file}: event {i} does not parse: {err}")),
        }
    }
    let expects = doc["expect"].as_array().cloned().unwrap_or_default();
    if expects.is_empty() {
        failures.push(format!("{file}: no checkpoints"));
    }
    for exp in expects {
        let exp = obj(exp);
        let Some(after) = exp.get("after").and_then(Value::as_u64) else {
            failures.push(format!("{file}: checkpoint without `after`"));
            continue;
        };
        if after as usize > events.len() {
            failures.push(format!("{file}: checkpoint after={after} past the log"));
            continue;
        }
        let mut c = Checker {
            file: &file,
            after,
            failures,
        };
        check_checkpoint(&mut c, &exp, &events[..after as usize]);
    }
}

#[test]
fn every_vector_matches() {
    let n = vector_files::check_every_file(&vectors_dir(), MIN_VECTORS, check_file);
    println!("{n} vectors passed");
}
