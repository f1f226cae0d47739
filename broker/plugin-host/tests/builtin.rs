//! The built-in plugins on good and bad data, through the real host.

mod common;

use common::*;
use es_core::Record;
use es_plugin_host::builtin::{self, AVRO, JSON_SCHEMA, RULES};
use es_plugin_host::{Action, PluginError};

#[test]
fn every_builtin_loads_and_describes_itself() {
    for name in builtin::NAMES {
        let wasm = builtin::builtin(name).unwrap();
        let pairs: &[(&str, &str)] = match *name {
            "json-schema" => &[("schema", "{}")],
            "avro" => &[("schema", r#""string""#)],
            _ => &[],
        };
        let v = load(name, wasm, pairs);
        assert_eq!(v.info().name, *name);
        assert!(!v.info().description.is_empty());
    }
}

#[test]
fn rules_pass_good_records_and_flag_each_broken_rule() {
    let rules = load(
        "rules",
        RULES,
        &[
            ("key.required", "true"),
            ("value.max.bytes", "16"),
            ("headers.required", "trace-id"),
            ("headers.max.bytes", "24"),
            ("value.format", "json"),
        ],
    );
    let good = with_header(keyed("k", br#"{"a":1}"#), "trace-id", b"t1");
    let records = vec![
        good.clone(),
        with_header(value(br#"{"a":1}"#), "trace-id", b"t"),
        with_header(keyed("k", br#"{"a":"0123456789"}"#), "trace-id", b"t"),
        keyed("k", b"{}"),
        with_header(keyed("k", b"{}"), "trace-id", &[b'x'; 32]),
        with_header(keyed("k", b"{nope"), "trace-id", b"t"),
        with_header(Record { key: Some("k".into()), ..Record::default() }, "trace-id", b"t"),
    ];
    let found = rules.validate(target(), &records).unwrap();
    assert_eq!(
        codes(&found),
        vec![
            (1, "key-required".into()),
            (2, "value-too-large".into()),
            (3, "header-required".into()),
            (4, "headers-too-large".into()),
            (5, "value-not-json".into()),
        ]
    );
    assert!(found.iter().all(|v| v.action == Action::Reject && !v.reason.is_empty()));
    assert!(rules.validate(target(), &[good.clone(), good]).unwrap().is_empty());
}

#[test]
fn rules_utf8_format_and_configured_action() {
    let rules = load("rules-utf8", RULES, &[("value.format", "utf8"), ("action", "dead-letter")]);
    let found = rules.validate(target(), &[value("héllo".as_bytes()), value(&[0xff, 0xfe])]).unwrap();
    assert_eq!(codes(&found), vec![(1, "value-not-utf8".into())]);
    assert_eq!(found[0].action, Action::DeadLetter);
}

#[test]
fn rules_refuse_bad_configuration_at_load() {
    for pairs in [&[("value.format", "xml")][..], &[("key.required", "maybe")], &[("colour", "blue")]] {
        let err =
            es_plugin_host::Validator::load(engine(), "rules", RULES, config(pairs), Default::default())
                .unwrap_err();
        assert!(matches!(err, PluginError::Configure { .. }), "{err}");
        assert!(err.to_string().contains("rules"), "{err}");
    }
}

const PERSON_JSON_SCHEMA: &str = r#"{
    "type": "object",
    "required": ["name", "age"],
    "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}}
}"#;

#[test]
fn json_schema_accepts_matching_values_and_names_the_mismatch() {
    let v = load("json-schema", JSON_SCHEMA, &[("schema", PERSON_JSON_SCHEMA)]);
    let records = vec![
        value(br#"{"name":"ada","age":36}"#),
        value(br#"{"name":"bob","age":-1}"#),
        value(br#"{"name":"cy"}"#),
        value(b"not json"),
        Record::default(),
    ];
    let found = v.validate(target(), &records).unwrap();
    assert_eq!(
        codes(&found),
        vec![(1, "schema-mismatch".into()), (2, "schema-mismatch".into()), (3, "value-not-json".into())]
    );
    assert!(found[0].reason.contains("/age"), "{}", found[0].reason);
}

#[test]
fn json_schema_refuses_an_invalid_schema() {
    let err = es_plugin_host::Validator::load(
        engine(),
        "json-schema",
        JSON_SCHEMA,
        config(&[("schema", r#"{"type": 12}"#)]),
        Default::default(),
    )
    .unwrap_err();
    assert!(matches!(err, PluginError::Configure { .. }), "{err}");
}

const PERSON_AVRO_SCHEMA: &str = r#"{
    "type": "record", "name": "Person",
    "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]
}"#;

/// `{"name": "ab", "age": 21}` in Avro's binary encoding (zig-zag varints).
const PERSON_AB_21: &[u8] = &[0x04, b'a', b'b', 0x2a];

#[test]
fn avro_decodes_good_values_and_flags_bad_ones() {
    let v = load("avro", AVRO, &[("schema", PERSON_AVRO_SCHEMA)]);
    let records = vec![
        value(PERSON_AB_21),
        value(&[0x04, b'a']),
        value(&[0x04, b'a', b'b', 0x2a, 0x00]),
        Record::default(),
    ];
    let found = v.validate(target(), &records).unwrap();
    assert_eq!(codes(&found), vec![(1, "avro-decode".into()), (2, "avro-trailing-bytes".into())]);
}

#[test]
fn avro_confluent_wire_format_checks_magic_and_schema_id() {
    let v = load("avro-confluent", AVRO, &[("schema", PERSON_AVRO_SCHEMA), ("wire.format", "confluent")]);
    let framed = |id: u32| [&[0u8][..], &id.to_be_bytes(), PERSON_AB_21].concat();
    let records = vec![value(&framed(7)), value(&framed(8)), value(PERSON_AB_21)];
    let mut target = target();
    target.schema_id = Some(7);
    let found = v.validate(target, &records).unwrap();
    assert_eq!(codes(&found), vec![(1, "schema-id-mismatch".into()), (2, "wire-format".into())]);
}
