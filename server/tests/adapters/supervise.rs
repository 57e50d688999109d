//! Process supervision with real child processes (sh): line limits, env
//! cleaning, stderr tail, group signals, reaping, recorded-group recovery,
//! and binary discovery.

use std::time::Duration;

use agent_harness_server::adapter::claude::discover::{SearchEnv, find_claude_in};
use agent_harness_server::adapter::{AdapterError, Signal, StdoutLine};
use agent_harness_server::supervise::{
    ProcessSpec, STDIN_QUEUE_LINES, kill_recorded_group, parse_start_time, process_start_time,
    spawn,
};
use agent_harness_server::tasks::Tasks;

fn sh(script: &str) -> ProcessSpec {
    let mut s = ProcessSpec::new("/bin/sh");
    s.args = vec!["-c".into(), script.into()];
    s
}

async fn lines(mut rx: tokio::sync::mpsc::Receiver<StdoutLine>) -> Vec<StdoutLine> {
    let mut out = Vec::new();
    while let Some(l) = rx.recv().await {
        out.push(l);
    }
    out
}

#[tokio::test]
async fn long_lines_become_too_long_and_the_stream_goes_on() {
    let mut spec = sh("head -c 5000 /dev/zero | tr '\\0' x; echo; echo short; printf tail");
    spec.max_line_bytes = 1000;
    let p = spawn(&spec).await.unwrap();
    let got = lines(p.stdout).await;
    assert_eq!(got.len(), 3, "{got:?}");
    let StdoutLine::TooLong { head, len } = &got[0] else {
        panic!("{got:?}")
    };
    assert_eq!(*len, 5000);
    assert!(head.len() <= 1000 && head.chars().all(|c| c == 'x'));
    assert_eq!(got[1], StdoutLine::Line("short".into()));
    assert_eq!(got[2], StdoutLine::Line("tail".into()));
    assert_eq!(p.exited.await.unwrap().code, Some(0));
}

#[tokio::test]
async fn env_is_cleaned_and_explicit_env_wins() {
    // The defaults strip the variables that confuse a nested CLI, and the
    // store URL (its password).
    let spec = ProcessSpec::new("/bin/true");
    for k in [
        "NODE_OPTIONS",
        "VSCODE_INSPECTOR_OPTIONS",
        "CLAUDECODE",
        "CLAUDE_CODE_ENTRYPOINT",
        "AGENT_HARNESS_STORE_URL",
    ] {
        assert!(spec.strip_env_keys.iter().any(|s| s == k), "{k}");
    }
    // HOME is surely inherited by this test: stripping it removes it, and an
    // explicit value for a stripped key still wins.
    assert!(std::env::var_os("HOME").is_some());
    let mut spec = sh("echo \"[${HOME-unset}][$KEEP]\"");
    spec.strip_env_keys = vec!["HOME".into()];
    spec.env = vec![("KEEP".into(), "yes".into())];
    let p = spawn(&spec).await.unwrap();
    assert_eq!(
        lines(p.stdout).await,
        [StdoutLine::Line("[unset][yes]".into())]
    );
    spec.env.push(("HOME".into(), "/explicit".into()));
    let p = spawn(&spec).await.unwrap();
    assert_eq!(
        lines(p.stdout).await,
        [StdoutLine::Line("[/explicit][yes]".into())]
    );
}

#[tokio::test]
async fn stderr_tail_is_bounded_and_exit_code_kept() {
    let p = spawn(&sh(
        "for i in $(seq 1 100); do echo err-$i 1>&2; done; exit 7",
    ))
    .await
    .unwrap();
    let _ = lines(p.stdout).await;
    let exit = p.exited.await.unwrap();
    assert_eq!(exit.code, Some(7));
    assert!(
        exit.stderr_tail.ends_with("err-100"),
        "{}",
        exit.stderr_tail
    );
    assert!(!exit.stderr_tail.contains("err-60\n"));
    assert!(exit.stderr_tail.lines().count() <= 40);
}

/// True when `pid` has exited: gone, a zombie, or past closing its files
/// (what ended the pipe it shared with us).
fn exited(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let no_files =
        std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(true, |mut d| d.next().is_none());
    stat.is_empty() || stat.contains(") Z") || stat.contains(") X") || no_files
}

