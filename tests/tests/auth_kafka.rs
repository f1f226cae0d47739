//! SASL on the real broker's Kafka listener (`--auth`): kcat and confluent-kafka
//! (librdkafka) log in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 and produce and
//! consume; a wrong password and an unknown user are refused alike; a request
//! before SASL closes the connection; a revoked key is refused on its next request;
//! PLAIN is not offered on a plaintext listener unless allowed; KIP-368 expiry and
//! re-authentication on a live connection; produce quotas as KIP-219 (answered with
//! `throttle_time_ms`, the connection muted, other keys untouched), measured with a
//! raw client that ignores the field and with confluent-kafka.

use std::process::{Command, Output};
use std::time::Duration;

use es_tests::broker::{self, Broker};
use es_tests::kafka_wire::{KafkaConn, produce_code, split_key};
use es_tests::python::run_script;
use kafka_protocol::messages::{MetadataRequest, ProduceResponse};
use serde_json::{Value, json};

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(30);
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

fn start(dir: &std::path::Path, extra: &[&str]) -> Broker {
    let mut args = vec!["--auth"];
    args.extend_from_slice(extra);
    Broker::start_env(dir, &args, &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)])
}

fn make_key(b: &Broker, name: &str, grants: &[&str]) -> String {
    let admin = broker::Client::with_key(&b.url, ADMIN);
    let r = admin.post("/keys", &json!({"name": name, "grants": grants}));
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["key"].as_str().unwrap().to_owned()
}

/// Runs `cmd` with `stdin`, killed after [`CLIENT_TIMEOUT`] (what it printed is kept).
fn run(cmd: &mut Command, stdin: &str) -> Output {
    let what = format!("{cmd:?}");
    es_tests::peers::output_within(cmd, Some(stdin.as_bytes()), CLIENT_TIMEOUT, &what).0
}

fn kcat(b: &Broker, mechanism: &str, key: &str, args: &[&str], stdin: &str) -> Output {
    let (user, password) = split_key(key);
    let mut cmd = es_tests::peers::kcat();
    cmd.arg("-b").arg(&b.kafka_addr);
    for (k, v) in [
        ("security.protocol", "SASL_PLAINTEXT"),
        ("sasl.mechanisms", mechanism),
        ("sasl.username", user),
        ("sasl.password", password),
    ] {
        cmd.arg("-X").arg(format!("{k}={v}"));
    }
    run(cmd.args(args), stdin)
}

/// The JSON lines kafka_sasl.py printed.
fn script(b: &Broker, mechanism: &str, user: &str, password: &str, args: &[&str]) -> Vec<Value> {
    es_tests::python::python();
    let mut all = vec![b.kafka_addr.as_str(), mechanism, user, password];
    all.extend_from_slice(args);
    let (ok, output) = run_script("kafka_sasl.py", &all, SCRIPT_TIMEOUT);
    assert!(ok, "kafka_sasl.py {args:?} failed:\n{output}\nbroker stderr:\n{}", b.stderr());
    output.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn kcat_and_confluent_log_in_with_every_mechanism_and_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &["--kafka-allow-plaintext-plain"]);
    let key = make_key(&b, "app", &["topic:prefixed:app.:admin", "group:prefixed:app.:read"]);
    let admin = broker::Client::with_key(&b.url, ADMIN);
    for (i, mechanism) in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"].iter().enumerate() {
        let topic = format!("app.t{i}");
        assert_eq!(admin.post("/topics", &json!({"name": topic, "partitions": 1})).status, 201);
        let out = kcat(&b, mechanism, &key, &["-P", "-t", &topic, "-p", "0", "-K", ":"], "k:from kcat\n");
        assert!(out.status.success(), "kcat {mechanism}: {}", String::from_utf8_lossy(&out.stderr));
        let fmt = ["-C", "-t", &topic, "-p", "0", "-o", "beginning", "-e", "-f", "%o %k=%s\n"];
        let out = kcat(&b, mechanism, &key, &fmt, "");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "0 k=from kcat\n", "{mechanism}");

        let (user, password) = split_key(&key);
        let group = format!("app.g{i}");
        let got = script(&b, mechanism, user, password, &["roundtrip", &topic, &group]);
        let r = &got[0];
        assert_eq!((r["left"].as_i64(), r["reports"].clone()), (Some(0), json!([null, null, null])), "{r}");
        assert_eq!(r["values"], json!(["from kcat", "v0", "v1"]), "{mechanism}: {r}");
        assert_eq!(r["committed"], json!(3), "{r}");
    }
}

