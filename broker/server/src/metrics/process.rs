//! Process figures read from /proc at scrape time (Linux; elsewhere they are
//! left out rather than reported as zero).

/// Open file descriptors: the entries of /proc/self/fd.
pub fn open_fds() -> Option<u64> {
    std::fs::read_dir("/proc/self/fd").ok().map(|d| d.count() as u64)
}

/// Resident memory in bytes: `VmRSS` of /proc/self/status.
pub fn resident_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    parse_vm_rss(&status)
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.trim_start_matches("VmRSS:").trim().trim_end_matches("kB").trim().parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_rss_is_read_in_bytes() {
        assert_eq!(parse_vm_rss("Name:\tx\nVmRSS:\t   2048 kB\nVmSwap: 0 kB\n"), Some(2 * 1024 * 1024));
        assert_eq!(parse_vm_rss("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_has_files_and_memory() {
        assert!(open_fds().is_some_and(|n| n >= 3), "stdin, stdout, stderr at least");
        assert!(resident_bytes().is_some_and(|b| b > 0));
    }
}
