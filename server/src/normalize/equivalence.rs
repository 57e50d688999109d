//! The normalizer's whole output pinned line by line: every recorded claude
//! line (`cassettes/*.cassette.jsonl`, `cassettes/transcripts/`), hostile
//! lines, and each hot line with its fields swapped for values of the
//! wrong type, fed through a [`Normalizer`]; for each line the events (with
//! their `cli_line`), the live-typing changes, the transcript entries and
//! the control replies it gave. `equivalence.expected.jsonl` was recorded
//! with the `Value`-tree normalizer this one replaced, so the test fails
//! when the mapping changes in any way. Rewrite it (only for an intended
//! change, and read the diff) with `NORMALIZE_EQUIVALENCE_WRITE=1`.

use agent_harness_protocol::pb;
use serde_json::{Value, json};

use super::Normalizer;
use crate::process::StdoutLine;

const EXPECTED: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/normalize/equivalence.expected.jsonl"
);

/// A small line limit, so the hostile lines can pass it.
const MAX_LINE: usize = 64 * 1024;

enum Step {
    Input,
    Out(StdoutLine),
}

/// One run's lines, fed to one normalizer.
struct Script {
    name: String,
    steps: Vec<Step>,
}

fn out(text: impl Into<String>) -> Step {
    Step::Out(StdoutLine::Line(text.into()))
}

/// The claude recordings: `in` user lines are inputs sent, `out` lines read.
fn recordings() -> Vec<Script> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../cassettes");
    let mut files = Vec::new();
    for (dir, suffix) in [
        (root.to_owned(), ".cassette.jsonl"),
        (format!("{root}/transcripts"), ".transcript.jsonl"),
    ] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_str().unwrap().to_owned();
            if name.ends_with(suffix) {
                files.push(path);
            }
        }
    }
    files.sort();
    let mut scripts = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let mut recs = text
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap());
        let first = recs.next().unwrap();
        if first["type"] == "header" && first["agent"].as_str().is_some_and(|a| a != "claude") {
            continue;
        }
        let mut steps = Vec::new();
        for rec in std::iter::once(first).chain(recs) {
            let Some(line) = rec["line"].as_str() else {
                continue;
            };
            match rec["dir"].as_str() {
                Some("out") => steps.push(out(line)),
                Some("in")
                    if serde_json::from_str::<Value>(line).is_ok_and(|v| v["type"] == "user") =>
                {
                    steps.push(Step::Input);
                }
                _ => {}
            }
        }
        let name = path
            .strip_prefix(root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        scripts.push(Script { name, steps });
    }
    scripts
}

/// `{"k": … {"end": true} …}`, `depth` objects.
fn nested(depth: usize) -> String {
    format!(
        "{}{{\"end\":true, \"n\" : 1.50}}{}",
        "{\"k\": ".repeat(depth - 1),
        "}".repeat(depth - 1)
    )
}

