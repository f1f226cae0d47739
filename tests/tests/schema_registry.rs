//! Black-box tests of the schema registry (Confluent's REST API under `/registry`)
//! against the real es-broker with its built-in Avro checker: every endpoint and
//! error code, soft and hard deletes, ids shared across subjects, concurrent
//! registrations, compatibility levels (transitive included), and restarts after
//! kill -9 and SIGTERM.

use std::time::Duration;

use es_tests::broker::{Broker, Client, Resp};
use serde_json::{Value, json};

const V1: &str = "application/vnd.schemaregistry.v1+json";

/// An Avro record `User` with the given fields.
fn user(fields: Value) -> String {
    json!({"type": "record", "name": "User", "namespace": "t", "fields": fields}).to_string()
}

fn v1() -> String {
    user(json!([{"name": "a", "type": "int"}]))
}

fn register(b: &Broker, subject: &str, schema: &str) -> Resp {
    b.send(
        "POST",
        &format!("/registry/subjects/{subject}/versions"),
        &json!({"schema": schema}).to_string(),
        V1,
    )
}

/// Registers and returns (id, version); panics on a refusal. The registry answers
/// `{"id"}` alone, as Confluent's does; the lookup says which version holds it.
fn registered(b: &Broker, subject: &str, schema: &str) -> (u64, u64) {
    let r = register(b, subject, schema);
    assert_eq!(r.status, 200, "registering under {subject}: {:?}", r.body);
    assert_eq!(r.body.as_object().unwrap().keys().collect::<Vec<_>>(), ["id"], "{:?}", r.body);
    let found = b.post(&format!("/registry/subjects/{subject}"), &json!({"schema": schema}));
    (r.body["id"].as_u64().unwrap(), found.body["version"].as_u64().unwrap())
}

/// The latest version number of `subject`.
fn latest_version(b: &Broker, subject: &str) -> Value {
    b.get(&format!("/registry/subjects/{subject}/versions/latest")).body["version"].clone()
}

fn expect(r: &Resp, status: u16, code: u64) {
    assert_eq!((r.status, r.error_code()), (status, code), "{:?}", r.body);
    assert!(r.body["message"].as_str().is_some_and(|m| !m.is_empty()), "{:?}", r.body);
    let keys: Vec<&String> = r.body.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["error_code", "message"], "error bodies are exactly Confluent's shape");
}

