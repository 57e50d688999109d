//! The next self-scheduled prompt (ScheduleWakeup / CronCreate).

use std::collections::HashMap;

use pbjson_types::{Struct, Value, value::Kind};

use crate::pb::{Event, InputSource, event::Payload};

/// Which tool scheduled it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum WakeupKind {
    /// `ScheduleWakeup {delaySeconds, reason, prompt}`.
    #[default]
    Wakeup,
    /// `CronCreate {cron, prompt, recurring?, durable?}`.
    Cron,
}

impl WakeupKind {
    /// "wakeup" | "cron".
    pub fn as_str(self) -> &'static str {
        match self {
            WakeupKind::Wakeup => "wakeup",
            WakeupKind::Cron => "cron",
        }
    }
}

/// A prompt the agent scheduled for itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScheduledWakeup {
    /// Which tool scheduled it.
    pub kind: WakeupKind,
    /// The tool_use that scheduled it.
    pub tool_use_id: String,
    /// "ScheduleWakeup" or "CronCreate".
    pub tool_name: String,
    /// When it fires, in Unix milliseconds (ScheduleWakeup's `scheduledFor`).
    pub scheduled_for_ms: Option<u64>,
    /// The requested delay (ScheduleWakeup's `delaySeconds`).
    pub delay_seconds: Option<u64>,
    /// The cron job id (CronCreate), from `tool_use_result.id` or the
    /// result text "Scheduled … task <id> …".
    pub cron_id: Option<String>,
    /// The cron expression (CronCreate).
    pub cron: Option<String>,
    /// The CLI's human-readable schedule ("Every minute"), when given.
    pub human_schedule: Option<String>,
    /// The prompt that will be delivered.
    pub prompt: String,
    /// Why (ScheduleWakeup's `reason`).
    pub reason: String,
    /// True for a recurring cron: firing does not clear it.
    pub recurring: bool,
    /// True for a durable cron: it outlives the process.
    pub durable: bool,
    /// Seq of the tool_result that confirmed it.
    pub seq: u64,
}

#[derive(Debug, Clone)]
struct Candidate {
    tool_name: String,
    input: Option<Struct>,
}

/// Incremental scheduled-wakeup state.
#[derive(Debug, Clone, Default)]
pub(crate) struct WakeupFold {
    /// Scheduling tool_uses waiting for their tool_result.
    candidates: HashMap<String, Candidate>,
    current: Option<ScheduledWakeup>,
}

impl WakeupFold {
    pub(crate) fn apply(&mut self, e: &Event) {
        match &e.payload {
            Some(Payload::Content(c)) => {
                for b in &c.blocks {
                    if b.r#type == "tool_use"
                        && matches!(
                            b.tool_name.as_str(),
                            "ScheduleWakeup" | "CronCreate" | "CronDelete"
                        )
                    {
                        self.candidates.insert(
                            b.tool_use_id.clone(),
                            Candidate {
                                tool_name: b.tool_name.clone(),
                                input: b.input.clone(),
                            },
                        );
                    }
                }
            }
            Some(Payload::Result(r)) => {
                for tr in &r.tool_results {
                    if let Some(c) = self.candidates.remove(&tr.tool_use_id) {
                        let side = r.tool_use_result.as_ref().and_then(as_struct);
                        self.resolve(e.seq, &tr.tool_use_id, c, tr.is_error, &tr.text, side);
                    }
                }
            }
            Some(Payload::InputSent(i)) if i.source == InputSource::Wakeup as i32 => {
                self.current = None;
            }
            Some(Payload::TurnStart(t))
                if t.origin == "cron" && self.current.as_ref().is_some_and(|w| !w.recurring) =>
            {
                self.current = None;
            }
            // Session-only crons live in the CLI process; wakeups are
            // delivered by the harness and survive it.
            Some(Payload::RunEnd(_))
                if self
                    .current
                    .as_ref()
                    .is_some_and(|w| w.kind == WakeupKind::Cron && !w.durable) =>
            {
                self.current = None;
            }
            _ => {}
        }
    }