/// Lines written to break a reader: wrong types, odd numbers, deep JSON,
/// bad escapes, duplicate keys, unknown blocks.
fn hostile() -> Vec<Script> {
    let init = r#"{"type":"system","subtype":"init","session_id":"s","model":"m","tools":["Bash"],"cwd":"/w","permissionMode":"default","mcp_servers":[]}"#;
    let mut lines: Vec<String> = vec![
        init.into(),
        // Not lines at all.
        "".into(),
        "   ".into(),
        "not json".into(),
        "[1,2]".into(),
        "\"assistant\"".into(),
        "{}".into(),
        r#"{"type":7}"#.into(),
        r#"{"type":null,"message":{}}"#.into(),
        r#"{"type":"assistant""#.into(),
        r#"{"type":"assistant"} x"#.into(),
        r#"{"type":"assistant",}"#.into(),
        "\u{feff}{\"type\":\"assistant\"}".into(),
        " \t{\"type\" : \"assistant\" , \"message\" : {\"id\" : \"m\"} } ".into(),
        // Bare and empty shapes.
        r#"{"type":"assistant"}"#.into(),
        r#"{"type":"user"}"#.into(),
        r#"{"type":"result"}"#.into(),
        r#"{"type":"stream_event"}"#.into(),
        r#"{"type":"assistant","message":null}"#.into(),
        r#"{"type":"assistant","message":"text"}"#.into(),
        r#"{"type":"assistant","message":[{"id":"x"}]}"#.into(),
        r#"{"type":"assistant","message":{"content":"just text"}}"#.into(),
        r#"{"type":"assistant","message":{"content":{"type":"text","text":"obj"}}}"#.into(),
        r#"{"type":"assistant","message":{"content":[null,1,"s",[],{}]}}"#.into(),
        r#"{"type":"user","message":{"content":[null,1,"s",[],{},{"type":"text"},{"type":"tool_result"}]}}"#.into(),
        r#"{"type":"user","message":{"content":5}}"#.into(),
        // Wrong types in every known field.
        r#"{"type":"assistant","message":{"id":5,"model":["m"],"stop_reason":{},"usage":"lots","content":[{"type":"text","text":9},{"type":"thinking","thinking":null},{"type":"tool_use","id":1,"name":true,"input":"ls"},{"type":"tool_use","id":"t","name":"N","input":[1,2]}]},"parent_tool_use_id":3,"error":{"e":1}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","usage":null,"content":[{"type":["text"],"text":"x"},{"type":"text","text":"ok","extra":{"deep":[1,{"a":null}]}}]}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","usage":{"input_tokens":"5","output_tokens":-3,"cache_creation_input_tokens":2.7,"cache_read_input_tokens":1e300}}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","usage":{"input_tokens":18446744073709551615,"output_tokens":18446744073709551616,"cache_creation_input_tokens":-0.0,"cache_read_input_tokens":123456789012345678901234567890}}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","usage":{"input_tokens":-9223372036854775808,"output_tokens":1e-400,"cache_creation_input_tokens":true}}}"#.into(),
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":4,"content":7,"is_error":"yes"},{"type":"tool_result","tool_use_id":"t","content":[{"text":"a"},{"text":5},"s",{"type":"image"},{"text":"b"}],"is_error":1},{"type":"text","text":["t"]}]},"parent_tool_use_id":[],"tool_use_result":null}"#.into(),
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":null,"is_error":true}]},"tool_use_result":"plain"}"#.into(),
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"out"}]},"tool_use_result":{"stdout":"x","n":[1,2.5,null,{"z":false}]}}"#.into(),
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"out"}]},"tool_use_result":[1,"two"]}"#.into(),
        r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":"out"}]},"tool_use_result":12}"#.into(),
        r#"{"type":"result","subtype":5,"is_error":"true","duration_ms":-5,"duration_api_ms":2.5,"num_turns":4294967297,"result":{"r":1},"total_cost_usd":"0.5","usage":[],"modelUsage":[],"errors":"e","permission_denials":{},"api_error_status":"529","origin":5,"terminal_reason":null}"#.into(),
        r#"{"type":"result","subtype":"success","total_cost_usd":0.25,"modelUsage":{"m":{"inputTokens":10,"outputTokens":"x","costUSD":0.125,"contextWindow":200000.0,"maxOutputTokens":null},"n":null,"o":5},"errors":["a",1,null,{"b":[2]},["c"]],"permission_denials":[null,{"tool_name":"Bash","tool_use_id":"t","tool_input":{"command":"rm"}},{"tool_input":"x"}],"origin":{"kind":"cron","x":1}}"#.into(),
        r#"{"type":"result","total_cost_usd":0.125,"modelUsage":{"m":{"inputTokens":4}},"origin":"user","usage":{"input_tokens":1}}"#.into(),
        r#"{"type":"result","subtype":"error_during_execution","is_error":true,"errors":["No conversation found with session ID: abc "]}"#.into(),
        // Live typing, odd.
        r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"p"}},"parent_tool_use_id":null}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"He\u0000l\"lo\ud83d\ude00"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0.0,"delta":{"type":"text_delta","text":"float index"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":-1,"delta":{"type":"text_delta","text":"neg"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":4294967296,"delta":{"type":"text_delta","text":"big"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":"0","delta":{"type":"text_delta","text":"str"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":null}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":7,"name":"Bash"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_start","index":2,"content_block":{"type":"server_tool_use","id":"s","name":"web"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_start","index":3,"content_block":{"type":"image"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"t"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"s"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"q"}},"parent_tool_use_id":"toolu_sub"}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_start","index":0,"content_block":{"type":"thinking"}},"parent_tool_use_id":"toolu_sub"}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"sub"}},"parent_tool_use_id":"toolu_sub"}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"main"}},"parent_tool_use_id":5}"#.into(),
        r#"{"type":"assistant","message":{"id":"q","content":[{"type":"thinking","thinking":"sub"}]},"parent_tool_use_id":"toolu_sub"}"#.into(),
        r#"{"type":"assistant","message":{"id":"p","content":[{"type":"text","text":"Hello"}]}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"message_stop"},"parent_tool_use_id":"toolu_sub"}"#.into(),
        r#"{"type":"stream_event","event":"message_stop"}"#.into(),
        r#"{"type":"stream_event","event":{"type":"message_stop"}}"#.into(),
        // Unknown blocks are kept whole.
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"redacted_thinking","data":"xyz"},{"type":"web_search_tool_result","tool_use_id":"s","content":[{"url":"u","n":1.0}]},{"type":"image","source":{"type":"base64","data":"AAAA"}},{"text":"no type"},{"type":"server_tool_use","id":"s","name":"web_search","input":{"query":"q"}}]}}"#.into(),
        // Invalid and valid escapes, and control characters.
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"lone \ud800"}]}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"ok"}]},"uuid":"lone \udc00 in a field nobody reads"}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"ok"}],"unread":{"deep":["\ud83d\u0041"]}}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"N","input":{"q":"\udfff"}}]}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"pair \ud83d\ude00 \u00e9 \/ \b\f\n\r\t"}]}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":"bad \x"}]}}"#.into(),
        "{\"type\":\"assistant\",\"message\":{\"id\":\"m\",\"content\":[{\"type\":\"text\",\"text\":\"raw\u{1}control\"}]}}".into(),
        "{\"type\":\"assistant\",\"uuid\":\"raw\ttab in an unread field\"}".into(),
        r#"{"typ\u0065":"assistant","message":{"id":"escaped key","content":[{"type":"text","t\u0065xt":"escaped"}]}}"#.into(),
        // Numbers out of range, read and unread.
        r#"{"type":"assistant","message":{"id":"m","usage":{"input_tokens":1e400}}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m"},"unread":-1e400}"#.into(),
        format!(r#"{{"type":"assistant","message":{{"id":"m"}},"unread":1{}}}"#, "0".repeat(400)),
        r#"{"type":"assistant","message":{"id":"m"},"unread":[01]}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","content":[{"type":"tool_use","id":"t","name":"N","input":{"big":1e308,"tiny":5e-324,"neg":-0.0,"int":-12,"huge":123456789012345678901234567890}}]}}"#.into(),
        // Duplicate keys: the last one counts.
        r#"{"type":"user","type":"assistant","message":{"id":"a","id":"b","content":[{"type":"text","text":"1","text":"2"}],"content":[{"type":"thinking","thinking":"last"}]}}"#.into(),
        r#"{"type":"assistant","message":{"id":"a","content":[{"type":"text","text":"kept"}]},"message":null}"#.into(),
        r#"{"message":{"id":"first","content":[{"type":"text","text":"x"}]},"type":"assistant","message":{"id":"second"}}"#.into(),
        r#"{"type":"assistant","message":{"id":"a","usage":{"input_tokens":1},"usage":"x"}}"#.into(),
        r#"{"type":"assistant","message":{"id":"a","content":[{"type":"tool_use","id":"t","input":{"a":1},"input":{"b":2},"name":"N"}]}}"#.into(),
        r#"{"type":"user","message":{"content":"a","content":[{"type":"tool_result","tool_use_id":"x","content":"y","is_error":true,"is_error":false}]},"tool_use_result":1,"tool_use_result":{"k":"v"}}"#.into(),
        r#"{"type":"result","result":"a","result":"b","total_cost_usd":1,"total_cost_usd":2,"modelUsage":{"m":{"inputTokens":1},"m":{"inputTokens":3}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"d1"},"message":{"id":"d2"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_start","index":0,"index":1,"content_block":{"type":"text"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"dup","text":"last"}}}"#.into(),
        r#"{"type":"stream_event","event":{"type":"message_stop"}}"#.into(),
        r#"{"type":"assistant","type":"stream_event","event":{"type":"message_start","message":{"id":"z"}}}"#.into(),
        r#"{"type":"stream_event","type":"assistant","message":{"id":"z","content":[{"type":"text","text":"t"}]}}"#.into(),
        // Unknown line types, and known lines with unknown fields.
        r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}"#.into(),
        r#"{"type":"assistant","message":{"id":"m","content":[],"container":null,"context_management":{"edits":[]}},"extra":[{"a":[{"b":{}}]}],"session_id":"s","uuid":"u"}"#.into(),
    ];
    // Deep JSON where a tool's input, an unknown block, a tool_use_result
    // and an unread field are read, around both nesting limits.
    for depth in [
        19, 20, 21, 40, 59, 60, 61, 62, 63, 64, 65, 66, 100, 123, 124, 125, 126, 127, 128, 129,
        200, 3000,
    ] {
        let n = nested(depth);
        lines.push(format!(
            r#"{{"type":"assistant","message":{{"id":"deep{depth}","content":[{{"type":"tool_use","id":"t","name":"N","input":{n}}},{{"type":"mystery","body":{n}}}]}}}}"#
        ));
        lines.push(format!(
            r#"{{"type":"user","message":{{"content":[{{"type":"tool_result","tool_use_id":"t","content":"ok"}}]}},"tool_use_result":{n}}}"#
        ));
        lines.push(format!(
            r#"{{"type":"assistant","message":{{"id":"unread{depth}","content":[{{"type":"text","text":"t"}}]}},"unread":{n}}}"#
        ));
        lines.push(format!(
            r#"{{"type":"result","permission_denials":[{{"tool_name":"B","tool_input":{n}}}],"errors":[{n}]}}"#
        ));
        lines.push(format!(
            r#"{{"type":"stream_event","event":{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"d{depth}"}},"unread":{n}}}}}"#
        ));
        // Deep through arrays, with spacing kept in the cut text.
        let arr = format!("{}\"x\" {}", "[ ".repeat(depth), " ]".repeat(depth));
        lines.push(format!(
            r#"{{"type":"assistant","message":{{"id":"arr{depth}","content":[{{"type":"tool_use","id":"t","name":"N","input":{{"a":{arr}}}}}]}}}}"#
        ));
    }
    let mut steps: Vec<Step> = lines.into_iter().map(out).collect();
    steps.push(Step::Out(StdoutLine::TooLong {
        head: r#"{"type":"assistant","message":"#.into(),
        len: 10 << 20,
    }));
    steps.push(out(format!(
        r#"{{"type":"assistant","message":{{"id":"long","content":[{{"type":"text","text":"{}"}}]}}}}"#,
        "é".repeat(MAX_LINE / 2)
    )));
    vec![Script {
        name: "hostile".into(),
        steps,
    }]
}

