//! Facts about the machine a benchmark ran on (CPUs, memory, kernel, load, and the
//! filesystem under the data directory), read from /proc so reports are comparable.

use std::path::{Path, PathBuf};

use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct Machine {
    pub nproc: usize,
    pub cpu_model: Option<String>,
    pub mem_total_mib: Option<u64>,
    /// The first line of /proc/version.
    pub kernel: Option<String>,
    /// Other work on the machine when the run started and when it ended.
    pub load_start: Load,
    pub load_end: Option<Load>,
    pub filesystem: Filesystem,
}

/// /proc/loadavg and the "some" lines of /proc/pressure/{cpu,io} (PSI): the share
/// of time tasks waited for a CPU or for I/O over the last 10, 60 and 300 s.
#[derive(Debug, Clone, Serialize)]
pub struct Load {
    pub loadavg: Option<String>,
    pub cpu_pressure: Option<String>,
    pub io_pressure: Option<String>,
}

impl Load {
    pub fn now() -> Load {
        Load {
            loadavg: first_line("/proc/loadavg"),
            cpu_pressure: first_line("/proc/pressure/cpu"),
            io_pressure: first_line("/proc/pressure/io"),
        }
    }

    /// `load 1.30 0.69 0.30, cpu some avg10=.., io some avg10=..`
    pub fn describe(&self) -> String {
        // The PSI lines end in a cumulative total that says nothing at a glance.
        let or_unknown = |s: &Option<String>| {
            s.as_deref().map_or("unknown", |l| l.split(" total=").next().unwrap_or(l)).to_owned()
        };
        let loadavg = self.loadavg.as_deref().map_or("unknown", |l| l.rsplitn(3, ' ').last().unwrap_or(l));
        format!(
            "loadavg {loadavg}; cpu pressure {}; io pressure {}",
            or_unknown(&self.cpu_pressure),
            or_unknown(&self.io_pressure)
        )
    }
}

/// The mount that holds the benchmark directory.
#[derive(Debug, Clone, Serialize)]
pub struct Filesystem {
    pub path: PathBuf,
    pub mount_point: Option<String>,
    pub fs_type: Option<String>,
    pub device: Option<String>,
}

impl Filesystem {
    /// `ext4 /dev/vda on /`, or `unknown` when /proc/self/mountinfo says nothing.
    pub fn describe(&self) -> String {
        match (&self.fs_type, &self.device, &self.mount_point) {
            (Some(t), Some(d), Some(m)) => format!("{t} {d} on {m}"),
            _ => "unknown filesystem".into(),
        }
    }

    /// fsync on these does not reach a disk, so the numbers mean nothing.
    pub fn is_memory_backed(&self) -> bool {
        matches!(self.fs_type.as_deref(), Some("tmpfs" | "ramfs"))
    }
}

/// Bytes an unprivileged writer may still write to the filesystem holding `dir`.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(dir).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

/// Refuses to go on when the filesystem holding `dir` has less than `min_bytes`
/// free: a benchmark that fills the disk measures the broker's `StorageError`s,
/// and starves everything else on the machine.
pub fn ensure_free_space(dir: &Path, min_bytes: u64, what: &str) -> anyhow::Result<()> {
    let Some(free) = free_bytes(dir) else { return Ok(()) };
    let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
    anyhow::ensure!(
        free >= min_bytes,
        "only {:.1} GiB free under {}, and {what} needs about {:.1} GiB: free some space or pass --dir on a \
         filesystem with more room",
        gib(free),
        dir.display(),
        gib(min_bytes)
    );
    Ok(())
}

impl Machine {
    /// Reads everything but `load_end`.
    pub fn probe(dir: &Path) -> Machine {
        Machine {
            nproc: std::thread::available_parallelism().map_or(1, usize::from),
            cpu_model: proc_field("/proc/cpuinfo", "model name"),
            mem_total_mib: proc_field("/proc/meminfo", "MemTotal")
                .and_then(|v| v.trim_end_matches(" kB").trim().parse::<u64>().ok())
                .map(|kb| kb / 1024),
            kernel: first_line("/proc/version"),
            load_start: Load::now(),
            load_end: None,
            filesystem: filesystem_of(dir),
        }
    }

    pub fn note_end(&mut self) {
        self.load_end = Some(Load::now());
    }
}

fn first_line(path: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().next().map(|l| l.trim().to_owned())
}

/// The value of the first `key: value` line of a /proc file.
fn proc_field(path: &str, key: &str) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().to_owned())
}

/// Finds the mount with the longest mount point that contains `dir`.
fn filesystem_of(dir: &Path) -> Filesystem {
    let mut fs = Filesystem { path: dir.to_path_buf(), mount_point: None, fs_type: None, device: None };
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return fs;
    };
    let best =
        info.lines().filter_map(parse_mountinfo).filter(|m| dir.starts_with(&m.0)).max_by_key(|m| m.0.len());
    if let Some((mount, fs_type, device)) = best {
        fs.mount_point = Some(mount);
        fs.fs_type = Some(fs_type);
        fs.device = Some(device);
    }
    fs
}

/// (mount point, fs type, source) of one /proc/self/mountinfo line.
fn parse_mountinfo(line: &str) -> Option<(String, String, String)> {
    let (before, after) = line.split_once(" - ")?;
    let mount = before.split(' ').nth(4)?;
    let mut after = after.split(' ');
    let fs_type = after.next()?.to_owned();
    let device = after.next()?.to_owned();
    Some((unescape(mount), fs_type, device))
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
fn unescape(s: &str) -> String {
    s.replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
}

#[cfg(test)]
mod free_space_tests {
    use super::*;

    #[test]
    fn a_run_that_would_fill_the_disk_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        assert!(free_bytes(dir.path()).is_some_and(|b| b > 0));
        ensure_free_space(dir.path(), 0, "nothing").unwrap();
        let e = ensure_free_space(dir.path(), u64::MAX, "a huge row").unwrap_err().to_string();
        assert!(e.contains("a huge row needs about") && e.contains("pass --dir"), "{e}");
    }
}
