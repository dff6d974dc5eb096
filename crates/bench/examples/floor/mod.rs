//! What the floor programs (`fanout_floor`, `sessions_floor`) share.

/// Raises this process's open-file limit to its hard limit: every socket
/// is a file.
pub fn raise_nofile() {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain get/set of our own limit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        lim.rlim_cur = lim.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
    }
}