/// Values of every kind, put in place of a field.
fn odd_values() -> Vec<Value> {
    vec![
        Value::Null,
        json!(7),
        json!(-3),
        json!(2.5),
        json!(true),
        json!("s"),
        json!([]),
        json!([{"text": "t"}]),
        json!({}),
    ]
}

/// Each hot line of the recordings (one per shape) with each of its fields
/// (to four levels, the first element of arrays) replaced by each odd value
/// or removed.
fn mutations(recorded: &[Script]) -> Vec<Script> {
    let mut shapes = std::collections::BTreeMap::new();
    for s in recorded {
        for step in &s.steps {
            let Step::Out(StdoutLine::Line(text)) = step else {
                continue;
            };
            let Ok(v) = serde_json::from_str::<Value>(text) else {
                continue;
            };
            let kind = v["type"].as_str().unwrap_or_default().to_owned();
            if !matches!(
                kind.as_str(),
                "assistant" | "user" | "result" | "stream_event"
            ) {
                continue;
            }
            shapes.entry(shape(&v)).or_insert(v);
        }
    }
    let mut scripts = Vec::new();
    for (name, line) in shapes {
        let mut steps = Vec::new();
        let mut paths = Vec::new();
        leaf_paths(&line, &mut Vec::new(), &mut paths, 0);
        // The stream a delta belongs to, so its changes show.
        steps.push(out(
            r#"{"type":"stream_event","event":{"type":"message_start","message":{"id":"msg_01"}}}"#,
        ));
        for path in paths {
            for odd in odd_values().into_iter().map(Some).chain([None]) {
                let mut v = line.clone();
                if set(&mut v, &path, odd) {
                    steps.push(out(v.to_string()));
                }
            }
        }
        scripts.push(Script {
            name: format!("mutations of {name}"),
            steps,
        });
    }
    scripts
}

