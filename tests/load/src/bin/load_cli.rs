//! The stand-in CLI the load tool gives the server as `--claude-bin`.
//!
//! It speaks the interactive stream-json protocol the way the real CLI
//! 2.1.197 does, replaying lines recorded from it
//! (`cassettes/plain_turn.cassette.jsonl`): one `system/init` when the
//! first message arrives, then per user message a run of assistant
//! messages (one `assistant` text line each) and one `result`. The message
//! says how many and how fast:
//!
//! ```text
//! LOAD n=<messages> rate=<messages per second, 0 = as fast as possible> size=<bytes per assistant line> frags=<fragments per message>
//! ```
//!
//! Each assistant line's text starts `load <i> t=<unix nanos>`: the time
//! the line was written, so a subscriber can tell how late it arrived.
//!
//! With `--include-partial-messages` in its argv (the server passes it
//! unless `--deltas off`), every assistant message is also streamed as the
//! real CLI streams it (`cassettes/transcripts/partial_messages.transcript.jsonl`):
//! `system/status requesting`, then `stream_event` lines `message_start`,
//! `content_block_start`, `frags` × `content_block_delta` (`text_delta`),
//! the complete `assistant` line, `content_block_stop`, `message_delta`,
//! `message_stop`. The text is then the fragments joined, and each
//! fragment is a write-time stamp (`⟨t=<unix micros>⟩`, see `stamp.rs`)
//! padded to an equal share of the text (at least [`FRAGMENT_BYTES`]): a
//! subscriber finds every fragment's write time however the server
//! coalesced them. The last fragment and the assistant line leave in one
//! write, so the last stamp is also the assistant line's write time.
//!
//! `frags=0` writes the bare assistant lines even with the flag (the
//! load tool's measurements other than live typing keep that workload).
//! `rate` counts assistant messages (log events) in both modes; with
//! fragments, message `i`'s fragments are spread evenly over its
//! `1/rate` slot, as a model types. At rate 0 everything is written as
//! fast as the pipe takes it.
//!
//! A `control_request` is answered with success; an `interrupt` also ends
//! the messages being written, as the real CLI ends its turn. Anything
//! else on stdin is ignored; end of stdin ends the process.

use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use agent_harness_load::stamp;

const CASSETTE: &str = include_str!("../../../../cassettes/plain_turn.cassette.jsonl");
const PARTIAL: &str =
    include_str!("../../../../cassettes/transcripts/partial_messages.transcript.jsonl");

/// The flag that turns on `stream_event` lines, as in the real CLI.
const PARTIAL_FLAG: &str = "--include-partial-messages";

/// Smallest fragment: a stamp and a few bytes of text, about what one
/// `text_delta` of a real reply carries.
const FRAGMENT_BYTES: usize = stamp::STAMP_BYTES + 7;

/// What one `LOAD` message asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Load {
    n: u64,
    rate: f64,
    size: usize,
    frags: usize,
}

impl Load {
    /// When fragment `part` of message `i` is due, from the turn's start
    /// (`None`: at once). Message `i`'s slot is `[i, i + 1) / rate`; its
    /// fragments share it evenly.
    fn due(&self, i: u64, part: usize) -> Option<Duration> {
        let slots = i as f64 + part as f64 / self.frags.max(1) as f64;
        (self.rate > 0.0).then(|| Duration::from_secs_f64(slots / self.rate))
    }
}

fn parse_load(text: &str) -> Load {
    let mut load = Load {
        n: 1,
        rate: 0.0,
        size: 600,
        frags: 20,
    };
    for word in text.split_whitespace() {
        let Some((k, v)) = word.split_once('=') else {
            continue;
        };
        match k {
            "n" => load.n = v.parse().unwrap_or(load.n),
            "rate" => load.rate = v.parse().unwrap_or(load.rate),
            "size" => load.size = v.parse().unwrap_or(load.size),
            "frags" => load.frags = v.parse().unwrap_or(load.frags),
            _ => {}
        }
    }
    load
}

