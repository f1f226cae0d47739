//! Auth over HTTP against the real broker: bootstrap, keys with grants, allowed
//! and denied calls on topics, groups, schemas, plugins and keys, "denied" looking
//! exactly like "does not exist", revoke and rotate, secrets never listed or
//! logged, byte quotas and the brute-force throttle.

use std::time::{Duration, Instant};

use es_tests::broker::{Broker, Client, Resp};
use serde_json::{Value, json};

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

fn start(dir: &std::path::Path, extra: &[&str]) -> Broker {
    let mut args = vec!["--auth"];
    args.extend_from_slice(extra);
    Broker::start_env(dir, &args, &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)])
}

fn ok(r: &Resp, what: &str) -> Value {
    assert!((200..300).contains(&r.status), "{what}: {} {}", r.status, r.body);
    r.body.clone()
}

/// Makes a key with `grants` and returns its whole text.
fn make_key(admin: &Client, name: &str, grants: &[&str]) -> String {
    let made = ok(&admin.post("/keys", &json!({"name": name, "grants": grants})), "create key");
    made["key"].as_str().unwrap().to_owned()
}

fn produce(c: &Client, topic: &str, value: &str) -> Resp {
    c.post(&format!("/topics/{topic}/records"), &json!({"records": [{"value": value}]}))
}

/// The same refusal with the resource's name replaced, so two answers about two
/// names can be compared byte for byte.
fn shape(r: &Resp, name: &str) -> (u16, String) {
    (r.status, r.body.to_string().replace(name, "NAME"))
}

