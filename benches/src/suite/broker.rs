//! The es-broker the suite starts for itself: a child process on loopback ports
//! chosen by the OS, with a fresh data directory, stopped with SIGTERM at the end
//! (SIGKILL if it does not exit in time). Every wait here is bounded.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// How long the broker may take to print its addresses.
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long it may take to exit after SIGTERM (it drains for at most 10 s).
const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// A running broker; killed on drop if [`Broker::stop`] was not called.
#[derive(Debug)]
pub struct Broker {
    child: Option<Child>,
    pub binary_addr: String,
    /// The Kafka listener's host:port (`es-bench kafka` measures it).
    pub kafka_addr: String,
    pub url: String,
    pub data_dir: PathBuf,
    stderr: Arc<Mutex<String>>,
}

/// `es-broker` next to the running es-bench executable (the same target dir).
pub fn default_bin() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the es-bench executable")?;
    let dir = exe.parent().context("the es-bench executable has no directory")?;
    Ok(dir.join("es-broker"))
}

impl Broker {
    /// Starts `bin` with its data in `data_dir` (created if needed).
    pub fn start(bin: &Path, data_dir: &Path) -> Result<Broker> {
        Self::start_with(bin, data_dir, &[], &[])
    }

    /// `start` with more flags and environment variables.
    pub fn start_with(bin: &Path, data_dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> Result<Broker> {
        std::fs::create_dir_all(data_dir).with_context(|| format!("creating {}", data_dir.display()))?;
        let mut child = Command::new(bin)
            .arg("--data-dir")
            .arg(data_dir)
            .args(["--bind", "127.0.0.1:0", "--bind-binary", "127.0.0.1:0", "--bind-kafka", "127.0.0.1:0"])
            .args(extra)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} (build it with cargo build --release)", bin.display()))?;
        let stderr = collect(child.stderr.take().context("the broker's stderr")?);
        let lines = lines_of(child.stdout.take().context("the broker's stdout")?);
        let mut broker = Broker {
            child: Some(child),
            binary_addr: String::new(),
            kafka_addr: String::new(),
            url: String::new(),
            data_dir: data_dir.to_path_buf(),
            stderr,
        };
        let deadline = Instant::now() + START_TIMEOUT;
        // The broker prints its binary address, then its HTTP address.
        while broker.url.is_empty() {
            let left = deadline.saturating_duration_since(Instant::now());
            let Ok(line) = lines.recv_timeout(left) else {
                bail!(
                    "es-broker did not print its addresses within {START_TIMEOUT:?}; stderr:\n{}",
                    broker.stderr()
                );
            };
            if let Some(addr) = line.strip_prefix("listening on es://") {
                // A TLS listener adds a note after its address: " (tls)".
                broker.binary_addr = addr.split_whitespace().next().unwrap_or_default().to_owned();
            } else if let Some(addr) = line.strip_prefix("listening on kafka://") {
                broker.kafka_addr = addr.split_whitespace().next().unwrap_or_default().to_owned();
            } else if let Some(url) = line.strip_prefix("listening on ") {
                broker.url = url.trim().to_owned();
            }
        }
        if broker.binary_addr.is_empty() {
            bail!("es-broker printed no es:// address; stderr:\n{}", broker.stderr());
        }
        Ok(broker)
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    fn stderr(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// SIGTERM, then waits up to [`STOP_TIMEOUT`]; SIGKILL after that. Returns
    /// whether the broker exited cleanly on its own.
    pub fn stop(&mut self) -> Result<bool> {
        let Some(mut child) = self.child.take() else {
            return Ok(true);
        };
        let sent = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status();
        if sent.is_ok_and(|s| s.success()) {
            let deadline = Instant::now() + STOP_TIMEOUT;
            while Instant::now() < deadline {
                if let Some(status) = child.try_wait().context("waiting for es-broker")? {
                    return Ok(status.success());
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
        Ok(false)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The lines of `from`, read on a thread of their own.
fn lines_of(from: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Keeps the broker's stderr (for error messages) without echoing it over the bars.
fn collect(mut from: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = text.clone();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            if let Ok(mut s) = sink.lock() {
                // Bounded: only the last 64 KiB matter for an error message.
                s.push_str(&String::from_utf8_lossy(&buf[..n]));
                if s.len() > 64 * 1024 {
                    let cut = s.len() - 32 * 1024;
                    let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
                    s.drain(..cut);
                }
            }
        }
    });
    text
}
