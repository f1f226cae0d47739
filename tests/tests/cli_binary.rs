//! `es produce|consume --protocol binary` against the real es-broker: the same
//! commands over the binary protocol, lines kept in order, output identical to HTTP.

use std::process::{Command, Output};
use std::time::Duration;

use es_tests::broker::{Broker, es_bin};
use es_tests::peers;

fn es(b: &Broker, args: &[&str], stdin: Option<&str>) -> Output {
    let out = es_status(b, args, stdin);
    assert!(out.status.success(), "es {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

/// Runs `es`, bounded in time, whatever its exit status.
fn es_status(b: &Broker, args: &[&str], stdin: Option<&str>) -> Output {
    let mut cmd = Command::new(es_bin());
    cmd.env("ES_BROKER", &b.url).env("ES_BROKER_BINARY", &b.binary_addr).args(args);
    peers::output(&mut cmd, stdin.map(str::as_bytes), Duration::from_secs(30), &format!("es {args:?}"))
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

/// The binary protocol says where a dead-lettered record went and prints warnings,
/// as the HTTP path does (the answer lists each record a validator spoke about).
#[test]
fn binary_produce_reports_dead_letters_and_warnings() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("pv", 1);
    b.create_topic("pv-dlq", 1);
    let bind = |topic: &str, policy: &[&str]| {
        let mut args =
            vec!["topic", "alter", topic, "--validator", "rules", "--validator-config", "value.max.bytes=5"];
        args.extend_from_slice(policy);
        es(&b, &args, None);
    };
    bind("pv", &["--on-failure", "dead-letter", "--dead-letter-topic", "pv-dlq"]);
    let text = |o: &Output| {
        (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (out, _) = text(&es(&b, &["produce", "pv", "--value", "far too long", "--protocol", "binary"], None));
    assert!(
        out.contains("dead-lettered to pv-dlq partition 0 at offset 0") && out.contains("value-too-large"),
        "{out}"
    );
    let (out, err) =
        text(&es(&b, &["produce", "pv", "--protocol", "binary"], Some("ok\nmuch too long\nhi\n")));
    assert!(out.contains("wrote 2 records to pv; dead-lettered 1 record to pv-dlq"), "{out}");
    assert!(err.contains("record 1 dead-lettered to pv-dlq partition 0 at offset 1"), "{err}");
    // An idempotent producer's batch is written whole or not at all: refused, nothing written.
    let refused = es_status(
        &b,
        &["produce", "pv", "--protocol", "binary", "--idempotent", "--value", "far too long"],
        None,
    );
    assert!(
        !refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("value-too-large"),
        "{refused:?}"
    );
    let (out, _) = text(&es(&b, &["consume", "pv", "--partition", "0"], None));
    assert_eq!(out, "\tok\n\thi\n", "the kept records, at the offsets reported");
    let (json, _) =
        text(&es(&b, &["--json", "produce", "pv", "--protocol", "binary"], Some("abc\nway too long\n")));
    let lines: Vec<serde_json::Value> = json.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!((lines[0]["topic"].as_str(), lines[0]["offset"].as_u64()), (Some("pv"), Some(2)), "{json}");
    assert_eq!(
        (lines[1]["topic"].as_str(), lines[1]["finding"]["outcome"].as_str()),
        (Some("pv-dlq"), Some("dead-lettered"))
    );

    b.create_topic("pw", 1);
    bind("pw", &["--on-failure", "warn"]);
    let (out, err) =
        text(&es(&b, &["produce", "pw", "--value", "far too long", "--protocol", "binary"], None));
    assert!(out.contains("wrote to pw partition 0 at offset 0"), "{out}");
    assert!(err.contains("warning: record 0: rules (value-too-large)"), "{err}");
}