#[test]
fn subjects_versions_ids_and_lookup() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    assert!(b.get("/registry/schemas/types").body.as_array().unwrap().contains(&json!("AVRO")));
    assert_eq!(b.get("/registry/subjects").body, json!([]));

    let (id, version) = registered(&b, "users-value", &v1());
    assert_eq!((id, version), (1, 1));
    // The same schema, formatted differently: same id, no new version.
    let spaced = serde_json::to_string_pretty(&serde_json::from_str::<Value>(&v1()).unwrap()).unwrap();
    assert_eq!(registered(&b, "users-value", &spaced), (1, 1));
    // The same schema under another subject shares the id.
    assert_eq!(registered(&b, "other", &v1()), (1, 1));
    assert_eq!(b.get("/registry/subjects").body, json!(["other", "users-value"]));
    assert_eq!(b.get("/registry/subjects?subjectPrefix=us").body, json!(["users-value"]));

    let v = b.get("/registry/subjects/users-value/versions/1");
    assert_eq!(v.status, 200);
    assert_eq!(
        (v.body["subject"].clone(), v.body["version"].clone(), v.body["id"].clone()),
        (json!("users-value"), json!(1), json!(1))
    );
    assert!(v.body.get("schemaType").is_none(), "AVRO is left out, as Confluent does");
    assert_eq!(b.get("/registry/subjects/users-value/versions/latest").body, v.body);
    assert_eq!(b.get("/registry/subjects/users-value/versions/-1").body, v.body);
    let raw = b.get("/registry/subjects/users-value/versions/1/schema");
    assert_eq!(raw.body, serde_json::from_str::<Value>(v.body["schema"].as_str().unwrap()).unwrap());
    assert_eq!(b.get("/registry/subjects/users-value/versions").body, json!([1]));

    let by_id = b.get("/registry/schemas/ids/1");
    assert_eq!(by_id.body["schema"], v.body["schema"]);
    assert_eq!(b.get("/registry/schemas/ids/1?subject=users-value").body["schema"], v.body["schema"]);
    assert_eq!(b.get("/registry/schemas/ids/1/schema").body, raw.body);
    assert_eq!(b.get("/registry/schemas/ids/1/subjects").body, json!(["other", "users-value"]));
    assert_eq!(
        b.get("/registry/schemas/ids/1/versions").body,
        json!([{"subject": "other", "version": 1}, {"subject": "users-value", "version": 1}])
    );

    let lookup = b.send("POST", "/registry/subjects/users-value", &json!({"schema": spaced}).to_string(), V1);
    assert_eq!(
        (lookup.status, lookup.body["version"].clone(), lookup.body["id"].clone()),
        (200, json!(1), json!(1))
    );
    let v2 = user(json!([{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "x"}]));
    expect(&b.post("/registry/subjects/users-value", &json!({"schema": v2})), 404, 40403);
    expect(&b.post("/registry/subjects/nobody", &json!({"schema": v1()})), 404, 40401);

    assert_eq!(registered(&b, "users-value", &v2), (2, 2));
    assert_eq!(b.get("/registry/subjects/users-value/versions").body, json!([1, 2]));
    // Every accepted content type.
    for ct in [V1, "application/vnd.schemaregistry+json", "application/json"] {
        let r =
            b.send("POST", "/registry/subjects/users-value/versions", &json!({"schema": v2}).to_string(), ct);
        assert_eq!((r.status, r.body["id"].clone()), (200, json!(2)), "{ct}: {:?}", r.body);
    }
    let ctype = ureq_content_type(&b.url, "/registry/subjects");
    assert_eq!(ctype, V1);

    // Unknown routes are Confluent-shaped 404s; clients probe optional endpoints.
    expect(&b.get("/registry/no/such/route"), 404, 404);
    expect(&b.get("/registry/schemas/ids/999"), 404, 40403);
    // Not a number matches no route (Confluent's id parameter is an integer).
    expect(&b.get("/registry/schemas/ids/abc"), 404, 404);
    expect(&b.get("/registry/subjects/users-value/versions/3"), 404, 40402);
    for bad in ["0", "-2", "x", "2147483648"] {
        expect(&b.get(&format!("/registry/subjects/users-value/versions/{bad}")), 422, 42202);
    }
    expect(&b.get("/registry/subjects/nobody/versions"), 404, 40401);
    expect(&b.get("/registry/subjects/nobody/versions/1"), 404, 40401);
}

/// The base URL answers `{}` with and without a trailing slash, and a wrong method
/// on it is Confluent's 405: `/registry/` used to fall through to the broker's own
/// 404 shape, `{"error": {...}}` (found by schemathesis).
#[test]
fn the_base_url_answers_with_and_without_a_slash() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    for path in ["/registry", "/registry/"] {
        let r = b.get(path);
        assert_eq!((r.status, r.body.clone()), (200, json!({})), "{path}");
        assert_eq!(ureq_content_type(&b.url, path), V1, "{path}");
        expect(&b.delete(path), 405, 405);
    }
    // Confluent's router matches the trailing slash.
    let r = b.get("/registry/subjects/");
    assert_eq!((r.status, r.body.clone()), (200, json!([])));
}

/// The content type of a GET answer.
fn ureq_content_type(url: &str, path: &str) -> String {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let resp = agent.get(&format!("{url}{path}")).call().unwrap();
    resp.headers().get("content-type").unwrap().to_str().unwrap().to_owned()
}

#[test]
fn invalid_requests_have_confluents_codes() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    expect(&register(&b, "s", "{\"type\": \"record\", \"name\": \"X\"}"), 422, 42201);
    expect(&register(&b, "s", "not avro"), 422, 42201);
    expect(
        &b.post("/registry/subjects/s/versions", &json!({"schema": v1(), "schemaType": "XML"})),
        422,
        42201,
    );
    // Not JSON is Confluent's 400; JSON of the wrong shape its 422.
    expect(&b.post_raw("/registry/subjects/s/versions", "{\"schema\": "), 400, 400);
    expect(&b.post_raw("/registry/subjects/s/versions", "{\"schema\": 5}"), 422, 422);
    expect(&b.put("/registry/config", &json!({"compatibility": "SIDEWAYS"})), 422, 42203);
    expect(&b.put("/registry/config/s", &json!({"compatibility": "SIDEWAYS"})), 422, 42203);
    expect(&b.put("/registry/mode", &json!({"mode": "WRITEONLY"})), 422, 42204);
    // A reference to a version that does not exist.
    let refs = json!([{"name": "t.Addr", "subject": "addr", "version": 1}]);
    expect(
        &b.post("/registry/subjects/s/versions", &json!({"schema": v1(), "references": refs})),
        422,
        42201,
    );
    // An id outside IMPORT mode.
    expect(&b.post("/registry/subjects/s/versions", &json!({"schema": v1(), "id": 50})), 422, 42205);
    expect(&b.get("/registry/config/s"), 404, 40408);
    expect(&b.get("/registry/mode/s"), 404, 40409);
    expect(&b.delete("/registry/config/s"), 404, 40401);
}

