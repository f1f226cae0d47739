//! s3s-fs (crates.io, Apache-2.0) as the cold tier's second real S3 peer, beside
//! moto_server. Unlike moto it checks every request's SigV4 signature. It runs out of
//! process, as its own binary: `.ci/run` installs the pinned release into
//! `~/.cache/es/s3s-fs/<version>` (outside the workspace, whose build it would
//! otherwise change), and `ES_S3S_FS` may name another copy of the same release.
//! A missing binary fails the test with the command to run; it is never skipped.
//!
//! es-log's `tests/cold_conformance.rs` compiles this file too (`#[path]`; es-log
//! cannot depend on es-tests), so it uses std and tempfile only.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The pinned s3s-fs release: the newest whose MSRV (1.92) the workspace's 1.95
/// toolchain meets (0.15.0 and later need 1.96). `.ci/run` installs the same one.
pub const VERSION: &str = "0.14.1";

/// The variable naming an s3s-fs binary, instead of the pinned install.
pub const ENV: &str = "ES_S3S_FS";

/// How long the server may take to say where it listens.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// Where `.ci/run` installs the pinned release.
pub fn pinned_path() -> PathBuf {
    let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default();
    home.join(".cache/es/s3s-fs").join(VERSION).join("bin/s3s-fs")
}

/// The command that installs the pinned release where [`pinned_path`] looks.
pub fn install_command() -> String {
    format!(
        "cargo install --locked s3s-fs --version {VERSION} --features binary --root ~/.cache/es/s3s-fs/{VERSION}"
    )
}

/// The s3s-fs binary of the pinned release, or a panic that says what to run.
pub fn binary() -> PathBuf {
    let (bin, from_env) = match std::env::var_os(ENV) {
        Some(p) => (PathBuf::from(p), true),
        None => (pinned_path(), false),
    };
    if !bin.is_file() {
        let named = match from_env {
            true => format!("{ENV}={} names no file", bin.display()),
            false => format!("s3s-fs {VERSION} is not installed at {}", bin.display()),
        };
        panic!(
            "{named}: the cold-tier tests need it as their second S3 peer; run `{}` outside the workspace \
             (as .ci/run does), or set {ENV} to an s3s-fs {VERSION} binary",
            install_command()
        );
    }
    let out = Command::new(&bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("running {} --version: {e}", bin.display()));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.split_whitespace().any(|w| w == VERSION),
        "{} is not s3s-fs {VERSION} (it says {:?}): run `{}`",
        bin.display(),
        said.trim(),
        install_command()
    );
    bin
}

/// An s3s-fs server on 127.0.0.1 (a port it chose), storing under a temporary
/// directory, with signatures checked against one key pair; killed on drop.
pub struct S3sFs {
    child: Child,
    /// The port it listens on.
    pub port: u16,
    /// Its data root: each bucket is a directory here.
    root: PathBuf,
    /// Holds the root and the server's log.
    _dir: tempfile::TempDir,
}

impl Drop for S3sFs {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl S3sFs {
    /// Starts the pinned s3s-fs requiring requests signed with this key pair, and
    /// waits (at most 30 s) until it says where it listens.
    pub fn start(access_key: &str, secret_key: &str) -> S3sFs {
        let bin = binary();
        let dir = tempfile::tempdir().expect("a temporary directory for s3s-fs");
        let root = dir.path().join("root");
        std::fs::create_dir(&root).expect("creating the s3s-fs root");
        let log_path = dir.path().join("s3s-fs.log");
        let log = std::fs::File::create(&log_path).expect("creating the s3s-fs log");
        let child = Command::new(&bin)
            .args([
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--access-key",
                access_key,
                "--secret-key",
                secret_key,
            ])
            .arg(&root)
            // Its one info line says where it listens; keep requests' errors too.
            .env("RUST_LOG", "s3s_fs=info,s3s=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the s3s-fs log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", bin.display()));
        let mut server = S3sFs { child, port: 0, root, _dir: dir };
        let deadline = Instant::now() + START_TIMEOUT;
        server.port = loop {
            let text = read_lossy(&log_path);
            if let Some(port) = listening_port(&text) {
                break port;
            }
            if let Some(status) = server.child.try_wait().expect("waiting on s3s-fs") {
                panic!("s3s-fs exited ({status}) before listening; its log:\n{text}");
            }
            assert!(
                Instant::now() < deadline,
                "s3s-fs did not listen within {START_TIMEOUT:?}; its log:\n{text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        server
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket: s3s-fs keeps each bucket as a directory of its root.
    pub fn create_bucket(&self, name: &str) {
        std::fs::create_dir(self.root.join(name)).unwrap_or_else(|e| panic!("creating bucket {name}: {e}"));
    }

    /// The data root (buckets are its directories, objects files below them).
    pub fn root(&self) -> &Path {
        &self.root
    }
}

fn read_lossy(path: &Path) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut f) = std::fs::File::open(path) {
        let _ = f.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The port of s3s-fs's `server is running at http://HOST:PORT` line.
fn listening_port(log: &str) -> Option<u16> {
    let at = log.find("server is running at http://")? + "server is running at http://".len();
    let rest = &log[at..];
    // Only a whole line: a read may catch the log mid-write.
    let addr = &rest[..rest.find(char::is_whitespace)?];
    addr.rsplit_once(':')?.1.parse().ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_listening_line_gives_the_port() {
        let line = "  2026-01-01T00:00:00.000000Z  INFO s3s_fs: server is running at http://127.0.0.1:43127\n    at src/main.rs:141\n";
        assert_eq!(super::listening_port(line), Some(43127));
        assert_eq!(super::listening_port("  INFO s3s_fs: server is running at http://127.0.0.1:431"), None);
        assert_eq!(super::listening_port(""), None);
    }
}
