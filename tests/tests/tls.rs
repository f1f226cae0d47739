//! TLS and mTLS on every listener, against the real broker: certificates made at
//! test time with rcgen (a CA, a server certificate for 127.0.0.1 and localhost,
//! client certificates; no key is ever committed); HTTPS with curl, the `es` CLI
//! over HTTPS and the binary protocol, kcat and confluent-kafka with
//! `security.protocol=ssl`; client
//! certificates mapped to keys; plaintext to a TLS port; half-configured TLS.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use es_client::{Client, ClientError, ClientOptions, ClientTls};
use es_core::{ProducerInfo, Record};
use es_protocol::ErrorCode;
use es_tests::broker::{Broker, broker_bin, es_bin};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};
use serde_json::{Value, json};

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

/// PEM files of a test PKI in a temporary directory.
struct Pki {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Pki {
    /// A CA, the broker's certificate (127.0.0.1, localhost) and client certificates:
    /// `billing` (SAN dns billing.internal), `stranger` (CN only) and `rogue`
    /// (signed by another CA).
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_owned();
        let ca = make_ca(&root, "ca", "es test CA");
        leaf(
            &root,
            "server",
            &ca,
            "es broker",
            &["127.0.0.1", "localhost"],
            ExtendedKeyUsagePurpose::ServerAuth,
        );
        leaf(
            &root,
            "billing",
            &ca,
            "billing-client",
            &["billing.internal"],
            ExtendedKeyUsagePurpose::ClientAuth,
        );
        leaf(&root, "stranger", &ca, "stranger", &[], ExtendedKeyUsagePurpose::ClientAuth);
        let other = make_ca(&root, "other-ca", "someone else's CA");
        leaf(&root, "rogue", &other, "rogue", &["billing.internal"], ExtendedKeyUsagePurpose::ClientAuth);
        Pki { _dir: dir, root }
    }

    fn path(&self, name: &str) -> String {
        self.root.join(name).to_str().unwrap().to_owned()
    }

    fn cert(&self, who: &str) -> String {
        self.path(&format!("{who}.pem"))
    }

    fn key(&self, who: &str) -> String {
        self.path(&format!("{who}-key.pem"))
    }

    /// The broker's TLS flags for every listener.
    fn server_flags(&self, mtls: bool) -> Vec<String> {
        let mut flags =
            vec!["--tls-cert".into(), self.cert("server"), "--tls-key".into(), self.key("server")];
        if mtls {
            flags.extend(["--tls-client-ca".into(), self.cert("ca")]);
        }
        flags
    }
}

fn make_ca(root: &Path, name: &str, cn: &str) -> Issuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, cn);
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(root.join(format!("{name}.pem")), cert.pem()).unwrap();
    // Kept to issue a renewed broker certificate (the reload test).
    std::fs::write(root.join(format!("{name}-key.pem")), key.serialize_pem()).unwrap();
    Issuer::new(params, key)
}

fn leaf(
    root: &Path,
    name: &str,
    ca: &Issuer<'_, KeyPair>,
    cn: &str,
    sans: &[&str],
    usage: ExtendedKeyUsagePurpose,
) {
    let mut params =
        CertificateParams::new(sans.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    params.extended_key_usages = vec![usage];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    std::fs::write(root.join(format!("{name}.pem")), cert.pem()).unwrap();
    std::fs::write(root.join(format!("{name}-key.pem")), key.serialize_pem()).unwrap();
}

fn start(dir: &Path, flags: &[String], auth: bool) -> Broker {
    let mut args: Vec<&str> = flags.iter().map(String::as_str).collect();
    if auth {
        args.push("--auth");
        Broker::start_env(dir, &args, &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)])
    } else {
        Broker::start_with(dir, &args)
    }
}

/// Runs a command with a bounded wait and returns its output.
fn run(cmd: &mut Command, stdin: &str) -> Output {
    let what = format!("{cmd:?}");
    es_tests::peers::output(cmd, Some(stdin.as_bytes()), Duration::from_secs(60), &what)
}

