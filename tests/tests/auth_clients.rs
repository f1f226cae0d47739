//! Real Kafka clients log in to es over TLS and through the JWT example plugin:
//! the Apache Kafka Java client with SCRAM-SHA-512 and with OAUTHBEARER (an RS256
//! token), confluent-kafka and kafka-python with SCRAM-SHA-512 and OAUTHBEARER,
//! each over SASL_SSL, producing, consuming and committing in a group. The RS256
//! key pair is made at test time with the openssl CLI (no key is committed), and
//! HTTP checks what the plugin refuses: another key's signature, an expired
//! token, `alg: none`, and an HS256 token keyed with the RSA public key (the "alg
//! confusion" attack). The Python token-allowlist example (built by
//! plugins/examples/build.sh, like the polyglot validators) logs the Java client
//! and confluent-kafka in with an opaque token.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use es_tests::broker::{self, Broker};
use es_tests::kafka_wire::split_key;
use es_tests::peers::{java_classpath, output};
use hmac::{Hmac, Mac};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};
use sha2::Digest as _;

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const HS256_KEY: &str = "an-hs256-test-key-of-more-than-32-bytes";
const CLIENT_TIMEOUT: Duration = Duration::from_secs(120);

/// A temporary directory holding a test CA, the broker's certificate for
/// 127.0.0.1 and an RSA key pair for RS256 tokens.
struct Keys {
    dir: tempfile::TempDir,
}

impl Keys {
    fn new() -> Keys {
        let dir = tempfile::tempdir().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.distinguished_name.push(DnType::CommonName, "es auth-clients test CA");
        let ca_key = KeyPair::generate().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca_params.self_signed(&ca_key).unwrap().pem()).unwrap();
        let ca = Issuer::new(ca_params, ca_key);
        let params = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        let key = KeyPair::generate().unwrap();
        std::fs::write(dir.path().join("server.pem"), params.signed_by(&key, &ca).unwrap().pem()).unwrap();
        std::fs::write(dir.path().join("server-key.pem"), key.serialize_pem()).unwrap();
        let keys = Keys { dir };
        openssl(
            &[
                "genpkey",
                "-algorithm",
                "RSA",
                "-pkeyopt",
                "rsa_keygen_bits:2048",
                "-out",
                &keys.path("rsa.pem"),
            ],
            b"",
        );
        keys
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_str().unwrap().to_owned()
    }

    /// The RS256 public key, PEM (SubjectPublicKeyInfo).
    fn public_pem(&self) -> String {
        openssl(&["pkey", "-in", &self.path("rsa.pem"), "-pubout"], b"")
    }

    /// An RS256 token with `claims`, signed with this pair's private key.
    fn rs256(&self, claims: &Value) -> String {
        rs256_with(&self.path("rsa.pem"), claims)
    }
}

/// What `openssl ARGS` printed, with `stdin`.
fn openssl(args: &[&str], stdin: &[u8]) -> String {
    let out = output(Command::new("openssl").args(args), Some(stdin), CLIENT_TIMEOUT, "openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn rs256_with(private_key: &str, claims: &Value) -> String {
    let signed = signing_input("RS256", claims);
    let out = output(
        Command::new("openssl").args(["dgst", "-sha256", "-sign", private_key]),
        Some(signed.as_bytes()),
        CLIENT_TIMEOUT,
        "openssl dgst -sign",
    );
    assert!(out.status.success(), "openssl dgst: {}", String::from_utf8_lossy(&out.stderr));
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(out.stdout))
}

fn hs256(secret: &[u8], claims: &Value) -> String {
    let signed = signing_input("HS256", claims);
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret).unwrap();
    mac.update(signed.as_bytes());
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

/// `header.payload` of a JWS compact token.
fn signing_input(alg: &str, claims: &Value) -> String {
    let header = URL_SAFE_NO_PAD.encode(json!({"alg": alg, "typ": "JWT"}).to_string());
    format!("{header}.{}", URL_SAFE_NO_PAD.encode(claims.to_string()))
}

/// Claims naming `sub`, expiring `exp_in_s` from now (negative: already expired).
fn claims(sub: &str, exp_in_s: i64) -> Value {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() as i64;
    json!({"sub": sub, "exp": now + exp_in_s})
}

