//! The built-in `avro-compat` checker through `CompatChecker`, against independent
//! conformance data (`tests/conformance/`, from Apache Avro's and Apicurio
//! Registry's test suites, Apache-2.0; see the README there), plus the behaviour
//! the registry relies on: normalization, every incompatibility reported,
//! transitive and FULL levels, aliases, enums, unions and recursive types.

mod common;

use std::sync::OnceLock;

use common::*;
use es_plugin_host::builtin::{self, AVRO_COMPAT};
use es_plugin_host::{CompatChecker, CompatLevel, Incompatibility, PluginLimits, Schema};

fn avro() -> &'static CompatChecker {
    static CHECKER: OnceLock<CompatChecker> = OnceLock::new();
    CHECKER.get_or_init(|| builtin_checker("avro-compat"))
}

fn check(level: CompatLevel, proposed: &str, existing: &[&str]) -> Vec<Incompatibility> {
    compat_check(avro(), level, proposed, existing)
}

fn compatible(level: CompatLevel, proposed: &str, existing: &[&str]) -> bool {
    check(level, proposed, existing).is_empty()
}

/// Confluent's codes of a result, in order.
fn codes(found: &[Incompatibility]) -> Vec<&str> {
    found.iter().map(|i| i.message.split(':').next().unwrap()).collect()
}

#[test]
fn avro_reader_writer_pairs_agree_with_avro() {
    let cases = conformance("avro-reader-writer.json");
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
                "case {i}: expected compatible={expected}\n  reader {reader}\n  writer {writer}\n  got {found:?}"
            );
        }
    }
    println!("avro-reader-writer.json: {agree}/{} agree", cases.len());
    assert_eq!(cases.len(), 174);
    assert_eq!(agree, 174, "disagreements are printed above");
}

#[test]
fn apicurio_avro_cases_agree() {
    let data = conformance("apicurio-avro.json");
    let tests = data["tests"].as_array().expect("tests");
    let (mut run, mut agree) = (0, 0);
    for test in tests.iter().filter(|t| t["enabled"].as_bool() == Some(true)) {
        run += 1;
        let (original, updated) = (test["original"].to_string(), test["updated"].to_string());
        let backward = compatible(CompatLevel::Backward, &updated, &[&original]);
        let forward = compatible(CompatLevel::Forward, &updated, &[&original]);
        let full = compatible(CompatLevel::Full, &updated, &[&original]);
        let expected = test["compatibility"].as_str().expect("compatibility");
        let ok = match expected {
            "backward" => backward && !forward && !full,
            "forward" => forward && !backward && !full,
            "both" => backward && forward && full,
            "none" => !backward && !forward && !full,
            other => panic!("unknown compatibility `{other}`"),
        };
        if ok {
            agree += 1;
        } else {
            println!("{}: expected {expected}, got backward={backward} forward={forward}", test["id"]);
        }
    }
    println!("apicurio-avro.json: {agree}/{run} agree");
    assert_eq!((agree, run), (4, 4));
}

#[test]
fn the_checker_is_built_in_and_supports_avro() {
    assert!(builtin::COMPAT_NAMES.contains(&"avro-compat"));
    assert_eq!(builtin::compat("avro-compat"), Some(AVRO_COMPAT));
    assert!(builtin::compat("avro").is_none() && builtin::builtin("avro-compat").is_none());
    assert_eq!(avro().supports(), ["AVRO".to_owned()]);
    assert_eq!(avro().info().name, "avro-compat");
}