fn curl(pki: &Pki, url: &str, extra: &[&str]) -> Output {
    run(
        Command::new("curl")
            .args(["-sS", "--max-time", "20", "--cacert", &pki.cert("ca")])
            .args(extra)
            .arg(url),
        "",
    )
}

fn es(b: &Broker, pki: &Pki, args: &[&str]) -> String {
    let out = run(
        Command::new(es_bin())
            .args(["--broker", &b.url, "--tls-ca", &pki.cert("ca")])
            .env("ES_BROKER_BINARY", &b.binary_addr)
            .args(args),
        "",
    );
    assert!(out.status.success(), "es {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// An HTTPS agent trusting the test CA, presenting `client` (mTLS) if given.
fn agent(pki: &Pki, client: Option<&str>) -> ureq::Agent {
    let pem = |p: String| std::fs::read(p).unwrap();
    let ca = ureq::tls::Certificate::from_pem(&pem(pki.cert("ca"))).unwrap();
    let mut tls =
        ureq::tls::TlsConfig::builder().root_certs(ureq::tls::RootCerts::Specific(Arc::new(vec![ca])));
    if let Some(who) = client {
        let cert = ureq::tls::Certificate::from_pem(&pem(pki.cert(who))).unwrap();
        let key = ureq::tls::PrivateKey::from_pem(&pem(pki.key(who))).unwrap();
        tls = tls.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&[cert], key)));
    }
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .tls_config(tls.build());
    config.build().into()
}

/// Status and JSON body of a GET, or the transport error.
fn get(agent: &ureq::Agent, url: &str, bearer: Option<&str>) -> Result<(u16, Value), ureq::Error> {
    let mut req = agent.get(url);
    if let Some(key) = bearer {
        req = req.header("authorization", format!("Bearer {key}"));
    }
    let mut resp = req.call()?;
    let body = resp.body_mut().read_to_string().unwrap_or_default();
    Ok((resp.status().as_u16(), serde_json::from_str(&body).unwrap_or(Value::Null)))
}

fn post(agent: &ureq::Agent, url: &str, bearer: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = agent.post(url).header("content-type", "application/json");
    if let Some(key) = bearer {
        req = req.header("authorization", format!("Bearer {key}"));
    }
    let mut resp = req.send(body.to_string()).unwrap();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    (resp.status().as_u16(), serde_json::from_str(&text).unwrap_or(Value::Null))
}

async fn binary(b: &Broker, tls: Option<ClientTls>) -> Result<Client, ClientError> {
    let options = ClientOptions { retries: 0, tls, ..ClientOptions::default() };
    tokio::time::timeout(Duration::from_secs(20), Client::connect(&b.binary_addr, options)).await.unwrap()
}

fn batch(value: &str) -> Bytes {
    Bytes::from(
        es_core::batch::encode(&[Record::from_value(value.to_owned())], 1_000, ProducerInfo::NONE).unwrap(),
    )
}

