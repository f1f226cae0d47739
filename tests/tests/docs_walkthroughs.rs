//! The walkthroughs in README.md ("Try it") and docs/plugins.md ("From `cargo new`
//! to a bound validator") run here, as written, against the real broker and `es`,
//! so the documents cannot drift from the code. A line's `# prints: TEXT` must show
//! in the output; `# fails: TEXT` means the command must fail and TEXT show.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use es_tests::broker::{Broker, es_bin};

fn repo() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .parent()
    .unwrap()
    .to_owned()
}

/// The first ```sh block after the line that starts with `heading`.
fn block(doc: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(repo().join(doc)).unwrap();
    let from = text.find(&format!("\n{heading}")).unwrap_or_else(|| panic!("{doc} has no {heading:?}"));
    let rest = &text[from..];
    let start = rest.find("```sh\n").expect("a ```sh block") + "```sh\n".len();
    let end = rest[start..].find("\n```").expect("the block ends");
    rest[start..start + end].to_owned()
}

/// The block as a bash script (`# fails:` lines must fail) and the texts the
/// output must hold.
fn script(block: &str, broker_addr: &str) -> (String, Vec<String>) {
    let mut lines = vec!["set -eo pipefail".to_owned(), "exec 2>&1".to_owned()];
    let mut expected = Vec::new();
    let block = block.replace("localhost:9000", broker_addr).replace("/path/to/es", repo().to_str().unwrap());
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
    (lines.join("\n") + "\n", expected)
}

/// Runs the script in `cwd` with `es` on the PATH and ES_BROKER set; bounded in time.
fn run(script: &str, cwd: &Path, b: &Broker, limit: Duration) -> String {
    let bin_dir = es_bin().parent().unwrap().to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .env("PATH", path)
        .env("ES_BROKER", &b.url)
        .env("CARGO_NET_OFFLINE", "true")
        .env_remove("CARGO_TARGET_DIR")
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
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the walkthrough did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = reader.join().unwrap();
    assert!(status.success(), "the walkthrough failed ({status}):\n{out}");
    out
}

fn check(out: &str, expected: &[String]) {
    for text in expected {
        assert!(out.contains(text.as_str()), "the walkthrough's output lacks {text:?}:\n{out}");
    }
}

#[test]
fn readme_try_it_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(&dir.path().join("data"));
    let addr = b.url.trim_start_matches("http://").to_owned();
    let (script, expected) = script(&block("README.md", "## Try it"), &addr);
    assert!(expected.len() >= 5, "the markers went missing: {expected:?}");
    let out = run(&script, dir.path(), &b, Duration::from_secs(60));
    check(&out, &expected);
    let paths = out.lines().filter(|l| l.starts_with('/')).count();
    assert_eq!(paths, 5, "the first five OpenAPI paths were not listed:\n{out}");
}

#[test]
fn plugins_md_rust_walkthrough_runs_outside_the_repository() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(&dir.path().join("data"));
    let addr = b.url.trim_start_matches("http://").to_owned();
    let (script, expected) = script(&block("docs/plugins.md", "### From `cargo new`"), &addr);
    let out = run(&script, dir.path(), &b, Duration::from_secs(900));
    check(&out, &expected);
    let wasm = dir.path().join("max-key/target/wasm32-wasip2/release/max_key.wasm");
    assert!(wasm.exists(), "no component at {}", wasm.display());
}