#[test]
fn deletes_are_soft_then_permanent() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let v2 = user(json!([{"name": "a", "type": "int"}, {"name": "b", "type": "long", "default": 0}]));
    registered(&b, "s", &v1());
    registered(&b, "s", &v2);
    expect(&b.delete("/registry/subjects/s/versions/1?permanent=true"), 404, 40407);
    expect(&b.delete("/registry/subjects/s?permanent=True"), 404, 40405);
    expect(&b.delete("/registry/subjects/s/versions/9"), 404, 40402);
    expect(&b.delete("/registry/subjects/nobody"), 404, 40401);
    let r = b.delete("/registry/subjects/s/versions/1");
    assert_eq!((r.status, r.body.clone()), (200, json!(1)));
    expect(&b.delete("/registry/subjects/s/versions/1"), 404, 40406);
    assert_eq!(b.get("/registry/subjects/s/versions").body, json!([2]));
    assert_eq!(b.get("/registry/subjects/s/versions?deleted=TRUE").body, json!([1, 2]));
    expect(&b.get("/registry/subjects/s/versions/1"), 404, 40402);
    assert_eq!(b.get("/registry/subjects/s/versions/1?deleted=true").status, 200);
    // Records written with a soft-deleted schema stay readable by id.
    assert_eq!(b.get("/registry/schemas/ids/1").status, 200);
    expect(&b.get("/registry/schemas/ids/1/versions"), 404, 40403);
    assert_eq!(
        b.get("/registry/schemas/ids/1/versions?deleted=true").body,
        json!([{"subject": "s", "version": 1}])
    );

    assert_eq!(b.delete("/registry/subjects/s").body, json!([2]));
    expect(&b.delete("/registry/subjects/s"), 404, 40404);
    assert_eq!(b.get("/registry/subjects").body, json!([]));
    assert_eq!(b.get("/registry/subjects?deleted=true").body, json!(["s"]));
    expect(&b.get("/registry/subjects/s/versions"), 404, 40401);
    expect(&b.get("/registry/subjects/s/versions/latest"), 404, 40401);
    assert_eq!(b.delete("/registry/subjects/s/versions/2?permanent=true").body, json!(2));
    assert_eq!(b.delete("/registry/subjects/s?permanent=true").body, json!([1]));
    expect(&b.delete("/registry/subjects/s?permanent=true"), 404, 40401);
    expect(&b.get("/registry/schemas/ids/1"), 404, 40403);
    assert_eq!(b.get("/registry/subjects?deleted=true").body, json!([]));
    // Ids are never reused: the same schema comes back with a new id.
    assert_eq!(registered(&b, "s", &v1()), (3, 1));
}