#[test]
fn wrong_passwords_unknown_users_and_revoked_keys_are_refused_alike() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]);
    let key = make_key(&b, "app", &["topic:prefixed:app.:admin"]);
    let (user, _) = split_key(&key);
    let (_, other_secret) = split_key(ADMIN);
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        let wrong = script(&b, mechanism, user, other_secret, &["login", "app.x"]);
        let unknown = script(&b, mechanism, "ffffffffffffffff", other_secret, &["login", "app.x"]);
        assert_eq!(wrong[0]["auth"].as_array().map(Vec::len), Some(1), "{wrong:?}");
        // The user name is not in the message; nothing else may differ.
        assert_eq!(wrong[0], unknown[0], "{mechanism}: unknown user and wrong password differ");
    }
    // PLAIN is not offered on a plaintext listener without --kafka-allow-plaintext-plain.
    let mut conn = KafkaConn::connect(&b.kafka_addr).unwrap();
    let shake = conn.handshake("PLAIN").unwrap();
    assert_eq!(shake.error_code, 33, "UNSUPPORTED_SASL_MECHANISM");
    let offered: Vec<String> = shake.mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, ["SCRAM-SHA-512", "SCRAM-SHA-256"]);
    assert!(conn.closed_by_broker());
    // A good login works, then revocation refuses the next one.
    let ok = script(&b, "SCRAM-SHA-256", user, split_key(&key).1, &["login", "app.x"]);
    assert_eq!(ok[0]["auth"], json!([]), "{ok:?}");
    let admin = broker::Client::with_key(&b.url, ADMIN);
    assert_eq!(admin.delete(&format!("/keys/{user}")).status, 200);
    let revoked = script(&b, "SCRAM-SHA-256", user, split_key(&key).1, &["login", "app.x"]);
    let unknown = script(&b, "SCRAM-SHA-256", "ffffffffffffffff", split_key(&key).1, &["login", "app.x"]);
    assert_eq!(revoked[0], unknown[0], "a revoked key is an unknown user");
}

#[test]
fn requests_before_sasl_close_the_connection_and_oversized_frames_too() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &["--kafka-allow-plaintext-plain"]);
    let mut conn = KafkaConn::connect(&b.kafka_addr).unwrap();
    assert!(conn.call(1, &MetadataRequest::default()).is_err());
    assert!(conn.closed_by_broker() || conn.call(1, &MetadataRequest::default()).is_err());
    // ApiVersions is served before login and lists the SASL APIs.
    let mut conn = KafkaConn::connect(&b.kafka_addr).unwrap();
    let versions = conn.call(3, &kafka_protocol::messages::ApiVersionsRequest::default()).unwrap();
    let keys: Vec<i16> = versions.api_keys.iter().map(|k| k.api_key).collect();
    assert!(keys.contains(&17) && keys.contains(&36), "{keys:?}");
    // A pre-auth frame over the small cap is refused on its size prefix alone.
    conn.send_raw(&(64 * 1024u32).to_be_bytes()).unwrap();
    assert!(conn.closed_by_broker());
    // SaslAuthenticate without a handshake: ILLEGAL_SASL_STATE, then closed.
    let mut conn = KafkaConn::connect(&b.kafka_addr).unwrap();
    assert_eq!(conn.authenticate(b"\0x\0y").unwrap().error_code, 34);
    assert!(conn.closed_by_broker());
    // A wrong secret: SASL_AUTHENTICATION_FAILED, then closed.
    let key = make_key(&b, "app", &["topic:prefixed:app.:admin"]);
    let mut conn = KafkaConn::connect(&b.kafka_addr).unwrap();
    assert_eq!(conn.plain_login(split_key(&key).0, split_key(ADMIN).1).unwrap(), 58);
    assert!(conn.closed_by_broker());
}