/// Every byte but the unreserved ones percent-encoded, for a query value.
fn query_escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => (b as char).to_string(),
            other => format!("%{other:02X}"),
        })
        .collect()
}

fn guest(name: &str) -> Vec<u8> {
    let path = PathBuf::from(es_plugin_host::GUEST_WASM_DIR).join(format!("{name}.wasm"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// Uploads `wasm` as plugin `name` with `config` (already a query string).
fn upload(b: &Broker, name: &str, config: &str, wasm: &[u8]) -> broker::Resp {
    broker::Client::with_key(&b.url, ADMIN)
        .post_bytes(&format!("/plugins/{name}?replace=true&{config}"), wasm)
}

/// Uploads the JWT example as `jwt` with `config` (already a query string).
fn upload_jwt(b: &Broker, config: &str) -> broker::Resp {
    upload(b, "jwt", config, &guest("es_example_jwt"))
}

/// A broker with auth on, SCRAM-SHA-512 and `OAUTHBEARER:jwt`, its Kafka listener
/// on TLS (HTTP stays plaintext, for the test's admin calls).
fn start(dir: &Path, keys: &Keys) -> Broker {
    start_with(dir, keys, "SCRAM-SHA-512,OAUTHBEARER:jwt")
}

fn start_with(dir: &Path, keys: &Keys, mechanisms: &str) -> Broker {
    let (cert, key) = (keys.path("server.pem"), keys.path("server-key.pem"));
    let args =
        ["--auth", "--auth-mechanisms", mechanisms, "--kafka-tls-cert", &cert, "--kafka-tls-key", &key];
    Broker::start_env(dir, &args, &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)])
}

/// A key with admin on the `app.` topics and read on the `app.` groups, and a topic.
fn app_key(b: &Broker, topic: &str) -> String {
    let admin = broker::Client::with_key(&b.url, ADMIN);
    let r = admin.post(
        "/keys",
        &json!({"name": "app", "grants": ["topic:prefixed:app.:admin", "group:prefixed:app.:read"]}),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(admin.post("/topics", &json!({"name": topic, "partitions": 1})).status, 201);
    r.body["key"].as_str().unwrap().to_owned()
}

/// The JSON document the Java client's `es.kafka.Auth` printed.
fn java(b: &Broker, keys: &Keys, topic: &str, group: &str, login: &[&str]) -> Value {
    let mut cmd = Command::new("java");
    cmd.args(["-cp", java_classpath(), "es.kafka.Auth", &b.kafka_addr, &keys.path("ca.pem"), topic, group]);
    let out = output(cmd.args(login), None, CLIENT_TIMEOUT, "java es.kafka.Auth");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "es.kafka.Auth {login:?}: {stdout}\n{}\nbroker stderr:\n{}",
        String::from_utf8_lossy(&out.stderr),
        b.stderr()
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"))
}

/// Whether the Java client's `es.kafka.Auth` logs in and round-trips on `topic`.
fn java_logs_in(b: &Broker, keys: &Keys, topic: &str, login: &[&str]) -> bool {
    let mut cmd = Command::new("java");
    cmd.args([
        "-cp",
        java_classpath(),
        "es.kafka.Auth",
        &b.kafka_addr,
        &keys.path("ca.pem"),
        topic,
        "app.refused",
    ]);
    output(cmd.args(login), None, CLIENT_TIMEOUT, "java es.kafka.Auth").status.success()
}

/// The JSON object kafka_sasl_tls.py printed.
fn python(b: &Broker, keys: &Keys, client: &str, login: [&str; 3], topic: &str, group: &str) -> Value {
    es_tests::python::python();
    let ca = keys.path("ca.pem");
    let args = [client, b.kafka_addr.as_str(), &ca, login[0], login[1], login[2], topic, group];
    let (ok, out) = es_tests::python::run_script("kafka_sasl_tls.py", &args, CLIENT_TIMEOUT);
    assert!(ok, "kafka_sasl_tls.py {client} {}:\n{out}\nbroker stderr:\n{}", login[0], b.stderr());
    let line = out.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no JSON: {out}"));
    serde_json::from_str(line).unwrap()
}

#[test]
fn java_confluent_and_kafka_python_log_in_with_scram_over_tls() {
    let keys = Keys::new();
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &keys);
    let key = app_key(&b, "app.scram");
    let (id, secret) = split_key(&key);
    let got = java(&b, &keys, "app.scram", "app.java", &["scram", "SCRAM-SHA-512", id, secret]);
    assert_eq!(got, json!({"offsets": [0, 1, 2], "values": ["v0", "v1", "v2"], "committed": 3}));
    for (client, group) in [("confluent", "app.confluent"), ("kafka-python", "app.kpy")] {
        let got = python(&b, &keys, client, ["SCRAM-SHA-512", id, secret], "app.scram", group);
        // Each client reads from offset 0: the Java client's three records first.
        assert_eq!(
            got["values"].as_array().map(|v| v[..3].to_vec()),
            Some(vec![json!("v0"), json!("v1"), json!("v2")]),
            "{client}: {got}"
        );
        assert_eq!(got["committed"], json!(3), "{client}: {got}");
    }
    // A wrong secret is refused: the Java client gives up, non-zero.
    assert!(!java_logs_in(&b, &keys, "app.scram", &["scram", "SCRAM-SHA-512", id, "not-the-secret"]));
}

#[test]
fn java_confluent_and_kafka_python_log_in_with_oauthbearer_through_the_jwt_plugin_over_tls() {
    let keys = Keys::new();
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &keys);
    let config = format!("config.rs256_public_key={}", query_escape(&keys.public_pem()));
    let r = upload_jwt(&b, &config);
    assert_eq!(r.status, 201, "{}", r.body);
    let key = app_key(&b, "app.oauth");
    let (id, _) = split_key(&key);
    let token = keys.rs256(&claims(id, 3600));
    let got = java(&b, &keys, "app.oauth", "app.java", &["oauth", &token]);
    assert_eq!(got, json!({"offsets": [0, 1, 2], "values": ["v0", "v1", "v2"], "committed": 3}));
    for (client, group) in [("confluent", "app.confluent"), ("kafka-python", "app.kpy")] {
        let got = python(&b, &keys, client, ["OAUTHBEARER", "-", &token], "app.oauth", group);
        assert_eq!(got["committed"], json!(3), "{client}: {got}");
    }
    // A token signed with another RSA key is refused.
    let other = keys.path("other.pem");
    openssl(&["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", &other], b"");
    let forged = rs256_with(&other, &claims(id, 3600));
    assert!(!java_logs_in(&b, &keys, "app.oauth", &["oauth", &forged]), "a forged token logged in");
}

