//! The built-in `jsonschema-compat` checker through `CompatChecker`, against
//! independent conformance data (`tests/conformance/`, from Karapace's and
//! Apicurio Registry's test suites, Apache-2.0; see the README there), plus what
//! the registry relies on: normalization, every incompatibility with its path,
//! the levels, transitive checks and recursive schemas.

mod common;

use std::sync::OnceLock;

use common::*;
use es_plugin_host::builtin::{self, JSONSCHEMA_COMPAT};
use es_plugin_host::{CompatChecker, CompatLevel, Incompatibility, PluginLimits, Schema};

/// Agreement today; the targets are 95% of each set (305 of 321, 138 of 145).
/// docs/schema-registry.md explains every remaining disagreement.
const KARAPACE_AGREE_MIN: usize = 315;
const APICURIO_AGREE_MIN: usize = 144;

fn json() -> &'static CompatChecker {
    static CHECKER: OnceLock<CompatChecker> = OnceLock::new();
    CHECKER.get_or_init(|| builtin_checker("jsonschema-compat"))
}

fn check(level: CompatLevel, proposed: &str, existing: &[&str]) -> Vec<Incompatibility> {
    compat_check(json(), level, proposed, existing)
}

fn compatible(level: CompatLevel, proposed: &str, existing: &[&str]) -> bool {
    check(level, proposed, existing).is_empty()
}

/// (path, Confluent-style code) of each incompatibility, in order.
fn codes(found: &[Incompatibility]) -> Vec<(&str, &str)> {
    found.iter().map(|i| (i.path.as_str(), i.message.split(':').next().unwrap())).collect()
}

#[test]
fn karapace_reader_writer_pairs_agree() {
    let cases = conformance("jsonschema-reader-writer.json");
    let cases = cases.as_array().expect("an array of cases");
    let mut agree = 0;
    for (i, case) in cases.iter().enumerate() {
        let (reader, writer) = (case["reader"].to_string(), case["writer"].to_string());
        let expected = case["compatible"].as_bool().expect("compatible is a bool");
        // compatible(reader = R, writer = W) is BACKWARD of proposed R against [W].
        let found = check(CompatLevel::Backward, &reader, &[&writer]);
        if found.is_empty() == expected {
            agree += 1;
        } else {
            println!(
                "case {i} ({}): expected compatible={expected}\n  reader {reader}\n  writer {writer}\n  got {:?}",
                case["test"],
                codes(&found)
            );
        }
    }
    println!("jsonschema-reader-writer.json: {agree}/{} agree", cases.len());
    assert_eq!(cases.len(), 321);
    assert!(agree >= KARAPACE_AGREE_MIN, "{agree} agree; disagreements are printed above");
}

#[test]
fn apicurio_json_schema_cases_agree() {
    let data = conformance("apicurio-jsonschema.json");
    let tests = data["tests"].as_array().expect("tests");
    let (mut run, mut agree) = (0, 0);
    for test in tests.iter().filter(|t| t["enabled"].as_bool() == Some(true)) {
        run += 1;
        let (original, updated) = (test["original"].to_string(), test["updated"].to_string());
        let backward = compatible(CompatLevel::Backward, &updated, &[&original]);
        let forward = compatible(CompatLevel::Forward, &updated, &[&original]);
        let expected = match test["compatibility"].as_str().expect("compatibility") {
            "backward" => (true, false),
            "forward" => (false, true),
            "both" => (true, true),
            "none" => (false, false),
            other => panic!("unknown compatibility `{other}`"),
        };
        if (backward, forward) == expected {
            agree += 1;
        } else {
            println!(
                "{}: expected {}, got backward={backward} forward={forward}\n  original {original}\n  updated {updated}",
                test["id"], test["compatibility"]
            );
        }
    }
    println!("apicurio-jsonschema.json: {agree}/{run} agree");
    assert_eq!(run, 145);
    assert!(agree >= APICURIO_AGREE_MIN, "{agree} agree; disagreements are printed above");
}

#[test]
fn the_checker_is_built_in_and_supports_json() {
    assert!(builtin::COMPAT_NAMES.contains(&"jsonschema-compat"));
    assert_eq!(builtin::compat("jsonschema-compat"), Some(JSONSCHEMA_COMPAT));
    assert!(builtin::builtin("jsonschema-compat").is_none());
    assert_eq!(json().supports(), ["JSON".to_owned()]);
    assert_eq!(json().info().name, "jsonschema-compat");
}

