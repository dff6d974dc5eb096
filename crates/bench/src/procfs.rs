//! Resident memory and CPU time of a process, and kernel socket queues,
//! from /proc (Linux only).

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
    sum(&sample_each(pids))
}

/// `sample` of each process, in the order given (None: gone), so a cluster's
/// nodes can be told apart in the plots.
pub fn sample_each(pids: &[u32]) -> Vec<Option<(u64, f64)>> {
    pids.iter().map(|&p| sample(p)).collect()
}

/// The sum of the processes still there.
pub fn sum(each: &[Option<(u64, f64)>]) -> (u64, f64) {
    each.iter().flatten().fold((0, 0.0), |(r, c), &(r2, c2)| (r + r2, c + c2))
}

/// A legend name for a process under test: `node N` for a throng cluster
/// node (`--node-id N` on its command line), else its command name; with the pid.
pub fn label(pid: u32) -> String {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    let args: Vec<String> = cmdline.split(|&b| b == 0).map(|a| String::from_utf8_lossy(a).into_owned()).collect();
    label_of(comm.trim(), &args, pid)
}

fn label_of(comm: &str, args: &[String], pid: u32) -> String {
    let node = args.iter().enumerate().find_map(|(i, a)| match a.strip_prefix("--node-id") {
        Some("") => args.get(i + 1).cloned(),
        Some(v) => v.strip_prefix('=').map(str::to_owned),
        None => None,
    });
    match (node, comm) {
        (Some(n), _) => format!("node {n} ({pid})"),
        (None, "") => format!("pid {pid}"),
        (None, c) => format!("{c} ({pid})"),
    }
}

/// Send-queue bytes (`tx_queue`: written, not yet acknowledged by the peer)
/// of every TCP socket whose local port is `port` except the listener, from
/// /proc/net/tcp and tcp6: on a local server, its connections, including
/// ones it has closed whose data the kernel is still trying to deliver.
pub fn tcp_send_queues(port: u16) -> Vec<u64> {
    let mut out = Vec::new();
    for file in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(file) else { continue };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            // sl local_address rem_address st tx_queue:rx_queue ...
            let (Some(local), Some(st), Some(q)) = (f.get(1), f.get(3), f.get(4)) else { continue };
            let local_port = local.rsplit(':').next().and_then(|p| u16::from_str_radix(p, 16).ok());
            // 0A: LISTEN.
            if local_port != Some(port) || *st == "0A" {
                continue;
            }
            if let Some(tx) = q.split(':').next().and_then(|t| u64::from_str_radix(t, 16).ok()) {
                out.push(tx);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_own_process() {
        let (rss, cpu) = super::sample(std::process::id()).unwrap();
        assert!(rss > 1 << 20);
        assert!(cpu >= 0.0);
    }

    #[test]
    fn labels_name_cluster_nodes_and_other_processes() {
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(super::label_of("throng", &args(&["throng", "serve", "--node-id", "3"]), 7), "node 3 (7)");
        assert_eq!(super::label_of("throng", &args(&["throng", "--node-id=12"]), 7), "node 12 (7)");
        assert_eq!(super::label_of("nats-server", &args(&["nats-server", "-p", "4222"]), 8), "nats-server (8)");
        assert_eq!(super::label_of("", &[], 9), "pid 9");
        assert!(super::label(std::process::id()).ends_with(&format!("({})", std::process::id())));
    }

    #[test]
    fn sees_a_listening_port_s_established_sockets() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (_s, _) = l.accept().unwrap();
        assert_eq!(super::tcp_send_queues(port), vec![0]);
    }
}
