//! A scripted, local Anthropic Messages API that the real `claude` CLI can talk to, so tests
//! run the real CLI (its framing, tool execution, permission prompts and interrupts) with
//! zero tokens; and beside it, on the same port, a scripted OpenAI Responses API for the real
//! `codex` CLI and a scripted Gemini API for the real `gemini` CLI.
//!
//! Point the CLI at it with `ANTHROPIC_BASE_URL=<base_url>` and `ANTHROPIC_API_KEY=test`;
//! point Codex at it with the `config.toml` that [`FakeApi::codex_home`] writes, and Gemini
//! with [`FakeApi::gemini_home`] and [`FakeApi::gemini_env`].
//! What the fake model answers is chosen by a directive at the start of the latest user
//! prompt (`TEXT hi`, `BASH echo x`, `SLOW 20 100`, `HANG`, ...): see `README.md` beside
//! this crate for the table.
//!
//! ```no_run
//! # async fn demo() {
//! use agent_harness_fake_api::FakeApi;
//! let api = FakeApi::start().await;
//! let url = api.base_url(); // e.g. http://127.0.0.1:41234
//! // ... spawn `claude` with ANTHROPIC_BASE_URL=url, send "TEXT hello" ...
//! let calls = api.message_requests();
//! # let _ = (url, calls);
//! # }
//! ```
//!
//! # Layout
//! - [`server`]: [`FakeApi`], routing, the request log.
//! - [`directive`]: the directive language both APIs share (`TEXT`, `BASH`, `SLOW`, ...).
//! - [`conversation`]: where a Messages request stands: the anchor prompt, its directive, the step,
//!   and what the CLI folded in (no per-connection state).
//! - [`script`]: what the fake model answers there.
//! - [`sse`]: the Messages wire format (SSE events, non-streaming JSON, error bodies).
//! - [`responses`]: the Responses API: reading its requests into the same position, and its
//!   wire format.
//! - [`codex`]: the `config.toml` that points Codex at the fake.
//! - [`gemini_api`]: the Gemini API: reading its requests into the same position, the shell
//!   tool a request declares, and its wire format.
//! - [`gemini`]: the `settings.json` and environment that point Gemini CLI at the fake.
//! - [`usage`]: plausible token numbers.
//! - [`ids`]: `msg_…`/`toolu_…`/`req_…` ids.
//! - [`cli`]: where the tests find the real CLIs (claude and codex), and the one-line failure
//!   naming the setup command when it is missing.

pub mod cli;
pub mod codex;
pub mod conversation;
pub mod directive;
pub mod gemini;
pub mod gemini_api;
pub mod ids;
pub mod responses;
pub mod script;
pub mod server;
pub mod sse;
pub mod usage;

pub use conversation::Position;
pub use directive::{Directive, KEYWORDS};
pub use script::Reply;
pub use server::{FakeApi, RecordedRequest};