#[test]
fn references_are_resolved_stored_and_protect_their_target() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let addr = json!({"type": "record", "name": "Addr", "namespace": "t", "fields": [{"name": "city", "type": "string"}]});
    registered(&b, "addr", &addr.to_string());
    // A schema whose reference resolves (it need not use what the reference defines).
    let refs = json!([{"name": "t.Addr", "subject": "addr", "version": 1}]);
    let r = b.post("/registry/subjects/user/versions", &json!({"schema": v1(), "references": refs}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let id = r.body["id"].as_u64().unwrap();
    assert_eq!(b.get("/registry/subjects/user/versions/1").body["references"], refs);
    assert_eq!(b.get("/registry/schemas/ids/2").body["references"], refs);
    assert_eq!(b.get("/registry/subjects/addr/versions/1/referencedby").body, json!([id]));
    expect(&b.delete("/registry/subjects/addr/versions/1"), 422, 42206);
    expect(&b.delete("/registry/subjects/addr"), 422, 42206);
    b.delete("/registry/subjects/user");
    assert_eq!(b.get("/registry/subjects/addr/versions/1/referencedby").body, json!([]));
    assert_eq!(b.delete("/registry/subjects/addr").status, 200);
}

/// One schema type's pair of schemas for the references test: a referenced
/// `Address` (its `zip` of the given type) and a `Customer` using it by the
/// reference's name.
struct ReferenceCase {
    schema_type: &'static str,
    /// The reference's name: what the customer schema calls the address schema.
    name: &'static str,
    address: fn(&str) -> String,
    customer: &'static str,
    /// The zip types of a compatible and a backward-incompatible address change.
    zips: [&'static str; 2],
    /// What the refusal of the incompatible change says: Confluent's error type, and where.
    incompatibility: (&'static str, &'static str),
}

fn reference_cases() -> [ReferenceCase; 3] {
    [
        ReferenceCase {
            schema_type: "AVRO",
            name: "com.acme.Address",
            address: |zip| {
                json!({"type": "record", "name": "Address", "namespace": "com.acme",
                       "fields": [{"name": "zip", "type": zip}]})
                .to_string()
            },
            customer: r#"{"type": "record", "name": "Customer", "namespace": "com.acme",
                          "fields": [{"name": "home", "type": "com.acme.Address"}]}"#,
            zips: ["string", "int"],
            incompatibility: ("TYPE_MISMATCH", "/fields/0/type/fields/0/type"),
        },
        ReferenceCase {
            schema_type: "JSON",
            name: "address.json",
            address: |zip| json!({"type": "object", "properties": {"zip": {"type": zip}}}).to_string(),
            customer: r#"{"type": "object", "properties": {"home": {"$ref": "address.json"}}}"#,
            zips: ["string", "integer"],
            incompatibility: ("TYPE_CHANGED", "/properties/home/properties/zip/type"),
        },
        ReferenceCase {
            schema_type: "PROTOBUF",
            name: "acme/address.proto",
            address: |zip| {
                format!("syntax = \"proto3\";\npackage acme;\nmessage Address {{ {zip} zip = 1; }}\n")
            },
            customer: "syntax = \"proto3\";\npackage acme;\nimport \"acme/address.proto\";\n\
                       message Customer { Address home = 1; }\n",
            zips: ["string", "double"],
            incompatibility: ("FIELD_NAMED_TYPE_CHANGED", "#/Customer/1"),
        },
    ]
}

#[test]
fn references_reach_the_checkers_for_every_schema_type() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    for case in reference_cases() {
        let t = case.schema_type;
        let (addr, cust) = (format!("{t}-address"), format!("{t}-customer"));
        let body = |schema: &str, refs: Value| json!({"schema": schema, "schemaType": t, "references": refs});
        let refs = |version: i64| json!([{"name": case.name, "subject": addr, "version": version}]);
        // The address changes freely under its own subject.
        b.put(&format!("/registry/config/{addr}"), &json!({"compatibility": "NONE"}));
        let post =
            |subject: &str, body: Value| b.post(&format!("/registry/subjects/{subject}/versions"), &body);
        let [ok_zip, bad_zip] = case.zips;
        let r = post(&addr, body(&(case.address)(ok_zip), json!([])));
        assert_eq!((r.status, latest_version(&b, &addr)), (200, json!(1)), "{t}: {:?}", r.body);

        // Without its reference, the customer schema names something undefined.
        let alone = post(&cust, body(case.customer, json!([])));
        expect(&alone, 422, 42201);
        // With it, it registers, and its lookup finds it.
        let r = post(&cust, body(case.customer, refs(1)));
        assert_eq!((r.status, latest_version(&b, &cust)), (200, json!(1)), "{t}: {:?}", r.body);
        let id = r.body["id"].clone();
        let found = b.post(&format!("/registry/subjects/{cust}"), &body(case.customer, refs(1)));
        assert_eq!((found.status, found.body["id"].clone()), (200, id.clone()), "{t}: {:?}", found.body);
        assert_eq!(b.get(&format!("/registry/subjects/{cust}/versions/1")).body["references"], refs(1));

        // An address change the customer's readers cannot follow: address v2 is
        // refused for the customer, through the referenced type.
        let r = post(&addr, body(&(case.address)(bad_zip), json!([])));
        assert_eq!((r.status, latest_version(&b, &addr)), (200, json!(2)), "{t}: {:?}", r.body);
        let refused = post(&cust, body(case.customer, refs(2)));
        expect(&refused, 409, 409);
        let message = refused.body["message"].as_str().unwrap();
        let (error_type, at) = case.incompatibility;
        let shaped = |text: &str| {
            text.contains(&format!("{{errorType:'{error_type}', description:'"))
                && text.contains(&format!("additionalInfo:'{at}'}}"))
        };
        assert!(shaped(message), "{t}: {message}");
        let test = b.post(
            &format!("/registry/compatibility/subjects/{cust}/versions/latest?verbose=true"),
            &body(case.customer, refs(-1)),
        );
        assert_eq!(test.body["is_compatible"], json!(false), "{t}: {:?}", test.body);
        let messages = test.body["messages"].to_string();
        assert!(shaped(&messages), "{t}: {messages}");
        // The same address version again is fine.
        let again = b.post(
            &format!("/registry/compatibility/subjects/{cust}/versions/latest"),
            &body(case.customer, refs(1)),
        );
        assert_eq!(again.body, json!({"is_compatible": true}), "{t}");

        // A reference to a version that does not exist is Confluent's invalid schema.
        for missing in [refs(3), json!([{"name": case.name, "subject": "nobody", "version": 1}])] {
            let r = post(&cust, body(case.customer, missing));
            expect(&r, 422, 42201);
            let message = r.body["message"].as_str().unwrap();
            assert!(message.contains(&format!("reference '{}'", case.name)), "{t}: {message}");
        }
        let r = b.post(
            &format!("/registry/compatibility/subjects/{cust}/versions/latest"),
            &body(case.customer, refs(3)),
        );
        expect(&r, 422, 42201);
        assert_eq!(b.get(&format!("/registry/subjects/{cust}/versions")).body, json!([1]), "{t}");
    }
}

