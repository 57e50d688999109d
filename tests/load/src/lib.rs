//! What the two binaries of the load tool share: `agent-harness-load`
//! (`main.rs`, the measurements) and `load-cli` (`bin/load_cli.rs`, the
//! stand-in CLI the server runs) agree on how the stand-in stamps its
//! output with the time it was written.

pub mod stamp;
