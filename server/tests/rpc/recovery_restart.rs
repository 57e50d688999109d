//! Restart recovery on a real redb file: a server "crashes" with a live run
//! (its runtime is dropped, nothing is shut down), a new one opens the same
//! file, recovers, and the session resumes.

use crate::support::server;

use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use agent_harness_protocol::pb;
use agent_harness_protocol::pb::event::Payload;
use agent_harness_server::log::{Commit, EventLogs, LogOptions};
use agent_harness_server::recovery::recover;
use agent_harness_server::supervise;
use server::*;

#[test]
fn crash_with_live_run_recovers_on_restart_and_next_send_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");

    // An orphan the crashed server "left behind": a real process in its own
    // group, whose pid + start time the crashed run recorded.
    let mut orphan = Command::new("sleep")
        .arg("300")
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("spawn sleep");
    let orphan_pid = orphan.id();
    let orphan_start = supervise::process_start_time(orphan_pid).expect("start time");

    // Instance 1: start a keep-alive run, finish one turn, then crash.
    let resume_id = {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .unwrap();
        let resume = rt.block_on(async {
            let server = TestServer::on_store(reopen_redb(&path)).await;
            let mut c = server.client().await;
            start(&mut c, "crashy", "hello").await.unwrap();
            let s = wait_session(&mut c, "crashy", |s| {
                s.status == pb::SessionStatus::Idle as i32 && !s.resume_id.is_empty()
            })
            .await;
            assert!(s.process_alive);
            // Record the orphan as this run's process group (the scripted
            // adapter has no OS process of its own).
            let logs = EventLogs::open(server.store.clone(), LogOptions::default()).unwrap();
            logs.commit(
                "crashy",
                Commit::meta(move |m| {
                    m.pid = Some(orphan_pid);
                    m.pid_start_time = Some(orphan_start);
                }),
            )
            .await
            .unwrap();
            drop(logs);
            // No graceful shutdown: dropping aborts the serve task, and the
            // runtime shutdown below drops every run task mid-flight.
            drop(server);
            s.resume_id
        });
        // The crash: every task of the instance is dropped mid-flight.
        rt.shutdown_timeout(Duration::from_millis(100));
        resume
    };

    // Instance 2: same file.
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = reopen_redb(&path);
        let before = store.read_range("crashy", 0, usize::MAX).unwrap();
        assert!(
            !before.iter().any(is_run_end),
            "the crash left the run live"
        );
        let logs = EventLogs::open(store.clone(), LogOptions::default()).unwrap();
        let recovered = recover(&logs, &supervise::kill_recorded_run).await.unwrap();
        assert_eq!(recovered.len(), 1, "{recovered:?}");
        assert!(recovered[0].closed_run.is_some());
        assert!(recovered[0].killed, "the recorded group was killed");
        assert_eq!(recovered[0].resume_id.as_deref(), Some(resume_id.as_str()));
        // Recovery is idempotent: a second pass finds nothing.
        assert!(
            recover(&logs, &supervise::kill_recorded_run)
                .await
                .unwrap()
                .is_empty()
        );
        logs.shutdown().await;

        let events = store.read_range("crashy", 0, usize::MAX).unwrap();
        let end = events.last().unwrap();
        let Some(Payload::RunEnd(r)) = &end.payload else {
            panic!("last event is {end:?}")
        };
        assert_eq!(r.reason, pb::RunEndReason::ServerRestart as i32);
        assert!(r.inferred);
        assert_eq!(r.source, "recovery");
        assert_eq!(events.iter().filter(|e| is_run_end(e)).count(), 1);

        let server = TestServer::on_store(store).await;
        let mut c = server.client().await;
        let s = get(&mut c, "crashy").await;
        assert_eq!(s.status, pb::SessionStatus::Idle as i32);
        assert!(!s.process_alive);
        assert_eq!(s.resume_id, resume_id);
        let run = send(&mut c, "crashy", "where were we").await.unwrap();
        let spawns = server.adapter.record().spawns;
        assert_eq!(spawns.len(), 1);
        assert_eq!(spawns[0].config.resume, resume_id, "the next Send resumes");
        let mut sub = Sub::open(&mut c, "crashy", 0).await;
        sub.until("turn_end of the resumed run", |e| {
            is_turn_end(e) && e.run_id == run
        })
        .await;
        server.shutdown().await.unwrap();
    });

    // The orphan is gone (killed by recovery, reaped here).
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if let Some(status) = orphan.try_wait().unwrap() {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(status.signal(), Some(9), "SIGKILL");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "orphan still alive");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_reused_pid_is_never_killed() {
    let mut child = Command::new("sleep")
        .arg("30")
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = child.id();
    let start = supervise::process_start_time(pid).unwrap();
    // A different start time: the pid now belongs to someone else.
    assert!(!supervise::kill_recorded_group(pid, start + 1));
    assert!(child.try_wait().unwrap().is_none(), "untouched");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The CLI's leader died with the crashed server, but a grandchild (a
/// backgrounded Bash command) lives on in its group: recovery kills it.
#[test]
fn an_orphaned_group_is_killed_even_when_its_leader_is_dead() {
    let mut leader = Command::new("sh")
        .args(["-c", "sleep 300 >/dev/null 2>&1 & echo $!"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let pid = leader.id();
    let start = supervise::process_start_time(pid).unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(leader.stdout.as_mut().unwrap(), &mut out).unwrap();
    let grandchild: u32 = out.trim().parse().unwrap();
    leader.wait().unwrap();
    assert!(
        supervise::process_start_time(pid).is_none(),
        "leader reaped"
    );
    let alive = |p: u32| {
        std::fs::read_to_string(format!("/proc/{p}/stat"))
            .map(|s| !s.contains(") Z"))
            .unwrap_or(false)
    };
    assert!(
        alive(grandchild),
        "the backgrounded sleep outlives its leader"
    );

    assert!(
        supervise::kill_recorded_group(pid, start),
        "the group's rest was killed"
    );
    let deadline = std::time::Instant::now() + WAIT;
    while alive(grandchild) {
        assert!(
            std::time::Instant::now() < deadline,
            "grandchild {grandchild} still alive"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Nothing in the group runs any more (a zombie waiting for its reaper
    // does not count): a second kill reaches nobody.
    assert!(!supervise::kill_recorded_group(pid, start));
}

#[tokio::test]
async fn recovery_ends_the_run_and_forgets_its_process_in_one_commit() {
    use crate::support::probe::Probe;
    use agent_harness_server::log::NewEvent;
    use std::sync::atomic::Ordering;
    use std::sync::{Arc, Mutex};

    let probe = Arc::new(Probe::default());
    let logs = EventLogs::open(probe.clone(), LogOptions::default()).unwrap();
    let start = NewEvent {
        run_id: "r1".into(),
        payload: Payload::RunStart(pb::RunStart::default()),
        cli_line: String::new(),
    };
    logs.commit("s", Commit::events(vec![start])).await.unwrap();
    logs.commit(
        "s",
        Commit::meta(|m| {
            m.pid = Some(4242);
            m.pid_start_time = Some(7);
        }),
    )
    .await
    .unwrap();
    let before = probe.commits.load(Ordering::SeqCst);
    let asked = Arc::new(Mutex::new(Vec::new()));
    let kill = {
        let asked = asked.clone();
        move |recorded: Option<(u32, u64)>, run: &str| {
            asked.lock().unwrap().push((recorded, run.to_owned()));
            true
        }
    };
    let recovered = recover(&logs, &kill).await.unwrap();
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert_eq!(recovered[0].closed_run.as_deref(), Some("r1"));
    assert_eq!(
        *asked.lock().unwrap(),
        vec![(Some((4242, 7)), "r1".to_owned())]
    );
    assert_eq!(
        probe.commits.load(Ordering::SeqCst) - before,
        1,
        "the run_end and the forgotten pid are one commit"
    );
    let meta = logs.meta("s").await.unwrap().unwrap();
    assert_eq!((meta.pid, meta.pid_start_time), (None, None));
    let events = logs.read_range("s", 0, usize::MAX).await.unwrap();
    assert!(is_run_end(events.last().unwrap()), "{events:?}");
    logs.shutdown().await;
}