#[test]
fn revocation_refuses_the_next_request_on_an_open_connection() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &["--kafka-allow-plaintext-plain"]);
    let key = make_key(&b, "app", &["topic:prefixed:app.:admin"]);
    let admin = broker::Client::with_key(&b.url, ADMIN);
    assert_eq!(admin.post("/topics", &json!({"name": "app.t", "partitions": 1})).status, 201);
    let mut conn = KafkaConn::login(&b.kafka_addr, &key).unwrap();
    assert_eq!(produce_code(&mut conn, "app.t", "revoked?"), 0);
    assert_eq!(
        produce_code(&mut conn, "other.t", "revoked?"),
        29,
        "TOPIC_AUTHORIZATION_FAILED, existing or not"
    );
    assert_eq!(admin.delete(&format!("/keys/{}", split_key(&key).0)).status, 200);
    assert_eq!(produce_code(&mut conn, "app.t", "revoked?"), 29, "refused on the very next request");
    // kcat cannot log in with it any more.
    let out = kcat(&b, "SCRAM-SHA-256", &key, &["-P", "-t", "app.t", "-X", "message.timeout.ms=3000"], "x\n");
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("Authentication failed") || said.contains("authentication failed"), "{said}");
    let records = admin.get("/topics/app.t/partitions/0/records?offset=earliest");
    assert_eq!(records.body["records"].as_array().map(Vec::len), Some(1), "{}", records.body);
}

/// Metadata's and DescribeCluster's authorized operations are what the logged-in
/// key's requests would be allowed (Kafka's AclOperation bits), and a field not
/// asked for is Kafka's "omitted".
#[test]
fn authorized_operations_are_what_the_key_may_do() {
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::{DescribeClusterRequest, TopicName};
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &["--kafka-allow-plaintext-plain"]);
    let admin = broker::Client::with_key(&b.url, ADMIN);
    assert_eq!(admin.post("/topics", &json!({"name": "app.t", "partitions": 1})).status, 201);
    let reader = make_key(&b, "reader", &["topic:prefixed:app.:read"]);
    let topic = MetadataRequestTopic::default().with_name(Some(TopicName("app.t".to_owned().into())));
    let ask = |key: &str, include: bool| {
        let mut conn = KafkaConn::login(&b.kafka_addr, key).unwrap();
        let req = MetadataRequest::default()
            .with_topics(Some(vec![topic.clone()]))
            .with_include_topic_authorized_operations(include);
        let md = conn.call(12, &req).unwrap();
        let cluster = DescribeClusterRequest::default().with_include_cluster_authorized_operations(include);
        let described = conn.call(0, &cluster).unwrap();
        (md.topics[0].topic_authorized_operations, described.cluster_authorized_operations)
    };
    let bits = |codes: &[u8]| codes.iter().fold(0i32, |b, c| b | (1 << c));
    // READ 3, DESCRIBE 8, DESCRIBE_CONFIGS 10; IDEMPOTENT_WRITE 12 (any active key).
    assert_eq!(ask(&reader, true), (bits(&[3, 8, 10]), bits(&[12])));
    // The superuser may do everything Kafka supports on a topic and on the cluster.
    assert_eq!(ask(ADMIN, true), (3576, 8096));
    assert_eq!(ask(ADMIN, false), (i32::MIN, i32::MIN));
}

#[test]
fn sessions_expire_and_re_authentication_keeps_a_connection_open() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &["--kafka-allow-plaintext-plain", "--kafka-session-lifetime-ms", "1500"]);
    let key = make_key(&b, "app", &["topic:prefixed:app.:admin"]);
    let other = make_key(&b, "other", &["topic:prefixed:other.:admin"]);
    let (id, secret) = split_key(&key);
    let mut renewed = KafkaConn::connect(&b.kafka_addr).unwrap();
    renewed.handshake("PLAIN").unwrap();
    let first = renewed.authenticate(format!("\0{id}\0{secret}").as_bytes()).unwrap();
    assert_eq!((first.error_code, first.session_lifetime_ms), (0, 1500));
    let mut lapsed = KafkaConn::login(&b.kafka_addr, &key).unwrap();
    // Re-authenticating as another key is refused and closes the connection.
    let mut switched = KafkaConn::login(&b.kafka_addr, &key).unwrap();
    let (other_id, other_secret) = split_key(&other);
    assert_eq!(switched.plain_login(other_id, other_secret).unwrap(), 58);
    assert!(switched.closed_by_broker());
    // Before the lifetime ends, one connection re-authenticates and goes on.
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(renewed.plain_login(id, secret).unwrap(), 0);
    std::thread::sleep(Duration::from_millis(1100));
    assert!(renewed.call(1, &MetadataRequest::default()).is_ok(), "re-authenticated in time");
    // The other lapsed: the broker closed it.
    assert!(lapsed.closed_by_broker() || lapsed.call(1, &MetadataRequest::default()).is_err());
}

