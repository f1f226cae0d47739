//! A client's own integration suite against es: franz-go v1.22.3's `pkg/kgo` tests
//! (the version `kafka_reference.rs` pins), unmodified, run by `go test` from the
//! module `tests/go-suites/` with the broker taken from `KGO_SEEDS`, as franz-go's CI
//! runs them against Apache Kafka and Redpanda.
//!
//! Of the package's tests, [`BROKER_TESTS`] are those that talk to a broker (found by
//! reading the source: the ones that reach `adm()`, `newTestClient` or
//! `testClientOpts`); the others are unit tests of the client or talk to a fake of
//! their own, say nothing about es and are not run. Each broker test is either
//! allowlisted, and must pass, or excluded with its reason. A skip of an allowlisted
//! test fails; a skipped subtest is accepted only for a reason of [`EXPECTED_SKIPS`].
//!
//! Needs Go (the machine's requirements, see README.md); the modules and the compiled
//! package are cached under ~/.cache/es/go.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use es_tests::broker::Broker;
use es_tests::peers::{cache_dir, output_within, run};
use serde_json::Value;

const KGO: &str = "github.com/twmb/franz-go/pkg/kgo";

/// Why a broker test is not run against es.
const TRANSACTIONS: &str = "transactions: es has no transactional producers (InitProducerId with a transactional id, \
                            AddPartitionsToTxn, EndTxn are not served)";
const SHARE_GROUPS: &str = "share groups (KIP-932): es does not serve ShareGroupHeartbeat, ShareFetch, \
                            ShareAcknowledge";
const KIP_848: &str = "KIP-848 consumer groups: es does not serve ConsumerGroupHeartbeat";
const PRODUCE_V2: &str = "needs a broker that does not advertise Produce v0-2; es advertises v0 (librdkafka < 2.11.1 \
                          needs the floor, KAFKA-18659) and refuses v0-2 by closing the connection, so the test \
                          would skip itself";
const CONSUMER_OFFSETS: &str = "asserts that Kafka's internal topic __consumer_offsets is in Metadata and skipped by \
                                regex consumers; es keeps group offsets in __es_offsets, left out of Metadata";
/// Every test of `pkg/kgo` that needs a broker: `None` runs it against es, `Some`
/// says why it is excluded.
const BROKER_TESTS: &[(&str, Option<&str>)] = &[
    ("Test848RegexBrokerResolves", Some(KIP_848)),
    ("TestAddRemovePartitions", None),
    ("TestClient_Produce", None),
    ("TestClient_ProduceLargeMessages", None),
    ("TestConsumeMaxDecompressBatchBytes", None),
    ("TestConsumeRegex", Some(CONSUMER_OFFSETS)),
    ("TestConsumeRegexShareSkipsInternal", Some(SHARE_GROUPS)),
    ("TestConsumeTopicRetrieval", None),
    ("TestConsumeTopicRetrieval_Many", None),
    ("TestDirectPartitionPurge", None),
    ("TestGroupETL", None),
    ("TestGroupSimple", None),
    ("TestHookPollStart", None),
    ("TestIssue1034", None),
    ("TestIssue325", None),
    ("TestIssue337", None),
    ("TestIssue434", None),
    ("TestIssue523", None),
    ("TestIssue648", None),
    ("TestIssue769", None),
    ("TestIssue810", None),
    ("TestIssue831", None),
    ("TestIssue865", None),
    ("TestIssueFetchLargerThanBrokerMaxReadBytes", None),
    ("TestIssueProduceBrokerTooOldFailsRecords", Some(PRODUCE_V2)),
    ("TestIssueProduceSyncManualPartitionNegativeDoesNotPanic", None),
    ("TestPauseIssue489", None),
    ("TestPauseIssueOct2023", None),
    ("TestPing", None),
    ("TestPooling", None),
    ("TestShareGroup", Some(SHARE_GROUPS)),
    ("TestShareGroupAckOnClose", Some(SHARE_GROUPS)),
    ("TestShareGroupETL", Some(SHARE_GROUPS)),
    ("TestShareGroupOffsetsAdmin", Some(SHARE_GROUPS)),
    ("TestTxnEtl", Some(TRANSACTIONS)),
    ("TestUnknownGroupOffsetFetchPinned", None),
];

/// Subtests of allowlisted tests that skip themselves when the broker does not
/// advertise a feature: what the skip prints, and why es lacks it.
const EXPECTED_SKIPS: &[(&str, &str)] =
    &[("broker does not support KIP-848 (requires ConsumerGroupHeartbeat, key 68)", KIP_848)];

/// The bound on the suite's run against es (compiling it is bounded apart).
const SUITE_LIMIT: Duration = Duration::from_secs(240);

/// `go` in `tests/go-suites/`, with the module and build caches under ~/.cache/es/go
/// and the module's go.sum as the only source of versions.
fn go() -> Command {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("go-suites");
    let cache = cache_dir().join("go");
    let mut cmd = Command::new("go");
    cmd.current_dir(dir)
        .env("GOMODCACHE", cache.join("mod"))
        .env("GOCACHE", cache.join("build"))
        .env("GOFLAGS", "-mod=readonly");
    cmd
}

/// What `go test -json` said about one test or subtest.
#[derive(Default)]
struct Outcome {
    action: Option<String>,
    output: String,
    elapsed: f64,
}