#[test]
fn normalize_gives_one_canonical_form_and_refuses_bad_schemas() {
    let a =
        r#"{"type":"record","name":"r","namespace":"ns","fields":[{"name":"a","type":"int","default":1}]}"#;
    let b = r#"{ "fields": [ {"default": 1, "type": "int", "name": "a"} ],
               "namespace": "ns", "name": "r", "type": "record" }"#;
    let canonical = avro().normalize(&Schema::new(a)).unwrap().expect("a valid schema");
    assert_eq!(
        avro().normalize(&Schema::new(b)).unwrap(),
        Ok(canonical.clone()),
        "key order and spacing do not matter"
    );
    assert_eq!(
        avro().normalize(&Schema::new(&canonical)).unwrap(),
        Ok(canonical.clone()),
        "normalizing is idempotent"
    );
    assert!(canonical.contains(r#""default":1"#), "defaults are kept: {canonical}");
    assert_eq!(avro().normalize(&Schema::new(r#""string""#)).unwrap(), Ok(r#""string""#.to_owned()));

    for bad in [
        r#"{"type":"record","name":"r"}"#,
        r#"{"type":"intt"}"#,
        "not json",
        r#"{"type":"enum","name":"e","symbols":["A","A"]}"#,
    ] {
        let refused = avro().normalize(&Schema::new(bad)).unwrap().expect_err(bad);
        assert!(refused.starts_with("invalid Avro schema: "), "{bad}: {refused}");
        assert!(refused.len() > "invalid Avro schema: ".len(), "the parser says why: {refused}");
    }
    assert_eq!(avro().stats().failures, 0);
}

#[test]
fn every_conformance_schema_normalizes_idempotently_and_keeps_its_verdict() {
    let cases = conformance("avro-reader-writer.json");
    for (i, case) in cases.as_array().unwrap().iter().enumerate() {
        let mut normal = Vec::new();
        for side in ["reader", "writer"] {
            let schema = case[side].to_string();
            let once = avro()
                .normalize(&Schema::new(&schema))
                .unwrap()
                .unwrap_or_else(|e| panic!("case {i} {side}: {e}"));
            let twice = avro()
                .normalize(&Schema::new(&once))
                .unwrap()
                .unwrap_or_else(|e| panic!("case {i} {side} again: {e}"));
            assert_eq!(once, twice, "case {i} {side}: normalizing is idempotent");
            normal.push(once);
        }
        // The registry stores normalized schemas: checking them must give the
        // same answer as checking the originals.
        let expected = case["compatible"].as_bool().unwrap();
        assert_eq!(compatible(CompatLevel::Backward, &normal[0], &[&normal[1]]), expected, "case {i}");
    }
}

#[test]
fn namespaces_references_and_logical_types_survive_normalization() {
    let schema = r#"{"type":"record","name":"order","namespace":"shop","doc":"an order","fields":[
        {"name":"id","type":{"type":"string","logicalType":"uuid"}},
        {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
        {"name":"hash","type":{"type":"fixed","name":"md5","namespace":"crypto","size":16}},
        {"name":"previous_hash","type":["null","crypto.md5"],"default":null},
        {"name":"at","type":{"type":"long","logicalType":"timestamp-micros"}},
        {"name":"state","type":{"type":"enum","name":"state","symbols":["NEW","PAID"],"default":"NEW"},"default":"NEW"},
        {"name":"lines","type":{"type":"array","items":{"type":"record","name":"line","fields":[
            {"name":"sku","type":"string","aliases":["item"]},
            {"name":"qty","type":"int","default":1}]}}},
        {"name":"by_sku","type":{"type":"map","values":"line"}},
        {"name":"parent","type":["null","order"],"default":null}]}"#;
    let once = avro().normalize(&Schema::new(schema)).unwrap().expect("valid");
    assert_eq!(avro().normalize(&Schema::new(&once)).unwrap(), Ok(once.clone()), "idempotent: {once}");
    for level in CompatLevel::ALL {
        assert!(compatible(level, &once, &[schema]), "{level}: normalized against original");
    }
    for kept in
        [r#""aliases":["item"]"#, r#""logicalType":"uuid""#, r#""default":"NEW""#, r#""doc":"an order""#]
    {
        assert!(once.contains(kept), "{kept} kept in {once}");
    }
}

/// Records `r0`..`r{depth}`, each with four fields of the next one, so a naive
/// check walks 4^depth paths; the innermost has one field of type `leaf`.
fn fan_out(depth: usize, leaf: &str) -> String {
    let mut schema =
        format!(r#"{{"type":"record","name":"r{depth}","fields":[{{"name":"x","type":"{leaf}"}}]}}"#);
    for d in (0..depth).rev() {
        let fields: Vec<String> = (0..4)
            .map(|i| {
                if i == 0 {
                    format!(r#"{{"name":"f0","type":{schema}}}"#)
                } else {
                    format!(r#"{{"name":"f{i}","type":"r{}"}}"#, d + 1)
                }
            })
            .collect();
        schema = format!(r#"{{"type":"record","name":"r{d}","fields":[{}]}}"#, fields.join(","));
    }
    schema
}

#[test]
fn schemas_built_to_be_slow_fail_closed_within_the_deadline() {
    let same = fan_out(14, "long");
    // A record used in many places is checked once when compatible.
    assert!(compatible(CompatLevel::Full, &same, &[&same]));
    // Incompatible at every one of the 4^14 leaves: the check gives up, says so,
    // and still answers (no deadline error).
    let narrowed = fan_out(14, "int");
    // What is under test is the step budget, not wall time: with a generous
    // deadline a busy machine (parallel tests on 2 cores) cannot turn the budget's
    // answer into a deadline error.
    let limits = PluginLimits { call_deadline_ms: 30_000, ..PluginLimits::compat() };
    let patient = CompatChecker::load(engine(), "avro-compat-patient", AVRO_COMPAT, vec![], limits).unwrap();
    let started = std::time::Instant::now();
    // The step budget is per request, so many versions do not multiply it.
    let existing = vec![Schema::new(&same); 8];
    let found = patient.check(CompatLevel::FullTransitive, &Schema::new(&narrowed), &existing).unwrap();
    let took = started.elapsed();
    let codes = codes(&found);
    assert_eq!(codes.iter().filter(|c| **c == "SCHEMA_TOO_COMPLEX").count(), 1, "{:?}", &found[..3]);
    assert!(codes.contains(&"TYPE_MISMATCH"), "{:?}", &found[..3]);
    assert!(found.len() <= 1_000, "{}", found.len());
    println!("gave up after {took:?} with {} incompatibilities", found.len());
}

const V1: &str = r#"{"type":"record","name":"user","fields":[
    {"name":"id","type":"long"},
    {"name":"name","type":"string"}]}"#;

#[test]
fn every_incompatibility_is_reported_with_its_path() {
    // Reader (new): `id` narrowed to int, two new fields without defaults, `kind`
    // an enum the old schema does not have, `tags` an array of a different type.
    let old = r#"{"type":"record","name":"user","fields":[
        {"name":"id","type":"long"},
        {"name":"tags","type":{"type":"array","items":"string"}},
        {"name":"size","type":{"type":"fixed","name":"sz","size":4}}]}"#;
    let new = r#"{"type":"record","name":"user","fields":[
        {"name":"id","type":"int"},
        {"name":"email","type":"string"},
        {"name":"age","type":"int"},
        {"name":"tags","type":{"type":"array","items":"int"}},
        {"name":"size","type":{"type":"fixed","name":"sz","size":8}}]}"#;
    let found = check(CompatLevel::Backward, new, &[old]);
    let got: Vec<(&str, &str)> =
        found.iter().map(|i| (i.path.as_str(), codes(std::slice::from_ref(i))[0])).collect();
    assert_eq!(
        got,
        [
            ("/fields/0/type", "TYPE_MISMATCH"),
            ("/fields/1", "READER_FIELD_MISSING_DEFAULT_VALUE"),
            ("/fields/2", "READER_FIELD_MISSING_DEFAULT_VALUE"),
            ("/fields/3/type/items", "TYPE_MISMATCH"),
            ("/fields/4/type/size", "FIXED_SIZE_MISMATCH"),
        ],
        "{found:#?}"
    );
    assert!(found[1].message.contains("'email'") && found[1].message.contains("new schema"), "{found:#?}");
    assert!(found[0].message.contains("int") && found[0].message.contains("long"), "{found:#?}");
}

#[test]
fn transitive_levels_check_every_schema_given() {
    // v2 adds `email` with a default; v3 makes it required: v2's data has it,
    // v1's does not.
    let v2 = r#"{"type":"record","name":"user","fields":[
        {"name":"id","type":"long"},
        {"name":"name","type":"string"},
        {"name":"email","type":"string","default":""}]}"#;
    let v3 = r#"{"type":"record","name":"user","fields":[
        {"name":"id","type":"long"},
        {"name":"name","type":"string"},
        {"name":"email","type":"string"}]}"#;
    assert!(compatible(CompatLevel::Backward, v3, &[v2]), "v3 reads v2 data");
    let found = check(CompatLevel::BackwardTransitive, v3, &[V1, v2]);
    assert_eq!(codes(&found), ["READER_FIELD_MISSING_DEFAULT_VALUE"], "{found:#?}");
    assert!(found[0].message.contains("old schema 1 of 2"), "names the old schema: {found:#?}");

    // Forward: every old schema must read v3's data; v1 and v2 ignore `email`.
    assert!(compatible(CompatLevel::ForwardTransitive, v3, &[V1, v2]));
    // FULL_TRANSITIVE fails for the backward half only.
    assert_eq!(
        codes(&check(CompatLevel::FullTransitive, v3, &[V1, v2])),
        ["READER_FIELD_MISSING_DEFAULT_VALUE"]
    );
}