#[test]
fn librdkafka_re_authenticates_before_its_session_expires() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &["--kafka-session-lifetime-ms", "2000"]);
    let key = make_key(&b, "app", &["topic:prefixed:app.:admin"]);
    let admin = broker::Client::with_key(&b.url, ADMIN);
    assert_eq!(admin.post("/topics", &json!({"name": "app.r", "partitions": 1})).status, 201);
    let (user, password) = split_key(&key);
    let got = script(&b, "SCRAM-SHA-512", user, password, &["reauth", "app.r"]);
    let r = &got[0];
    assert_eq!(r["reports"], json!(vec![Value::Null; 24]), "{r}");
    assert_eq!(r["errors"], json!([]), "the connection survived its 2 s lifetime: {r}");
    // Six seconds over a 2 s lifetime: the broker saw re-authentications, not new logins only.
    let log = b.wait_for_stderr("re-authenticated");
    assert!(log.matches("re-authenticated").count() >= 2, "{log}");
}

/// A produce of `value` to `topic` partition 0 at v7: its response, and how long
/// the broker took to answer it.
fn produce_timed(conn: &mut KafkaConn, topic: &str, value: &str) -> (ProduceResponse, Duration) {
    let req = es_tests::kafka_wire::produce_one(topic, value);
    let started = std::time::Instant::now();
    let r = conn.call(7, &req).unwrap();
    (r, started.elapsed())
}

#[test]
fn a_key_over_its_quota_is_answered_with_throttle_time_and_muted_while_another_is_not() {
    let dir = tempfile::tempdir().unwrap();
    // 2 kB/s with 10 s of burst: 20 kB at once, then every response says how long to wait.
    let b = start(dir.path(), &["--kafka-allow-plaintext-plain", "--quota-produce-bytes-per-s", "2000"]);
    let admin = broker::Client::with_key(&b.url, ADMIN);
    assert_eq!(admin.post("/topics", &json!({"name": "q", "partitions": 1})).status, 201);
    let heavy_key = make_key(&b, "heavy", &["topic:literal:q:write"]);
    let light_key = make_key(&b, "light", &["topic:literal:q:write"]);
    let mut heavy = KafkaConn::login(&b.kafka_addr, &heavy_key).unwrap();
    let mut light = KafkaConn::login(&b.kafka_addr, &light_key).unwrap();
    let big = "x".repeat(8_000);
    let mut throttle = 0;
    for _ in 0..10 {
        let (r, _) = produce_timed(&mut heavy, "q", &big);
        // Kafka answers a byte-rate throttle with the field, never with an error.
        assert_eq!(r.responses[0].partition_responses[0].error_code, 0);
        if r.throttle_time_ms > 0 {
            throttle = r.throttle_time_ms;
            break;
        }
    }
    assert!((500..=10_000).contains(&throttle), "never throttled, or far too long: {throttle} ms");
    // This client ignores throttle_time_ms and sends at once: the broker holds it.
    let hold = std::thread::spawn(move || produce_timed(&mut heavy, "q", "small"));
    let (r, light_took) = produce_timed(&mut light, "q", "small");
    assert_eq!((r.responses[0].partition_responses[0].error_code, r.throttle_time_ms), (0, 0));
    assert!(light_took < Duration::from_millis(500), "another key was slowed: {light_took:?}");
    let (r, held) = hold.join().unwrap();
    assert_eq!(r.responses[0].partition_responses[0].error_code, 0, "slowed, never refused");
    let expected = Duration::from_millis(u64::try_from(throttle).unwrap() * 8 / 10);
    assert!(held >= expected, "the muted connection was read after {held:?}, throttle {throttle} ms");
}