#[test]
fn bootstrap_grants_and_denied_looks_like_missing() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]);
    let anon = Client::new(&b.url);
    let (r, headers) = anon.send_full("GET", "/topics", "");
    assert_eq!((r.status, r.code()), (401, "unauthenticated"), "{}", r.body);
    assert!(headers.iter().any(|(k, v)| k == "www-authenticate" && v.starts_with("Bearer")));
    assert_eq!(anon.get("/healthz").status, 200, "probes stay public");
    let forged = Client::with_key(&b.url, &ADMIN.replace("AAAA", "AAAB"));
    assert_eq!(shape(&forged.get("/topics"), ""), shape(&r, ""), "a wrong key is refused like none");

    let admin = Client::with_key(&b.url, ADMIN);
    for t in ["billing.invoices", "ops.secret"] {
        ok(&admin.post("/topics", &json!({"name": t, "partitions": 1})), "create");
        ok(&produce(&admin, t, &format!("canary-{t}")), "canary");
    }
    let billing = Client::with_key(
        &b.url,
        &make_key(&admin, "billing", &["topic:prefixed:billing.:admin", "group:prefixed:billing.:read"]),
    );
    ok(&produce(&billing, "billing.invoices", "mine"), "own produce");
    let read = ok(&billing.get("/topics/billing.invoices/partitions/0/records?offset=earliest"), "own read");
    assert_eq!(read["records"].as_array().unwrap().len(), 2);
    let listed = ok(&billing.get("/topics"), "list");
    let names: Vec<&str> =
        listed["topics"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["billing.invoices"], "listing hides what the key cannot see");

    // Forbidden and missing answer alike, route by route, also for the admin's view
    // of a missing topic (so a denial says nothing an authorized caller would not).
    let routes: [(&str, &str, &str); 7] = [
        ("GET", "/topics/T", ""),
        ("GET", "/topics/T/config", ""),
        ("GET", "/topics/T/offsets", ""),
        ("GET", "/topics/T/partitions/0/records", ""),
        ("POST", "/topics/T/records", r#"{"records":[{"value":"x"}]}"#),
        ("DELETE", "/topics/T", ""),
        ("PATCH", "/topics/T/config", r#"{"config":{"retention.ms":1000}}"#),
    ];
    for (method, path, body) in routes {
        let forbidden = billing.send(method, &path.replace('T', "ops.secret"), body);
        let missing = billing.send(method, &path.replace('T', "ops.nothing"), body);
        let admin_missing = admin.send(method, &path.replace('T', "ops.nothing"), body);
        assert_eq!(forbidden.status, 404, "{method} {path}: {}", forbidden.body);
        assert_eq!(shape(&forbidden, "ops.secret"), shape(&missing, "ops.nothing"), "{method} {path}");
        assert_eq!(shape(&missing, "x"), shape(&admin_missing, "x"), "{method} {path}");
    }
    let created = billing.post("/topics", &json!({"name": "ops.mine", "partitions": 1}));
    assert_eq!(created.status, 404, "creating outside the prefix: {}", created.body);
    ok(&billing.post("/topics", &json!({"name": "billing.new", "partitions": 1})), "create under the prefix");
    let canary = ok(&admin.get("/topics/ops.secret/partitions/0/records?offset=earliest"), "canary");
    assert_eq!(canary["records"].as_array().unwrap().len(), 1, "nothing reached the victim");

    // Plugins and keys need cluster grants; listing plugins does not.
    assert_eq!(billing.get("/plugins").status, 200);
    let upload = billing.send("POST", "/plugins/x", "not wasm");
    assert_eq!((upload.status, upload.code()), (403, "unauthorized"), "{}", upload.body);
    assert_eq!(billing.get("/keys").status, 403);
    assert_eq!(billing.post("/keys", &json!({"name": "evil", "grants": ["cluster:admin"]})).status, 403);
    assert!(!b.stderr().contains(&ADMIN[20..]), "the admin secret is never logged");
}

#[test]
fn groups_schemas_ownership_revoke_and_rotate() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &[]);
    let admin = Client::with_key(&b.url, ADMIN);
    ok(&admin.post("/topics", &json!({"name": "billing.t", "partitions": 1})), "create");
    ok(&admin.post("/topics", &json!({"name": "ops.t", "partitions": 1})), "create");
    let grants =
        ["topic:prefixed:billing.:write", "topic:prefixed:billing.:read", "group:prefixed:billing.:read"];
    let billing_key = make_key(&admin, "billing", &grants);
    let billing = Client::with_key(&b.url, &billing_key);
    let rival = Client::with_key(&b.url, &make_key(&admin, "rival", &grants));
    let join = json!({"topics": ["billing.t"], "session_timeout_ms": 10000});
    ok(&billing.post("/groups/billing.g/join", &join), "own join");
    ok(&billing.get("/groups/billing.g/offsets"), "own offsets");
    // The rival's grants cover the group, but the group is billing's.
    for (method, path, body) in [
        ("POST", "/groups/billing.g/join", join.to_string()),
        ("GET", "/groups/billing.g/offsets", String::new()),
        ("GET", "/groups/billing.g", String::new()),
        ("POST", "/groups/billing.g/heartbeat", r#"{"member_id":"m","generation":1}"#.into()),
    ] {
        let r = rival.send(method, path, &body);
        assert_eq!((r.status, r.code()), (404, "group_not_found"), "{method} {path}: {}", r.body);
    }
    let missing = billing.get("/groups/billing.never");
    assert_eq!(shape(&rival.get("/groups/billing.g"), "billing.g"), shape(&missing, "billing.never"));
    assert_eq!(billing.post("/groups/ops.g/join", &join).status, 404, "outside the prefix");
    let groups = ok(&rival.get("/groups"), "list groups");
    assert_eq!(groups["groups"], json!([]), "another key's group is not listed");

    let schema = json!({"schema": "{\"type\":\"string\"}"}).to_string();
    let reg = billing.send("POST", "/registry/subjects/billing.t-value/versions", &schema);
    assert_eq!(reg.status, 200, "a subject follows its topic's write grant: {}", reg.body);
    let theirs = billing.send("POST", "/registry/subjects/ops.t-value/versions", &schema);
    assert_eq!((theirs.status, theirs.error_code()), (404, 40401), "{}", theirs.body);
    let nothing = billing.send("GET", "/registry/subjects/billing.none-value/versions", "");
    let forbidden = billing.send("GET", "/registry/subjects/ops.t-value/versions", "");
    assert_eq!(shape(&nothing, "billing.none-value"), shape(&forbidden, "ops.t-value"));
    assert_eq!(billing.get("/registry/subjects").status, 403, "registry-wide reads need a cluster grant");

    // Rotate: the old secret stops at once, the new one works; revoke: nothing works.
    let id = billing_key[3..19].to_owned();
    let listed = ok(&admin.get("/keys"), "list keys").to_string();
    assert!(listed.contains(&id) && !listed.contains(&billing_key[20..]), "list shows ids, never secrets");
    let rotated = ok(&admin.post(&format!("/keys/{id}/rotate"), &json!({})), "rotate");
    let new_key = rotated["key"].as_str().unwrap();
    assert_eq!(produce(&billing, "billing.t", "old").status, 401, "old secret");
    let billing = Client::with_key(&b.url, new_key);
    ok(&produce(&billing, "billing.t", "new"), "new secret");
    ok(&admin.delete(&format!("/keys/{id}")), "revoke");
    let after = Instant::now();
    assert_eq!(produce(&billing, "billing.t", "revoked").status, 401, "revoked");
    assert!(after.elapsed() < Duration::from_secs(1));
    let described = ok(&admin.get(&format!("/keys/{id}")), "describe");
    assert!(described["revoked_ms"].is_i64());
    assert_eq!(admin.get("/keys/ffffffffffffffff").code(), "key_not_found");
    assert!(!b.stderr().contains(&new_key[20..]) && !b.stderr().contains(&billing_key[20..]));
}

