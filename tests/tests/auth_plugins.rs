//! Authenticator plugins on the real broker's Kafka listener: the JWT example
//! uploaded as `jwt` serves `OAUTHBEARER:jwt`, and confluent-kafka (librdkafka,
//! with an `oauth_cb` making HS256 tokens) produces and consumes through it; an
//! expired token, a bad signature and a token naming an unknown key are refused
//! alike (and like a wrong password); a trapping, looping or memory-hungry
//! authenticator fails only its own handshake, the broker stays up and PLAIN and
//! SCRAM logins on it still work; a plugin cannot log a client in as an identity
//! that is not an active key. HTTP and the binary protocol's `Authenticate` step
//! take a bearer JWT through the same plugin.

use std::path::PathBuf;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use es_tests::broker::{self, Broker};
use es_tests::kafka_wire::{KafkaConn, split_key};
use es_tests::python::run_script;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const HS256_KEY: &str = "an-hs256-test-key-of-more-than-32-bytes";
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);
/// SASL_AUTHENTICATION_FAILED.
const AUTH_FAILED: i16 = 58;

fn guest(name: &str) -> Vec<u8> {
    let path = PathBuf::from(es_plugin_host::GUEST_WASM_DIR).join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

fn start(dir: &std::path::Path, mechanisms: &str) -> Broker {
    let args = ["--auth", "--kafka-allow-plaintext-plain", "--auth-mechanisms", mechanisms];
    Broker::start_env(dir, &args, &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)])
}

fn make_key(b: &Broker, name: &str, grants: &[&str]) -> String {
    let admin = broker::Client::with_key(&b.url, ADMIN);
    let r = admin.post("/keys", &json!({"name": name, "grants": grants}));
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["key"].as_str().unwrap().to_owned()
}

fn upload(b: &Broker, path: &str, wasm: &[u8]) -> Value {
    let r = broker::Client::with_key(&b.url, ADMIN).post_bytes(path, wasm);
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

/// The JSON lines kafka_oauth.py printed.
fn oauth(b: &Broker, subject: &str, kind: &str, args: &[&str]) -> Vec<Value> {
    es_tests::python::python();
    let mut all = vec![b.kafka_addr.as_str(), HS256_KEY, subject, kind];
    all.extend_from_slice(args);
    let (ok, output) = run_script("kafka_oauth.py", &all, SCRIPT_TIMEOUT);
    assert!(ok, "kafka_oauth.py {args:?} failed:\n{output}\nbroker stderr:\n{}", b.stderr());
    output.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[test]
fn confluent_kafka_logs_in_with_oauthbearer_through_the_jwt_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), "SCRAM-SHA-512,PLAIN,OAUTHBEARER:jwt");
    let body = upload(&b, &format!("/plugins/jwt?config.hs256_key={HS256_KEY}"), &guest("es_example_jwt"));
    assert_eq!(
        (body["world"].as_str(), body["supports"].clone()),
        (Some("authenticator"), json!(["OAUTHBEARER"]))
    );
    // SaslHandshake offers exactly the configured set.
    let mut conn = KafkaConn::connect(&b.kafka_addr).unwrap();
    let offered: Vec<String> =
        conn.handshake("NOPE").unwrap().mechanisms.iter().map(|m| m.to_string()).collect();
    assert_eq!(offered, ["SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"]);

    let key = make_key(&b, "app", &["topic:prefixed:app.:admin", "group:prefixed:app.:read"]);
    let (id, _) = split_key(&key);
    let admin = broker::Client::with_key(&b.url, ADMIN);
    assert_eq!(admin.post("/topics", &json!({"name": "app.jwt", "partitions": 1})).status, 201);
    let got = oauth(&b, id, "good", &["roundtrip", "app.jwt", "app.g"]);
    let r = &got[0];
    assert_eq!((r["left"].as_i64(), r["reports"].clone()), (Some(0), json!([null, null, null])), "{r}");
    assert_eq!(r["values"], json!(["v0", "v1", "v2"]), "{r}");
    assert_eq!(r["committed"], json!(3), "{r}");
    // The token's key has that key's grants, no more: another prefix is denied.
    assert_eq!(admin.post("/topics", &json!({"name": "other.t", "partitions": 1})).status, 201);
    let denied = oauth(&b, id, "good", &["login", "other.t"]);
    assert_eq!(denied[0]["auth"], json!([]), "logged in: {denied:?}");

    // Expired, badly signed, not yet valid and unknown-key tokens: one answer.
    let expired = oauth(&b, id, "expired", &["login", "app.jwt"]);
    assert_eq!(expired[0]["auth"].as_array().map(Vec::len), Some(1), "{expired:?}");
    assert!(expired[0]["auth"][0][1].as_str().unwrap().contains("invalid credentials"), "{expired:?}");
    for (subject, kind) in [(id, "badsig"), (id, "notyet"), ("ffffffffffffffff", "good")] {
        let got = oauth(&b, subject, kind, &["login", "app.jwt"]);
        assert_eq!(got[0], expired[0], "{kind} {subject}: the refusals differ");
    }
    // A revoked key's token is refused like an unknown one.
    assert_eq!(admin.delete(&format!("/keys/{id}")).status, 200);
    let revoked = oauth(&b, id, "good", &["login", "app.jwt"]);
    assert_eq!(revoked[0], expired[0], "revoked");
}