/// Sends plaintext to a TLS port: the broker answers nothing readable and closes.
fn plaintext_is_refused(addr: &str) {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    assert!(!String::from_utf8_lossy(&got).contains("HTTP/1.1 200"), "plaintext got an answer: {got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_listener_speaks_tls_and_plaintext_fails_cleanly() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &pki.server_flags(false), false);
    assert!(b.url.starts_with("https://"), "{}", b.url);

    let out = curl(&pki, &format!("{}/healthz", b.url), &[]);
    assert!(out.status.success(), "curl over TLS: {}", String::from_utf8_lossy(&out.stderr));

    // The es CLI over HTTPS and over the binary protocol with TLS.
    es(&b, &pki, &["topic", "create", "secure", "--partitions", "1"]);
    es(&b, &pki, &["produce", "--topic", "secure", "--value", "over https"]);
    es(&b, &pki, &["produce", "--topic", "secure", "--value", "over binary tls", "--protocol", "binary"]);
    let http = es(&b, &pki, &["consume", "--topic", "secure", "--max-records", "2"]);
    let bin = es(&b, &pki, &["consume", "--topic", "secure", "--max-records", "2", "--protocol", "binary"]);
    for text in [&http, &bin] {
        assert!(text.contains("over https") && text.contains("over binary tls"), "{text}");
    }

    // kcat (librdkafka) with security.protocol=ssl: produce, then consume.
    let ssl = ["-X", "security.protocol=ssl", "-X", &format!("ssl.ca.location={}", pki.cert("ca"))];
    let kcat = |args: &[&str], stdin: &str| {
        run(es_tests::peers::kcat().arg("-b").arg(&b.kafka_addr).args(ssl).args(args), stdin)
    };
    let out = kcat(&["-P", "-t", "secure", "-p", "0"], "from kcat\n");
    assert!(out.status.success(), "kcat -P over ssl: {}", String::from_utf8_lossy(&out.stderr));
    let out = kcat(&["-C", "-t", "secure", "-p", "0", "-o", "beginning", "-e", "-f", "%s\n"], "");
    assert!(out.status.success(), "kcat -C over ssl: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "over https\nover binary tls\nfrom kcat\n");

    // confluent-kafka over TLS: produce, then consume.
    es(&b, &pki, &["topic", "create", "confluent", "--partitions", "1"]);
    es_tests::python::python();
    let args = [b.kafka_addr.as_str(), &pki.cert("ca"), "confluent", "3"];
    let (ok, output) = es_tests::python::run_script("kafka_tls.py", &args, Duration::from_secs(120));
    assert!(ok, "kafka_tls.py failed:\n{output}\nbroker stderr:\n{}", b.stderr());
    assert!(output.contains(r#"{"values": ["tls-0", "tls-1", "tls-2"]}"#), "{output}");

    // Plaintext to each TLS port fails, and the broker keeps serving.
    let http_addr = b.url.trim_start_matches("https://").to_owned();
    for addr in [&http_addr, &b.binary_addr, &b.kafka_addr] {
        plaintext_is_refused(addr);
    }
    assert!(binary(&b, None).await.is_err(), "a plaintext binary client connected to a TLS port");
    let out = run(
        Command::new("curl").args(["-sS", "--max-time", "20"]).arg(format!("http://{http_addr}/healthz")),
        "",
    );
    assert!(!String::from_utf8_lossy(&out.stdout).contains("ok"), "plain HTTP was served");
    let tls = ClientTls::from_ca_file(Path::new(&pki.cert("ca"))).unwrap();
    let client = binary(&b, Some(tls)).await.unwrap();
    assert!(client.list_topics().await.unwrap().iter().any(|t| t.name == "secure"));
    let out = curl(&pki, &format!("{}/healthz", b.url), &[]);
    assert!(
        out.status.success(),
        "curl after the plaintext attempts: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_mapped_to_a_key_holds_its_grants() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    // First start: make the billing key and the topics (key ids are random, so the
    // rule that names one comes with the second start).
    let mut b = start(dir.path(), &pki.server_flags(true), true);
    let admin = agent(&pki, Some("stranger"));
    let (status, made) = post(
        &admin,
        &format!("{}/keys", b.url),
        Some(ADMIN),
        &json!({"name": "billing", "grants": ["topic:prefixed:billing.:admin"]}),
    );
    assert_eq!(status, 201, "{made}");
    let billing_id = made["id"].as_str().unwrap().to_owned();
    for topic in ["billing.invoices", "ops.secret"] {
        let (status, body) =
            post(&admin, &format!("{}/topics", b.url), Some(ADMIN), &json!({"name": topic, "partitions": 1}));
        assert_eq!(status, 201, "{body}");
    }
    b.signal("TERM");
    assert!(b.wait_exit(Duration::from_secs(30)).success());
    drop(b);

    let mut flags = pki.server_flags(true);
    flags.extend(["--tls-principal-rule".into(), format!("san:dns:billing.internal={billing_id}")]);
    let b = start(dir.path(), &flags, true);

    // HTTP: the billing certificate is the billing key, no bearer needed.
    let billing = agent(&pki, Some("billing"));
    let (status, body) = get(&billing, &format!("{}/topics/billing.invoices", b.url), None).unwrap();
    assert_eq!(status, 200, "{body}");
    let (status, body) = get(&billing, &format!("{}/topics/ops.secret", b.url), None).unwrap();
    assert_eq!((status, body["error"]["code"].as_str()), (404, Some("topic_not_found")), "{body}");
    let (status, body) = get(&billing, &format!("{}/topics", b.url), None).unwrap();
    assert_eq!(status, 200);
    assert!(
        !body.to_string().contains("ops.secret") && body.to_string().contains("billing.invoices"),
        "{body}"
    );
    // A verified certificate no rule maps is anonymous: refused with auth on.
    let (status, body) = get(&agent(&pki, Some("stranger")), &format!("{}/topics", b.url), None).unwrap();
    assert_eq!(status, 401, "{body}");
    // No certificate, or one from another CA: the handshake fails.
    assert!(get(&agent(&pki, None), &format!("{}/topics", b.url), None).is_err());
    assert!(get(&agent(&pki, Some("rogue")), &format!("{}/topics", b.url), None).is_err());

    // Binary: the same identity, no Authenticate step.
    let with = |who: &str| {
        ClientTls::with_client_cert(
            Path::new(&pki.cert("ca")),
            Path::new(&pki.cert(who)),
            Path::new(&pki.key(who)),
        )
        .unwrap()
    };
    let client = binary(&b, Some(with("billing"))).await.unwrap();
    client.produce("billing.invoices", 0, batch("paid")).await.unwrap();
    let names: Vec<String> = client.list_topics().await.unwrap().into_iter().map(|t| t.name).collect();
    assert_eq!(names, ["billing.invoices"]);
    match client.produce("ops.secret", 0, batch("x")).await {
        Err(ClientError::Broker { code, .. }) => assert_eq!(code, ErrorCode::UnknownTopic),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let stranger = binary(&b, Some(with("stranger"))).await.unwrap();
    match stranger.list_topics().await {
        Err(ClientError::Broker { code, .. }) => assert_eq!(code, ErrorCode::Unauthenticated),
        other => panic!("expected a refusal, got {other:?}"),
    }
    let no_cert = ClientTls::from_ca_file(Path::new(&pki.cert("ca"))).unwrap();
    let refused = match binary(&b, Some(no_cert)).await {
        Ok(c) => c.list_topics().await.is_err(),
        Err(_) => true,
    };
    assert!(refused, "a client without a certificate was served");

    // Kafka: the certificate is the key from the first request, with no SASL login.
    let kcat = |who: &str, args: &[&str], stdin: &str| {
        let ssl = [
            "security.protocol=ssl".to_owned(),
            format!("ssl.ca.location={}", pki.cert("ca")),
            format!("ssl.certificate.location={}", pki.cert(who)),
            format!("ssl.key.location={}", pki.key(who)),
        ];
        let mut cmd = es_tests::peers::kcat();
        cmd.arg("-b").arg(&b.kafka_addr);
        for setting in &ssl {
            cmd.arg("-X").arg(setting);
        }
        run(cmd.args(args), stdin)
    };
    let out = kcat("billing", &["-P", "-t", "billing.invoices", "-p", "0"], "over kafka mtls\n");
    assert!(
        out.status.success(),
        "kcat -P with the billing certificate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let args = ["-C", "-t", "billing.invoices", "-p", "0", "-o", "beginning", "-e", "-f", "%s\n"];
    let out = kcat("billing", &args, "");
    assert!(
        out.status.success(),
        "kcat -C with the billing certificate: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "paid\nover kafka mtls\n");
    let out = kcat("billing", &["-L", "-t", "ops.secret"], "");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("partition 0"), "another key's topic was listed");
    // A certificate no rule maps is not logged in: the broker closes the connection.
    let out = kcat("stranger", &["-L", "-m", "5"], "");
    assert!(!out.status.success(), "an unmapped certificate was served metadata");
}

/// Starts es-broker expecting it to exit at once with an error; returns stderr.
fn start_fails(args: &[&str]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = run(
        Command::new(broker_bin())
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--bind", "127.0.0.1:0", "--bind-binary", "127.0.0.1:0", "--bind-kafka", "127.0.0.1:0"])
            .args(args),
        "",
    );
    assert!(!out.status.success(), "es-broker {args:?} started");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn half_configured_tls_is_a_startup_error_naming_the_setting() {
    let pki = Pki::new();
    let e = start_fails(&["--tls-cert", &pki.cert("server")]);
    assert!(e.contains("--tls-cert is set but no key"), "{e}");
    let e = start_fails(&["--kafka-tls-client-ca", &pki.cert("ca")]);
    assert!(e.contains("--kafka-tls-client-ca is set but no cert"), "{e}");
    let e = start_fails(&["--tls-cert", &pki.cert("server"), "--tls-key", &pki.key("billing")]);
    assert!(e.contains("do not fit together"), "{e}");
    let e = start_fails(&["--tls-principal-rule", "cn:x=00000000000000aa"]);
    assert!(e.contains("--tls-client-ca"), "{e}");
}

/// The subject line of the certificate `addr` presents to a new connection.
fn presented_subject(pki: &Pki, addr: &str) -> String {
    let out =
        run(Command::new("openssl").args(["s_client", "-connect", addr, "-CAfile", &pki.cert("ca")]), "");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines().find(|l| l.starts_with("subject=")).unwrap_or("no subject").to_owned()
}

/// Issues a new broker certificate (CN `cn`) from the test CA, over the old files:
/// written beside them and renamed, as a certificate manager does.
fn reissue_server(pki: &Pki, cn: &str) {
    let ca_key = std::fs::read_to_string(pki.path("ca-key.pem")).unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, "es test CA");
    let ca = Issuer::new(params, KeyPair::from_pem(&ca_key).unwrap());
    let staging = pki.root.join("staging");
    std::fs::create_dir_all(&staging).unwrap();
    let sans = ["127.0.0.1", "localhost"];
    leaf(&staging, "server", &ca, cn, &sans, ExtendedKeyUsagePurpose::ServerAuth);
    for f in ["server-key.pem", "server.pem"] {
        std::fs::rename(staging.join(f), pki.root.join(f)).unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificates_reload_on_file_change_and_sighup_without_dropping_connections() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &pki.server_flags(false), false);
    let http_addr = b.url.trim_start_matches("https://").to_owned();
    assert!(presented_subject(&pki, &b.kafka_addr).contains("es broker"), "the first certificate");
    let tls = ClientTls::from_ca_file(Path::new(&pki.cert("ca"))).unwrap();
    let old = binary(&b, Some(tls)).await.unwrap();
    old.create_topic("reload", 1, vec![]).await.unwrap();

    // A changed file is seen within the watch interval: new connections get it.
    reissue_server(&pki, "es broker renewed");
    b.wait_for_stderr("TLS certificates reloaded");
    for addr in [&http_addr, &b.binary_addr, &b.kafka_addr] {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !presented_subject(&pki, addr).contains("renewed") {
            assert!(std::time::Instant::now() < deadline, "{addr} never presented the new certificate");
        }
    }
    // The connection opened before the change keeps working on its session.
    old.produce("reload", 0, batch("after the file change")).await.unwrap();

    // SIGHUP reloads too (here: the same files again, then a third certificate).
    reissue_server(&pki, "es broker third");
    b.signal("HUP");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !presented_subject(&pki, &b.kafka_addr).contains("third") {
        assert!(std::time::Instant::now() < deadline, "SIGHUP never put the third certificate in force");
    }
    old.produce("reload", 0, batch("after SIGHUP")).await.unwrap();
    assert!(b.stderr().matches("TLS certificates reloaded").count() >= 2, "{}", b.stderr());
}