#[test]
fn keys_survive_restart_and_auth_needs_a_bootstrap_key() {
    let dir = tempfile::tempdir().unwrap();
    let key = {
        let b = start(dir.path(), &[]);
        make_key(&Client::with_key(&b.url, ADMIN), "app", &["topic:literal:t:read"])
    };
    let b = Broker::start_with(dir.path(), &["--auth"]);
    let app = Client::with_key(&b.url, &key);
    assert_eq!(app.get("/topics/t").status, 404, "the key authenticates after a restart");
    assert_eq!(Client::with_key(&b.url, ADMIN).get("/keys").status, 200);
    drop(b);

    let empty = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(es_tests::broker::broker_bin())
        .args(["--auth", "--bind", "127.0.0.1:0", "--bind-binary", "127.0.0.1:0", "--data-dir"])
        .arg(empty.path())
        .env_remove("ES_AUTH_BOOTSTRAP_KEY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("es key generate") && stderr.contains("ES_AUTH_BOOTSTRAP_KEY"), "{stderr}");
    let open = std::process::Command::new(es_tests::broker::broker_bin())
        .args(["--bind", "0.0.0.0:0", "--data-dir"])
        .arg(empty.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&open.stderr);
    assert_eq!(open.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("without authentication"), "{stderr}");
}

#[test]
fn produce_quota_throttles_one_key_only_and_brute_force_is_throttled() {
    let dir = tempfile::tempdir().unwrap();
    // 2 kB/s with 10 s of burst: 20 kB, then 429 until the debt is paid.
    let b = start(dir.path(), &["--quota-produce-bytes-per-s", "2000"]);
    let admin = Client::with_key(&b.url, ADMIN);
    ok(&admin.post("/topics", &json!({"name": "q", "partitions": 1})), "create");
    let heavy = Client::with_key(&b.url, &make_key(&admin, "heavy", &["topic:literal:q:write"]));
    let light = Client::with_key(&b.url, &make_key(&admin, "light", &["topic:literal:q:write"]));
    let big = "x".repeat(8_000);
    let deadline = Instant::now() + Duration::from_secs(20);
    let (throttled, headers) = loop {
        assert!(Instant::now() < deadline, "the heavy key was never throttled");
        let body = json!({"records": [{"value": big}]}).to_string();
        let (r, headers) = heavy.send_full("POST", "/topics/q/records", &body);
        if r.status == 429 {
            break (r, headers);
        }
        ok(&r, "heavy produce");
    };
    assert_eq!(throttled.code(), "throttled");
    let retry: u64 = headers.iter().find(|(k, _)| k == "retry-after").unwrap().1.parse().unwrap();
    assert!((1..=30).contains(&retry), "{retry}");
    ok(&produce(&light, "q", "small"), "another key is not slowed by the heavy one");

    // Guessing keys from one address: refused, then throttled; a valid key still works.
    let mut throttled = 0;
    for i in 0..40 {
        let guess = Client::with_key(&b.url, &format!("es_{:016x}_{}", i, "B".repeat(43)));
        match guess.get("/topics").status {
            401 => {}
            429 => throttled += 1,
            other => panic!("a guess got {other}"),
        }
    }
    assert!(throttled > 0, "brute force was never throttled");
    assert_eq!(admin.get("/topics").status, 200, "a valid key is not held by others' failures");
}

#[test]
fn a_keys_own_quotas_replace_the_defaults_durably_and_change_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let b = start(dir.path(), &["--quota-produce-bytes-per-s", "2000"]);
    let admin = Client::with_key(&b.url, ADMIN);
    ok(&admin.post("/topics", &json!({"name": "q", "partitions": 1})), "create");
    // Above the default: 10 x 8 kB is four times the default's 20 kB burst.
    let body = json!({"name": "vip", "grants": ["topic:literal:q:write"], "quota": {"produce_bytes_per_s": 10_000_000}});
    let made = ok(&admin.post("/keys", &body), "create vip");
    assert_eq!(made["quota"], json!({"produce_bytes_per_s": 10_000_000}));
    let vip = Client::with_key(&b.url, made["key"].as_str().unwrap());
    let big = "x".repeat(8_000);
    for _ in 0..10 {
        ok(&produce(&vip, "q", &big), "a key with its own higher quota is not held to the default");
    }
    let id = made["id"].as_str().unwrap().to_owned();
    assert_eq!(vip.put(&format!("/keys/{id}/quota"), &json!({})).status, 403, "only a cluster admin");
    // Below any default: a key limited to 2 requests a second, with no default set.
    let slow = ok(&admin.put(&format!("/keys/{id}/quota"), &json!({"requests_per_s": 2})), "set quota");
    assert_eq!(slow["quota"], json!({"requests_per_s": 2}), "the body replaces the whole override");
    let deadline = Instant::now() + Duration::from_secs(10);
    let throttled = loop {
        assert!(Instant::now() < deadline, "the key's own request rate never applied");
        let r = vip.get("/topics");
        if r.status == 429 {
            break r;
        }
        ok(&r, "list");
    };
    assert_eq!(throttled.code(), "throttled");
    assert_eq!(admin.get("/topics").status, 200, "the admin keeps the (unlimited) default");

    // Refusals: a zero rate, an unknown key.
    let zero = admin.put(&format!("/keys/{id}/quota"), &json!({"fetch_bytes_per_s": 0}));
    assert_eq!((zero.status, zero.code()), (400, "invalid_request"), "{}", zero.body);
    let unknown = admin.put("/keys/00000000000000ff/quota", &json!({}));
    assert_eq!((unknown.status, unknown.code()), (404, "key_not_found"));

    // Stored with the key: a restart keeps it, and an empty body returns to the defaults.
    drop(b);
    let b = start(dir.path(), &["--quota-produce-bytes-per-s", "2000"]);
    let admin = Client::with_key(&b.url, ADMIN);
    assert_eq!(ok(&admin.get(&format!("/keys/{id}")), "describe")["quota"], json!({"requests_per_s": 2}));
    assert_eq!(ok(&admin.put(&format!("/keys/{id}/quota"), &json!({})), "clear")["quota"], json!({}));
}
