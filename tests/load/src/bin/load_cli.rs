//! The stand-in CLI the load tool gives the server as `--claude-bin`.
//!
//! It speaks the interactive stream-json protocol the way the real CLI
//! 2.1.197 does, replaying lines recorded from it
//! (`cassettes/plain_turn.cassette.jsonl`): one `system/init` when the
//! first message arrives, then per user message a run of `assistant` text
//! lines and one `result`. The message says how many and how fast:
//!
//! ```text
//! LOAD n=<lines> rate=<lines per second, 0 = as fast as possible> size=<bytes per line>
//! ```
//!
//! Each assistant line's text starts `load <i> t=<unix nanos>`: the time
//! the line was written, so a subscriber can tell how late it arrived. A
//! `control_request` is answered with success; an `interrupt` also ends
//! the lines being written, as the real CLI ends its turn. Anything else
//! on stdin is ignored; end of stdin ends the process.

use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

const CASSETTE: &str = include_str!("../../../../cassettes/plain_turn.cassette.jsonl");

/// What one `LOAD` message asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Load {
    n: u64,
    rate: f64,
    size: usize,
}

fn parse_load(text: &str) -> Load {
    let mut load = Load {
        n: 1,
        rate: 0.0,
        size: 600,
    };
    for word in text.split_whitespace() {
        let Some((k, v)) = word.split_once('=') else {
            continue;
        };
        match k {
            "n" => load.n = v.parse().unwrap_or(load.n),
            "rate" => load.rate = v.parse().unwrap_or(load.rate),
            "size" => load.size = v.parse().unwrap_or(load.size),
            _ => {}
        }
    }
    load
}

/// The recorded `system/init`, `assistant` and `result` lines.
fn recorded() -> (Value, Value, Value) {
    let mut init = None;
    let mut assistant = None;
    let mut result = None;
    for record in CASSETTE.lines() {
        let record: Value = serde_json::from_str(record).expect("cassette record");
        if record["dir"] != "out" {
            continue;
        }
        let line: Value =
            serde_json::from_str(record["line"].as_str().unwrap_or("")).expect("recorded line");
        match (line["type"].as_str(), line["subtype"].as_str()) {
            (Some("system"), Some("init")) => init = init.or(Some(line)),
            (Some("assistant"), _) => assistant = assistant.or(Some(line)),
            (Some("result"), _) => result = result.or(Some(line)),
            _ => {}
        }
    }
    (
        init.expect("recorded init"),
        assistant.expect("recorded assistant line"),
        result.expect("recorded result"),
    )
}

fn now_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos()
}

/// The text of line `i`: its number and write time, padded so the whole
/// line comes to about `size` bytes.
fn text(i: u64, pad: usize) -> String {
    let mut t = format!("load {i} t={} ", now_nanos());
    t.extend(std::iter::repeat_n('x', pad.saturating_sub(t.len())));
    t
}

enum Input {
    User(String),
    Control(Value),
}

fn main() {
    let (init, assistant, result) = recorded();
    let session_id = format!(
        "{:08x}-0000-4000-8000-{:012x}",
        std::process::id(),
        now_nanos() as u64 & 0xffff_ffff_ffff
    );
    let (tx, rx) = mpsc::channel::<Input>();
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            let Ok(v) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            let input = match v["type"].as_str() {
                Some("user") => {
                    let c = &v["message"]["content"];
                    let text = match c {
                        Value::String(s) => s.clone(),
                        Value::Array(blocks) => blocks
                            .iter()
                            .filter_map(|b| b["text"].as_str())
                            .collect::<Vec<_>>()
                            .join(" "),
                        _ => String::new(),
                    };
                    Input::User(text)
                }
                Some("control_request") => Input::Control(v),
                _ => continue,
            };
            if tx.send(input).is_err() {
                break;
            }
        }
    });

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let mut write = |v: &Value| -> bool {
        let mut line = serde_json::to_vec(v).expect("serialize");
        line.push(b'\n');
        out.write_all(&line).and_then(|()| out.flush()).is_ok()
    };
    let answer = |req: &Value| {
        json!({
            "type": "control_response",
            "response": {"subtype": "success", "request_id": req["request_id"], "response": {}},
        })
    };

    let mut initialized = false;
    let mut seq = 0u64;
    while let Ok(input) = rx.recv() {
        let prompt = match input {
            Input::Control(req) => {
                if !write(&answer(&req)) {
                    return;
                }
                continue;
            }
            Input::User(text) => text,
        };
        if !initialized {
            let mut init = init.clone();
            init["session_id"] = json!(session_id);
            if !write(&init) {
                return;
            }
            initialized = true;
        }
        let load = parse_load(&prompt);
        // The line's size without text, so the text can be padded to `size`.
        let mut probe = assistant.clone();
        probe["message"]["content"][0]["text"] = json!("");
        let bare = serde_json::to_vec(&probe).map(|v| v.len()).unwrap_or(0) + 60;
        let pad = load.size.saturating_sub(bare);
        let started = Instant::now();
        let mut interrupted = false;
        for i in 0..load.n {
            while let Ok(input) = rx.try_recv() {
                if let Input::Control(req) = input {
                    if !write(&answer(&req)) {
                        return;
                    }
                    if req["request"]["subtype"] == "interrupt" {
                        interrupted = true;
                    }
                }
            }
            if interrupted {
                break;
            }
            if load.rate > 0.0 {
                let due = started + Duration::from_secs_f64(i as f64 / load.rate);
                if let Some(wait) = due.checked_duration_since(Instant::now()) {
                    std::thread::sleep(wait);
                }
            }
            seq += 1;
            let mut line = assistant.clone();
            line["session_id"] = json!(session_id);
            line["uuid"] = json!(format!("00000000-0000-4000-8000-{seq:012x}"));
            line["message"]["id"] = json!(format!("msg_load_{seq}"));
            line["message"]["content"][0]["text"] = json!(text(i, pad));
            if !write(&line) {
                return;
            }
        }
        let mut end = result.clone();
        end["session_id"] = json!(session_id);
        end["num_turns"] = json!(1);
        if interrupted {
            end["subtype"] = json!("error_during_execution");
            end["is_error"] = json!(true);
        }
        if !write(&end) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn load_words() {
        assert_eq!(
            parse_load("LOAD n=10 rate=5.5 size=900"),
            Load {
                n: 10,
                rate: 5.5,
                size: 900
            }
        );
        assert_eq!(parse_load("hello").n, 1);
    }

    #[test]
    fn recorded_lines_are_found() {
        let (init, assistant, result) = recorded();
        assert_eq!(init["subtype"], "init");
        assert_eq!(assistant["type"], "assistant");
        assert_eq!(result["type"], "result");
    }
}