/// The kind of a line and the types of its blocks or event.
fn shape(v: &Value) -> String {
    let blocks = v["message"]["content"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|b| b["type"].as_str().unwrap_or("?").to_owned())
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_else(|| "-".into());
    let event = v["event"]["type"].as_str().unwrap_or("-");
    let delta = v["event"]["delta"]["type"].as_str().unwrap_or("-");
    format!(
        "{} {} {} {} sub={}",
        v["type"],
        blocks,
        event,
        delta,
        v["parent_tool_use_id"].is_string()
    )
}

#[derive(Clone)]
enum Key {
    Field(String),
    Index(usize),
}

fn leaf_paths(v: &Value, at: &mut Vec<Key>, out: &mut Vec<Vec<Key>>, depth: usize) {
    if depth >= 4 {
        return;
    }
    match v {
        Value::Object(map) => {
            for (k, item) in map {
                at.push(Key::Field(k.clone()));
                out.push(at.clone());
                leaf_paths(item, at, out, depth + 1);
                at.pop();
            }
        }
        Value::Array(items) if !items.is_empty() => {
            at.push(Key::Index(0));
            out.push(at.clone());
            leaf_paths(&items[0], at, out, depth + 1);
            at.pop();
        }
        _ => {}
    }
}

/// Puts `to` at `path` (removes the field when `None`); false when the path
/// leads nowhere.
fn set(v: &mut Value, path: &[Key], to: Option<Value>) -> bool {
    let (last, parents) = path.split_last().unwrap();
    let mut at = v;
    for k in parents {
        at = match k {
            Key::Field(f) => &mut at[f.as_str()],
            Key::Index(i) => &mut at[*i],
        };
    }
    match (last, at, to) {
        (Key::Field(f), Value::Object(map), Some(to)) => {
            map.insert(f.clone(), to);
        }
        (Key::Field(f), Value::Object(map), None) => {
            map.remove(f);
        }
        (Key::Index(i), Value::Array(items), Some(to)) => items[*i] = to,
        (Key::Index(i), Value::Array(items), None) => {
            items.remove(*i);
        }
        _ => return false,
    }
    true
}

