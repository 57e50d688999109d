//! Where children are started: one long-lived spawner thread, each child
//! set to die with the server (`PR_SET_PDEATHSIG`). See [`spawn_on_spawner`]
//! for why one thread. The `agent-harness` binary starts each child through
//! a trampoline ([`super::trampoline`], no fork of the server); elsewhere (a test
//! binary using the library) the child is forked and asks for the signal
//! between fork and exec ([`die_with_the_server`]).

use std::sync::OnceLock;

use nix::sys::signal::Signal as NixSignal;
use tokio::process::Command;
use tokio::sync::oneshot;

use crate::process::AdapterError;

/// Makes the child's death follow the server's: `PR_SET_PDEATHSIG(SIGKILL)`
/// in the child between fork and exec. A server killed with SIGKILL runs no
/// code of its own, so without this its CLI would go on with its turn (model
/// calls, tools) while another node already runs the session.
///
/// Only the direct child (the CLI) gets it; the setting is cleared in what
/// the child forks. A Bash command the CLI already started runs in a
/// session of its own to its end; the run marker finds it (at restart on
/// the same node).
///
/// Used when the trampoline is not enabled (a program other than the
/// `agent-harness` binary). The crate's one `unsafe`: std offers no safe
/// way to run code in the child before exec. (The exec helper, a program
/// of its own compiled by the build script, makes its system calls in
/// `unsafe` too: `server/exec-helper/main.rs`.)
#[allow(unsafe_code)]
pub(super) fn die_with_the_server(cmd: &mut Command) {
    // Read before the fork: in the child, getpid() is the child's own.
    let server = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and makes
    // only async-signal-safe system calls (prctl, getppid, _exit); it
    // allocates nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(NixSignal::SIGKILL)?;
            // The server may have died between the fork and the prctl: the
            // child was then re-parented already and no signal will come.
            if nix::unistd::getppid() != server {
                nix::libc::_exit(1);
            }
            Ok(())
        });
    }
}

/// A spawn to run on the spawner thread.
type SpawnJob = Box<dyn FnOnce() + Send>;

/// The spawner thread's queue, started by the first spawn.
static SPAWNER: OnceLock<std::sync::mpsc::Sender<SpawnJob>> = OnceLock::new();

/// Spawns `cmd` on the spawner thread: one `std::thread` that lives as long
/// as the server process, and whose only work is to start children.
///
/// Why a thread of its own: the kernel sends the parent-death signal when
/// the THREAD that forked the child exits, not when the process does. A
/// tokio worker can become a blocking-pool thread (`block_in_place`), and
/// blocking-pool threads exit after being idle for a while; a child forked
/// there would be killed mid-turn by a server that is alive and well. The
/// spawner thread never exits (its queue's sender is a static, never
/// dropped), so the signal comes only when the process dies.
///
/// The thread enters the caller's runtime to spawn, so tokio registers the
/// child with that runtime's reaping, and hands the child back; everything
/// after the spawn (readers, reaper) runs on the caller's runtime.
pub(super) async fn spawn_on_spawner(
    mut cmd: Command,
) -> Result<std::io::Result<tokio::process::Child>, AdapterError> {
    let runtime = tokio::runtime::Handle::current();
    let (tx, rx) = oneshot::channel();
    let job: SpawnJob = Box::new(move || {
        let _entered = runtime.enter();
        let _ = tx.send(cmd.spawn());
    });
    spawner()
        .send(job)
        .map_err(|_| AdapterError::Spawn("the spawner thread is gone".into()))?;
    rx.await
        .map_err(|_| AdapterError::Spawn("the spawner thread dropped the spawn".into()))
}

fn spawner() -> &'static std::sync::mpsc::Sender<SpawnJob> {
    SPAWNER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("agent-harness-spawner".into())
            .spawn(move || {
                for job in rx {
                    // A panicking fork must not end the thread: every
                    // later spawn would fail. The caller sees its oneshot
                    // dropped.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                }
            })
            .expect("start the spawner thread");
        tx
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::process::Signal;
    use crate::supervise::{ProcessSpec, spawn};

    /// Whether `pid` runs (exists and is not a zombie).
    fn running(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            let state = stat
                .rfind(')')
                .and_then(|i| stat[i + 1..].split_whitespace().next());
            !matches!(state, Some("Z" | "X") | None)
        })
    }

    /// The kernel kills a child when the thread that forked it exits. A
    /// spawn asked for on a blocking-pool thread that then exits (idle)
    /// must leave the child running: the fork happened on the spawner
    /// thread, which lives as long as the process.
    #[test]
    fn a_child_outlives_the_blocking_thread_that_asked_for_it() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            // Idle blocking threads exit at once instead of after 10 s.
            .thread_keep_alive(Duration::from_millis(10))
            .enable_all()
            .build()
            .expect("runtime");
        let (child, tid) = runtime.block_on(async {
            tokio::task::spawn_blocking(|| {
                let mut spec = ProcessSpec::new("sleep");
                spec.args = vec!["30".into()];
                spec.stdin = false;
                let child = tokio::runtime::Handle::current()
                    .block_on(spawn(&spec))
                    .expect("spawn sleep");
                (child, nix::unistd::gettid())
            })
            .await
            .expect("the blocking task")
        });
        // The blocking thread is idle now; wait until it has exited. The
        // parent-death signal is sent while a thread exits, before its
        // /proc entry goes.
        let task = format!("/proc/self/task/{tid}");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::path::Path::new(&task).exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the blocking thread {tid} never exited"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // A SIGKILL sent with the thread's exit takes effect within
        // milliseconds; give it ample time to show.
        std::thread::sleep(Duration::from_millis(300));
        assert!(
            running(child.pid) && child.group.alive(),
            "the child died with the thread that asked for it"
        );
        child.group.signal(Signal::Kill).expect("kill the child");
        let exit = runtime.block_on(child.exited).expect("the reaper reports");
        assert_eq!(exit.signal.as_deref(), Some("SIGKILL"), "{exit:?}");
    }
}