#[test]
fn config_mode_and_import() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    assert_eq!(b.get("/registry/config").body, json!({"compatibilityLevel": "BACKWARD"}));
    assert_eq!(
        b.put("/registry/config", &json!({"compatibility": "full"})).body,
        json!({"compatibility": "FULL"})
    );
    assert_eq!(b.get("/registry/config").body, json!({"compatibilityLevel": "FULL"}));
    assert_eq!(
        b.put("/registry/config/s", &json!({"compatibility": "NONE"})).body,
        json!({"compatibility": "NONE"})
    );
    assert_eq!(b.get("/registry/config/s").body, json!({"compatibilityLevel": "NONE"}));
    assert_eq!(b.get("/registry/config/t?defaultToGlobal=true").body, json!({"compatibilityLevel": "FULL"}));
    expect(&b.get("/registry/config/t?defaultToGlobal=false"), 404, 40408);
    assert_eq!(b.delete("/registry/config/s").body, json!({"compatibilityLevel": "NONE"}));
    expect(&b.get("/registry/config/s"), 404, 40408);
    assert_eq!(b.delete("/registry/config").body, json!({"compatibilityLevel": "FULL"}));
    assert_eq!(b.get("/registry/config").body, json!({"compatibilityLevel": "BACKWARD"}));

    assert_eq!(b.get("/registry/mode").body, json!({"mode": "READWRITE"}));
    registered(&b, "s", &v1());
    assert_eq!(b.put("/registry/mode/s", &json!({"mode": "READONLY"})).body, json!({"mode": "READONLY"}));
    let v2 = user(json!([{"name": "a", "type": "int"}, {"name": "c", "type": "int", "default": 1}]));
    expect(&register(&b, "s", &v2), 422, 42205);
    expect(&b.delete("/registry/subjects/s"), 422, 42205);
    registered(&b, "other", &v2);
    assert_eq!(b.get("/registry/mode/s").body, json!({"mode": "READONLY"}));
    assert_eq!(b.get("/registry/mode/x?defaultToGlobal=true").body, json!({"mode": "READWRITE"}));
    assert_eq!(b.delete("/registry/mode/s").body, json!({"mode": "READONLY"}));
    assert_eq!(b.put("/registry/mode", &json!({"mode": "READONLY_OVERRIDE"})).status, 200);
    expect(&register(&b, "other", &v1()), 422, 42205);
    assert_eq!(b.put("/registry/mode", &json!({"mode": "READWRITE"})).status, 200);

    // IMPORT: only on an empty subject unless forced; ids and versions as given.
    expect(&b.put("/registry/mode/s", &json!({"mode": "IMPORT"})), 422, 42205);
    assert_eq!(b.put("/registry/mode/s?force=true", &json!({"mode": "IMPORT"})).status, 200);
    assert_eq!(b.put("/registry/mode/imp", &json!({"mode": "IMPORT"})).body, json!({"mode": "IMPORT"}));
    let imported = user(json!([{"name": "z", "type": "string"}]));
    let r = b.post("/registry/subjects/imp/versions", &json!({"schema": imported, "id": 100, "version": 7}));
    assert_eq!((r.status, r.body.clone()), (200, json!({"id": 100})), "{:?}", r.body);
    assert_eq!(latest_version(&b, "imp"), json!(7));
    let other = user(json!([{"name": "q", "type": "string"}]));
    expect(&b.post("/registry/subjects/imp/versions", &json!({"schema": other, "id": 100})), 422, 42205);
    assert_eq!(b.get("/registry/schemas/ids/100").status, 200);
    b.delete("/registry/mode/imp");
    // New ids continue above the imported one.
    assert_eq!(registered(&b, "fresh", &other).0, 101);
}