#[test]
fn full_checks_both_directions_and_none_nothing() {
    // New adds a field with a default: backward fine; forward fine too (old
    // readers skip it). Removing a field without default breaks forward only.
    let removed = r#"{"type":"record","name":"user","fields":[{"name":"id","type":"long"}]}"#;
    assert!(compatible(CompatLevel::Backward, removed, &[V1]));
    let forward = check(CompatLevel::Forward, removed, &[V1]);
    assert_eq!(codes(&forward), ["READER_FIELD_MISSING_DEFAULT_VALUE"]);
    assert!(forward[0].message.contains("'name'") && forward[0].message.contains("in the old schema"));
    assert_eq!(codes(&check(CompatLevel::Full, removed, &[V1])), ["READER_FIELD_MISSING_DEFAULT_VALUE"]);
    assert!(compatible(CompatLevel::None, r#""int""#, &[V1]));
    assert!(compatible(CompatLevel::None, "not even json", &[V1]));
    assert!(compatible(CompatLevel::FullTransitive, V1, &[]), "nothing to be incompatible with");
}

#[test]
fn aliases_rename_records_and_fields() {
    let renamed = r#"{"type":"record","name":"person","aliases":["user"],"fields":[
        {"name":"id","type":"long"},
        {"name":"full_name","type":"string","aliases":["name"]}]}"#;
    assert!(
        compatible(CompatLevel::Backward, renamed, &[V1]),
        "{:?}",
        check(CompatLevel::Backward, renamed, &[V1])
    );
    let no_alias = renamed.replace(r#","aliases":["user"]"#, "");
    assert_eq!(codes(&check(CompatLevel::Backward, &no_alias, &[V1])), ["NAME_MISMATCH"]);
    // The writer's field aliases do not help a reader (as in Avro's Java checker).
    let forward = check(CompatLevel::Forward, renamed, &[V1]);
    assert_eq!(codes(&forward), ["NAME_MISMATCH", "READER_FIELD_MISSING_DEFAULT_VALUE"], "{forward:#?}");
}

#[test]
fn enums_unions_and_promotions() {
    let e = |symbols: &str, default: &str| {
        format!(r#"{{"type":"enum","name":"color","symbols":[{symbols}]{default}}}"#)
    };
    let (abc, ab) = (e(r#""A","B","C""#, ""), e(r#""A","B""#, ""));
    assert!(compatible(CompatLevel::Backward, &abc, &[&ab]), "a reader may gain symbols");
    let found = check(CompatLevel::Backward, &ab, &[&abc]);
    assert_eq!(codes(&found), ["MISSING_ENUM_SYMBOLS"]);
    assert_eq!(found[0].path, "/symbols");
    assert!(found[0].message.contains("[C]"), "{found:?}");
    assert!(compatible(CompatLevel::Backward, &e(r#""A","B""#, r#","default":"A""#), &[&abc]));

    let union = r#"["null","string","long"]"#;
    assert!(compatible(CompatLevel::Backward, union, &[r#"["null","string"]"#]));
    let found = check(CompatLevel::Backward, r#"["null","string"]"#, &[union]);
    assert_eq!((codes(&found), found[0].path.as_str()), (vec!["MISSING_UNION_BRANCH"], "/2"));
    assert!(
        compatible(CompatLevel::Backward, r#"["null","double"]"#, &[r#""int""#]),
        "promoted into a branch"
    );
    assert_eq!(codes(&check(CompatLevel::Backward, r#""int""#, &[r#"["null","int"]"#])), ["TYPE_MISMATCH"]);

    for (reader, writer) in
        [("long", "int"), ("float", "long"), ("double", "float"), ("string", "bytes"), ("bytes", "string")]
    {
        assert!(compatible(CompatLevel::Backward, &format!("\"{reader}\""), &[&format!("\"{writer}\"")]));
    }
    assert!(!compatible(CompatLevel::Backward, r#""int""#, &[r#""long""#]));
    // Logical types resolve as the types they annotate.
    assert!(compatible(
        CompatLevel::Backward,
        r#"{"type":"long","logicalType":"timestamp-millis"}"#,
        &[r#""int""#]
    ));
}

#[test]
fn recursive_types_terminate_and_are_checked() {
    let list = |extra: &str| {
        format!(
            r#"{{"type":"record","name":"node","fields":[
                {{"name":"value","type":"int"}}{extra},
                {{"name":"next","type":["null","node"],"default":null}}]}}"#
        )
    };
    let v1 = list("");
    assert!(compatible(CompatLevel::FullTransitive, &v1, &[&v1]));
    let with_default = list(r#",{"name":"label","type":"string","default":""}"#);
    assert!(compatible(CompatLevel::Full, &with_default, &[&v1]));
    let without = list(r#",{"name":"label","type":"string"}"#);
    let found = check(CompatLevel::Backward, &without, &[&v1]);
    assert_eq!(codes(&found), ["READER_FIELD_MISSING_DEFAULT_VALUE"], "{found:#?}");
    assert_eq!(found[0].path, "/fields/1");
}

#[test]
fn invalid_schemas_in_a_check_are_reported_not_fatal() {
    let found = check(CompatLevel::Backward, r#"{"type":"nope"}"#, &[V1]);
    assert_eq!(codes(&found), ["INVALID_SCHEMA"]);
    assert!(found[0].message.contains("new schema"), "{found:?}");
    let found = check(CompatLevel::BackwardTransitive, V1, &["{", V1]);
    assert_eq!(codes(&found), ["INVALID_SCHEMA"]);
    assert!(found[0].message.contains("old schema 1 of 2"), "{found:?}");
}
