//! `GET /metrics` against the real broker: series move for HTTP, binary and Kafka
//! (kcat) traffic; two keys with different grants see different series, an
//! anonymous scrape with auth on is refused; every metric the Grafana dashboard
//! (docs/grafana/es.json) queries exists in a real scrape, and every family a
//! scrape shows is described in docs/operations.md.

use std::collections::BTreeSet;
use std::process::Output;
use std::time::Duration;

use es_client::{Client as BinaryClient, ClientOptions};
use es_tests::broker::{Broker, Client, Resp};
use serde_json::{Value, json};

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);

fn ok(r: &Resp, what: &str) -> Value {
    assert!((200..300).contains(&r.status), "{what}: {} {}", r.status, r.body);
    r.body.clone()
}

fn scrape(c: &Client) -> String {
    let r = c.get("/metrics");
    assert_eq!(r.status, 200, "scrape: {}", r.body);
    r.body.as_str().expect("the exposition is text").to_owned()
}

/// The value of the sample `name` whose labels include every pair of `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (n, rest) = series.split_once('{').map_or((series, ""), |(n, r)| (n, r));
        let all = labels.iter().all(|(k, v)| rest.contains(&format!("{k}=\"{v}\"")));
        (n == name && all).then(|| value.parse().ok()).flatten()
    })
}

/// Every sample name in a scrape.
fn names(text: &str) -> BTreeSet<String> {
    let name = |l: &str| l.split(['{', ' ']).next().unwrap_or_default().to_owned();
    text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()).map(name).collect()
}

/// Runs kcat against the broker's Kafka listener, killed after CLIENT_TIMEOUT.
fn kcat(b: &Broker, args: &[&str], stdin: &str) -> Output {
    let mut cmd = es_tests::peers::kcat();
    cmd.arg("-b").arg(&b.kafka_addr).args(args);
    let out =
        es_tests::peers::output(&mut cmd, Some(stdin.as_bytes()), CLIENT_TIMEOUT, &format!("kcat {args:?}"));
    assert!(out.status.success(), "kcat {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out
}

fn http_produce(c: &Client, topic: &str, records: Value) {
    ok(&c.post(&format!("/topics/{topic}/records"), &json!({ "records": records })), "produce");
}

/// Three records in and out over the binary protocol.
fn binary_traffic(b: &Broker, topic: &str) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let c = BinaryClient::connect(&b.binary_addr, ClientOptions::default()).await.unwrap();
        let records: Vec<es_core::Record> = ["x", "y", "z"].map(es_core::Record::from_value).to_vec();
        let batch = es_core::batch::encode(&records, 1_000, es_core::ProducerInfo::NONE).unwrap();
        c.produce(topic, 0, batch.into()).await.unwrap();
        let p =
            es_protocol::FetchPartition { topic: topic.into(), partition: 0, offset: 0, max_bytes: 1 << 20 };
        c.fetch(0, 1 << 20, vec![p]).await.unwrap();
    });
}

#[test]
fn series_move_for_http_binary_and_kafka_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_with(dir.path(), &["--metrics-kafka-compat"]);
    let c = Client::new(&b.url);
    b.create_topic("t", 1);
    let before = scrape(&c);
    assert_eq!(sample(&before, "es_records_produced_total", &[("topic", "t")]), Some(0.0));
    http_produce(&c, "t", json!([{"value": "a"}, {"value": "b"}]));
    binary_traffic(&b, "t");
    kcat(&b, &["-P", "-t", "t", "-p", "0"], "from kcat\n");
    let consumed = kcat(&b, &["-C", "-t", "t", "-o", "beginning", "-e", "-q"], "");
    assert_eq!(String::from_utf8_lossy(&consumed.stdout).lines().count(), 6);
    ok(&c.get("/topics/t/partitions/0/records?offset=0"), "consume");

    let text = scrape(&c);
    let t = [("topic", "t")];
    assert_eq!(sample(&text, "es_records_produced_total", &t), Some(6.0), "{text}");
    assert!(sample(&text, "es_records_fetched_total", &t).unwrap() >= 6.0 + 3.0 + 6.0);
    assert!(sample(&text, "es_bytes_in_total", &t).unwrap() > 0.0);
    assert!(sample(&text, "es_bytes_out_total", &t).unwrap() > 0.0);
    for protocol in ["http", "binary", "kafka"] {
        let p = [("protocol", protocol)];
        assert!(sample(&text, "es_produce_latency_seconds_count", &p).unwrap() >= 1.0, "{protocol}");
        assert!(sample(&text, "es_fetch_latency_seconds_count", &p).unwrap() >= 1.0, "{protocol}");
    }
    assert!(sample(&text, "es_kafka_request_latency_seconds_count", &[("api", "produce")]).unwrap() >= 1.0);
    assert!(sample(&text, "es_kafka_request_latency_seconds_count", &[("api", "metadata")]).unwrap() >= 1.0);
    let p0 = [("topic", "t"), ("partition", "0")];
    assert_eq!(sample(&text, "es_partition_high_watermark", &p0), Some(6.0));
    assert_eq!(sample(&text, "es_partition_segments", &p0), Some(1.0));
    assert!(sample(&text, "es_log_fsyncs_total", &[]).unwrap() >= 3.0);
    assert!(sample(&text, "es_log_appended_bytes_total", &[]).unwrap() > 0.0);
    for counter in ["es_log_direct_rounds_total", "es_log_checkpoint_fsyncs_total"] {
        assert!(sample(&text, counter, &[]).is_some(), "{counter} missing");
    }
    assert!(sample(&text, "es_log_group_commit_appends_count", &[]).unwrap() >= 1.0);
    assert!(sample(&text, "es_process_open_fds", &[]).unwrap() > 3.0);
    assert!(sample(&text, "es_process_resident_memory_bytes", &[]).unwrap() > 0.0);
    assert_eq!(sample(&text, "kafka_server_brokertopicmetrics_messagesin_total", &t), Some(6.0));
}

