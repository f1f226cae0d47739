//! `es produce|consume --protocol binary` against the real es-broker: the same
//! commands over the binary protocol, lines kept in order, output identical to HTTP.

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use es_tests::broker::{Broker, es_bin};

fn es(b: &Broker, args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(es_bin())
        .env("ES_BROKER", &b.url)
        .env("ES_BROKER_BINARY", &b.binary_addr)
        .args(args)
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawning es");
    if let Some(input) = stdin {
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "es {args:?} did not finish within 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "es {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn produce_and_consume_over_the_binary_protocol() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("lines", 3);
    let input: String = (0..300).map(|i| format!("key-{}:line-{i}\n", i % 7)).collect();
    es(&b, &["produce", "--topic", "lines", "--key-separator", ":", "--protocol", "binary"], Some(&input));
    es(&b, &["produce", "--topic", "lines", "--key", "solo", "--value", "one", "--protocol", "binary"], None);
    let binary = es(&b, &["consume", "--topic", "lines", "--protocol", "binary"], None);
    let http = es(&b, &["consume", "--topic", "lines"], None);
    let mut bin_lines: Vec<&str> = std::str::from_utf8(&binary.stdout).unwrap().lines().collect();
    let mut http_lines: Vec<&str> = std::str::from_utf8(&http.stdout).unwrap().lines().collect();
    assert_eq!(bin_lines.len(), 301);
    // Within one key (one partition) the input order is kept.
    let key3: Vec<&str> = bin_lines.iter().copied().filter(|l| l.starts_with("key-3\t")).collect();
    let want: Vec<String> = (0..300).filter(|i| i % 7 == 3).map(|i| format!("key-3\tline-{i}")).collect();
    assert_eq!(key3, want.iter().map(String::as_str).collect::<Vec<_>>());
    bin_lines.sort_unstable();
    http_lines.sort_unstable();
    assert_eq!(bin_lines, http_lines, "both protocols read the same records");
    let tail = es(
        &b,
        &["consume", "--topic", "lines", "--protocol", "binary", "--max-records", "2", "--format", "json"],
        None,
    );
    assert_eq!(std::str::from_utf8(&tail.stdout).unwrap().lines().count(), 2);
}