#[test]
fn compatibility_levels_with_the_avro_checker() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let no_default = user(json!([{"name": "a", "type": "int"}, {"name": "b", "type": "int"}]));
    registered(&b, "s", &v1());
    // BACKWARD (default): a new field without a default cannot read old data.
    let r = register(&b, "s", &no_default);
    expect(&r, 409, 409);
    assert!(r.body["message"].as_str().unwrap().contains("incompatible"), "{:?}", r.body);
    let test = |path: &str, schema: &str| {
        b.post(&format!("/registry/compatibility/subjects/s/versions{path}"), &json!({"schema": schema}))
    };
    let verbose = test("/latest?verbose=True", &no_default);
    assert_eq!(verbose.body["is_compatible"], json!(false));
    assert!(!verbose.body["messages"].as_array().unwrap().is_empty(), "{:?}", verbose.body);
    assert_eq!(test("/1", &no_default).body, json!({"is_compatible": false}));
    assert_eq!(test("?verbose=true", &no_default).body["is_compatible"], json!(false));
    assert_eq!(test("/latest", &v1()).body, json!({"is_compatible": true}));
    expect(&test("/5", &v1()), 404, 40402);
    expect(&test("/abc", &v1()), 422, 42202);
    expect(&test("/latest", "nope"), 422, 42201);
    expect(
        &b.post("/registry/compatibility/subjects/nobody/versions/latest", &json!({"schema": v1()})),
        404,
        40401,
    );
    assert_eq!(
        b.post("/registry/compatibility/subjects/nobody/versions", &json!({"schema": v1()})).body["is_compatible"],
        json!(true)
    );

    // FORWARD accepts it (old readers ignore the new field); FULL does not.
    b.put("/registry/config/s", &json!({"compatibility": "FULL"}));
    expect(&register(&b, "s", &no_default), 409, 409);
    b.put("/registry/config/s", &json!({"compatibility": "FORWARD"}));
    assert_eq!(registered(&b, "s", &no_default).1, 2);

    // Transitive levels check every live version, plain ones the latest only:
    // v1 {f: int}, v2 {} , v3 {f: string, default ""} is backward-compatible with
    // v2 but not with v1.
    let f_int = user(json!([{"name": "f", "type": "int"}]));
    let empty = user(json!([]));
    let f_string = user(json!([{"name": "f", "type": "string", "default": ""}]));
    for (subject, level) in [("plain", "BACKWARD"), ("transitive", "BACKWARD_TRANSITIVE")] {
        b.put(&format!("/registry/config/{subject}"), &json!({"compatibility": level}));
        registered(&b, subject, &f_int);
        registered(&b, subject, &empty);
    }
    assert_eq!(registered(&b, "plain", &f_string).1, 3);
    expect(&register(&b, "transitive", &f_string), 409, 409);
    // A soft-deleted version no longer counts.
    b.delete("/registry/subjects/transitive/versions/1");
    assert_eq!(registered(&b, "transitive", &f_string).1, 3);
    // NONE accepts anything.
    b.put("/registry/config/plain", &json!({"compatibility": "NONE"}));
    assert_eq!(registered(&b, "plain", &user(json!([{"name": "f", "type": "boolean"}]))).1, 4);
    // A schema already registered keeps its version whatever the level.
    assert_eq!(registered(&b, "plain", &f_int).1, 1);
}