#[test]
fn normalize_sorts_keys_drops_whitespace_and_refuses_bad_schemas() {
    let a = r#"{"type": "object", "properties": {"b": {"type": "string"}, "a": {"type": "integer"}}}"#;
    let b = r#"{"properties":{"a":{"type":"integer"},"b":{"type":"string"}},"type":"object"}"#;
    assert_eq!(json().normalize(&Schema::new(a)).unwrap(), Ok(b.to_owned()));
    assert_eq!(json().normalize(&Schema::new(b)).unwrap(), Ok(b.to_owned()), "normalizing is idempotent");
    assert_eq!(json().normalize(&Schema::new("false")).unwrap(), Ok("false".to_owned()));
    let refused = |schema: &str| json().normalize(&Schema::new(schema)).unwrap().expect_err(schema);
    assert!(refused("{").starts_with("the schema is not JSON"));
    assert!(refused("\"string\"").contains("an object or a boolean"));
    assert!(refused(r#"{"type": "strnig"}"#).starts_with("invalid JSON Schema"));
    assert!(refused(r##"{"$ref": "#/definitions/A"}"##).contains("cannot resolve $ref `#/definitions/A`"));
    assert!(refused(r#"{"$ref": "other.json"}"#).contains("another document"));
}

#[test]
fn every_incompatibility_comes_back_with_a_path() {
    let old = r#"{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}"#;
    let new = r#"{"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "string"}},
                  "required": ["a"]}"#;
    let found = check(CompatLevel::Backward, new, &[old]);
    assert_eq!(
        codes(&found),
        [
            ("/properties/a/maxLength", "MAX_LENGTH_ADDED"),
            ("/properties/b/type", "TYPE_CHANGED"),
            ("/required", "REQUIRED_ATTRIBUTE_ADDED"),
        ]
    );
    assert!(
        found[1].message.contains("the reader expects string but the writer produces integer"),
        "{found:?}"
    );
    assert!(
        found[1].message.ends_with("(the new schema reading data written with the old schema)"),
        "{found:?}"
    );
}

#[test]
fn levels_choose_the_direction_and_none_accepts_anything() {
    // A closed reader that drops a property: fine for old readers, not new ones.
    let old = r#"{"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": false}"#;
    let new = r#"{"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                  "additionalProperties": false}"#;
    assert!(compatible(CompatLevel::Backward, new, &[old]));
    let forward = check(CompatLevel::Forward, new, &[old]);
    assert_eq!(codes(&forward), [("/properties/b", "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL")]);
    assert!(forward[0].message.ends_with("(the old schema reading data written with the new schema)"));
    assert_eq!(codes(&check(CompatLevel::Full, new, &[old])), codes(&forward));
    assert!(compatible(CompatLevel::None, r#"{"type": "string"}"#, &[old]));
}

#[test]
fn transitive_levels_check_every_version_and_name_it() {
    let v1 = r#"{"type": "integer"}"#;
    let v2 = r#"{"type": "number"}"#;
    let v3 = r#"{"type": "number", "maximum": 10}"#;
    // v3 reads v2's numbers only up to 10, and v1's integers too.
    let found = check(CompatLevel::BackwardTransitive, v3, &[v1, v2]);
    assert_eq!(codes(&found), [("/maximum", "MAXIMUM_ADDED"), ("/maximum", "MAXIMUM_ADDED")]);
    assert!(found[0].message.contains("old schema 1 of 2") && found[1].message.contains("old schema 2 of 2"));
    let found = check(CompatLevel::ForwardTransitive, v2, &[v1, v2]);
    assert_eq!(codes(&found), [("/type", "TYPE_NARROWED")], "v1 cannot read v2's non-integers");
    assert!(found[0].message.contains("old schema 1 of 2"));
}

#[test]
fn recursive_schemas_terminate() {
    let tree = r##"{"$ref": "#/definitions/node", "definitions": {"node": {"type": "object",
        "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/definitions/node"}}}}}}"##;
    let wider = tree.replace(r#""value": {"type": "integer"}"#, r#""value": {"type": "number"}"#);
    assert!(compatible(CompatLevel::FullTransitive, tree, &[tree, tree]));
    assert!(compatible(CompatLevel::Backward, &wider, &[tree]));
    let found = check(CompatLevel::Forward, &wider, &[tree]);
    assert_eq!(codes(&found), [("/properties/value/type", "TYPE_NARROWED")]);
}

#[test]
fn a_schema_that_does_not_parse_is_reported_not_an_error() {
    let found = check(CompatLevel::Backward, r#"{"type": "string"}"#, &["not json", r#"{"type": "string"}"#]);
    assert_eq!(codes(&found), [("/", "INVALID_SCHEMA")]);
    assert!(found[0].message.contains("old schema 1 of 2"), "{found:?}");
}

#[test]
fn an_exponential_schema_is_refused_within_the_deadline() {
    // Each level is an anyOf of three references to the level below: every reader
    // branch meets every writer branch at every level, 9^12 pairs unbounded.
    let levels = |leaf: &str| {
        let mut definitions = vec![format!(r#""d0": {{"type": "{leaf}"}}"#)];
        for i in 1..=12 {
            let below = format!(r##"{{"$ref": "#/definitions/d{}"}}"##, i - 1);
            definitions
                .push(format!(r#""d{i}": {{"anyOf": [{below}, {below}, {below}, {{"type": "string"}}]}}"#));
        }
        format!(r##"{{"$ref": "#/definitions/d12", "definitions": {{{}}}}}"##, definitions.join(", "))
    };
    let (new, old) = (levels("integer"), levels("number"));
    // The budget is under test, not wall time: a generous deadline keeps a busy
    // machine (parallel tests on 2 cores) from turning its answer into a timeout.
    let limits = PluginLimits { call_deadline_ms: 30_000, ..PluginLimits::compat() };
    let patient =
        CompatChecker::load(engine(), "jsonschema-patient", JSONSCHEMA_COMPAT, vec![], limits).unwrap();
    let started = std::time::Instant::now();
    let found = patient.check(CompatLevel::Forward, &Schema::new(new), &[Schema::new(old)]).unwrap();
    assert_eq!(codes(&found), [("/", "SCHEMA_TOO_COMPLEX")]);
    println!("refused after {:?}", started.elapsed());
}