/// Output lines of a recording (`{"dir":"out","line":…}` records).
fn out_lines(recording: &str) -> impl Iterator<Item = Value> + '_ {
    recording.lines().filter_map(|record| {
        let record: Value = serde_json::from_str(record).expect("recorded record");
        if record["dir"] != "out" {
            return None;
        }
        Some(serde_json::from_str(record["line"].as_str().unwrap_or("")).expect("recorded line"))
    })
}

/// The recorded lines the stand-in writes, with its ids put in.
struct Recorded {
    init: Value,
    assistant: Value,
    result: Value,
    /// `system/status requesting`, written before each API request.
    requesting: Value,
    /// The first `stream_event` of each event type, by that type.
    stream: std::collections::HashMap<String, Value>,
}

impl Recorded {
    fn load() -> Self {
        let mut init = None;
        let mut assistant = None;
        let mut result = None;
        for line in out_lines(CASSETTE) {
            match (line["type"].as_str(), line["subtype"].as_str()) {
                (Some("system"), Some("init")) => init = init.or(Some(line)),
                (Some("assistant"), _) => assistant = assistant.or(Some(line)),
                (Some("result"), _) => result = result.or(Some(line)),
                _ => {}
            }
        }
        let mut requesting = None;
        let mut stream = std::collections::HashMap::new();
        for line in out_lines(PARTIAL) {
            match (line["type"].as_str(), line["subtype"].as_str()) {
                (Some("system"), Some("status")) => requesting = requesting.or(Some(line)),
                (Some("stream_event"), _) => {
                    let kind = line["event"]["type"].as_str().unwrap_or("").to_string();
                    stream.entry(kind).or_insert(line);
                }
                _ => {}
            }
        }
        Self {
            init: init.expect("recorded init"),
            assistant: assistant.expect("recorded assistant line"),
            result: result.expect("recorded result"),
            requesting: requesting.expect("recorded system/status requesting"),
            stream,
        }
    }

    /// The recorded `stream_event` of this kind.
    fn event(&self, kind: &str) -> Value {
        self.stream
            .get(kind)
            .unwrap_or_else(|| panic!("recorded stream_event {kind}"))
            .clone()
    }
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

/// One streamed fragment: the write time, padded to `bytes`.
fn fragment(bytes: usize) -> String {
    let mut f = stamp::stamp((now_nanos() / 1000) as u64);
    f.extend(std::iter::repeat_n('x', bytes.saturating_sub(f.len())));
    f
}

/// Writes whole lines: each call is one `write` and one flush.
struct Out<W: Write> {
    w: W,
    buf: Vec<u8>,
}

impl<W: Write> Out<W> {
    fn new(w: W) -> Self {
        Self { w, buf: Vec::new() }
    }

    /// False when the reader is gone.
    fn send(&mut self, lines: &[&Value]) -> bool {
        self.send_with(|buf| {
            for v in lines {
                serde_json::to_writer(&mut *buf, v).expect("serialize");
                buf.push(b'\n');
            }
        })
    }

    /// Writes what `fill` puts in the buffer. False when the reader is gone.
    fn send_with(&mut self, fill: impl FnOnce(&mut Vec<u8>)) -> bool {
        self.buf.clear();
        fill(&mut self.buf);
        self.w
            .write_all(&self.buf)
            .and_then(|()| self.w.flush())
            .is_ok()
    }
}

/// A line serialized once, with holes where the values that change from
/// line to line go: writing a line is copying the parts and the values,
/// not cloning and serializing a JSON tree (which took a third of the
/// machine's CPU when the stand-in wrote at full speed, on the two cores
/// it shares with the server it measures).
struct Template {
    /// `holes + 1` serialized pieces around the holes.
    parts: Vec<Vec<u8>>,
    /// Which value goes in each hole, in the order they appear.
    order: Vec<usize>,
}

impl Template {
    /// The text a hole's value replaces; nothing recorded contains it.
    fn marker(hole: usize) -> String {
        format!("\u{1}hole{hole}\u{1}")
    }

