//! Unit tests of the schema-tag edits: vectors written from Confluent's tag
//! documentation (a record or field path, tags added and removed).

use super::*;

fn entity(path: &str, entity_type: EntityType) -> SchemaEntity {
    SchemaEntity { entity_path: path.to_owned(), entity_type }
}

fn add(path: &str, t: EntityType, tags: &[&str]) -> TagSchemaRequest {
    TagSchemaRequest {
        tags_to_add: Some(vec![SchemaTags {
            schema_entity: entity(path, t),
            tags: tags.iter().map(|s| s.to_string()).collect(),
        }]),
        ..TagSchemaRequest::default()
    }
}

const USER: &str = r#"{"type":"record","name":"User","namespace":"com.acme","fields":[{"name":"email","type":"string"},{"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}}]}"#;

#[test]
fn an_avro_field_gets_its_tags_last_and_keys_keep_their_order() {
    let out =
        retag(SchemaType::Avro, USER, &add("com.acme.User.email", EntityType::Field, &["PII"])).unwrap();
    assert_eq!(
        out,
        r#"{"type":"record","name":"User","namespace":"com.acme","fields":[{"name":"email","type":"string","confluent:tags":["PII"]},{"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}}]}"#
    );
}

#[test]
fn a_nested_avro_record_is_found_breadth_first_in_the_namespace_in_scope() {
    let out = retag(SchemaType::Avro, USER, &add("com.acme.Address", EntityType::Record, &["LOC"])).unwrap();
    assert!(
        out.contains(
            r#""name":"Address","fields":[{"name":"city","type":"string"}],"confluent:tags":["LOC"]}"#
        ),
        "{out}"
    );
    let field = retag(SchemaType::Avro, USER, &add("Address.city", EntityType::Field, &["LOC"])).unwrap();
    assert!(field.contains(r#"{"name":"city","type":"string","confluent:tags":["LOC"]}"#), "{field}");
}

#[test]
fn avro_union_and_array_branches_are_searched() {
    let s = r#"{"type":"record","name":"R","fields":[{"name":"u","type":["null",{"type":"array","items":{"type":"record","name":"In","fields":[{"name":"x","type":"int"}]}}]}]}"#;
    let out = retag(SchemaType::Avro, s, &add("In.x", EntityType::Field, &["T"])).unwrap();
    assert!(out.contains(r#"{"name":"x","type":"int","confluent:tags":["T"]}"#), "{out}");
}

#[test]
fn removing_the_last_tag_removes_the_key_and_adds_come_before_removes() {
    let tagged =
        retag(SchemaType::Avro, USER, &add("com.acme.User.email", EntityType::Field, &["PII", "X"])).unwrap();
    let mut req = add("com.acme.User.email", EntityType::Field, &["Y"]);
    req.tags_to_remove = Some(vec![SchemaTags {
        schema_entity: entity("com.acme.User.email", EntityType::Field),
        tags: vec!["PII".into(), "X".into(), "Y".into()],
    }]);
    assert_eq!(retag(SchemaType::Avro, &tagged, &req).unwrap(), USER);
}

#[test]
fn an_unknown_path_is_42201_naming_it() {
    let e = retag(SchemaType::Avro, USER, &add("com.acme.User.nope", EntityType::Field, &["T"])).unwrap_err();
    assert_eq!(e.to_string(), "Invalid schema: No matching path 'com.acme.User.nope' found in the schema");
    let wrong_ns = retag(SchemaType::Avro, USER, &add("org.User", EntityType::Record, &["T"]));
    assert!(wrong_ns.is_err());
}

#[test]
fn json_schema_properties_and_definitions_are_paths() {
    let s = r#"{"type":"object","properties":{"a.b":{"type":"string"},"n":{"type":"object","properties":{"c":{"type":"integer"}}}},"definitions":{"D":{"type":"object"}}}"#;
    let out = retag(SchemaType::Json, s, &add("object.a.b", EntityType::Field, &["T"])).unwrap();
    assert!(out.contains(r#""a.b":{"type":"string","confluent:tags":["T"]}"#), "{out}");
    let nested = retag(SchemaType::Json, s, &add("object.n.object.c", EntityType::Field, &["T"])).unwrap();
    assert!(nested.contains(r#""c":{"type":"integer","confluent:tags":["T"]}"#), "{nested}");
    let def = retag(SchemaType::Json, s, &add("object.definitions.D", EntityType::Record, &["T"])).unwrap();
    assert!(def.contains(r#""D":{"type":"object","confluent:tags":["T"]}"#), "{def}");
    let root = retag(SchemaType::Json, s, &add("object", EntityType::Record, &["T"])).unwrap();
    assert!(root.ends_with(r#","confluent:tags":["T"]}"#), "{root}");
}

#[test]
fn protobuf_tags_are_refused() {
    let e = retag(SchemaType::Protobuf, "syntax = \"proto3\";", &add("M.f", EntityType::Field, &["T"]))
        .unwrap_err();
    assert!(e.to_string().contains("PROTOBUF"), "{e}");
}

#[test]
fn no_edits_keep_the_text_as_it_is() {
    assert_eq!(retag(SchemaType::Protobuf, "x", &TagSchemaRequest::default()).unwrap(), "x");
}

#[test]
fn rules_to_merge_and_remove_edit_the_previous_rules_by_name() {
    let prev = serde_json::json!({"domainRules": [{"name": "a", "kind": "CONDITION"}, {"name": "b"}]});
    let req = TagSchemaRequest {
        rules_to_merge: Some(serde_json::json!({"domainRules": [{"name": "a", "kind": "TRANSFORM"}]})),
        rules_to_remove: Some(vec!["b".into()]),
        ..TagSchemaRequest::default()
    };
    let rules = rules_for(&req, Some(prev)).unwrap().unwrap();
    assert_eq!(rules, serde_json::json!({"domainRules": [{"name": "a", "kind": "TRANSFORM"}]}));
    let both = TagSchemaRequest { rule_set: Some(serde_json::json!({})), ..req };
    assert!(rules_for(&both, None).is_err());
}