#[test]
fn concurrent_registrations_never_share_an_id() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.put("/registry/config", &json!({"compatibility": "NONE"}));
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let c = Client::new(&b.url);
            std::thread::spawn(move || {
                let distinct = user(json!([{"name": format!("f{i}"), "type": "int"}]));
                let shared = user(json!([{"name": "shared", "type": "int"}]));
                let a = c.try_post(
                    &format!("/registry/subjects/s{}/versions", i % 3),
                    &json!({"schema": distinct}),
                );
                let b =
                    c.try_post(&format!("/registry/subjects/shared{i}/versions"), &json!({"schema": shared}));
                (a.unwrap().body["id"].as_u64().unwrap(), b.unwrap().body["id"].as_u64().unwrap())
            })
        })
        .collect();
    let results: Vec<(u64, u64)> = tasks.into_iter().map(|t| t.join().unwrap()).collect();
    let mut distinct: Vec<u64> = results.iter().map(|r| r.0).collect();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), 16, "{results:?}");
    let shared: std::collections::BTreeSet<u64> = results.iter().map(|r| r.1).collect();
    assert_eq!(shared.len(), 1, "one schema, one id: {results:?}");
    assert!(!distinct.contains(shared.iter().next().unwrap()));
}

/// Everything a client can observe, for before/after comparisons.
fn snapshot(b: &Broker) -> Value {
    let subjects = b.get("/registry/subjects?deleted=true").body;
    let mut versions = serde_json::Map::new();
    for s in subjects.as_array().unwrap() {
        let s = s.as_str().unwrap();
        let all = b.get(&format!("/registry/subjects/{s}/versions?deleted=true")).body;
        let detail: Vec<Value> = all
            .as_array()
            .unwrap()
            .iter()
            .map(|v| b.get(&format!("/registry/subjects/{s}/versions/{v}?deleted=true")).body)
            .collect();
        versions.insert(s.to_owned(), json!(detail));
        versions.insert(format!("{s}/config"), b.get(&format!("/registry/config/{s}")).body);
        versions.insert(format!("{s}/mode"), b.get(&format!("/registry/mode/{s}")).body);
    }
    json!({
        "subjects": subjects,
        "live": b.get("/registry/subjects").body,
        "versions": versions,
        "config": b.get("/registry/config").body,
        "mode": b.get("/registry/mode").body,
    })
}

#[test]
fn the_registry_survives_kill9_and_graceful_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    b.put("/registry/config", &json!({"compatibility": "FULL_TRANSITIVE"}));
    b.put("/registry/config/a", &json!({"compatibility": "NONE"}));
    registered(&b, "a", &v1());
    registered(&b, "a", &user(json!([{"name": "x", "type": "string"}])));
    registered(&b, "b", &v1());
    b.delete("/registry/subjects/a/versions/1");
    b.put("/registry/mode/b", &json!({"mode": "READONLY"}));
    registered(&b, "gone", &user(json!([{"name": "g", "type": "int"}])));
    b.delete("/registry/subjects/gone");
    b.delete("/registry/subjects/gone?permanent=true");
    let before = snapshot(&b);
    assert_eq!(before["live"], json!(["a", "b"]));

    b.kill9();
    let mut b = Broker::start(dir.path());
    assert_eq!(snapshot(&b), before, "after kill -9");
    // The hard-deleted id 3 stays used: the next new schema gets 4.
    assert_eq!(registered(&b, "c", &user(json!([{"name": "n", "type": "int"}]))).0, 4);
    let before = snapshot(&b);
    b.signal("TERM");
    assert!(b.wait_exit(Duration::from_secs(30)).success());
    let b = Broker::start(dir.path());
    assert_eq!(snapshot(&b), before, "after a graceful restart");
    // The internal topic is hidden and protected.
    assert!(!b.get("/topics").body.to_string().contains("__es_schemas"));
    assert_eq!(b.delete("/topics/__es_schemas").status, 400);
}