    fn resolve(
        &mut self,
        seq: u64,
        tool_use_id: &str,
        c: Candidate,
        is_error: bool,
        text: &str,
        side: Option<&Struct>,
    ) {
        let input = c.input.as_ref();
        match c.tool_name.as_str() {
            "ScheduleWakeup" => {
                let when = side.and_then(|s| num(s, "scheduledFor"));
                let scheduled = !is_error
                    && match when {
                        Some(ms) => ms > 0.0,
                        None => !text.contains("not scheduled"),
                    };
                self.current = scheduled.then(|| ScheduledWakeup {
                    kind: WakeupKind::Wakeup,
                    tool_use_id: tool_use_id.to_owned(),
                    tool_name: c.tool_name.clone(),
                    scheduled_for_ms: when.map(|ms| ms as u64),
                    delay_seconds: input.and_then(|i| num(i, "delaySeconds")).map(|d| d as u64),
                    prompt: input.and_then(|i| string(i, "prompt")).unwrap_or_default(),
                    reason: input.and_then(|i| string(i, "reason")).unwrap_or_default(),
                    seq,
                    ..Default::default()
                });
            }
            "CronCreate" => {
                let id = if is_error {
                    None
                } else {
                    side.and_then(|s| string(s, "id"))
                        .filter(|id| !id.is_empty())
                        .or_else(|| cron_id_from_text(text))
                };
                self.current = id.map(|id| ScheduledWakeup {
                    kind: WakeupKind::Cron,
                    tool_use_id: tool_use_id.to_owned(),
                    tool_name: c.tool_name.clone(),
                    cron_id: Some(id),
                    cron: input.and_then(|i| string(i, "cron")),
                    human_schedule: side.and_then(|s| string(s, "humanSchedule")),
                    prompt: input.and_then(|i| string(i, "prompt")).unwrap_or_default(),
                    recurring: side
                        .and_then(|s| boolean(s, "recurring"))
                        .or_else(|| input.and_then(|i| boolean(i, "recurring")))
                        .unwrap_or(false),
                    durable: side
                        .and_then(|s| boolean(s, "durable"))
                        .or_else(|| input.and_then(|i| boolean(i, "durable")))
                        .unwrap_or(false),
                    seq,
                    ..Default::default()
                });
            }
            "CronDelete" => {
                let id = input.and_then(|i| string(i, "id"));
                if !is_error
                    && id.is_some()
                    && self.current.as_ref().and_then(|w| w.cron_id.as_ref()) == id.as_ref()
                {
                    self.current = None;
                }
            }
            _ => {}
        }
    }

    pub(crate) fn current(&self) -> Option<&ScheduledWakeup> {
        self.current.as_ref()
    }
}

/// "Scheduled one-shot task 75f49f4e (Every minute). …" → "75f49f4e".
fn cron_id_from_text(text: &str) -> Option<String> {
    if !text.starts_with("Scheduled") {
        return None;
    }
    let rest = &text[text.find(" task ")? + " task ".len()..];
    let id: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
        .collect();
    (!id.is_empty()).then_some(id)
}

pub(crate) fn as_struct(v: &Value) -> Option<&Struct> {
    match &v.kind {
        Some(Kind::StructValue(s)) => Some(s),
        _ => None,
    }
}

pub(crate) fn string(s: &Struct, key: &str) -> Option<String> {
    match &s.fields.get(key)?.kind {
        Some(Kind::StringValue(v)) => Some(v.clone()),
        _ => None,
    }
}

fn num(s: &Struct, key: &str) -> Option<f64> {
    match &s.fields.get(key)?.kind {
        Some(Kind::NumberValue(v)) => Some(*v),
        _ => None,
    }
}

fn boolean(s: &Struct, key: &str) -> Option<bool> {
    match &s.fields.get(key)?.kind {
        Some(Kind::BoolValue(v)) => Some(*v),
        _ => None,
    }
}

/// The prompt the agent has scheduled for itself, if one is still due.
///
/// Rules:
/// - A `ScheduleWakeup` or `CronCreate` tool_use counts once its tool_result
///   arrives. ScheduleWakeup is scheduled when `tool_use_result.scheduledFor`
///   is a number > 0 (or, with no `scheduledFor`, when the result text does
///   not say "not scheduled"); CronCreate when the result gives a job id
///   (`tool_use_result.id`, or "Scheduled … task <id>" in the text). An
///   error result, or one that says it was not scheduled, clears any earlier
///   wakeup: the latest attempt wins.
/// - It is cleared by a following `input_sent` with source WAKEUP, by a
///   `turn_start` with origin "cron" (unless the cron is recurring), by a
///   successful `CronDelete` of its id, and, for a non-durable cron, by
///   `run_end` (session-only crons die with the process).
pub fn scheduled_wakeup(events: &[Event]) -> Option<ScheduledWakeup> {
    let mut f = WakeupFold::default();
    for e in events {
        f.apply(e);
    }
    f.current
}

#[cfg(test)]
mod tests {
    use super::cron_id_from_text;

    #[test]
    fn cron_id_is_parsed_from_the_result_text() {
        assert_eq!(
            cron_id_from_text(
                "Scheduled one-shot task 75f49f4e (Every minute). Session-only (not written to disk)."
            )
            .as_deref(),
            Some("75f49f4e")
        );
        assert_eq!(
            cron_id_from_text("Scheduled recurring task ab12cd34 (Every hour).").as_deref(),
            Some("ab12cd34")
        );
        assert_eq!(cron_id_from_text("Error: bad cron"), None);
    }
}
