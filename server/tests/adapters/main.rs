//! Adapters and normalization without a CLI: process supervision, cassette replay, the normalizer over real CLI transcripts.
//!
//! One test binary per concern (build and link once); each module below
//! was its own binary before.

#[path = "../support/mod.rs"]
mod support;

mod cassette_replay;
mod normalize_transcripts;
mod supervise;
mod trampolines;