/// What one line gave, as JSON.
/// `owned`: the line is handed over as the run task hands it
/// ([`Normalizer::line_owned`]).
fn output(n: &mut Normalizer, line: &StdoutLine, owned: bool) -> Value {
    let text = match line {
        StdoutLine::Line(t) => t.as_str(),
        StdoutLine::TooLong { head, .. } => head.as_str(),
    };
    let events = if owned {
        n.line_owned(line.clone())
    } else {
        n.line(line)
    };
    let events: Vec<Value> = events
        .into_iter()
        .map(|(payload, cli_line)| {
            let event = pb::Event {
                payload: Some(payload),
                ..Default::default()
            };
            let mut e = serde_json::to_value(&event).unwrap();
            if cli_line != text {
                e["cli_line"] = json!(cli_line);
            }
            e
        })
        .collect();
    let partial: Vec<String> = n.take_partial().iter().map(|c| format!("{c:?}")).collect();
    let transcript = n.take_transcript();
    let replies: Vec<String> = n
        .take_control_replies()
        .iter()
        .map(|r| format!("{r:?}"))
        .collect();
    let mut o = serde_json::Map::new();
    if !events.is_empty() {
        o.insert("events".into(), json!(events));
    }
    if !partial.is_empty() {
        o.insert("partial".into(), json!(partial));
    }
    if !transcript.is_empty() {
        o.insert("transcript".into(), json!(transcript));
    }
    if !replies.is_empty() {
        o.insert("replies".into(), json!(replies));
    }
    Value::Object(o)
}

