//! Which session each CLI conversation belongs to.
//!
//! A conversation (the CLI's session id, passed back as `--resume`) belongs
//! to the session whose log names it: a `run_ready` that announced it, or a
//! `run_start` that resumed it (a fork's `run_start` names its source's
//! conversation, which the CLI copies into a new one, so it does not
//! count). Stores keep this as an index beside the events, written by
//! [`Store::commit`](super::Store::commit) in the same transaction as the
//! event that names the conversation, and removed with the session, so it
//! can never disagree with the logs; it is rebuilt from the events when a
//! store written before it existed is opened.

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;

/// The conversation `event` names for its session, if any: a `run_ready`'s
/// resume id, or the `--resume` of a `run_start` that is not a fork.
pub fn named(event: &pb::Event) -> Option<&str> {
    let id = match event.payload.as_ref()? {
        Payload::RunReady(r) => r.resume_id.as_str(),
        Payload::RunStart(s) => {
            let c = s.config.as_ref()?;
            if c.fork.is_some() {
                return None;
            }
            c.resume.as_str()
        }
        _ => return None,
    };
    (!id.is_empty()).then_some(id)
}

/// The parts of a stored event [`named`] reads: prost skips every other
/// field without parsing it, so rebuilding the index decodes little.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Naming {
    #[prost(message, optional, tag = "10")]
    run_start: Option<NamingStart>,
    #[prost(message, optional, tag = "11")]
    run_ready: Option<NamingReady>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamingStart {
    #[prost(message, optional, tag = "1")]
    config: Option<NamingConfig>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamingConfig {
    #[prost(string, tag = "3")]
    resume: String,
    /// Present (as bytes, unparsed) for a fork.
    #[prost(bytes = "vec", optional, tag = "10")]
    fork: Option<Vec<u8>>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct NamingReady {
    #[prost(string, tag = "1")]
    resume_id: String,
}

impl Naming {
    /// [`named`] of a stored event's bytes; `None` when it names nothing
    /// (or does not decode: such a row cannot name anything either).
    pub(super) fn of(bytes: &[u8]) -> Option<String> {
        use prost::Message;
        let n = Naming::decode(bytes).ok()?;
        let id = match (n.run_ready, n.run_start) {
            (Some(r), _) => r.resume_id,
            (None, Some(NamingStart { config: Some(c) })) if c.fork.is_none() => c.resume,
            _ => return None,
        };
        (!id.is_empty()).then_some(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn ev(payload: Payload) -> pb::Event {
        pb::Event {
            seq: 1,
            session_id: "s".into(),
            payload: Some(payload),
            ..Default::default()
        }
    }

    #[test]
    fn the_partial_decode_names_what_named_names() {
        let start = |resume: &str, fork: bool| {
            ev(Payload::RunStart(pb::RunStart {
                config: Some(pb::StartConfig {
                    resume: resume.into(),
                    prompt: "p".into(),
                    fork: fork.then(|| pb::Fork {
                        from_session_id: "src".into(),
                        ..Default::default()
                    }),
                    ..Default::default()
                }),
                ..Default::default()
            }))
        };
        let cases = [
            (
                ev(Payload::RunReady(pb::RunReady {
                    resume_id: "c1".into(),
                    model: "m".into(),
                    ..Default::default()
                })),
                Some("c1"),
            ),
            (ev(Payload::RunReady(pb::RunReady::default())), None),
            (start("c2", false), Some("c2")),
            (start("c3", true), None),
            (start("", false), None),
            (ev(Payload::RunEnd(pb::RunEnd::default())), None),
        ];
        for (e, want) in cases {
            assert_eq!(named(&e), want, "{e:?}");
            assert_eq!(
                Naming::of(&e.encode_to_vec()).as_deref(),
                want,
                "partial decode of {e:?}"
            );
        }
    }
}
