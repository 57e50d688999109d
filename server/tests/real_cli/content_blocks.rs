//! Content blocks (a base64 PNG) on Start and on Send, through the whole
//! server and the interactive adapter to the **real** claude CLI, checked
//! where they land: the Messages API request the CLI makes (the fake API
//! keeps every request) must carry the image block before the text, and the
//! log's input_sent must record the blocks as sent.

use crate::support::cli_grpc;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use cli_grpc::Harness;
use serde_json::{Value, json};

/// A valid 1×1 PNG.
const PNG_1X1: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

fn image_block() -> Value {
    json!({
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": PNG_1X1}
    })
}

fn as_struct(v: &Value) -> pbjson_types::Struct {
    serde_json::from_value(v.clone()).expect("a JSON object is a Struct")
}

/// The content of the newest user message holding the text block `text`,
/// in the newest Messages request that has one (CLI 2.1.332 adds its
/// environment block as a later user message, so it need not be the last).
fn user_content_with(api: &agent_harness_fake_api::FakeApi, text: &str) -> Vec<Value> {
    let requests = api.message_requests();
    for r in requests.iter().rev() {
        let Some(messages) = r
            .body
            .as_ref()
            .and_then(|b| b.get("messages"))
            .and_then(Value::as_array)
        else {
            continue;
        };
        for user in messages.iter().rev().filter(|m| m["role"] == "user") {
            if let Some(blocks) = user["content"].as_array()
                && blocks.iter().any(|b| same_text(b, text))
            {
                return blocks.clone();
            }
        }
    }
    panic!(
        "no Messages request has a user message with the text block {text:?}; requests: {:#?}",
        requests.iter().map(|r| &r.body).collect::<Vec<_>>()
    );
}

/// Whether block `b` holds `text` (CLI 2.1.332 ends a prompt's text with a
/// newline and adds an `[Image: source: ...]` text block after it).
fn same_text(b: &Value, text: &str) -> bool {
    b["text"].as_str().map(str::trim_end) == Some(text)
}

/// Asserts the image block reached the API, whole, before the text block.
fn assert_image_before_text(blocks: &[Value], text: &str) {
    let image = blocks
        .iter()
        .position(|b| b["type"] == "image")
        .unwrap_or_else(|| panic!("no image block in {blocks:#?}"));
    let text_at = blocks
        .iter()
        .position(|b| b["type"] == "text" && same_text(b, text))
        .expect("the text block");
    assert!(image < text_at, "image after text: {blocks:#?}");
    let source = &blocks[image]["source"];
    assert_eq!(source["type"], "base64");
    assert_eq!(source["media_type"], "image/png");
    assert_eq!(source["data"], PNG_1X1, "the image data arrived unchanged");
}

fn input_sent(events: &[pb::Event], source: pb::InputSource) -> Vec<pb::InputSent> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::InputSent(i)) if i.source == source as i32 => Some(i.clone()),
            _ => None,
        })
        .collect()
}

fn turn_ends(events: &[pb::Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(&e.payload, Some(Payload::TurnEnd(t)) if !t.compact))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn image_blocks_on_start_and_send_reach_the_api_before_the_text() {
    let h = Harness::start().await;
    let events = h.subscribe("img").await;
    let block = image_block();

    // Start: blocks + prompt become the CLI's first stdin message.
    let first_text = "TEXT I see a tiny image";
    let mut config = h.config(first_text);
    config.content_blocks = vec![as_struct(&block)];
    let started = h.try_start("img", config).await.expect("Start");
    events
        .wait_for("the first turn_end", |evs| {
            (turn_ends(evs) >= 1).then_some(())
        })
        .await;
    assert_image_before_text(&user_content_with(h.api(), first_text), first_text);

    // Send: a follow-up with blocks goes to the same live process.
    let second_text = "TEXT a second look";
    let run = h
        .client()
        .send(pb::SendRequest {
            idempotency_key: String::new(),
            session_id: "img".into(),
            input: second_text.into(),
            content_blocks: vec![as_struct(&block)],
        })
        .await
        .expect("Send")
        .into_inner()
        .run_id;
    assert_eq!(run, started.run_id, "the keep-alive process took it");
    let seen = events
        .wait_for("the second turn_end", |evs| {
            (turn_ends(evs) >= 2).then(|| evs.to_vec())
        })
        .await;
    assert_image_before_text(&user_content_with(h.api(), second_text), second_text);

    // The log records what was sent, blocks included.
    let initial = input_sent(&seen, pb::InputSource::Initial);
    assert_eq!(initial.len(), 1);
    assert_eq!(initial[0].text, first_text);
    assert_eq!(initial[0].content_blocks, vec![as_struct(&block)]);
    let user = input_sent(&seen, pb::InputSource::User);
    assert_eq!(user.len(), 1);
    assert_eq!(user[0].text, second_text);
    assert_eq!(user[0].content_blocks, vec![as_struct(&block)]);
    // And the answers are the fake model's replies to those prompts.
    let answers: Vec<String> = seen
        .iter()
        .filter_map(|e| match &e.payload {
            Some(Payload::Content(c)) => Some(c.blocks.iter().map(|b| b.text.clone()).collect()),
            _ => None,
        })
        .collect();
    assert_eq!(answers, ["I see a tiny image", "a second look"]);
    h.finish("img", &events).await;
}