#[test]
fn rs256_tokens_are_checked_with_the_configured_public_key() {
    let keys = Keys::new();
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &keys);
    let public = keys.public_pem();
    let r = upload_jwt(&b, &format!("config.rs256_public_key={}", query_escape(&public)));
    assert_eq!(r.status, 201, "{}", r.body);
    let key = app_key(&b, "app.h");
    let (id, _) = split_key(&key);
    let status = |token: &str| broker::Client::with_key(&b.url, token).get("/topics/app.h").status;
    assert_eq!(status(&keys.rs256(&claims(id, 3600))), 200, "a good RS256 token");
    assert_eq!(status(&keys.rs256(&claims(id, -60))), 401, "expired");
    assert_eq!(status(&keys.rs256(&claims("ffffffffffffffff", 3600))), 401, "an unknown key id");
    let other = keys.path("other.pem");
    openssl(&["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", &other], b"");
    assert_eq!(status(&rs256_with(&other, &claims(id, 3600))), 401, "another key's signature");
    // HS256 keyed with the public key's own text, the classic confusion: no HS256
    // key is configured, so the algorithm is refused outright.
    assert_eq!(status(&hs256(public.as_bytes(), &claims(id, 3600))), 401, "alg confusion");
    let none = format!("{}.", signing_input("none", &claims(id, 3600)));
    assert_eq!(status(&none), 401, "alg none");

    // Both algorithms at once, each with its own key.
    let both = format!("config.rs256_public_key={}&config.hs256_key={HS256_KEY}", query_escape(&public));
    assert_eq!(upload_jwt(&b, &both).status, 200);
    assert_eq!(status(&hs256(HS256_KEY.as_bytes(), &claims(id, 3600))), 200, "HS256 beside RS256");
    assert_eq!(status(&keys.rs256(&claims(id, 3600))), 200, "RS256 beside HS256");
    assert_eq!(status(&hs256(public.as_bytes(), &claims(id, 3600))), 401, "alg confusion, both set");

    // A short RSA key or a non-key is refused when configured.
    let short = keys.path("short.pem");
    openssl(&["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024", "-out", &short], b"");
    let short_pem = openssl(&["pkey", "-in", &short, "-pubout"], b"");
    for bad in [short_pem.as_str(), "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"] {
        let r = upload_jwt(&b, &format!("config.rs256_public_key={}", query_escape(bad)));
        assert!(r.status >= 400, "a bad key was taken: {} {}", r.status, r.body);
    }
}

