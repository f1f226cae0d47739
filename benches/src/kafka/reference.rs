//! The Apache Kafka broker the benchmark compares with: started here through
//! `tests/golden-capture/kafka.sh` (KRaft, one node, plaintext on 127.0.0.1, jars
//! from Maven Central cached in ~/.cache/es) with its data on the same disk as es's,
//! and stopped at the end; or one already running, given by address.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The Apache Kafka release compared with, as the compatibility tests pin it.
pub const KAFKA_VERSION: &str = "4.4.0";

/// A reference broker: its address and, when known, its JVM's pid (for CPU time).
#[derive(Debug)]
pub struct Reference {
    pub addr: String,
    pub pid: Option<u32>,
    /// Set when this run started it: the script and the directory to stop it with.
    started: Option<(PathBuf, PathBuf)>,
}

impl Reference {
    /// One already running at `addr`.
    pub fn given(addr: &str) -> Reference {
        Reference { addr: addr.to_owned(), pid: None, started: None }
    }

    /// Starts Apache Kafka with `script` on `port`, its data and logs in `dir`
    /// (formatted afresh: the directory must not hold an earlier run's broker).
    pub fn start(script: &Path, dir: &Path, port: u16) -> Result<Reference> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        println!("apache kafka {KAFKA_VERSION}: starting on 127.0.0.1:{port} with {}", script.display());
        let out = Command::new("bash")
            .arg(script)
            .args(["start"])
            .arg(dir)
            .env("KAFKA_VERSION", KAFKA_VERSION)
            .env("KAFKA_PORT", port.to_string())
            .output()
            .with_context(|| format!("running {}", script.display()))?;
        if !out.status.success() {
            bail!(
                "{} start failed: {}{}",
                script.display(),
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        print!("{}", String::from_utf8_lossy(&out.stdout));
        let pid = std::fs::read_to_string(dir.join("kafka.pid")).ok().and_then(|p| p.trim().parse().ok());
        Ok(Reference {
            addr: format!("127.0.0.1:{port}"),
            pid,
            started: Some((script.to_path_buf(), dir.to_path_buf())),
        })
    }

    /// Stops a broker this run started (the script waits for it, bounded) and
    /// deletes its data unless `keep_data`.
    pub fn stop(self, keep_data: bool) -> Result<()> {
        let Some((script, dir)) = self.started else {
            return Ok(());
        };
        let status = Command::new("bash")
            .arg(&script)
            .arg("stop")
            .arg(&dir)
            .status()
            .with_context(|| format!("running {} stop", script.display()))?;
        if !status.success() {
            println!("WARNING: {} stop {} failed", script.display(), dir.display());
        }
        if keep_data {
            println!("kept apache kafka's data and logs in {}", dir.display());
        } else {
            std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
        }
        Ok(())
    }
}