    /// `line` with holes where it holds `Template::marker(i)` strings.
    fn new(line: &Value) -> Self {
        let text = serde_json::to_string(line).expect("serialize");
        // Holes 0, 1, ... up to the first marker the line does not hold.
        let mut at: Vec<(usize, usize, usize)> = (0..)
            .map_while(|h| {
                let quoted = serde_json::to_string(&Self::marker(h)).expect("marker");
                let start = text.find(&quoted)?;
                // The quotes stay in the parts: a hole holds a string's inside.
                Some((start + 1, start + quoted.len() - 1, h))
            })
            .collect();
        at.sort();
        let mut parts = Vec::with_capacity(at.len() + 1);
        let mut from = 0;
        for &(start, end, _) in &at {
            parts.push(text.as_bytes()[from..start].to_vec());
            from = end;
        }
        parts.push(text.as_bytes()[from..].to_vec());
        Self {
            parts,
            order: at.into_iter().map(|(_, _, h)| h).collect(),
        }
    }

    /// Bytes of the line without the holes' values.
    fn fixed_len(&self) -> usize {
        self.parts.iter().map(Vec::len).sum()
    }

    /// Appends the line with `values[i]` in hole `i`. The values must need
    /// no JSON escaping (ids and the ASCII `text` below do not).
    fn render(&self, values: &[&str], buf: &mut Vec<u8>) {
        for (part, &hole) in self.parts.iter().zip(&self.order) {
            buf.extend_from_slice(part);
            let value = values[hole];
            debug_assert!(!value.bytes().any(|b| b == b'"' || b == b'\\' || b < 0x20));
            buf.extend_from_slice(value.as_bytes());
        }
        buf.extend_from_slice(self.parts.last().expect("a last part"));
    }
}

/// Writes assistant messages for one session.
struct Writer {
    rec: Recorded,
    session_id: String,
    /// Whether to stream each message as `stream_event` lines first.
    partial: bool,
    /// Assistant messages written so far (their ids count on across turns).
    seq: u64,
    /// Lines given a uuid so far.
    uuids: u64,
    /// The assistant line with holes for its message id, uuid and text,
    /// made on first use.
    bare: Option<Template>,
}

impl Writer {
    fn uuid(&mut self) -> Value {
        json!(self.uuid_text())
    }

    fn uuid_text(&mut self) -> String {
        self.uuids += 1;
        format!("00000000-0000-4000-8000-{:012x}", self.uuids)
    }

    /// The assistant line's template: holes 0, 1 and 2 are its message id,
    /// uuid and text.
    fn bare_template(&mut self) -> &Template {
        if self.bare.is_none() {
            let mut v = self.rec.assistant.clone();
            v["session_id"] = json!(self.session_id);
            v["message"]["id"] = json!(Template::marker(0));
            if v.get("uuid").is_some() {
                v["uuid"] = json!(Template::marker(1));
            }
            v["message"]["content"][0]["text"] = json!(Template::marker(2));
            self.bare = Some(Template::new(&v));
        }
        self.bare.as_ref().expect("made above")
    }

    /// Writes message `i` as one assistant line, from the template.
    fn bare_message<W: Write>(&mut self, out: &mut Out<W>, i: u64, load: &Load) -> bool {
        let id = format!("msg_load_{}", self.seq);
        let uuid = self.uuid_text();
        let template = self.bare_template();
        // As `message` pads: the line without its text, and 60 bytes more.
        let bare = template.fixed_len() + id.len() + uuid.len() + 60;
        let text = text(i, load.size.saturating_sub(bare));
        out.send_with(|buf| {
            template.render(&[&id, &uuid, &text], buf);
            buf.push(b'\n');
        })
    }

    /// A recorded line with this session's ids.
    fn line(&mut self, mut v: Value) -> Value {
        v["session_id"] = json!(self.session_id);
        if v.get("uuid").is_some() {
            v["uuid"] = self.uuid();
        }
        v
    }

    fn stream_event(&mut self, kind: &str) -> Value {
        let e = self.rec.event(kind);
        self.line(e)
    }