#[test]
fn two_keys_see_their_grants_and_anonymous_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_env(dir.path(), &["--auth"], &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)]);
    let admin = Client::with_key(&b.url, ADMIN);
    for t in ["a.x", "b.x"] {
        ok(&admin.post("/topics", &json!({"name": t, "partitions": 1})), "create");
        http_produce(&admin, t, json!([{"value": "v"}]));
    }
    let key = |name: &str, grant: &str| {
        let made = ok(&admin.post("/keys", &json!({"name": name, "grants": [grant]})), "create key");
        made["key"].as_str().unwrap().to_owned()
    };
    let (a, b_key) = (key("a", "topic:prefixed:a.:read"), key("b", "topic:prefixed:b.:describe"));
    let id = |k: &str| k.split('_').nth(1).unwrap().to_owned();
    let (ca, cb) = (Client::with_key(&b.url, &a), Client::with_key(&b.url, &b_key));
    let denied = ca.post("/topics/b.x/records", &json!({"records": [{"value": "no"}]}));
    assert_eq!(denied.status, 404, "a denial looks like a missing topic");

    let seen_a = scrape(&ca);
    assert!(seen_a.contains("topic=\"a.x\"") && !seen_a.contains("topic=\"b.x\""), "{seen_a}");
    assert!(sample(&seen_a, "es_authorization_denials_total", &[("key", &id(&a))]).unwrap() >= 1.0);
    assert!(!seen_a.contains(&id(ADMIN)) && !seen_a.contains(&id(&b_key)), "another key's series");
    for broker_wide in ["es_log_fsyncs_total", "es_process_open_fds", "es_produce_latency_seconds_count"] {
        assert!(!names(&seen_a).contains(broker_wide), "{broker_wide} needs cluster describe");
    }
    let seen_b = scrape(&cb);
    assert!(seen_b.contains("topic=\"b.x\"") && !seen_b.contains("topic=\"a.x\""), "{seen_b}");

    let everything = scrape(&admin);
    assert!(everything.contains("topic=\"a.x\"") && everything.contains("topic=\"b.x\""));
    assert!(sample(&everything, "es_process_open_fds", &[]).is_some());
    assert!(sample(&everything, "es_auth_successes_total", &[("key", &id(&a))]).unwrap() >= 1.0);

    let anonymous = Client::new(&b.url).get("/metrics");
    assert_eq!((anonymous.status, anonymous.code()), (401, "unauthenticated"), "{}", anonymous.body);
}

/// Metric names a dashboard query uses (`es_*` and `kafka_server_*` tokens).
fn queried_names(dashboard: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            let tokens = expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'));
            out.extend(
                tokens.filter(|t| t.starts_with("es_") || t.starts_with("kafka_server_")).map(str::to_owned),
            );
        }
    }
    out
}

#[test]
fn the_dashboard_queries_only_metrics_a_scrape_has_and_the_docs_list_them() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start_with(dir.path(), &["--metrics-kafka-compat"]);
    let c = Client::new(&b.url);
    b.create_topic("t", 1);
    let bind = json!({"validators": [{"plugin": "rules", "config": {"key.required": "true"}}]});
    ok(&b.put("/topics/t/validators", &bind), "bind a validator");
    http_produce(&c, "t", json!([{"key": "k", "value": "a"}]));
    kcat(&b, &["-P", "-t", "t", "-p", "0", "-K", ":"], "k2:from kcat\n");
    kcat(&b, &["-C", "-t", "t", "-o", "beginning", "-e", "-q"], "");
    ok(&b.post("/groups/g/reset-offsets", &json!({"topic": "t", "to": "earliest"})), "commit offsets");
    assert_eq!(Client::with_key(&b.url, &ADMIN.replace('A', "B")).get("/topics").status, 401);
    ok(&c.get("/registry/subjects"), "a schema-registry read");
    let text = scrape(&c);
    assert_eq!(
        sample(&text, "es_consumer_group_lag", &[("group", "g"), ("topic", "t")]),
        Some(2.0),
        "{text}"
    );
    assert!(sample(&text, "es_plugin_calls_total", &[("plugin", "rules")]).unwrap() >= 2.0);
    assert!(
        sample(&text, "es_schema_registry_requests_total", &[("kind", "read"), ("status", "2xx")]).unwrap()
            >= 1.0
    );

    let root = std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("..");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("docs/grafana/es.json")).unwrap()).unwrap();
    let scraped = names(&text);
    let queried = queried_names(&dashboard);
    assert!(queried.len() >= 20, "the dashboard queries {} metrics", queried.len());
    let missing: Vec<_> = queried.iter().filter(|n| !scraped.contains(*n)).collect();
    assert!(missing.is_empty(), "the dashboard queries metrics no scrape has: {missing:?}\n{text}");

    let docs = std::fs::read_to_string(root.join("docs/operations.md")).unwrap();
    let families: BTreeSet<&str> =
        text.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.split(' ').next()).collect();
    let undocumented: Vec<_> = families.iter().filter(|f| !docs.contains(&format!("`{f}`"))).collect();
    assert!(undocumented.is_empty(), "docs/operations.md does not describe {undocumented:?}");
}
