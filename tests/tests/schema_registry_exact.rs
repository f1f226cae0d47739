//! Recorded-exchange tests of the schema registry: each scenario in
//! `tests/schema-exchanges/*.json` is a list of requests with the status and body
//! Confluent Schema Registry answers (written from its API reference and
//! documented behaviour, cited in each scenario's `source`), replayed against a
//! fresh es-broker on 127.0.0.1:0. Bodies are compared exactly, field by field,
//! after placeholders are matched:
//!
//! - `"<id:N>"`: the N-th schema id of the scenario; bound on first sight, the
//!   same value every time after, and distinct placeholders are distinct ids.
//!   It may also appear inside a path (`/schemas/ids/<id:1>`).
//! - `"<string>"`: any string (a message Confluent's documentation does not word).
//! - `"<any>"`: any value.
//!
//! A step's `body` is sent as JSON text; `rawBody` is sent as it is (malformed
//! bodies); `headers` replaces the default content type
//! (`application/vnd.schemaregistry.v1+json`; `{}` sends none).

use std::collections::BTreeMap;
use std::path::PathBuf;

use es_tests::broker::Broker;
use serde_json::Value;

const V1: &str = "application/vnd.schemaregistry.v1+json";

/// Ids bound so far in a scenario: placeholder number to id.
type Ids = BTreeMap<u64, i64>;

fn exchanges_dir() -> PathBuf {
    std::path::PathBuf::from(
        std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
    )
    .join("schema-exchanges")
}

/// Sends one step's request; answers (status, content type, body as JSON or as a string).
fn send(b: &Broker, step: &Value, ids: &Ids) -> (u16, String, Value) {
    let method = step["method"].as_str().expect("a step has a method");
    let path = substitute(step["path"].as_str().expect("a step has a path"), ids);
    let url = format!("{}/registry{path}", b.url);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(std::time::Duration::from_secs(30)))
        .build()
        .into();
    let body = match (&step["rawBody"], &step["body"]) {
        (Value::String(raw), _) => Some(raw.clone()),
        (_, Value::Null) => None,
        (_, v) => Some(substitute(&v.to_string(), ids)),
    };
    let mut req = ureq::http::Request::builder().method(method).uri(&url);
    let headers = step["headers"].as_object().cloned();
    match headers {
        Some(h) => {
            for (k, v) in h {
                req = req.header(k, v.as_str().unwrap_or(""));
            }
        }
        None if body.is_some() => req = req.header("content-type", V1),
        None => {}
    }
    let sent = match body {
        // Bytes, so that the client adds no content type of its own.
        Some(b) => agent.run(req.body(b.into_bytes()).expect("a valid request")),
        None => agent.run(req.body(()).expect("a valid request")),
    };
    let mut resp = sent.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status().as_u16();
    let ctype = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    let text = resp.body_mut().read_to_string().unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, ctype, body)
}

/// `<id:N>` in a path or body text, replaced by the id it is bound to.
fn substitute(text: &str, ids: &Ids) -> String {
    let mut out = text.to_owned();
    for (n, id) in ids {
        out = out
            .replace(&format!("\"<id:{n}>\""), &id.to_string())
            .replace(&format!("<id:{n}>"), &id.to_string());
    }
    out
}

/// Whether `actual` is `expected`, binding `<id:N>` placeholders; the first
/// difference as a JSON pointer and reason otherwise.
fn matches(expected: &Value, actual: &Value, ids: &mut Ids, at: &str) -> Result<(), String> {
    let differs = || Err(format!("at '{at}': expected {expected}, got {actual}"));
    match (expected, actual) {
        (Value::String(e), _) if e == "<any>" => Ok(()),
        (Value::String(e), Value::String(_)) if e == "<string>" => Ok(()),
        (Value::String(e), _) if e.starts_with("<id:") => {
            let n: u64 = e.trim_start_matches("<id:").trim_end_matches('>').parse().expect("<id:N>");
            let Some(id) = actual.as_i64() else { return differs() };
            match ids.get(&n) {
                Some(bound) if *bound == id => Ok(()),
                Some(bound) => Err(format!("at '{at}': <id:{n}> is {bound}, got {id}")),
                None if ids.values().any(|v| *v == id) => {
                    Err(format!("at '{at}': <id:{n}> got {id}, which another placeholder holds"))
                }
                None => {
                    ids.insert(n, id);
                    Ok(())
                }
            }
        }
        (Value::Object(e), Value::Object(a)) => {
            let (ek, ak): (Vec<&String>, Vec<&String>) = (e.keys().collect(), a.keys().collect());
            let (mut ek_sorted, mut ak_sorted) = (ek.clone(), ak.clone());
            ek_sorted.sort();
            ak_sorted.sort();
            if ek_sorted != ak_sorted {
                return Err(format!(
                    "at '{at}': fields {ek_sorted:?} expected, got {ak_sorted:?} in {actual}"
                ));
            }
            e.iter().try_for_each(|(k, v)| matches(v, &a[k], ids, &format!("{at}/{k}")))
        }
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            e.iter().zip(a).enumerate().try_for_each(|(i, (e, a))| matches(e, a, ids, &format!("{at}/{i}")))
        }
        _ if expected == actual => Ok(()),
        _ => differs(),
    }
}