    /// Writes message `i` of a turn, each fragment `part` once `due(part)`
    /// has passed (a message without fragments: once `due(0)` has).
    /// False when the reader is gone.
    fn message<W: Write>(
        &mut self,
        out: &mut Out<W>,
        i: u64,
        load: &Load,
        due: impl Fn(usize) -> Option<Instant>,
    ) -> bool {
        let wait = |part: usize| {
            if let Some(wait) = due(part).and_then(|d| d.checked_duration_since(Instant::now())) {
                std::thread::sleep(wait);
            }
        };
        self.seq += 1;
        if !self.partial || load.frags == 0 {
            wait(0);
            return self.bare_message(out, i, load);
        }
        let id = format!("msg_load_{}", self.seq);
        let mut assistant = self.rec.assistant.clone();
        assistant["message"]["id"] = json!(id);
        // The line's size without text, so the text can be padded to `size`.
        let bare = {
            let mut probe = assistant.clone();
            probe["message"]["content"][0]["text"] = json!("");
            serde_json::to_vec(&probe).map(|v| v.len()).unwrap_or(0) + 60
        };
        let pad = load.size.saturating_sub(bare);
        let mut assistant = self.line(assistant);
        let requesting = self.line(self.rec.requesting.clone());
        let mut start = self.stream_event("message_start");
        start["event"]["message"]["id"] = json!(id);
        let block = self.stream_event("content_block_start");
        wait(0);
        if !out.send(&[&requesting]) || !out.send(&[&start]) || !out.send(&[&block]) {
            return false;
        }
        let bytes = pad.div_ceil(load.frags).max(FRAGMENT_BYTES);
        let mut joined = String::with_capacity(bytes * load.frags);
        for part in 0..load.frags {
            wait(part);
            let f = fragment(bytes);
            joined.push_str(&f);
            let mut delta = self.stream_event("content_block_delta");
            delta["event"]["delta"]["text"] = json!(f);
            let sent = if part + 1 < load.frags {
                out.send(&[&delta])
            } else {
                assistant["message"]["content"][0]["text"] = json!(joined);
                out.send(&[&delta, &assistant])
            };
            if !sent {
                return false;
            }
        }
        ["content_block_stop", "message_delta", "message_stop"]
            .into_iter()
            .all(|kind| {
                let e = self.stream_event(kind);
                out.send(&[&e])
            })
    }
}

enum Input {
    User(String),
    Control(Value),
}

fn main() {
    let partial = std::env::args().any(|a| a == PARTIAL_FLAG);
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

    let mut out = Out::new(std::io::stdout().lock());
    let answer = |req: &Value| {
        json!({
            "type": "control_response",
            "response": {"subtype": "success", "request_id": req["request_id"], "response": {}},
        })
    };

    let mut writer = Writer {
        rec: Recorded::load(),
        session_id,
        partial,
        seq: 0,
        uuids: 0,
        bare: None,
    };
    let mut initialized = false;
    while let Ok(input) = rx.recv() {
        let prompt = match input {
            Input::Control(req) => {
                if !out.send(&[&answer(&req)]) {
                    return;
                }
                continue;
            }
            Input::User(text) => text,
        };
        if !initialized {
            let init = writer.line(writer.rec.init.clone());
            if !out.send(&[&init]) {
                return;
            }
            initialized = true;
        }
        let load = parse_load(&prompt);
        let started = Instant::now();
        let mut interrupted = false;
        for i in 0..load.n {
            while let Ok(input) = rx.try_recv() {
                if let Input::Control(req) = input {
                    if !out.send(&[&answer(&req)]) {
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
            let due = |part: usize| load.due(i, part).map(|d| started + d);
            if !writer.message(&mut out, i, &load, due) {
                return;
            }
        }
        let mut end = writer.line(writer.rec.result.clone());
        end["num_turns"] = json!(1);
        if interrupted {
            end["subtype"] = json!("error_during_execution");
            end["is_error"] = json!(true);
        }
        if !out.send(&[&end]) {
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
            parse_load("LOAD n=10 rate=5.5 size=900 frags=7"),
            Load {
                n: 10,
                rate: 5.5,
                size: 900,
                frags: 7,
            }
        );
        assert_eq!(parse_load("hello").n, 1);
        assert_eq!(parse_load("hello").frags, 20);
    }

    #[test]
    fn fragments_share_their_message_slot() {
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        let load = parse_load("LOAD rate=10 frags=4");
        assert_eq!(ms(load.due(2, 0)), Some(200.0));
        assert_eq!(ms(load.due(2, 1)), Some(225.0));
        let bare = parse_load("LOAD rate=10 frags=0");
        assert_eq!(ms(bare.due(3, 0)), Some(300.0));
        assert_eq!(parse_load("LOAD rate=0").due(5, 3), None);
    }

    fn writer(partial: bool) -> Writer {
        Writer {
            rec: Recorded::load(),
            session_id: "s-1".into(),
            partial,
            seq: 0,
            uuids: 0,
            bare: None,
        }
    }

    /// The lines `writer` writes for one message, parsed.
    fn one_message(writer: &mut Writer, load: &Load) -> Vec<Value> {
        let mut out = Out::new(Vec::new());
        assert!(writer.message(&mut out, 0, load, |_| None));
        String::from_utf8(out.w)
            .expect("utf-8")
            .lines()
            .map(|l| serde_json::from_str(l).expect("a JSON line"))
            .collect()
    }

    /// `type`, or `stream_event/<event type>`, or `system/<subtype>`.
    fn kind(v: &Value) -> String {
        match v["type"].as_str().unwrap_or("") {
            "stream_event" => format!("stream_event/{}", v["event"]["type"].as_str().unwrap_or("")),
            "system" => format!("system/{}", v["subtype"].as_str().unwrap_or("")),
            t => t.to_string(),
        }
    }

    fn keys(v: &Value) -> Vec<String> {
        let mut k: Vec<String> = v.as_object().expect("object").keys().cloned().collect();
        k.sort();
        k
    }

    #[test]
    fn recorded_lines_are_found() {
        let rec = Recorded::load();
        assert_eq!(rec.init["subtype"], "init");
        assert_eq!(rec.assistant["type"], "assistant");
        assert_eq!(rec.result["type"], "result");
        assert_eq!(rec.requesting["status"], "requesting");
        assert_eq!(rec.stream.len(), 6, "{:?}", rec.stream.keys());
    }

    #[test]
    fn without_the_flag_or_fragments_a_message_is_one_assistant_line() {
        let load = parse_load("LOAD size=600");
        let lines = one_message(&mut writer(false), &load);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0]["type"], "assistant");
        let streamed_without_fragments = parse_load("LOAD frags=0");
        let bare = one_message(&mut writer(true), &streamed_without_fragments);
        assert_eq!(bare.len(), 1, "frags=0: no stream_event lines");
        let text = lines[0]["message"]["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("load 0 t="), "{text}");
    }

    /// The lines of a streamed message come in the recorded CLI's order
    /// and shape (one `content_block_delta` there, `frags` here), and the
    /// fragments join to the assistant line's text.
    #[test]
    fn streamed_message_has_the_recorded_shape() {
        let recorded: Vec<Value> = out_lines(PARTIAL)
            .filter(|v| !matches!(kind(v).as_str(), "system/init" | "result"))
            .collect();
        let frags = 5;
        let load = parse_load(&format!("LOAD size=600 frags={frags}"));
        let mut w = writer(true);
        let ours = one_message(&mut w, &load);
        let collapse = |lines: &[Value]| {
            let mut kinds: Vec<String> = lines.iter().map(kind).collect();
            kinds.dedup();
            kinds
        };
        assert_eq!(collapse(&ours), collapse(&recorded));
        let deltas: Vec<&Value> = ours
            .iter()
            .filter(|v| kind(v) == "stream_event/content_block_delta")
            .collect();
        assert_eq!(deltas.len(), frags);
        for v in &ours {
            let like = recorded
                .iter()
                .find(|r| kind(r) == kind(v))
                .expect("a recorded line of that kind");
            if v["type"] == "stream_event" {
                assert_eq!(keys(v), keys(like), "{}", kind(v));
                assert_eq!(keys(&v["event"]), keys(&like["event"]), "{}", kind(v));
            }
            assert_eq!(v["session_id"], "s-1");
        }
        let assistant = ours.iter().find(|v| v["type"] == "assistant").unwrap();
        let start = &ours[1]["event"]["message"];
        assert_eq!(start["id"], assistant["message"]["id"], "one message id");
        let text = assistant["message"]["content"][0]["text"].as_str().unwrap();
        let joined: String = deltas
            .iter()
            .map(|d| d["event"]["delta"]["text"].as_str().unwrap())
            .collect();
        assert_eq!(joined, text);
        for d in &deltas {
            let f = d["event"]["delta"]["text"].as_str().unwrap();
            assert_eq!(stamp::stamps(f).count(), 1, "one stamp per fragment: {f}");
            assert!(f.len() >= FRAGMENT_BYTES);
        }
        let times: Vec<u64> = stamp::stamps(text).collect();
        assert_eq!(times.len(), frags);
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");

        // The next message has a new id; every line a new uuid.
        let next = one_message(&mut w, &load);
        assert_ne!(next[1]["event"]["message"]["id"], start["id"]);
        let uuids: std::collections::HashSet<String> = ours
            .iter()
            .chain(&next)
            .map(|v| v["uuid"].to_string())
            .collect();
        assert_eq!(uuids.len(), ours.len() + next.len());
    }

    /// The template writes, byte for byte, what serializing the recorded
    /// line with the same values writes, at the asked size.
    #[test]
    fn a_bare_line_is_the_recorded_line_serialized() {
        let mut w = writer(false);
        let load = parse_load("LOAD size=800");
        for i in 0..3 {
            let mut out = Out::new(Vec::new());
            assert!(w.message(&mut out, i, &load, |_| None));
            let line = out.w.strip_suffix(b"\n").expect("one line").to_vec();
            assert!(!line.contains(&b'\n'));
            let parsed: Value = serde_json::from_slice(&line).expect("a JSON line");
            let text = parsed["message"]["content"][0]["text"].as_str().unwrap();
            assert!(text.starts_with(&format!("load {i} t=")), "{text}");
            let mut expected = w.rec.assistant.clone();
            expected["message"]["id"] = json!(format!("msg_load_{}", i + 1));
            expected["session_id"] = json!("s-1");
            expected["uuid"] = json!(format!("00000000-0000-4000-8000-{:012x}", i + 1));
            expected["message"]["content"][0]["text"] = json!(text);
            assert_eq!(
                String::from_utf8(line.clone()).unwrap(),
                serde_json::to_string(&expected).unwrap()
            );
            // `size` less the 60 bytes `message` leaves for the fields it changes.
            assert!((720..=740).contains(&line.len()), "{} bytes", line.len());
        }
    }

    #[test]
    fn a_template_fills_holes_in_any_order() {
        let v = json!({"b": Template::marker(1), "a": [Template::marker(0), "x\"y"], "c": 3});
        let t = Template::new(&v);
        let mut buf = Vec::new();
        t.render(&["zero", "one"], &mut buf);
        assert_eq!(
            String::from_utf8(buf).unwrap(),
            serde_json::to_string(&json!({"b": "one", "a": ["zero", "x\"y"], "c": 3})).unwrap()
        );
    }

    /// A larger `size` makes larger fragments, not more of them.
    #[test]
    fn size_sets_the_fragment_length() {
        let load = parse_load("LOAD size=4000 frags=10");
        let lines = one_message(&mut writer(true), &load);
        let assistant = lines.iter().find(|v| v["type"] == "assistant").unwrap();
        let line = serde_json::to_vec(assistant).unwrap().len();
        assert!((3_900..4_200).contains(&line), "{line} bytes");
    }
}