/// Data contracts, the config's newer fields and a context's config are records of
/// the internal topic like everything else: they survive kill -9.
#[test]
fn data_contracts_and_config_fields_survive_kill9() {
    let dir = tempfile::tempdir().unwrap();
    let mut b = Broker::start(dir.path());
    let md = json!({"properties": {"owner": "x"}});
    let rules = json!({"domainRules": [{"name": "r", "kind": "CONDITION", "type": "CEL", "mode": "WRITE", "expr": "true"}]});
    let r =
        b.post("/registry/subjects/dc/versions", &json!({"schema": v1(), "metadata": md, "ruleSet": rules}));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let cfg = json!({"alias": "dc", "compatibilityGroup": "major", "defaultMetadata": {"properties": {"team": "t"}}});
    assert_eq!(b.put("/registry/config/nick", &cfg).body, cfg);
    assert_eq!(b.put("/registry/config/:.ctx:", &json!({"compatibility": "NONE"})).status, 200);
    let read = |b: &Broker| {
        [
            b.get("/registry/subjects/dc/versions/1").body,
            b.get("/registry/config/nick").body,
            b.get("/registry/config/:.ctx:x?defaultToGlobal=true").body,
            b.get("/registry/subjects/nick/versions/1").body,
        ]
    };
    let before = read(&b);
    assert_eq!((before[0]["metadata"].clone(), before[0]["ruleSet"].clone()), (md, rules));
    assert_eq!(before[2], json!({"compatibilityLevel": "NONE"}));
    assert_eq!(before[3], before[0], "the alias reads the subject it names");
    b.kill9();
    let b = Broker::start(dir.path());
    assert_eq!(read(&b), before, "after kill -9");
}

/// Runs `es` against `url`; bounded in time.
fn es(url: &str, args: &[&str]) -> std::process::Output {
    let mut child = std::process::Command::new(es_tests::broker::es_bin())
        .env("ES_BROKER", url)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawning es");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("es {args:?} did not finish within 30 s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

fn es_ok(url: &str, args: &[&str]) -> String {
    let out = es(url, args);
    assert!(out.status.success(), "es {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_cli_registers_reads_checks_configures_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let url = b.url.as_str();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_str().unwrap().to_owned()
    };
    let f1 = file("v1.avsc", &v1());
    let ok2 = file(
        "ok.avsc",
        &user(json!([{"name": "a", "type": "int"}, {"name": "e", "type": "string", "default": ""}])),
    );
    let bad = file("bad.avsc", &user(json!([{"name": "a", "type": "int"}, {"name": "f", "type": "int"}])));

    assert_eq!(
        es_ok(url, &["schema", "register", "orders-value", &f1]).trim(),
        "subject orders-value version 1 id 1"
    );
    let json_out: Value =
        serde_json::from_str(&es_ok(url, &["--json", "schema", "register", "orders-value", &ok2])).unwrap();
    assert_eq!((json_out["id"].clone(), json_out["version"].clone()), (json!(2), json!(2)));
    assert_eq!(es_ok(url, &["schema", "list"]).trim(), "orders-value");
    assert_eq!(es_ok(url, &["schema", "versions", "orders-value"]).trim(), "1\n2");
    let got = es_ok(url, &["schema", "get", "orders-value", "1"]);
    assert!(got.starts_with("subject orders-value version 1 id 1 type AVRO\n"), "{got}");
    let by_id = es_ok(url, &["schema", "get", "--id", "1"]);
    assert_eq!(
        serde_json::from_str::<Value>(by_id.trim()).unwrap(),
        serde_json::from_str::<Value>(&v1()).unwrap()
    );

    assert_eq!(es_ok(url, &["schema", "check", "orders-value", &ok2]).trim(), "compatible");
    let out = es(url, &["schema", "check", "orders-value", &bad]);
    assert_eq!(out.status.code(), Some(1), "an incompatible schema exits 1");
    let lines = String::from_utf8(out.stdout).unwrap();
    assert!(
        !lines.trim().is_empty() && !lines.contains("{compatibility"),
        "one plain line per incompatibility: {lines}"
    );
    let out = es(url, &["schema", "register", "orders-value", &bad]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("error_code 409"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    assert_eq!(es_ok(url, &["schema", "config"]).trim(), "BACKWARD");
    assert_eq!(es_ok(url, &["schema", "config", "orders-value", "--set", "forward"]).trim(), "FORWARD");
    assert_eq!(es_ok(url, &["schema", "config", "orders-value"]).trim(), "FORWARD");
    assert_eq!(es_ok(url, &["schema", "check", "orders-value", &bad, "--version", "2"]).trim(), "compatible");

    let out = es(url, &["schema", "delete", "orders-value", "--permanent"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("40405"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        es_ok(url, &["schema", "delete", "orders-value", "--version", "1"]).trim(),
        "soft-deleted subject orders-value version 1"
    );
    assert_eq!(
        es_ok(url, &["schema", "delete", "orders-value"]).trim(),
        "soft-deleted subject orders-value version 2"
    );
    assert_eq!(
        es_ok(url, &["schema", "delete", "orders-value", "--permanent"]).trim(),
        "permanently deleted subject orders-value version 1, 2"
    );
    let out = es(url, &["schema", "versions", "orders-value"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("40401"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