fn run(script: &Script, owned: bool) -> Value {
    let mut n = Normalizer::new(MAX_LINE);
    n.set_pid(Some(4242));
    let outputs: Vec<Value> = script
        .steps
        .iter()
        .map(|step| match step {
            Step::Input => {
                n.input_sent();
                Value::Null
            }
            Step::Out(line) => output(&mut n, line, owned),
        })
        .collect();
    json!({"script": script.name, "outputs": outputs})
}

fn scripts() -> Vec<Script> {
    let recorded = recordings();
    let mut all = mutations(&recorded);
    all.extend(hostile());
    let mut out = recorded;
    out.extend(all);
    out
}

#[test]
fn every_line_maps_as_recorded() {
    let scripts = scripts();
    assert!(scripts.len() > 40, "the recordings are found");
    let got: Vec<Value> = scripts.iter().map(|s| run(s, false)).collect();
    for (script, got) in scripts.iter().zip(&got) {
        assert_eq!(
            &run(script, true),
            got,
            "{}: a line handed over maps as a line lent",
            script.name
        );
    }
    if std::env::var_os("NORMALIZE_EQUIVALENCE_WRITE").is_some() {
        let text: String = got.iter().map(|v| format!("{v}\n")).collect();
        std::fs::write(EXPECTED, text).unwrap();
        return;
    }
    let stored = std::fs::read_to_string(EXPECTED).unwrap();
    let stored: Vec<Value> = stored
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(stored.len(), got.len(), "scripts");
    for ((want, got), script) in stored.iter().zip(&got).zip(&scripts) {
        assert_eq!(want["script"], got["script"]);
        let (want, got) = (
            want["outputs"].as_array().unwrap(),
            got["outputs"].as_array().unwrap(),
        );
        assert_eq!(want.len(), got.len(), "{}", script.name);
        for (i, (w, g)) in want.iter().zip(got).enumerate() {
            if w != g {
                let line = match &script.steps[i] {
                    Step::Out(StdoutLine::Line(t)) => t.clone(),
                    Step::Out(StdoutLine::TooLong { head, .. }) => head.clone(),
                    Step::Input => "(input sent)".into(),
                };
                panic!(
                    "{} line {i} maps differently:\n{line}\nwant {w}\ngot  {g}",
                    script.name
                );
            }
        }
    }
}
