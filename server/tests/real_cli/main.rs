//! Everything against the real claude CLI and the fake Messages API: adapters, the gRPC API, permission modes, cassette recording and serving, content blocks, a lost resume id, the crash loop, a killed owner's session taken over by another node, the live-service opt-in.
//!
//! One test binary per concern (build and link once); each module below
//! was its own binary before.

#[path = "../support/mod.rs"]
mod support;

mod adapters;
mod argv_words;
mod cli_vocabulary;
mod content_blocks;
mod control;
mod crash_loop;
mod grpc;
mod idle_evict;
mod killed_owner;
mod live_service_optin;
mod live_typing;
mod moved_conversation;
mod permission_modes;
mod record_cassette_serve;
mod record_cassettes;
mod resume_lost;
mod rewind_fork;
mod server_owned_config;
mod settings;
