//! The Python environment of the client tests: a venv at `$ES_PYTHON_VENV` (default
//! `~/.cache/es/venv`, which `.ci/schemathesis` shares) with
//! `tests/python/requirements.txt` installed. It is made once, under a file lock so
//! parallel test binaries do not race, and pip runs again only when the
//! requirements file changed (its text is kept in a stamp file in the venv).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long creating the venv and installing the requirements may take.
const INSTALL_TIMEOUT: Duration = Duration::from_secs(20 * 60);
/// The stamp file, inside the venv, holding the requirements last installed.
const STAMP: &str = ".es-requirements";

/// `tests/python/`.
pub fn scripts_dir() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("python")
}

/// The venv's Python interpreter, with the requirements installed.
pub fn python() -> PathBuf {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| prepare().unwrap_or_else(|e| panic!("preparing the Python venv: {e:#}"))).clone()
}

fn venv_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("ES_PYTHON_VENV") {
        return Ok(PathBuf::from(dir));
    }
    let home =
        std::env::var_os("HOME").ok_or_else(|| anyhow::anyhow!("neither ES_PYTHON_VENV nor HOME is set"))?;
    Ok(PathBuf::from(home).join(".cache/es/venv"))
}

fn prepare() -> anyhow::Result<PathBuf> {
    let venv = venv_dir()?;
    let parent =
        venv.parent().ok_or_else(|| anyhow::anyhow!("{} has no parent directory", venv.display()))?;
    std::fs::create_dir_all(parent)?;
    let lock_path = venv.with_extension("lock");
    let lock = std::fs::OpenOptions::new().create(true).truncate(false).write(true).open(&lock_path)?;
    // Held until this function returns; the OS drops it if the process dies.
    lock.lock()?;
    let python = venv.join("bin/python");
    if !python.exists() {
        run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    }
    let requirements = scripts_dir().join("requirements.txt");
    let wanted = std::fs::read_to_string(&requirements)?;
    let stamp = venv.join(STAMP);
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        eprintln!(
            "installing {} into {} (once per change of the file)",
            requirements.display(),
            venv.display()
        );
        run(Command::new(&python)
            .args(["-m", "pip", "install", "-q", "--disable-pip-version-check", "-r"])
            .arg(&requirements))?;
        std::fs::write(&stamp, &wanted)?;
    }
    Ok(python)
}

/// Runs `cmd` to completion within [`INSTALL_TIMEOUT`], its output passed through.
fn run(cmd: &mut Command) -> anyhow::Result<()> {
    let mut child = cmd.stdin(Stdio::null()).spawn()?;
    let deadline = Instant::now() + INSTALL_TIMEOUT;
    loop {
        if let Some(status) = child.try_wait()? {
            anyhow::ensure!(status.success(), "{cmd:?} failed: {status}");
            return Ok(());
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("{cmd:?} did not finish within {INSTALL_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs a script of `tests/python/` with `args`, bounded by `timeout`; returns
/// (success, stdout + stderr).
pub fn run_script(script: &str, args: &[&str], timeout: Duration) -> (bool, String) {
    spawn_script(script, args).finish(timeout)
}

/// A script of `tests/python/` running in the background: [`Script::finish`] waits
/// for it (bounded) and returns what it printed.
pub struct Script {
    child: std::process::Child,
    out_path: PathBuf,
}

/// Starts a script of `tests/python/` with `args`, its stdout and stderr to a file.
pub fn spawn_script(script: &str, args: &[&str]) -> Script {
    // Tests of one binary run in parallel: each run gets its own log file.
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let run = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let out_path = std::env::temp_dir().join(format!("es-py-{}-{run}.log", std::process::id()));
    let out = std::fs::File::create(&out_path).expect("creating the script's log file");
    let child = Command::new(python())
        .arg(scripts_dir().join(script))
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("cloning a file handle"))
        .stderr(out)
        .spawn()
        .expect("starting python");
    Script { child, out_path }
}

impl Script {
    /// Waits for the script, killing it after `timeout`; returns (success, stdout +
    /// stderr).
    pub fn finish(mut self, timeout: Duration) -> (bool, String) {
        let deadline = Instant::now() + timeout;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("polling python") {
                break Some(status);
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let mut text = std::fs::read_to_string(&self.out_path).unwrap_or_default();
        if status.is_none() {
            text.push_str(&format!("\n(killed after {timeout:?})"));
        }
        (status.is_some_and(|s| s.success()), text)
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_file(&self.out_path);
    }
}
