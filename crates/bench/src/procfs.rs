//! Resident memory and CPU time of a process, from /proc (Linux only).

/// (RSS in bytes, CPU time user+system in seconds), or None if the process is gone.
pub fn sample(pid: u32) -> Option<(u64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb: u64 = status.lines().find_map(|l| l.strip_prefix("VmRSS:"))?.split_whitespace().next()?.parse().ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after ')'.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some((rss_kb * 1024, (utime + stime) as f64 / hz))
}

/// Sums `sample` over several processes; missing ones count as zero.
pub fn sample_sum(pids: &[u32]) -> (u64, f64) {
    pids.iter().filter_map(|&p| sample(p)).fold((0, 0.0), |(r, c), (r2, c2)| (r + r2, c + c2))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_own_process() {
        let (rss, cpu) = super::sample(std::process::id()).unwrap();
        assert!(rss > 1 << 20);
        assert!(cpu >= 0.0);
    }
}