/// Runs one scenario on a fresh broker; every failing step is reported.
fn run_scenario(file: &str, scenario: &Value) -> Vec<String> {
    let name = scenario["name"].as_str().expect("a scenario has a name");
    assert!(scenario["source"].as_str().is_some_and(|s| !s.is_empty()), "{file}: {name} cites no source");
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let mut ids = Ids::new();
    let mut failures = Vec::new();
    let steps = scenario["steps"].as_array().expect("a scenario has steps");
    assert!(steps.len() >= 2, "{file}: {name}: a scenario has several steps");
    for (i, step) in steps.iter().enumerate() {
        let (status, ctype, body) = send(&b, step, &ids);
        let want_status = step["status"].as_u64().expect("a step has a status") as u16;
        let what = format!("{file}: {name}: step {} {} {}", i + 1, step["method"], step["path"]);
        if status != want_status {
            failures.push(format!("{what}: status {status}, expected {want_status}; body {body}"));
            continue;
        }
        if let Some(expected) = step.get("response")
            && let Err(e) = matches(expected, &body, &mut ids, "")
        {
            failures.push(format!("{what}: {e}"));
        }
        // A 204 has no body, so no content type (Confluent's `DELETE /contexts/{ctx}`).
        if ctype != V1 && !(status == 204 && ctype.is_empty()) {
            failures.push(format!("{what}: content type {ctype:?}, expected {V1}"));
        }
    }
    failures
}

fn run_file(file: &str) {
    let path = exchanges_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let scenarios = doc["scenarios"].as_array().expect("a file has scenarios");
    let failures: Vec<String> = scenarios.iter().flat_map(|s| run_scenario(file, s)).collect();
    assert!(
        failures.is_empty(),
        "{} step(s) differ from Confluent's answers:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Every exchange file has its test below, so none is silently skipped.
#[test]
fn every_exchange_file_is_run() {
    let mut files: Vec<String> = std::fs::read_dir(exchanges_dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".json"))
        .collect();
    files.sort();
    assert_eq!(files, FILES, "add a test for each file in tests/schema-exchanges");
}

const FILES: [&str; 13] = [
    "avro-identity.json",
    "compatibility.json",
    "config.json",
    "contexts.json",
    "contracts.json",
    "json-identity.json",
    "malformed.json",
    "protobuf.json",
    "routes.json",
    "shapes.json",
    "tags.json",
    "validation.json",
    "versions.json",
];

#[test]
fn answer_shapes() {
    run_file("shapes.json");
}

#[test]
fn protobuf_text_and_formats() {
    run_file("protobuf.json");
}

#[test]
fn avro_schema_identity_and_formats() {
    run_file("avro-identity.json");
}

#[test]
fn json_schema_identity() {
    run_file("json-identity.json");
}

#[test]
fn malformed_bodies() {
    run_file("malformed.json");
}

#[test]
fn validation() {
    run_file("validation.json");
}

#[test]
fn routes() {
    run_file("routes.json");
}

#[test]
fn versions_and_import() {
    run_file("versions.json");
}

#[test]
fn config() {
    run_file("config.json");
}

#[test]
fn contexts() {
    run_file("contexts.json");
}

#[test]
fn data_contracts() {
    run_file("contracts.json");
}

#[test]
fn schema_tags() {
    run_file("tags.json");
}

#[test]
fn compatibility_messages() {
    run_file("compatibility.json");
}

/// Every route of Confluent Schema Registry's API reference (7.9.0, plus 8.1's
/// `DELETE /contexts/{context}`), as (method, path template).
const CONFLUENT_ROUTES: [(&str, &str); 36] = [
    ("get", "/"),
    ("post", "/"),
    ("get", "/schemas"),
    ("get", "/schemas/ids/{id}"),
    ("get", "/schemas/ids/{id}/schema"),
    ("get", "/schemas/ids/{id}/subjects"),
    ("get", "/schemas/ids/{id}/versions"),
    ("get", "/schemas/types"),
    ("get", "/subjects"),
    ("post", "/subjects/{subject}"),
    ("delete", "/subjects/{subject}"),
    ("get", "/subjects/{subject}/metadata"),
    ("get", "/subjects/{subject}/versions"),
    ("post", "/subjects/{subject}/versions"),
    ("get", "/subjects/{subject}/versions/{version}"),
    ("delete", "/subjects/{subject}/versions/{version}"),
    ("get", "/subjects/{subject}/versions/{version}/schema"),
    ("get", "/subjects/{subject}/versions/{version}/referencedby"),
    ("post", "/subjects/{subject}/versions/{version}/tags"),
    ("post", "/compatibility/subjects/{subject}/versions"),
    ("post", "/compatibility/subjects/{subject}/versions/{version}"),
    ("get", "/config"),
    ("put", "/config"),
    ("delete", "/config"),
    ("get", "/config/{subject}"),
    ("put", "/config/{subject}"),
    ("delete", "/config/{subject}"),
    ("get", "/mode"),
    ("put", "/mode"),
    ("get", "/mode/{subject}"),
    ("put", "/mode/{subject}"),
    ("delete", "/mode/{subject}"),
    ("get", "/contexts"),
    ("delete", "/contexts/{context}"),
    ("get", "/v1/metadata/id"),
    ("get", "/v1/metadata/version"),
];

/// Whether a step's path (query and placeholders aside) is an instance of `template`.
fn instance_of(template: &str, path: &str) -> bool {
    let path = path.split('?').next().unwrap_or(path);
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter().zip(&p).all(|(t, p)| if t.starts_with('{') { !p.is_empty() } else { t == p })
}

/// Every (method, path) a step of some exchange file sends.
fn all_steps() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for file in FILES {
        let text = std::fs::read_to_string(exchanges_dir().join(file)).unwrap();
        let doc: Value = serde_json::from_str(&text).unwrap();
        for scenario in doc["scenarios"].as_array().unwrap() {
            for step in scenario["steps"].as_array().unwrap() {
                let method = step["method"].as_str().unwrap().to_ascii_lowercase();
                out.push((method, step["path"].as_str().unwrap().to_owned()));
            }
        }
    }
    out
}

