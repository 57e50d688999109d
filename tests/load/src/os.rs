//! Operating-system knobs the measurements need.

/// Writes dirty pages out and drops the OS page cache, so the next read
/// comes from the disk. Needs root; false when it was not allowed.
pub fn drop_page_cache() -> bool {
    nix::unistd::sync();
    std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok()
}
