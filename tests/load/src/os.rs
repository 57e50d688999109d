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