/// An HS256 JWT naming `sub`, valid for an hour, signed with `key`.
fn token(sub: &str, key: &str) -> String {
    let exp = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3600;
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(json!({"sub": sub, "exp": exp}).to_string());
    let signed = format!("{header}.{payload}");
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(signed.as_bytes());
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

/// A broker taking OAUTHBEARER through the `jwt` example, a key `app` with the
/// `app.` prefix, and the topics `app.{suffix}` and `other.{suffix}`; answers the
/// broker and the key's id.
fn jwt_broker(dir: &std::path::Path, suffix: &str) -> (Broker, String) {
    let b = start(dir, "SCRAM-SHA-512,OAUTHBEARER:jwt");
    upload(&b, &format!("/plugins/jwt?config.hs256_key={HS256_KEY}"), &guest("es_example_jwt"));
    let key = make_key(&b, "app", &["topic:prefixed:app.:admin"]);
    let id = split_key(&key).0.to_owned();
    let admin = broker::Client::with_key(&b.url, ADMIN);
    for topic in [format!("app.{suffix}"), format!("other.{suffix}")] {
        assert_eq!(admin.post("/topics", &json!({"name": topic, "partitions": 1})).status, 201);
    }
    (b, id)
}

#[test]
fn http_takes_a_bearer_jwt_through_the_same_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let (b, id) = jwt_broker(dir.path(), "h");
    let id = id.as_str();
    let jwt = broker::Client::with_key(&b.url, &token(id, HS256_KEY));
    assert_eq!(jwt.get("/topics/app.h").status, 200, "the token's key reads its topic");
    assert_eq!(jwt.get("/topics/other.h").status, 404, "and has only that key's grants");
    let bad = broker::Client::with_key(&b.url, &token(id, "another-key-of-at-least-thirty-two-bytes"));
    assert_eq!(bad.get("/topics/app.h").status, 401);
    let unknown = broker::Client::with_key(&b.url, &token("ffffffffffffffff", HS256_KEY));
    assert_eq!(unknown.get("/topics/app.h").status, 401);
}