#[tokio::test]
async fn waiting_for_the_tasks_waits_for_the_reapers_kill() {
    // The leader leaves a straggler in its group that ignores SIGTERM and
    // exits at once: only the reaper's kill ends the straggler, and nobody
    // waits for the exit but the task set.
    let tasks = Tasks::new();
    let mut spec = sh("trap '' TERM INT; sleep 300 & echo $!");
    spec.tasks = tasks.clone();
    let p = spawn(&spec).await.unwrap();
    let mut out = p.stdout;
    let Some(StdoutLine::Line(straggler)) = out.recv().await else {
        panic!()
    };
    let straggler: u32 = straggler.trim().parse().unwrap();
    // The queue for stdin closes with its owner, as a run's control drops it.
    drop((out, p.stdin));
    let mut exit = p.exited;
    assert!(
        tasks.wait(Duration::from_secs(10)).await,
        "still running: {:?}",
        tasks.running()
    );
    // The reaper ran to its end (the exit is sent last) and the straggler
    // is dead.
    assert!(exit.try_recv().is_ok(), "the reaper finished");
    assert!(exited(straggler), "straggler {straggler} still running");
}

#[tokio::test]
async fn signals_reach_the_whole_group_and_the_leader_is_reaped() {
    // The grandchild (sleep) is in the same group and must die with it.
    let p = spawn(&sh("sleep 300 & echo $!; wait")).await.unwrap();
    let mut out = p.stdout;
    let Some(StdoutLine::Line(grandchild)) = out.recv().await else {
        panic!()
    };
    let grandchild: u32 = grandchild.trim().parse().unwrap();
    assert!(std::path::Path::new(&format!("/proc/{grandchild}")).exists());
    p.group.signal(Signal::Term).unwrap();
    let exit = tokio::time::timeout(Duration::from_secs(5), p.exited)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit.signal.as_deref(), Some("SIGTERM"));
    assert!(!p.group.alive());
    assert!(matches!(
        p.group.signal(Signal::Kill),
        Err(AdapterError::NotRunning)
    ));
    // The grandchild is gone (or a zombie of init's about to be reaped):
    // SIGTERM went to the whole group; it dies as soon as the kernel
    // delivers it.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let dead = |stat: &str| stat.is_empty() || stat.contains(") Z");
    let mut stat = String::new();
    while std::time::Instant::now() < deadline {
        stat = std::fs::read_to_string(format!("/proc/{grandchild}/stat")).unwrap_or_default();
        if dead(&stat) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(dead(&stat), "grandchild still running: {stat}");
    assert!(
        !std::path::Path::new(&format!("/proc/{}", p.pid)).exists(),
        "leader reaped"
    );
}

#[tokio::test]
async fn stdin_lines_reach_the_child_and_close_ends_it() {
    let p = spawn(&sh("while read l; do echo got-$l; done; echo eof"))
        .await
        .unwrap();
    let w = p.stdin.unwrap();
    w.send_line("a").unwrap();
    w.send_line("b").unwrap();
    w.close();
    assert!(w.send_line("c").is_err());
    assert_eq!(
        lines(p.stdout).await,
        ["got-a", "got-b", "eof"].map(|s| StdoutLine::Line(s.into()))
    );
}

#[tokio::test]
async fn recorded_group_is_killed_only_when_the_start_time_matches() {
    // `exec`: the group is the leader alone. With a shell and its `sleep`,
    // the SIGKILL'd sleep may still be exiting (not yet a zombie) after the
    // leader was reaped, and the last check would find it running.
    let p = spawn(&sh("exec sleep 300")).await.unwrap();
    let start = p.start_time.expect("start time read from /proc");
    assert_eq!(process_start_time(p.pid), Some(start));
    assert!(
        !kill_recorded_group(p.pid, start + 1),
        "a different start time is another process"
    );
    assert!(p.group.alive());
    assert!(kill_recorded_group(p.pid, start));
    let exit = tokio::time::timeout(Duration::from_secs(5), p.exited)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(exit.signal.as_deref(), Some("SIGKILL"));
    assert!(!kill_recorded_group(p.pid, start), "gone: nothing to kill");
}

#[test]
fn start_time_parsing_survives_odd_command_names() {
    let stat = "123 (a) b (c) S 1 123 123 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 10";
    assert_eq!(parse_start_time(stat), Some(987654));
    assert_eq!(parse_start_time("garbage"), None);
    assert_eq!(process_start_time(u32::MAX), None);
}

