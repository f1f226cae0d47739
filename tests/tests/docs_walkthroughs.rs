//! The walkthroughs in README.md ("Try it"), docs/plugins.md ("From `cargo new`
//! to a bound validator") and docs/security.md ("Walkthrough", which starts its own
//! broker) run here, as written, against the real broker and `es`,
//! so the documents cannot drift from the code. A line's `# prints: TEXT` must show
//! in the output; `# fails: TEXT` means the command must fail and TEXT show.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use es_tests::broker::{Broker, es_bin, shared_plugin_cache};
use es_tests::cluster::free_port;

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

/// Every ```sh block of the section that starts with `heading` (up to the next
/// heading of the same level), joined in order.
fn blocks(doc: &str, heading: &str) -> String {
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

/// The block as a bash script (`# fails:` lines must fail) and the texts the
/// output must hold.
fn script(block: &str, broker_addr: &str) -> (String, Vec<String>) {
    script_moved(block, &[("localhost:9000", broker_addr)])
}

/// [`script`] with each `(from, to)` replaced (addresses moved to the test's ports).
fn script_moved(block: &str, moves: &[(&str, &str)]) -> (String, Vec<String>) {
    let mut lines = vec!["set -eo pipefail".to_owned(), "exec 2>&1".to_owned()];
    let mut expected = Vec::new();
    let mut block = block.replace("/path/to/es", repo().to_str().unwrap());
    for (from, to) in moves {
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
    (lines.join("\n") + "\n", expected)
}

/// Runs the script in `cwd` with `es` on the PATH and ES_BROKER set; bounded in time.
fn run(script: &str, cwd: &Path, b: &Broker, limit: Duration) -> String {
    run_env(script, cwd, &[("ES_BROKER", b.url.as_str())], limit)
}

/// Runs the script in `cwd`, in a process group of its own (so a broker it started
/// in the background is killed with it, whatever happened), with `es` and
/// `es-broker` on the PATH and `env` set; bounded in time.
fn run_env(script: &str, cwd: &Path, env: &[(&str, &str)], limit: Duration) -> String {
    use std::os::unix::process::CommandExt;
    let bin_dir = es_bin().parent().unwrap().to_owned();
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let mut child = Command::new("bash")
        .arg("-c")
        .arg(script)
        .current_dir(cwd)
        .env("PATH", path)
        .envs(env.iter().copied())
        .env("CARGO_NET_OFFLINE", "true")
        .env_remove("CARGO_TARGET_DIR")
        .env_remove("ES_API_KEY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    let group = child.id();
    let kill_group = move || {
        let _ =
            Command::new("kill").args(["-KILL", "--", &format!("-{group}")]).stderr(Stdio::null()).status();
    };
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
            kill_group();
            let _ = child.wait();
            panic!("the walkthrough did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    kill_group();
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

#[test]
fn security_md_walkthrough_runs_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let (http, binary, kafka) = (free_port(), free_port(), free_port());
    let http_addr = format!("127.0.0.1:{http}");
    let binary_addr = format!("127.0.0.1:{binary}");
    let kafka_addr = format!("127.0.0.1:{kafka}");
    let moves = [("127.0.0.1:9000", http_addr.as_str()), ("127.0.0.1:9092", kafka_addr.as_str())];
    let (script, expected) = script_moved(&blocks("docs/security.md", "## Walkthrough"), &moves);
    assert!(expected.len() >= 15, "the markers went missing: {expected:?}");
    let cache = shared_plugin_cache();
    let env = [
        ("ES_HTTP_BIND", http_addr.as_str()),
        ("ES_BINARY_BIND", binary_addr.as_str()),
        ("ES_KAFKA_BIND", kafka_addr.as_str()),
        ("ES_BROKER_BINARY", binary_addr.as_str()),
        ("ES_PLUGIN_CACHE_DIR", cache.to_str().unwrap()),
    ];
    let out = std::panic::catch_unwind(|| run_env(&script, dir.path(), &env, Duration::from_secs(180)));
    let log = std::fs::read_to_string(dir.path().join("broker.log")).unwrap_or_default();
    let out = out.unwrap_or_else(|e| {
        eprintln!("broker.log:\n{log}");
        std::panic::resume_unwind(e)
    });
    for text in &expected {
        assert!(
            out.contains(text.as_str()),
            "the walkthrough's output lacks {text:?}:\n{out}\nbroker.log:\n{log}"
        );
    }
    // The broker really ran with TLS on every listener and auth on.
    assert!(log.contains(&format!("listening on https://{http_addr}")), "broker.log:\n{log}");
    assert!(log.contains(&format!("listening on es://{binary_addr} (tls)")), "broker.log:\n{log}");
}
