//! Runs a document's shell blocks as written, so the documents cannot drift from
//! the code. In a block, a line's `# prints: TEXT` means TEXT must show in the
//! output; `# fails: TEXT` means the command must fail and TEXT show.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::broker::es_bin;

/// The repository's root (read at run time: a test binary built at another
/// checkout path still finds this checkout's documents).
pub fn repo() -> PathBuf {
    PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()))
        .parent()
        .unwrap()
        .to_owned()
}

/// The first ```sh block after the line of `doc` that starts with `heading`.
pub fn block(doc: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(repo().join(doc)).unwrap();
    let from = text.find(&format!("\n{heading}")).unwrap_or_else(|| panic!("{doc} has no {heading:?}"));
    block_of(&text[from..])
}

/// The first ```sh block of `rest`.
pub fn block_of(rest: &str) -> String {
    let start = rest.find("```sh\n").expect("a ```sh block") + "```sh\n".len();
    let end = rest[start..].find("\n```").expect("the block ends");
    rest[start..start + end].to_owned()
}

/// Every ```sh block of the section that starts with `heading` (up to the next
/// heading of the same level), joined in order.
pub fn blocks(doc: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(repo().join(doc)).unwrap();
    let from = text.find(&format!("\n{heading}")).unwrap_or_else(|| panic!("{doc} has no {heading:?}"));
    let level = heading.split(' ').next().unwrap();
    let mut rest = &text[from + 1 + heading.len()..];
    if let Some(end) = rest.find(&format!("\n{level} ")) {
        rest = &rest[..end];
    }
    let mut all = Vec::new();
    while let Some(start) = rest.find("```sh\n") {
        let body = &rest[start + "```sh\n".len()..];
        let end = body.find("\n```").expect("the block ends");
        all.push(&body[..end]);
        rest = &body[end + 4..];
    }
    assert!(!all.is_empty(), "{doc}: {heading:?} has no ```sh block");
    all.join("\n")
}

/// A block made a bash script, and the texts its output must hold.
pub struct Walk {
    pub script: String,
    pub expected: Vec<String>,
}

/// The block as a bash script (each `from` replaced by its `to`, e.g. a documented
/// port by a free one; `# fails:` lines must fail), and the texts to look for.
pub fn script(block: &str, replace: &[(&str, &str)]) -> Walk {
    let mut lines = vec!["set -eo pipefail".to_owned(), "exec 2>&1".to_owned()];
    let mut expected = Vec::new();
    let mut block = block.to_owned();
    for (from, to) in replace {
        block = block.replace(from, to);
    }
    for line in block.lines() {
        if let Some((cmd, text)) = line.split_once("# fails: ") {
            expected.push(text.trim().to_owned());
            let cmd = cmd.trim();
            lines.push(format!(
                "if {cmd}; then echo 'walkthrough: this should have failed: {cmd}'; exit 97; fi"
            ));
            continue;
        }
        if let Some((_, text)) = line.split_once("# prints: ") {
            expected.push(text.trim().to_owned());
        }
        lines.push(line.to_owned());
    }
    Walk { script: lines.join("\n") + "\n", expected }
}

impl Walk {
    /// Runs the script in `cwd` with es's binaries first on the PATH, no inherited
    /// `ES_API_KEY`, and `env` set,
    /// within `limit`; panics unless it succeeds and prints every expected text.
    /// Answers the output. Cargo inside a block works offline and in its own target.
    /// The script runs in a process group of its own, killed at the end: a broker a
    /// block left running (after a failed line, say) does not outlive the test.
    pub fn run(&self, cwd: &Path, env: &[(&str, &str)], limit: Duration) -> String {
        let bin_dir = es_bin().parent().unwrap().to_owned();
        let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
        let mut child = Command::new("bash")
            .process_group(0)
            .arg("-c")
            .arg(&self.script)
            .current_dir(cwd)
            .env("PATH", path)
            .env("CARGO_NET_OFFLINE", "true")
            .env_remove("CARGO_TARGET_DIR")
            // As a user's shell: kcat on the system's librdkafka, not the vendored one
            // cargo's test-run LD_LIBRARY_PATH points at (`peers::kcat`).
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("ES_API_KEY")
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            let _ = stdout.read_to_string(&mut all);
            all
        });
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let group = format!("-{}", child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).stderr(Stdio::null()).status();
        let _ = child.wait();
        let out = reader.join().unwrap();
        let Some(status) = status else {
            panic!("the walkthrough did not finish within {limit:?}:\n{}\n--- output:\n{out}", self.script)
        };
        assert!(status.success(), "the walkthrough failed ({status}):\n{}\n--- output:\n{out}", self.script);
        for text in &self.expected {
            assert!(out.contains(text.as_str()), "the walkthrough's output lacks {text:?}:\n{out}");
        }
        out
    }
}