#[test]
fn confluent_kafka_is_held_to_its_keys_quota_and_a_light_key_is_not_slowed() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &["--kafka-allow-plaintext-plain", "--quota-produce-bytes-per-s", "5000"]);
    let admin = broker::Client::with_key(&b.url, ADMIN);
    assert_eq!(admin.post("/topics", &json!({"name": "q", "partitions": 1})).status, 201);
    let heavy_key = make_key(&b, "heavy", &["topic:literal:q:write"]);
    let light_key = make_key(&b, "light", &["topic:literal:q:write"]);
    let addr = b.kafka_addr.clone();
    let heavy = std::thread::spawn(move || {
        let (user, password) = split_key(&heavy_key);
        let args = [addr.as_str(), "PLAIN", user, password, "rate", "q", "8", "1000", "0"];
        run_script("kafka_sasl.py", &args, SCRIPT_TIMEOUT)
    });
    let (user, password) = split_key(&light_key);
    let light = script(&b, "PLAIN", user, password, &["rate", "q", "6", "200", "0.2"]);
    let (ok, output) = heavy.join().unwrap();
    assert!(ok, "the heavy client failed:\n{output}\nbroker stderr:\n{}", b.stderr());
    let heavy: Value = output.lines().find_map(|l| serde_json::from_str(l).ok()).unwrap();
    let (light, heavy_bytes) = (&light[0], heavy["bytes"].as_f64().unwrap());
    let heavy_rate = heavy_bytes / heavy["elapsed"].as_f64().unwrap();
    // At most the burst (10 s of the rate) plus the rate itself, with slack for one
    // batch charged after the fact; unthrottled, this client writes megabytes.
    let bound = (50_000.0 + 5_000.0 * heavy["elapsed"].as_f64().unwrap()) * 1.5;
    assert!(heavy_bytes <= bound, "heavy wrote {heavy_bytes} bytes (bound {bound}): {heavy}");
    assert!(heavy_bytes >= 50_000.0, "heavy was held below its quota: {heavy}");
    assert_eq!(heavy["errors"], json!([]), "throttled, never refused: {heavy}");
    assert_eq!(light["errors"], json!([]), "{light}");
    assert!(light["delivered"].as_u64().unwrap() >= 10, "{light}");
    assert!(light["latency_max"].as_f64().unwrap() < 1.5, "the light key was slowed: {light}");
    eprintln!("heavy {heavy_rate:.0} B/s over its 5000 B/s quota (10 s burst); light {light}");
}

#[test]
fn a_keys_own_produce_quota_throttles_it_on_a_broker_without_a_default() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &["--kafka-allow-plaintext-plain"]);
    let admin = broker::Client::with_key(&b.url, ADMIN);
    assert_eq!(admin.post("/topics", &json!({"name": "q", "partitions": 1})).status, 201);
    let capped = admin.post(
        "/keys",
        &json!({"name": "capped", "grants": ["topic:literal:q:write"], "quota": {"produce_bytes_per_s": 2000}}),
    );
    assert_eq!(capped.status, 201, "{}", capped.body);
    let free_key = make_key(&b, "free", &["topic:literal:q:write"]);
    let mut capped = KafkaConn::login(&b.kafka_addr, capped.body["key"].as_str().unwrap()).unwrap();
    let mut free = KafkaConn::login(&b.kafka_addr, &free_key).unwrap();
    let big = "x".repeat(8_000);
    let throttle_within = |conn: &mut KafkaConn| {
        (0..6)
            .map(|_| produce_timed(conn, "q", &big).0)
            .find(|r| r.throttle_time_ms > 0)
            .map(|r| r.throttle_time_ms)
    };
    // Six 8 kB batches: past the capped key's 20 kB burst, nothing for an unlimited key.
    assert_eq!(throttle_within(&mut free), None, "a key without a quota of its own is unlimited here");
    let throttle = throttle_within(&mut capped).expect("the key's own quota never throttled it");
    assert!((500..=30_000).contains(&throttle), "{throttle} ms");
}
