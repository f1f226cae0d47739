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
//!
//! librdkafka's own suite runs the same way, from the source rdkafka-sys vendors: see
//! [`librdkafka`].

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

/// The failures with what each printed, then their first lines again: a panic's
/// message ends with them, where a log cut in the middle still shows them.
fn failed_last(failures: &[String]) -> String {
    let heads: Vec<&str> = failures.iter().map(|f| f.lines().next().unwrap_or_default()).collect();
    format!(
        "{} failure(s):\n{}\n\nin short:\n  {}",
        failures.len(),
        failures.join("\n\n"),
        heads.join("\n  ")
    )
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
    // go test's own timeout fires first and prints every goroutine's stack.
    let go_timeout = format!("{}s", SUITE_LIMIT.as_secs() - 20);
    let kgo = |names: &[&str]| {
        let pattern = format!("^({})$", names.join("|"));
        output_within(
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
        )
    };
    let (out, finished) = kgo(&allowlist);
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let (mut tests, package) = parse(&stdout);
    // A test that failed in the parallel run gets one more run on its own. Some of
    // kgo's tests bound their waits tightly (TestDirectPartitionPurge: 7 s, "under
    // heavy parallel load the cursor setup ... can take a moment", its own comment),
    // which CI's 2 loaded cores can miss; a second failure is a failure.
    let failed: Vec<&str> = allowlist
        .iter()
        .copied()
        .filter(|n| finished && tests.get(*n).and_then(|o| o.action.as_deref()) == Some("fail"))
        .collect();
    let mut rerun = Vec::new();
    if !failed.is_empty() {
        let (again, _) = kgo(&failed);
        let (retried, _) = parse(&String::from_utf8_lossy(&again.stdout));
        tests.retain(|name, _| !failed.iter().any(|f| name == f || name.starts_with(&format!("{f}/"))));
        for (name, outcome) in retried {
            if failed.iter().any(|f| name == *f) && outcome.action.as_deref() == Some("pass") {
                rerun.push(name.clone());
            }
            tests.insert(name, outcome);
        }
    }

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
    if !rerun.is_empty() {
        summary.push_str(&format!(
            "\npassed on a second run, alone, after failing in the parallel run: {rerun:?}"
        ));
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
        "{summary}\n\ngo test's own output:\n{}\nstderr:\n{}\nbroker stderr:\n{}\n\n{}",
        tail(&package, 8000),
        tail(&String::from_utf8_lossy(&out.stderr), 4000),
        tail(&b.stderr(), 4000),
        failed_last(&failures),
    );
}