/// The registry's routes in the broker's own `/openapi.json`, `/registry` taken off.
fn documented_routes(b: &Broker) -> Vec<(String, String)> {
    let text =
        ureq::get(format!("{}/openapi.json", b.url)).call().unwrap().body_mut().read_to_string().unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let mut out = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        let Some(route) = path.strip_prefix("/registry") else { continue };
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                out.push((method.clone(), route.to_owned()));
            }
        }
    }
    out
}

/// Coverage: every route of Confluent's API reference is served (it is in the
/// broker's `/openapi.json`), and every registry route the OpenAPI document
/// describes has at least one recorded exchange, so a new route without a
/// scenario fails here.
#[test]
fn every_route_has_a_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let documented = documented_routes(&b);
    let unserved: Vec<_> = CONFLUENT_ROUTES
        .iter()
        .filter(|(m, p)| !documented.iter().any(|(dm, dp)| dm == m && dp == p))
        .collect();
    assert!(unserved.is_empty(), "Confluent routes missing from /openapi.json: {unserved:?}");
    let steps = all_steps();
    let uncovered: Vec<_> = documented
        .iter()
        .filter(|(m, t)| !steps.iter().any(|(sm, sp)| sm == m && instance_of(t, sp)))
        .collect();
    assert!(uncovered.is_empty(), "registry routes without a recorded exchange: {uncovered:?}");
}

#[test]
fn a_route_template_matches_its_instances_only() {
    assert!(instance_of("/subjects/{subject}/versions", "/subjects/s/versions?normalize=true"));
    assert!(!instance_of("/subjects/{subject}", "/subjects/"));
    assert!(!instance_of("/subjects/{subject}", "/subjects/s/versions"));
    assert!(instance_of("/subjects/", "/subjects/"));
}

/// The matcher itself: placeholders bind once and stay distinct, fields are exact.
#[test]
fn placeholders_bind_ids_and_fields_are_exact() {
    let mut ids = Ids::new();
    let e = serde_json::json!({"id": "<id:1>", "m": "<string>"});
    assert!(matches(&e, &serde_json::json!({"id": 7, "m": "x"}), &mut ids, "").is_ok());
    assert!(matches(&e, &serde_json::json!({"id": 8, "m": "x"}), &mut ids, "").is_err(), "<id:1> is 7");
    assert!(
        matches(&serde_json::json!("<id:2>"), &serde_json::json!(7), &mut ids, "").is_err(),
        "7 is taken"
    );
    assert!(matches(&e, &serde_json::json!({"id": 7, "m": "x", "extra": 1}), &mut ids, "").is_err());
    assert!(matches(&e, &serde_json::json!({"id": 7}), &mut ids, "").is_err());
    assert_eq!(substitute("/schemas/ids/<id:1>", &ids), "/schemas/ids/7");
}