/// The binary protocol's `Authenticate` step with a JWT in place of a key: the
/// token's key is logged in with that key's grants (its topic is written and
/// read, another one answers as missing), and a token signed with another key,
/// one naming an unknown key and, after a revocation, a valid-looking one for the
/// revoked key are refused like a wrong key.
#[test]
fn binary_authenticate_takes_a_bearer_jwt_through_the_same_plugin() {
    use es_client::{Client, ClientError, ClientOptions};
    use es_protocol::ErrorCode;
    let dir = tempfile::tempdir().unwrap();
    let (b, id) = jwt_broker(dir.path(), "b");
    let id = id.as_str();
    let admin = broker::Client::with_key(&b.url, ADMIN);
    let batch = |v: &str| {
        let records = [es_core::Record::from_value(v.to_owned())];
        bytes::Bytes::from(es_core::batch::encode(&records, 1_000, es_core::ProducerInfo::NONE).unwrap())
    };
    let code = |r: Result<Client, ClientError>| match r {
        Err(ClientError::Broker { code, .. }) => code,
        Err(other) => panic!("expected a refusal, got {other:?}"),
        Ok(_) => panic!("expected a refusal, got a connection"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let connect = |text: String| {
            let addr = b.binary_addr.clone();
            async move {
                let options = ClientOptions { api_key: Some(text), retries: 0, ..ClientOptions::default() };
                tokio::time::timeout(Duration::from_secs(30), Client::connect(&addr, options))
                    .await
                    .expect("connect within 30 s")
            }
        };
        let jwt = connect(token(id, HS256_KEY)).await.expect("the token logs in");
        jwt.produce("app.b", 0, batch("by jwt")).await.expect("the token's key writes its topic");
        let names: Vec<String> = jwt.list_topics().await.unwrap().into_iter().map(|t| t.name).collect();
        assert_eq!(names, ["app.b"], "the listing shows only the key's topics");
        match jwt.produce("other.b", 0, batch("x")).await {
            Err(ClientError::Broker { code, .. }) => assert_eq!(code, ErrorCode::UnknownTopic),
            other => panic!("another topic must answer as missing, got {other:?}"),
        }
        let other_key = token(id, "another-key-of-at-least-thirty-two-bytes");
        assert_eq!(code(connect(other_key).await), ErrorCode::Unauthenticated, "a bad signature");
        let unknown = token("ffffffffffffffff", HS256_KEY);
        assert_eq!(code(connect(unknown).await), ErrorCode::Unauthenticated, "an unknown key");
        assert_eq!(admin.delete(&format!("/keys/{id}")).status, 200, "revoke");
        assert_eq!(code(connect(token(id, HS256_KEY)).await), ErrorCode::Unauthenticated, "a revoked key");
    });
    let got = admin.get("/topics/app.b/partitions/0/records?offset=earliest");
    assert!(got.body.to_string().contains("by jwt"), "{}", got.body);
}

/// One X-HOSTILE handshake with `message`: the SaslAuthenticate error code and
/// whether the broker closed the connection after it.
fn hostile_login(b: &Broker, message: &[u8]) -> (i16, bool) {
    let mut conn = KafkaConn::connect(&b.kafka_addr).unwrap();
    assert_eq!(conn.handshake("X-HOSTILE").unwrap().error_code, 0);
    let code = conn.authenticate(message).unwrap().error_code;
    (code, code != 0 && conn.closed_by_broker())
}

#[test]
fn a_hostile_authenticator_fails_only_its_own_handshakes() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), "SCRAM-SHA-512,PLAIN,X-HOSTILE:hostile");
    // A 32 MiB cap and a 1 s step deadline: the bomb (1 MiB written per step) meets
    // the cap long before the deadline even on a loaded machine, where with the
    // 100 ms default it could run out of time first and fail as a deadline.
    let limits = "call_deadline_ms=1000&memory_bytes_max=33554432";
    upload(&b, &format!("/plugins/hostile?{limits}"), &guest("es_fixture_hostile_auth"));
    let key = make_key(&b, "app", &["topic:prefixed:app.:admin"]);
    let (id, secret) = split_key(&key);
    assert_eq!(hostile_login(&b, format!("ok:{id}").as_bytes()), (0, false), "the fixture logs in");
    for mode in ["trap", "loop", "bomb"] {
        assert_eq!(hostile_login(&b, mode.as_bytes()), (AUTH_FAILED, true), "{mode}");
        // The broker is fine: PLAIN and SCRAM logins on it work at once.
        let mut conn = KafkaConn::connect(&b.kafka_addr).unwrap();
        assert_eq!(conn.plain_login(id, secret).unwrap(), 0, "PLAIN after {mode}");
    }
    // A plugin cannot mint an identity: only an active key's id is accepted.
    assert_eq!(hostile_login(&b, b"as:admin").0, AUTH_FAILED);
    assert_eq!(hostile_login(&b, b"as:ffffffffffffffff").0, AUTH_FAILED);
    let scram = run_script(
        "kafka_sasl.py",
        &[b.kafka_addr.as_str(), "SCRAM-SHA-512", id, secret, "login", "app.x"],
        SCRIPT_TIMEOUT,
    );
    assert!(scram.0, "{}", scram.1);
    assert!(scram.1.contains(r#""auth": []"#), "SCRAM after the hostile plugin: {}", scram.1);
    let stderr = b.stderr();
    for expected in ["trapped", "deadline", "memory cap"] {
        assert!(stderr.contains(expected), "the broker log names `{expected}`:\n{stderr}");
    }
}