/// librdkafka's own integration tests (its `tests/` directory, from the source
/// rdkafka-sys vendors), unmodified: `tests/librdkafka/build.sh` builds the library
/// and the suite's `test-runner` once per version under ~/.cache/es/librdkafka, and the
/// runner runs the allowlisted tests against es with a `test.conf` naming its Kafka
/// listener, as librdkafka's CI runs them against a trivup cluster.
///
/// The runner's own table (`tests[]` in `tests/test.c`) flags the tests that need no
/// broker (`TEST_F_LOCAL`: unit tests, the mock cluster) and the manual ones; every
/// other test is one of [`BROKER_TESTS`], allowlisted (it must pass) or excluded with
/// its reason, or one of [`MOCK_TESTS`], which are not flagged local but talk only to
/// librdkafka's mock cluster, say nothing about es and are not run. Most run in quick
/// mode, as librdkafka's CI runs them; quick mode skips every subtest of some, which
/// run in a full-mode runner beside it, and a test passing in no time fails.
mod librdkafka {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};
    use std::process::Command;
    use std::time::{Duration, Instant};

    use es_tests::broker::Broker;
    use es_tests::peers::{output_within, run};
    use serde_json::Value;

    use super::{failed_last, tail};

    /// The librdkafka release rdkafka-sys vendors (Cargo.lock pins 4.10.0+2.12.1).
    const VERSION: &str = "2.12.1";

    /// Why a broker test is not run against es.
    const TRANSACTIONS: &str = super::TRANSACTIONS;
    const NO_AUTO_CREATE: &str = "relies on the broker creating a topic on first use (auto.create.topics.enable, on in \
                                  librdkafka's default scenario); es never creates a topic implicitly: Metadata \
                                  answers UNKNOWN_TOPIC_OR_PARTITION";
    const NO_AUTO_CREATE_FULL: &str = "does nothing in quick mode (it skips all its subtests, or itself), and in full \
                                       mode relies on the broker creating a topic on first use, which es never does";
    const KAFKA_SCRIPTS_FULL: &str = "quick mode skips all its subtests, and in full mode they run kafka-topics.sh \
                                      from KAFKA_PATH, which only a trivup cluster provides";
    const TRANSACTIONS_FULL: &str = "quick mode skips all its subtests; in full mode the last one produces \
                                     transactionally (init_transactions times out: es has no transactional \
                                     producers)";
    const KAFKA_SCRIPTS: &str = "runs Kafka's own scripts (kafka-topics.sh, kafka-configs.sh) from KAFKA_PATH, which \
                                 only a trivup cluster provides";
    const SASL_SSL: &str = "needs an SSL or SASL listener set up by trivup (es's TLS and SASL are tested by \
                            auth_kafka.rs and auth_clients.rs)";
    const RAPIDJSON: &str = "needs RapidJSON (rapidjson-dev) at build time, not a machine requirement: without it \
                             the test skips itself";
    const KNOWN_ISSUE: &str =
        "flagged TEST_F_KNOWN_ISSUE by librdkafka; the runner skips it unless asked (-k)";
    const MULTI_BROKER: &str = "needs a cluster of several brokers (replication factor 3, follower fetching, or a \
                                broker to take down); es runs here as one node";
    const MSG_V1: &str = "produces message format v0/v1, which Kafka 4.0 removed; the test skips itself against a \
                          broker version of 4.0 or later";
    const CI_TIMING: &str = "skips itself when CI is set (\"latency measurements not reliable on CI\"), as the run \
                             sets it so that timing assertions a loaded machine misses warn instead of failing, as \
                             on librdkafka's CI";
    /// Each of 0081's subtests run alone (SUBTESTS=do_test_...) against es and Kafka
    /// 4.4.0: these fail against es only.
    const ADMIN: &str = "fails on what es lacks, each subtest run alone against es and Apache Kafka 4.4.0: \
                         CreateTopics and IncrementalAlterConfigs setting the topic config compression.type (es: \
                         INVALID_CONFIG, unknown setting; Kafka: NO_ERROR); IncrementalAlterConfigs of a BROKER \
                         resource (es: INVALID_REQUEST; Kafka: NO_ERROR); DescribeConfigs of a GROUP resource (type \
                         32; es: INVALID_REQUEST; Kafka: the group's configs); AlterConfigs (key 33), ACLs (keys \
                         29-31) and SCRAM credentials (keys 50-51) not advertised (librdkafka: UNSUPPORTED_FEATURE); \
                         DescribeTopics and DescribeCluster with authorized operations (Metadata \
                         include_topic_authorized_operations, DescribeCluster include_cluster_authorized_operations: es \
                         answers -2147483648, no operations; Kafka without an authorizer all 8 and 7); the ACL \
                         subtests fail against Kafka too (no authorizer configured)";
    const CLIENT_PROTOCOL: &str = "tests the KIP-848 consumer protocol only (it skips itself with the classic \
                                   protocol): es does not serve ConsumerGroupHeartbeat";

    /// What is done with a broker test.
    #[derive(Clone, Copy, PartialEq, Debug)]
    enum Verdict {
        /// Allowlisted, run in quick mode (`-Q`, as librdkafka's CI's `make quick`).
        Quick,
        /// Allowlisted, run in full mode: quick mode skips all its subtests.
        Full,
        /// Not run, for this reason.
        Excluded(&'static str),
    }
    use Verdict::{Excluded, Full, Quick};

    /// Every test of the runner's table that needs a broker.
    const BROKER_TESTS: &[(&str, Verdict)] = &[
        ("0001_multiobj", Excluded(NO_AUTO_CREATE)),
        ("0002_unkpart", Excluded(NO_AUTO_CREATE)),
        ("0003_msgmaxsize", Excluded(NO_AUTO_CREATE)),
        ("0005_order", Excluded(NO_AUTO_CREATE)),
        ("0007_autotopic", Excluded(NO_AUTO_CREATE)),
        ("0008_reqacks", Excluded(NO_AUTO_CREATE)),
        ("0011_produce_batch", Excluded(NO_AUTO_CREATE)),
        ("0012_produce_consume", Excluded(NO_AUTO_CREATE)),
        ("0013_null_msgs", Excluded(NO_AUTO_CREATE)),
        ("0014_reconsume_191", Excluded(NO_AUTO_CREATE)),
        ("0015_offsets_seek", Excluded(NO_AUTO_CREATE)),
        ("0016_client_swname", Quick),
        ("0017_compression", Excluded(NO_AUTO_CREATE)),
        ("0018_cgrp_term", Excluded(NO_AUTO_CREATE_FULL)),
        ("0019_list_groups", Excluded(NO_AUTO_CREATE_FULL)),
        ("0020_destroy_hang", Excluded(NO_AUTO_CREATE)),
        ("0021_rkt_destroy", Excluded(NO_AUTO_CREATE)),
        ("0022_consume_batch", Quick),
        ("0026_consume_pause", Full),
        ("0028_long_topicnames", Excluded(KNOWN_ISSUE)),
        ("0029_assign_offset", Excluded(NO_AUTO_CREATE)),
        ("0030_offset_commit", Excluded(NO_AUTO_CREATE)),
        ("0031_get_offsets", Excluded(NO_AUTO_CREATE)),
        ("0033_regex_subscribe", Excluded(NO_AUTO_CREATE)),
        ("0034_offset_reset", Excluded(NO_AUTO_CREATE)),
        ("0035_api_version", Quick),
        ("0036_partial_fetch", Excluded(NO_AUTO_CREATE)),
        ("0038_performance", Excluded(NO_AUTO_CREATE)),
        ("0039_event_dr", Excluded(NO_AUTO_CREATE)),
        ("0040_io_event", Excluded(NO_AUTO_CREATE)),
        ("0041_fetch_max_bytes", Excluded(NO_AUTO_CREATE)),
        ("0042_many_topics", Excluded(NO_AUTO_CREATE)),
        ("0044_partition_cnt", Quick),
        ("0045_resubscribe_with_regex", Full),
        ("0045_subscribe_many_updates", Full),
        ("0045_subscribe_update", Full),
        ("0045_subscribe_update_non_exist_and_partchange", Excluded(KAFKA_SCRIPTS_FULL)),
        ("0045_subscribe_update_topic_remove", Excluded(KAFKA_SCRIPTS_FULL)),
        ("0047_partial_buf_tmout", Excluded(KNOWN_ISSUE)),
        ("0048_partitioner", Excluded(NO_AUTO_CREATE)),
        ("0049_consume_conn_close", Excluded(NO_AUTO_CREATE)),
        ("0050_subscribe_adds", Excluded(NO_AUTO_CREATE_FULL)),
        ("0051_assign_adds", Excluded(NO_AUTO_CREATE)),
        ("0052_msg_timestamps", Excluded(KAFKA_SCRIPTS)),
        ("0053_stats", Excluded(RAPIDJSON)),
        ("0054_offset_time", Excluded(NO_AUTO_CREATE)),
        ("0055_producer_latency", Excluded(CI_TIMING)),
        ("0056_balanced_group_mt", Excluded(NO_AUTO_CREATE)),
        ("0057_invalid_topic", Excluded(NO_AUTO_CREATE)),
        ("0059_bsearch", Excluded(NO_AUTO_CREATE)),
        ("0060_op_prio", Excluded(NO_AUTO_CREATE)),
        ("0061_consumer_lag", Excluded(NO_AUTO_CREATE_FULL)),
        ("0063_clusterid", Quick),
        ("0064_interceptors", Excluded(NO_AUTO_CREATE)),
        ("0065_yield", Excluded(NO_AUTO_CREATE)),
        ("0067_empty_topic", Excluded(NO_AUTO_CREATE)),
        ("0068_produce_timeout", Quick),
        ("0069_consumer_add_parts", Quick),
        ("0070_null_empty", Excluded(NO_AUTO_CREATE)),
        ("0073_headers", Excluded(NO_AUTO_CREATE)),
        ("0075_retry", Quick),
        ("0076_produce_retry", Excluded(NO_AUTO_CREATE)),
        ("0077_compaction", Excluded(KAFKA_SCRIPTS)),
        ("0081_admin", Excluded(ADMIN)),
        ("0082_fetch_max_bytes", Excluded(NO_AUTO_CREATE_FULL)),
        ("0083_cb_event", Excluded(NO_AUTO_CREATE)),
        ("0084_destroy_flags", Quick),
        ("0085_headers", Quick),
        ("0086_purge_remote", Quick),
        ("0088_produce_metadata_timeout", Quick),
        ("0089_max_poll_interval", Full),
        ("0090_idempotence", Quick),
        ("0091_max_poll_interval_timeout", Quick),
        ("0092_mixed_msgver", Excluded(MSG_V1)),
        ("0093_holb_consumer", Quick),
        ("0094_idempotence_msg_timeout", Excluded(NO_AUTO_CREATE)),
        ("0097_ssl_verify", Excluded(SASL_SSL)),
        ("0098_consumer_txn", Excluded(TRANSACTIONS)),
        ("0099_commit_metadata", Quick),
        ("0101_fetch_from_follower", Excluded(MULTI_BROKER)),
        ("0102_static_group_rebalance", Full),
        ("0103_transactions", Excluded(TRANSACTIONS)),
        ("0107_topic_recreate", Excluded(MULTI_BROKER)),
        ("0109_auto_create_topics", Excluded(KAFKA_SCRIPTS)),
        ("0110_batch_size", Excluded(RAPIDJSON)),
        ("0111_delay_create_topics", Excluded(MULTI_BROKER)),
        ("0112_assign_unknown_part", Quick),
        ("0113_cooperative_rebalance", Quick),
        ("0114_sticky_partitioning", Quick),
        ("0115_producer_auth", Excluded(KAFKA_SCRIPTS)),
        ("0118_commit_rebalance", Excluded(NO_AUTO_CREATE)),
        ("0119_consumer_auth", Excluded(KAFKA_SCRIPTS)),
        ("0122_buffer_cleaning_after_rebalance", Excluded(NO_AUTO_CREATE_FULL)),
        ("0123_connections_max_idle", Quick),
        ("0125_immediate_flush", Quick),
        ("0126_oauthbearer_oidc", Excluded(SASL_SSL)),
        ("0127_fetch_queue_backoff", Quick),
        ("0129_fetch_aborted_msgs", Excluded(TRANSACTIONS)),
        ("0130_store_offsets", Excluded(NO_AUTO_CREATE)),
        ("0132_strategy_ordering", Full),
        ("0135_sasl_credentials", Excluded(SASL_SSL)),
        ("0137_barrier_batch_consume", Excluded(TRANSACTIONS_FULL)),
        ("0140_commit_metadata", Quick),
        ("0142_reauthentication", Excluded(SASL_SSL)),
        ("0153_memberid", Excluded(CLIENT_PROTOCOL)),
    ];

    /// Tests the table does not flag local but that create librdkafka's mock cluster
    /// and talk to it alone.
    const MOCK_TESTS: &[&str] = &["0139_offset_validation_mock", "0150_telemetry_mock"];

    /// The bound on the run against es (building is bounded apart).
    const RUN_LIMIT: Duration = Duration::from_secs(300);

    /// One entry of the runner's `tests[]` table.
    struct Entry {
        name: String,
        local: bool,
        manual: bool,
        /// The trivup scenarios it runs in (`default` unless it says).
        scenario: String,
    }

    /// The entries of `tests[]` in `tests/test.c`: each `_TEST(name, flags, ...)`.
    fn table(test_c: &str) -> Vec<Entry> {
        let start = test_c.find("struct test tests[] = {").expect("the tests[] table in test.c");
        let body = &test_c[start..];
        let body = &body[..body.find("{NULL}").expect("the end of tests[]")];
        body.split("_TEST(")
            .skip(1)
            .map(|chunk| {
                let name = chunk.split(',').next().unwrap_or_default().trim().to_string();
                let scenario = chunk
                    .split_once(".scenario")
                    .and_then(|(_, rest)| rest.split('"').nth(1))
                    .unwrap_or("default")
                    .to_string();
                Entry {
                    local: chunk.contains("TEST_F_LOCAL"),
                    manual: chunk.contains("TEST_F_MANUAL"),
                    name,
                    scenario,
                }
            })
            .collect()
    }

    /// The vendored librdkafka source: the `librdkafka/` beside rdkafka-sys's manifest,
    /// as `cargo metadata` resolves it (a fresh clone finds it in its own registry).
    fn source() -> PathBuf {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = run(
            Command::new(cargo).current_dir(&workspace).args(["metadata", "--format-version", "1"]),
            None,
            Duration::from_secs(300),
            "cargo metadata",
        );
        let meta: Value = serde_json::from_str(&out).expect("cargo metadata's JSON");
        let sys = meta["packages"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|p| p["name"] == "rdkafka-sys")
            .expect("rdkafka-sys among the workspace's packages");
        let version = sys["version"].as_str().unwrap_or_default();
        assert!(
            version.ends_with(&format!("+{VERSION}")),
            "rdkafka-sys {version} vendors another librdkafka than {VERSION}: update VERSION and BROKER_TESTS"
        );
        let manifest = PathBuf::from(sys["manifest_path"].as_str().expect("rdkafka-sys's manifest_path"));
        manifest.parent().expect("rdkafka-sys's directory").join("librdkafka")
    }

    /// What the runner printed about each test: its final state (`PASSED`, `FAILED`,
    /// `SKIPPED`) and its own lines.
    #[derive(Default)]
    struct Outcome {
        state: Option<String>,
        output: String,
        /// As the summary table gives it (`1.234s`).
        took: Option<String>,
    }

    /// The tests' threads share stderr, so one's line may start in the middle of
    /// another's: states are taken from the `=== Test NAME STATE ===` marker wherever
    /// it is, and from the summary table (`| NAME | STATE | 1.234s |`, printed at the
    /// end by one thread) when the runner got that far.
    fn parse(said: &str) -> BTreeMap<String, Outcome> {
        let text = strip_colours(said);
        let mut tests: BTreeMap<String, Outcome> = BTreeMap::new();
        for line in text.lines() {
            // `[NAME   /  1.234s] text`, `### Test "NAME (subtest)" failed ...`.
            let name = if let Some(rest) = line.strip_prefix('[') {
                rest.split(['/', ' ']).next().unwrap_or_default()
            } else if let Some(rest) = line.strip_prefix("### Test \"") {
                rest.split(['"', ' ']).next().unwrap_or_default()
            } else {
                ""
            };
            if !name.is_empty() && name != "<MAIN>" {
                let outcome = tests.entry(name.to_string()).or_default();
                outcome.output.push_str(line);
                outcome.output.push('\n');
            }
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if let [_, name, state, time, ..] = cells[..]
                && time.ends_with('s')
                && matches!(state, "PASSED" | "FAILED" | "SKIPPED" | "RUNNING" | "NOT_STARTED")
            {
                let outcome = tests.entry(name.to_string()).or_default();
                outcome.state = Some(state.to_string());
                outcome.took = Some(time.to_string());
            }
        }
        for (_, rest) in text.match_indices("================= Test ").map(|(i, _)| text.split_at(i + 23)) {
            let mut words = rest.split_whitespace();
            if let (Some(name), Some(state @ ("PASSED" | "FAILED" | "SKIPPED"))) =
                (words.next(), words.next())
            {
                let outcome = tests.entry(name.to_string()).or_default();
                outcome.state.get_or_insert_with(|| state.to_string());
            }
        }
        tests
    }

    /// `s` without its ANSI colour escapes.
    fn strip_colours(s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        let mut chars = s.chars();
        while let Some(c) = chars.next() {
            if c == '\x1b' {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    }

    /// The test number the runner's `TESTS` matches on (`0045` of
    /// `0045_subscribe_update`).
    fn number(name: &str) -> &str {
        name.split('_').next().unwrap_or(name)
    }

    #[test]
    fn librdkafka_integration_tests_pass_against_es() {
        let src = source();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("librdkafka/build.sh");
        let built = run(
            Command::new("bash").arg(&script).arg(&src),
            None,
            Duration::from_secs(1800),
            "tests/librdkafka/build.sh",
        );
        let dir = PathBuf::from(built.lines().last().expect("build.sh prints the build directory").trim());
        let runner = dir.join("tests/test-runner");

        // Every test of the table, so that a broker test added by a newer librdkafka is
        // noticed rather than silently left out.
        let test_c = std::fs::read_to_string(dir.join("tests/test.c")).expect("tests/test.c");
        let entries = table(&test_c);
        let broker: BTreeSet<&str> =
            entries.iter().filter(|e| !e.local && !e.manual).map(|e| e.name.as_str()).collect();
        let listed: BTreeSet<&str> =
            BROKER_TESTS.iter().map(|(n, _)| *n).chain(MOCK_TESTS.iter().copied()).collect();
        for name in &listed {
            assert!(
                broker.contains(name),
                "{name} is not a broker test of librdkafka {VERSION}: update BROKER_TESTS"
            );
        }
        for name in &broker {
            assert!(
                listed.contains(name),
                "{name} needs a broker: add it to BROKER_TESTS, allowlisted or excluded"
            );
        }
        let allowlist: Vec<&str> =
            BROKER_TESTS.iter().filter(|(_, v)| !matches!(v, Excluded(_))).map(|(n, _)| *n).collect();
        let verdict = |name: &str| BROKER_TESTS.iter().find(|(n, _)| *n == name).map(|(_, v)| *v);
        let scenario_of = |name: &str| entries.iter().find(|e| e.name == name).map(|e| e.scenario.clone());
        // One run per scenario and mode. TESTS matches on numbers: every broker test
        // sharing a number and a scenario must be in the same run, or excluded with
        // every other.
        let mut runs: BTreeMap<(String, bool), BTreeSet<&str>> = BTreeMap::new();
        for name in &allowlist {
            let quick = verdict(name) == Some(Quick);
            runs.entry((scenario_of(name).unwrap_or_default(), quick)).or_default().insert(number(name));
        }
        for (name, v) in BROKER_TESTS {
            for ((scenario, quick), numbers) in &runs {
                let same_run = matches!(v, Quick) == *quick && !matches!(v, Excluded(_));
                assert!(
                    !numbers.contains(number(name))
                        || scenario_of(name).as_deref() != Some(scenario.as_str())
                        || same_run,
                    "{name} ({v:?}) shares its number with a test of the {scenario} run (quick: {quick}): \
                     TESTS would run it there"
                );
            }
        }

        let data = tempfile::tempdir().unwrap();
        // Kafka's defaults, as trivup's clusters run them (group.initial.rebalance.delay.ms
        // 3000: a group's first generation waits for the members its tests start).
        let b = Broker::start(data.path());
        let work = tempfile::tempdir().unwrap();
        let conf = work.path().join("test.conf");
        std::fs::write(&conf, format!("bootstrap.servers={}\ntest.timeout.multiplier=2\n", b.kafka_addr))
            .unwrap();

        // The quick runs go again with every producer idempotent (-P), as librdkafka's
        // CI's broker_idempotent target runs them.
        let runs: Vec<(&str, bool, bool, String)> = runs
            .iter()
            .flat_map(|((scenario, quick), numbers)| {
                let tests = numbers.iter().copied().collect::<Vec<_>>().join(",");
                let idempotent = quick.then(|| (scenario.as_str(), true, true, tests.clone()));
                [Some((scenario.as_str(), *quick, false, tests)), idempotent]
            })
            .flatten()
            .collect();
        let label = |scenario: &str, quick: bool, idempotent: bool| {
            let mode = if quick { "quick" } else { "full" };
            format!("{scenario}-{mode}{}", if idempotent { "-idempotent" } else { "" })
        };

        // One run of the runner: the tests TESTS names, in a scenario and mode, in a
        // directory of its own for its stats files. What it said and whether it
        // finished within RUN_LIMIT.
        let run_tests = |scenario: &str, quick: bool, idempotent: bool, tests: &str, cwd: PathBuf| {
            std::fs::create_dir_all(&cwd).unwrap();
            let mut cmd = Command::new(&runner);
            cmd.current_dir(&cwd)
                .env(
                    "LD_LIBRARY_PATH",
                    format!("{}:{}", dir.join("src").display(), dir.join("src-cpp").display()),
                )
                .env("RDKAFKA_TEST_CONF", &conf)
                .env("TESTS", tests)
                .env("TEST_SCENARIO", scenario)
                // es answers as Kafka 4 does (no message format v0/v1, KIP-896).
                .env("TEST_KAFKA_VERSION", "4.4.0")
                // As on librdkafka's CI: a timing assertion that a loaded machine
                // misses (0086's second ProduceRequest within 100 ms) warns instead
                // of failing; timeouts get 2 more multiples of test.conf's. Set here,
                // so a run is the same everywhere.
                .env("CI", "true")
                // -L: broker tests only; -Q: fewer messages, shorter waits.
                .args(["-L", "-p3"]);
            if quick {
                cmd.arg("-Q");
            }
            if idempotent {
                cmd.arg("-P");
            }
            let (out, finished) = output_within(&mut cmd, None, RUN_LIMIT, "librdkafka test-runner");
            // The runner says what each test does on stderr, sums up on stdout.
            let said =
                format!("{}{}", String::from_utf8_lossy(&out.stderr), String::from_utf8_lossy(&out.stdout));
            (said, finished)
        };

        // The runs go side by side (their tests mostly wait on timers).
        let started = Instant::now();
        let results: Vec<(String, String, bool)> = std::thread::scope(|scope| {
            let handles: Vec<_> = runs
                .iter()
                .map(|(scenario, quick, idempotent, tests)| {
                    let name = label(scenario, *quick, *idempotent);
                    let cwd = work.path().join(&name);
                    let run_tests = &run_tests;
                    scope.spawn(move || {
                        let (said, finished) = run_tests(scenario, *quick, *idempotent, tests, cwd);
                        (name, said, finished)
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().expect("a runner thread")).collect()
        });
        let took = started.elapsed();

        let mut failures = Vec::new();
        let mut outputs = String::new();
        let mut passed = BTreeMap::<&str, usize>::new();
        let mut lines = String::new();
        let mut rerun = Vec::new();
        for ((scenario, quick, idempotent, _), (name, said, finished)) in runs.iter().zip(&results) {
            if !*finished {
                failures.push(format!("the {name} run did not finish within {RUN_LIMIT:?}"));
            }
            outputs.push_str(&format!("\n=== the {name} run\n{said}"));
            let mut tests = parse(said);
            let mine = |n: &str| {
                scenario_of(n).as_deref() == Some(*scenario)
                    && verdict(n).is_some_and(|v| (v == Quick) == *quick)
            };
            // A test that failed beside the five other runs gets one more run on its
            // own, in the same scenario and mode: several bound their waits on a
            // rebalance or a session timeout tightly enough for CI's 2 loaded cores to
            // miss. A second failure is a failure, and a pass is named in the summary.
            for test in allowlist.iter().filter(|n| mine(n)) {
                if *finished && tests.get(*test).and_then(|o| o.state.as_deref()) != Some("PASSED") {
                    let cwd = work.path().join(format!("{name}-{test}-alone"));
                    let (again, _) = run_tests(scenario, *quick, *idempotent, number(test), cwd);
                    outputs.push_str(&format!("\n=== {test} again, alone, in the {name} run\n{again}"));
                    if let Some(outcome) = parse(&again).remove(*test)
                        && outcome.state.as_deref() == Some("PASSED")
                    {
                        rerun.push(format!("{test} ({name})"));
                        tests.insert(test.to_string(), outcome);
                    }
                }
            }
            for test in allowlist.iter().filter(|n| mine(n)) {
                let outcome = tests.get(*test);
                let took = outcome.and_then(|o| o.took.as_deref()).unwrap_or("?");
                match outcome.and_then(|o| o.state.as_deref()) {
                    // A test whose every subtest is left out (SUB_TEST in quick mode)
                    // passes in no time, having tested nothing.
                    Some("PASSED") if took == "0.000s" => failures.push(format!(
                        "{test} ({name}): passed in 0.000s, running none of its subtests: allowlist it as Full"
                    )),
                    Some("PASSED") => *passed.entry(if *idempotent { "idempotent" } else { "plain" }).or_default() += 1,
                    Some(state) => failures.push(format!("{test} ({name}): {state}\n{}", tail(&tests[*test].output, 6000))),
                    None => failures.push(format!(
                        "{test} ({name}): did not run to the end\n{}",
                        outcome.map(|o| tail(&o.output, 6000)).unwrap_or_default()
                    )),
                }
                let state = outcome.and_then(|o| o.state.as_deref()).unwrap_or("unfinished");
                lines.push_str(&format!("\n  {test} ({name}): {state} ({took})"));
            }
            // Every run reports the other runs' tests as skipped.
            for (test, outcome) in &tests {
                let ran = !matches!(outcome.state.as_deref(), Some("SKIPPED") | None);
                if ran
                    && broker.contains(test.as_str())
                    && !(allowlist.contains(&test.as_str()) && mine(test))
                {
                    failures.push(format!("{test}: ran in the {name} run, but is not allowlisted there"));
                }
            }
        }
        let quick_count = allowlist.iter().filter(|n| verdict(n) == Some(Quick)).count();

        let mut summary = format!(
            "librdkafka {VERSION} tests/ against es: {} tests, {} need a broker ({} more only the mock cluster), {} \
             allowlisted, {} passed; the {quick_count} quick ones again with idempotent producers: {} passed; in \
             {took:.0?}",
            entries.len(),
            BROKER_TESTS.len(),
            MOCK_TESTS.len(),
            allowlist.len(),
            passed.get("plain").unwrap_or(&0),
            passed.get("idempotent").unwrap_or(&0),
        );
        summary.push_str(&lines);
        if !rerun.is_empty() {
            summary.push_str(&format!(
                "\npassed on a second run, alone, after failing beside the others: {rerun:?}"
            ));
        }
        summary.push_str("\nexcluded:");
        for (name, v) in BROKER_TESTS {
            if let Excluded(why) = v {
                summary.push_str(&format!("\n  {name}: {why}"));
            }
        }
        println!("{summary}");
        assert!(
            failures.is_empty(),
            "{summary}\n\nthe runner's output:\n{}\nbroker stderr:\n{}\n\n{}",
            tail(&outputs, 8000),
            tail(&b.stderr(), 4000),
            failed_last(&failures),
        );
    }
}
