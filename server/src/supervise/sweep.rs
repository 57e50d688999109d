//! Killing what left a run's process group: every process whose environment
//! carries the run's marker ([`RUN_MARKER_ENV`]), found by reading the
//! environment of every process on the machine.
//!
//! That read is one pass over `/proc` whatever the number of runs it looks
//! for, so the runs that end together share passes: a reaper hands its
//! marker to one sweeper thread ([`sweep`]), and every marker handed over
//! while a pass runs is looked for in the next one. A pass checks each
//! process's marker against the set of markers (one read of its
//! environment), so 100 CLIs ending at once cost a few passes, not 100.
//!
//! A pass kills what it finds; passes go on until one finds nothing new (at
//! most [`PASSES`]), so a process forked during a pass is caught by the
//! next. A marker drops out of the passes once one finds nothing new for
//! it.

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex, OnceLock, PoisonError};

use nix::sys::signal::{self as nsig, Signal as NixSignal};
use nix::unistd::Pid;
use tokio::sync::oneshot;

use super::RUN_MARKER_ENV;

/// Passes at most, for the markers of one hand-over.
const PASSES: usize = 10;

/// Kills every running process (not a zombie) whose environment has
/// [`RUN_MARKER_ENV`]`=marker` (see the module docs), in a pass shared with
/// the other markers handed over meanwhile. Returns how many were killed.
pub async fn sweep(marker: String) -> usize {
    let (tx, rx) = oneshot::channel();
    match sweeper() {
        Some(s) => {
            s.queue
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push((marker, tx));
            s.queued.notify_one();
            rx.await.unwrap_or(0)
        }
        // No thread to share: this marker alone, on the blocking pool.
        None => tokio::task::spawn_blocking(move || kill_marked(&marker))
            .await
            .unwrap_or(0),
    }
}

/// Kills every running process (not a zombie) whose environment has
/// [`RUN_MARKER_ENV`]`=marker`, in passes of its own (see the module
/// docs). Returns how many were killed.
pub fn kill_marked(marker: &str) -> usize {
    kill_all_marked(&HashSet::from([marker]))
        .remove(marker)
        .unwrap_or(0)
}

/// The markers handed over and not yet looked for, and the thread that
/// looks for them.
struct Sweeper {
    queue: Mutex<Vec<(String, oneshot::Sender<usize>)>>,
    queued: Condvar,
}

/// The sweeper, its thread started on first use; `None` if the thread
/// could not start.
fn sweeper() -> Option<&'static Sweeper> {
    static SWEEPER: OnceLock<Option<Sweeper>> = OnceLock::new();
    SWEEPER
        .get_or_init(|| {
            std::thread::Builder::new()
                .name("marker-sweep".into())
                .spawn(|| {
                    if let Some(s) = sweeper() {
                        s.serve();
                    }
                })
                .inspect_err(|e| {
                    tracing::warn!(error = %e, "could not start the marker sweeper thread");
                })
                .ok()
                .map(|_| Sweeper {
                    queue: Mutex::new(Vec::new()),
                    queued: Condvar::new(),
                })
        })
        .as_ref()
}

impl Sweeper {
    fn serve(&self) {
        loop {
            let batch = {
                let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
                while queue.is_empty() {
                    queue = self
                        .queued
                        .wait(queue)
                        .unwrap_or_else(PoisonError::into_inner);
                }
                std::mem::take(&mut *queue)
            };
            let markers: HashSet<&str> = batch.iter().map(|(m, _)| m.as_str()).collect();
            let mut killed: HashMap<String, usize> = kill_all_marked(&markers)
                .into_iter()
                .map(|(marker, n)| (marker.to_owned(), n))
                .collect();
            for (marker, tx) in batch {
                // Each count once, should a marker be handed over twice.
                let _ = tx.send(killed.remove(&marker).unwrap_or(0));
            }
        }
    }
}