#[test]
fn spawn_of_a_missing_program_is_an_error() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let err = rt
        .block_on(spawn(&ProcessSpec::new("/nonexistent/prog")))
        .err()
        .unwrap();
    assert!(matches!(err, AdapterError::Spawn(m) if m.contains("/nonexistent/prog")));
}

#[test]
fn binary_discovery_order() {
    let dir = tempfile::tempdir().unwrap();
    let make = |rel: &str| {
        let p = dir.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    };
    let explicit = make("explicit/claude");
    let env_bin = make("envbin/claude");
    let home_local = make("home/.local/bin/claude");
    let on_path = make("pathdir/claude");
    let base = SearchEnv {
        home: Some(dir.path().join("home")),
        path: Some(dir.path().join("pathdir").into_os_string()),
        ..Default::default()
    };
    let mut e = base.clone();
    e.explicit = Some(explicit.clone());
    e.claude_bin = Some(env_bin.clone().into_os_string());
    assert_eq!(find_claude_in(&e).unwrap(), explicit);
    let mut e = base.clone();
    e.claude_bin = Some(env_bin.clone().into_os_string());
    assert_eq!(find_claude_in(&e).unwrap(), env_bin);
    assert_eq!(find_claude_in(&base).unwrap(), home_local);
    std::fs::remove_file(&home_local).unwrap();
    // /usr/local/bin/claude or /opt/homebrew may exist on a dev machine.
    let found = find_claude_in(&base).unwrap();
    assert!(found == on_path || found.starts_with("/usr/local") || found.starts_with("/opt"));
    // An explicit path that is wrong is an error, not a silent fallback.
    let mut e = base.clone();
    e.explicit = Some(dir.path().join("nope"));
    let Err(AdapterError::BinaryNotFound(msg)) = find_claude_in(&e) else {
        panic!()
    };
    assert!(msg.contains("--claude-bin") && msg.contains("npm install -g"));
    let empty = SearchEnv::default();
    if !std::path::Path::new("/usr/local/bin/claude").exists()
        && !std::path::Path::new("/opt/homebrew/bin/claude").exists()
    {
        let Err(AdapterError::BinaryNotFound(msg)) = find_claude_in(&empty) else {
            panic!()
        };
        assert!(msg.contains("CLAUDE_BIN"));
    }
}

/// A child that stops reading its stdin gets a bounded queue: once its
/// pipe and `STDIN_QUEUE_LINES` queued lines are full, the next line is
/// refused as InputQueueFull (never buffered without bound); a closed
/// stdin is a write error.
#[tokio::test]
async fn a_child_not_reading_stdin_gets_a_bounded_queue() {
    let mut spec = sh("sleep 300");
    spec.stdin = true;
    let p = spawn(&spec).await.unwrap();
    let stdin = p.stdin.as_ref().expect("stdin asked for");
    let line = "x".repeat(64 * 1024);
    let mut queued = 0;
    let refused = loop {
        match stdin.send_line(&line) {
            Ok(()) => queued += 1,
            Err(e) => break e,
        }
        // Let the writer task move what the pipe takes.
        tokio::task::yield_now().await;
        assert!(
            queued <= STDIN_QUEUE_LINES + 64,
            "{queued} lines queued and still accepting"
        );
    };
    assert!(
        matches!(refused, AdapterError::InputQueueFull(_)),
        "{refused:?}"
    );
    assert!(
        queued >= STDIN_QUEUE_LINES,
        "refused after only {queued} lines"
    );
    stdin.close();
    assert!(matches!(
        stdin.send_line("late"),
        Err(AdapterError::Write(_))
    ));
    p.group.signal(Signal::Kill).unwrap();
    p.exited.await.unwrap();
}

/// A client's env (a hostile `StartConfig.env` the operator allowed) cannot
/// replace a run's marker: the process always carries its own run id, so
/// the sweep at its end finds whatever it starts.
#[tokio::test]
async fn a_spoofed_run_marker_in_the_env_never_wins() {
    let mut spec = sh("echo \"$AGENT_HARNESS_RUN_ID\"");
    spec.env = vec![("AGENT_HARNESS_RUN_ID".into(), "someone-else".into())];
    spec.run_marker = Some("run-123".into());
    let p = spawn(&spec).await.unwrap();
    let got = lines(p.stdout).await;
    assert_eq!(got, vec![StdoutLine::Line("run-123".into())]);
    assert_eq!(p.exited.await.unwrap().code, Some(0));
}