/// A first run installs componentize-py (PyPI) and builds every example.
const BUILD_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// build.sh's exit status when the tools are missing or cannot be installed.
const TOOLS_UNAVAILABLE: i32 = 3;

/// The Python token-allowlist component, built by plugins/examples/build.sh into
/// the directory broker/plugin-host/tests/polyglot.rs uses (so each example is
/// built once per target directory); `None` when the tools are unavailable
/// outside CI (with `CI` set that fails).
fn python_allowlist() -> Option<&'static [u8]> {
    static WASM: OnceLock<Option<Vec<u8>>> = OnceLock::new();
    WASM.get_or_init(|| {
        let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-examples");
        std::fs::create_dir_all(&out).unwrap();
        let script = std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../plugins/examples/build.sh");
        // GNU timeout signals build.sh's whole process group (pip too).
        let mut cmd = Command::new("timeout");
        cmd.args(["--kill-after=10s", &format!("{}s", BUILD_TIMEOUT.as_secs()), "bash"]);
        cmd.arg(script).arg(&out).stdin(Stdio::null());
        let done = output(&mut cmd, None, BUILD_TIMEOUT + Duration::from_secs(30), "build.sh");
        let log = String::from_utf8_lossy(&done.stderr).into_owned() + &String::from_utf8_lossy(&done.stdout);
        let in_ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0");
        if done.status.code() == Some(TOOLS_UNAVAILABLE) && !in_ci {
            let _ =
                writeln!(std::io::stderr(), "\n!!! SKIPPED: the Python plugin tools are unavailable:\n{log}");
            return None;
        }
        assert!(done.status.success(), "plugins/examples/build.sh failed ({}):\n{log}", done.status);
        Some(std::fs::read(out.join("example_python_auth.wasm")).unwrap())
    })
    .as_deref()
}

fn sha256_hex(text: &str) -> String {
    sha2::Sha256::digest(text.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_python_token_allowlist_logs_java_and_confluent_in_over_tls() {
    let Some(wasm) = python_allowlist() else { return };
    let keys = Keys::new();
    let dir = tempfile::tempdir().unwrap();
    let b = start_with(dir.path(), &keys, "SCRAM-SHA-512,OAUTHBEARER:allow");
    let key = app_key(&b, "app.allow");
    let (id, _) = split_key(&key);
    let token = "an-opaque-token-from-some-vault";
    let r = upload(&b, "allow", &format!("config.tokens={}={id}", sha256_hex(token)), wasm);
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        (r.body["world"].as_str(), r.body["supports"].clone()),
        (Some("authenticator"), json!(["OAUTHBEARER"]))
    );
    let got = java(&b, &keys, "app.allow", "app.java", &["oauth", token]);
    assert_eq!(got, json!({"offsets": [0, 1, 2], "values": ["v0", "v1", "v2"], "committed": 3}));
    let got = python(&b, &keys, "confluent", ["OAUTHBEARER", "-", token], "app.allow", "app.confluent");
    assert_eq!(got["committed"], json!(3), "{got}");
    // An unlisted token is refused (the Java client gives up, non-zero).
    assert!(!java_logs_in(&b, &keys, "app.allow", &["oauth", "another-token-nobody-listed"]), "unlisted");
    // A malformed list is refused at upload.
    for bad in ["tokens=nothex=abc", "tokens=", "nope=1"] {
        let r = upload(&b, "allow", &format!("config.{bad}"), wasm);
        assert!(r.status >= 400, "{bad} was taken: {} {}", r.status, r.body);
    }
    // A revoked key's token is refused like an unlisted one.
    let admin = broker::Client::with_key(&b.url, ADMIN);
    assert_eq!(admin.delete(&format!("/keys/{id}")).status, 200);
    assert!(!java_logs_in(&b, &keys, "app.allow", &["oauth", token]), "revoked");
}