/// Passes over `/proc` until one finds no process of `markers` left that
/// it has not killed already (at most [`PASSES`]), killing what each
/// finds; how many processes each marker's kills reached. A process killed
/// may still be found by the next pass, before it has died: it is not
/// killed or counted again.
fn kill_all_marked<'a>(markers: &HashSet<&'a str>) -> HashMap<&'a str, usize> {
    let mut killed: HashMap<&str, usize> = HashMap::new();
    let mut signalled = HashSet::new();
    let mut left = markers.clone();
    for _ in 0..PASSES {
        if left.is_empty() {
            break;
        }
        let mut found = marked_pids(&left);
        found.retain(|(pid, _)| !signalled.contains(pid));
        left.retain(|m| found.iter().any(|(_, of)| of == m));
        for (pid, marker) in found {
            signalled.insert(pid);
            if nsig::kill(Pid::from_raw(pid as i32), NixSignal::SIGKILL).is_ok() {
                *killed.entry(marker).or_default() += 1;
            }
        }
    }
    killed
}

/// Running (non-zombie) processes whose environment has the marker entry
/// of one of `markers`, each with that marker.
fn marked_pids<'a>(markers: &HashSet<&'a str>) -> Vec<(u32, &'a str)> {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let prefix = format!("{RUN_MARKER_ENV}=");
    procs
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            if pid == me {
                return None;
            }
            let env = std::fs::read(entry.path().join("environ")).ok()?;
            let marker = env.split(|b| *b == 0).find_map(|var| {
                let value = std::str::from_utf8(var.strip_prefix(prefix.as_bytes())?).ok()?;
                markers.get(value).copied()
            })?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            let state = stat[stat.rfind(')')? + 1..].split_whitespace().next()?;
            (state != "Z" && state != "X").then_some((pid, marker))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    use std::process::{Child, Command};

    use super::*;

    /// A `sleep` in a process group of its own (out of any group we would
    /// signal), marked with a marker; killed when dropped, should a check
    /// fail first.
    struct Escaped(Child);

    impl Escaped {
        /// Starts one and waits until its environment reads back with the
        /// marker: while a process execs, its environment reads empty, and
        /// a pass then would not find it.
        fn start(marker: &str) -> Self {
            let child = Command::new("sleep")
                .arg("300")
                .process_group(0)
                .env(RUN_MARKER_ENV, marker)
                .spawn()
                .unwrap();
            let want = format!("{RUN_MARKER_ENV}={marker}");
            let environ = format!("/proc/{}/environ", child.id());
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !std::fs::read(&environ)
                .unwrap_or_default()
                .split(|b| *b == 0)
                .any(|var| var == want.as_bytes())
            {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{environ} never showed {want}"
                );
                std::thread::yield_now();
            }
            Self(child)
        }

        fn running(&mut self) -> bool {
            self.0.try_wait().unwrap().is_none()
        }

        /// Waits for the end of a process a kill was counted for: the
        /// signal that ended it.
        fn killed_by(mut self) -> Option<i32> {
            self.0.wait().unwrap().signal()
        }
    }

    impl Drop for Escaped {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    const SIGKILL: Option<i32> = Some(NixSignal::SIGKILL as i32);

    #[tokio::test]
    async fn markers_handed_over_together_each_kill_their_own_and_nothing_else() {
        let tag = format!("sweep-test-{}", std::process::id());
        let (a, b, c) = (format!("{tag}-a"), format!("{tag}-b"), format!("{tag}-c"));
        let children = [Escaped::start(&a), Escaped::start(&a), Escaped::start(&b)];
        let mut spared = Escaped::start(&c);
        let counts = tokio::join!(
            sweep(a.clone()),
            sweep(b.clone()),
            sweep(format!("{tag}-none"))
        );
        assert_eq!(counts, (2, 1, 0));
        for child in children {
            assert_eq!(child.killed_by(), SIGKILL);
        }
        // Not handed over: still running, until its own marker is.
        assert!(spared.running());
        assert_eq!(sweep(c).await, 1);
        assert_eq!(spared.killed_by(), SIGKILL);
    }

    #[test]
    fn a_marker_is_matched_whole_not_as_the_start_of_another() {
        let tag = format!("prefix-test-{}", std::process::id());
        let longer = format!("{tag}-longer");
        let mut child = Escaped::start(&longer);
        assert_eq!(kill_marked(&tag), 0);
        assert!(child.running());
        assert_eq!(kill_marked(&longer), 1);
        assert_eq!(child.killed_by(), SIGKILL);
    }
}
