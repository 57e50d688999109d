//! What the measurements need from the OS.

/// Drops the OS page cache so the next read of any file comes from the
/// disk: `sync` (dirty pages become clean ones) then `1` written to
/// `/proc/sys/vm/drop_caches` (the kernel drops every clean page-cache
/// page, ours and everyone else's on the machine).
///
/// Needs root (and a writable `/proc/sys`). Returns whether the cache was
/// dropped; when it was not, only the `sync` happened, and a "cold" read
/// that follows is cold only for the process's own caches.
pub fn drop_page_cache() -> bool {
    nix::unistd::sync();
    std::fs::write("/proc/sys/vm/drop_caches", b"1").is_ok()
}

/// Server processes this tool started and has not yet stopped: killed if
/// the tool itself is interrupted, so a benchmark stopped with Ctrl-C or
/// SIGTERM leaves no server behind (a panic already stops them on drop).
static CHILDREN: std::sync::Mutex<Vec<u32>> = std::sync::Mutex::new(Vec::new());

/// Remembers a child to kill on interrupt.
pub fn track(pid: u32) {
    CHILDREN.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
}

/// Forgets a child that was stopped.
pub fn untrack(pid: u32) {
    CHILDREN
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|&p| p != pid);
}

/// SIGTERM to every tracked child, then SIGKILL to those still there a
/// second later.
pub fn kill_tracked() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let pids = std::mem::take(&mut *CHILDREN.lock().unwrap_or_else(|e| e.into_inner()));
    for &p in &pids {
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGTERM);
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
    for &p in &pids {
        while kill(Pid::from_raw(p as i32), None).is_ok() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = kill(Pid::from_raw(p as i32), Signal::SIGKILL);
    }
}

/// A process and all its descendants (from every `/proc/PID/stat`'s parent
/// pid; a process that exits meanwhile is left out).
pub fn tree(root: u32) -> Vec<u32> {
    let mut parent_of = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        // After the command name in parentheses: state, then the parent pid.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(ppid) = ppid {
            parent_of.push((pid, ppid));
        }
    }
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// The summed `VmRSS` of a process and its descendants, bytes (shared pages
/// counted in each process, as `ps` does).
pub fn tree_rss(root: u32) -> u64 {
    tree(root).into_iter().map(crate::server::proc_rss).sum()
}