/// The final action and the output of every test and subtest in a `go test -json`
/// stream, and the package's own output (a panic, a timeout).
fn parse(stream: &str) -> (BTreeMap<String, Outcome>, String) {
    let mut tests: BTreeMap<String, Outcome> = BTreeMap::new();
    let mut package = String::new();
    for line in stream.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            package.push_str(line);
            package.push('\n');
            continue;
        };
        let action = event["Action"].as_str().unwrap_or_default();
        let Some(test) = event["Test"].as_str() else {
            if let Some(out) = event["Output"].as_str() {
                package.push_str(out);
            }
            continue;
        };
        let outcome = tests.entry(test.to_string()).or_default();
        match action {
            "output" => outcome.output.push_str(event["Output"].as_str().unwrap_or_default()),
            "pass" | "fail" | "skip" => {
                outcome.action = Some(action.to_string());
                outcome.elapsed = event["Elapsed"].as_f64().unwrap_or_default();
            }
            _ => {}
        }
    }
    (tests, package)
}

/// The tail of `s`, at most `n` bytes, for a failure message.
fn tail(s: &str, n: usize) -> &str {
    let mut start = s.len().saturating_sub(n);
    while !s.is_char_boundary(start) {
        start += 1;
    }
    &s[start..]
}

#[test]
fn franz_go_kgo_integration_tests_pass_against_es() {
    // Every test the package has, so that a broker test added by a newer franz-go is
    // noticed rather than silently left out.
    let listed =
        run(go().args(["test", "-list", ".", KGO]), None, Duration::from_secs(900), "go test -list (kgo)");
    let all: Vec<&str> = listed.lines().filter(|l| l.starts_with("Test")).collect();
    for (name, _) in BROKER_TESTS {
        assert!(all.contains(name), "{name} is not a test of {KGO} any more: update BROKER_TESTS");
    }
    let allowlist: Vec<&str> =
        BROKER_TESTS.iter().filter(|(_, why)| why.is_none()).map(|(n, _)| *n).collect();

    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let started = Instant::now();
    let pattern = format!("^({})$", allowlist.join("|"));
    // go test's own timeout fires first and prints every goroutine's stack.
    let go_timeout = format!("{}s", SUITE_LIMIT.as_secs() - 20);
    let (out, finished) = output_within(
        go().args(["test", "-count=1", "-json", "-timeout", &go_timeout, "-run", &pattern, KGO])
            .env("KGO_SEEDS", &b.kafka_addr)
            // One node: topics with replication factor 1.
            .env("KGO_TEST_RF", "1")
            // TestGroupETL produces this many records and chains them through three
            // levels of groups (500000 by default).
            .env("KGO_TEST_RECORDS", "20000")
            .env("KGO_LOG_LEVEL", "info"),
        None,
        // Compiling is cached by the `go test -list` above; this bounds the run.
        SUITE_LIMIT,
        "go test (kgo)",
    );
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (tests, package) = parse(&stdout);

    let mut failures = Vec::new();
    if !finished {
        failures.push(format!("go test did not finish within {SUITE_LIMIT:?}"));
    }
    let mut passed = 0;
    for name in &allowlist {
        match tests.get(*name).and_then(|o| o.action.as_deref()) {
            Some("pass") => passed += 1,
            Some(action) => failures.push(format!("{name}: {action}\n{}", tail(&tests[*name].output, 6000))),
            None => failures.push(format!("{name}: did not run to the end")),
        }
    }
    let mut skipped_subtests = Vec::new();
    for (name, outcome) in &tests {
        let Some((parent, _)) = name.split_once('/') else { continue };
        if !allowlist.contains(&parent) {
            failures.push(format!("{name}: ran, but {parent} is not allowlisted"));
        }
        match outcome.action.as_deref() {
            Some("pass") => {}
            Some("skip") => match EXPECTED_SKIPS.iter().find(|(said, _)| outcome.output.contains(said)) {
                Some((_, why)) => skipped_subtests.push(format!("{name} ({why})")),
                None => failures.push(format!("{name}: skipped for no expected reason\n{}", outcome.output)),
            },
            Some(action) => failures.push(format!("{name}: {action}\n{}", tail(&outcome.output, 6000))),
            None => failures.push(format!("{name}: did not run to the end")),
        }
    }

    let mut summary = format!(
        "franz-go {KGO} v1.22.3 against es: {} tests, {} need a broker, {} allowlisted, {passed} passed in {:.0?}",
        all.len(),
        BROKER_TESTS.len(),
        allowlist.len(),
        took,
    );
    for name in &allowlist {
        if let Some(o) = tests.get(*name) {
            summary.push_str(&format!(
                "\n  {name}: {} ({:.1} s)",
                o.action.as_deref().unwrap_or("unfinished"),
                o.elapsed
            ));
        }
    }
    summary.push_str("\nexcluded:");
    for (name, why) in BROKER_TESTS {
        if let Some(why) = why {
            summary.push_str(&format!("\n  {name}: {why}"));
        }
    }
    summary.push_str("\nsubtests skipped:");
    for s in &skipped_subtests {
        summary.push_str(&format!("\n  {s}"));
    }
    println!("{summary}");
    assert!(
        failures.is_empty(),
        "{summary}\n\n{} failure(s):\n{}\n\ngo test's own output:\n{}\nstderr:\n{}\nbroker stderr:\n{}",
        failures.len(),
        failures.join("\n\n"),
        tail(&package, 8000),
        tail(&String::from_utf8_lossy(&out.stderr), 4000),
        tail(&b.stderr(), 4000),
    );
}
