//! Records every cassette scenario from the real CLI (or the real Codex, for
//! a Codex scenario) against the fake API
//! with the project's recorder, then replays the fresh recording and checks
//! it yields the pinned events (`cassettes/expected.json`). With `AH_RECORD_CASSETTES=1` the recordings
//! replace the committed ones in cassettes/ (that is how they were made).

use crate::support::cassette;
use crate::support::cli;
use crate::support::common;

use std::ffi::OsString;
use std::time::Duration;

use agent_harness_protocol::vocab::agent;
use agent_harness_server::adapter::cassette::{Cassette, record_cassette};
use agent_harness_server::adapter::claude::ClaudeCliAdapter;
use agent_harness_server::adapter::claude::{ClaudeInteractiveAdapter, PermissionMode};
use agent_harness_server::adapter::codex::{APP_SERVER_ARGS, CodexAdapter};
use cassette::{replay_checked, scenarios};
use cli::Fixture;
use common::{cassettes_dir, cli_version_under_test, codex_version_under_test};

/// An adapter's CLI arguments as the cassette header records them.
fn strings(args: Vec<OsString>) -> Vec<String> {
    args.iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_and_replay_every_scenario() {
    let keep = std::env::var_os("AH_RECORD_CASSETTES").is_some_and(|v| v == "1");
    let tmp = tempfile::tempdir().unwrap();
    let dir = if keep {
        cassettes_dir()
    } else {
        tmp.path().to_path_buf()
    };
    // AH_CASSETTES=a,b records only those (when re-recording a few).
    let only: Option<Vec<String>> = std::env::var("AH_CASSETTES")
        .ok()
        .map(|v| v.split(',').map(str::to_owned).collect());
    for s in scenarios() {
        if only
            .as_ref()
            .is_some_and(|o| !o.iter().any(|n| n == s.name))
        {
            continue;
        }
        let want = s.expected();
        let fx = Fixture::new().await;
        let perms = if s.relay {
            PermissionMode::Relay
        } else {
            PermissionMode::Settings
        };
        let codex = s.agent == agent::CODEX;
        let mut config = if codex {
            fx.codex_config(s.prompt)
        } else {
            fx.config(s.prompt)
        };
        if let Some(first) = s.resume_from {
            let first_path = tmp.path().join(format!("{}-first.jsonl", s.name));
            let adapter = ClaudeInteractiveAdapter::new(fx.options(perms));
            let first_config = fx.config(first);
            record_cassette(
                adapter,
                vec![],
                first_config,
                &[agent_harness_server::adapter::cassette::ScriptStep::WaitTurnEnd],
                &first_path,
                Duration::from_secs(60),
            )
            .await
            .unwrap();
            let c = Cassette::parse(&std::fs::read_to_string(&first_path).unwrap()).unwrap();
            config.config.resume = c
                .records
                .iter()
                .find_map(|r| match r {
                    agent_harness_server::adapter::cassette::CassetteRecord::Out {
                        line: agent_harness_server::adapter::StdoutLine::Line(l),
                        ..
                    } => serde_json::from_str::<serde_json::Value>(l)
                        .ok()
                        .and_then(|v| v["session_id"].as_str().map(str::to_string)),
                    _ => None,
                })
                .expect("first run's session id");
            if s.forget_first {
                // The first process has exited: its transcript is complete.
                let projects = common::cli_config_dir(fx.home.path()).join("projects");
                let name = format!("{}.jsonl", config.config.resume);
                let removed = std::fs::read_dir(&projects)
                    .unwrap()
                    .flatten()
                    .map(|d| d.path().join(&name))
                    .filter(|p| std::fs::remove_file(p).is_ok())
                    .count();
                assert_eq!(removed, 1, "{}: the first run's transcript", s.name);
            }
        }
        if s.fork {
            config.config.fork = Some(agent_harness_protocol::pb::Fork {
                from_session_id: "source".into(),
                ..Default::default()
            });
        }
        let path = dir.join(format!("{}.cassette.jsonl", s.name));
        let steps = (s.steps)();
        let timeout = Duration::from_secs(90);
        let exit = if codex {
            let a = CodexAdapter::new(fx.codex_options(perms));
            let argv = APP_SERVER_ARGS.iter().map(|a| a.to_string()).collect();
            record_cassette(a, argv, config, &steps, &path, timeout).await
        } else if want.adapter == "cli" {
            let a = ClaudeCliAdapter::new(fx.options(perms));
            let argv = strings(a.args(&config));
            record_cassette(a, argv, config, &steps, &path, timeout).await
        } else {
            let a = ClaudeInteractiveAdapter::new(fx.options(perms));
            let argv = strings(a.args(&config));
            record_cassette(a, argv, config, &steps, &path, timeout).await
        }
        .unwrap_or_else(|e| panic!("recording {}: {e}", s.name));
        assert_eq!(exit.code, want.exit_code, "{}: {exit:?}", s.name);

        let mut cassette = Cassette::parse(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(cassette.header.agent, s.agent, "{}", s.name);
        if codex {
            assert_eq!(cassette.header.cli_version, codex_version_under_test());
            assert_eq!(cassette.header.adapter, want.adapter);
            let (kinds, replay_exit) = replay_checked(&path).await;
            assert_eq!(kinds, want.events, "{}", s.name);
            assert_eq!(replay_exit, exit, "{}", s.name);
            continue;
        }
        if cassette.header.cli_version.is_empty() && s.forget_first {
            // The recorder takes the version from the CLI's init, and a CLI
            // that cannot resume never sends one: ask the binary instead.
            cassette.header.cli_version = cli_version_under_test();
            std::fs::write(&path, cassette.to_jsonl()).unwrap();
        }
        assert_eq!(
            cassette.header.cli_version,
            cli_version_under_test(),
            "{}",
            s.name
        );
        assert_eq!(cassette.header.adapter, want.adapter);
        assert!(cassette.header.argv.iter().any(|a| a == "stream-json"));
        let (kinds, replay_exit) = replay_checked(&path).await;
        assert_eq!(kinds, want.events, "{}", s.name);
        assert_eq!(replay_exit, exit, "{}", s.name);
    }
}
