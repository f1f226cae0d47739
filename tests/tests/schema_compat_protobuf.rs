//! The built-in Protobuf compatibility checker (`protobuf-compat`), loaded from the
//! broker's embedded bytes through `CompatChecker`: both input forms, the canonical
//! rendering, each of Confluent's incompatible differences with a compatible and
//! an incompatible case, the levels, and invalid schemas.

use std::path::PathBuf;
use std::sync::OnceLock;

use base64::Engine as _;
use es_plugin_host::builtin::{self, PROTOBUF_COMPAT};
use es_plugin_host::{CompatChecker, CompatLevel, EngineLimits, PluginEngine, PluginLimits, Schema};
use prost::Message as _;
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto};

/// One engine and one checker per test binary; the engine outlives the checker
/// (it drives the deadlines).
fn checker() -> &'static CompatChecker {
    static ENGINE: OnceLock<PluginEngine> = OnceLock::new();
    static CHECKER: OnceLock<CompatChecker> = OnceLock::new();
    let engine = ENGINE.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("plugin-cache");
        PluginEngine::new(dir, EngineLimits::default()).expect("engine")
    });
    CHECKER.get_or_init(|| {
        CompatChecker::load(engine, "protobuf-compat", PROTOBUF_COMPAT, vec![], PluginLimits::compat())
            .expect("load protobuf-compat")
    })
}

fn normalize(schema: &str) -> Result<String, String> {
    checker().normalize(&Schema::new(schema)).expect("the plugin answers")
}

/// (path, Confluent's difference name) of each incompatibility.
fn check(level: CompatLevel, proposed: &str, existing: &[&str]) -> Vec<(String, String)> {
    let existing: Vec<Schema> = existing.iter().map(|s| Schema::new(*s)).collect();
    checker()
        .check(level, &Schema::new(proposed), &existing)
        .expect("the plugin answers")
        .into_iter()
        .map(|i| {
            let name = i.message.split(':').next().unwrap_or_default().to_owned();
            (i.path, name)
        })
        .collect()
}

fn backward(old: &str, new: &str) -> Vec<(String, String)> {
    check(CompatLevel::Backward, new, &[old])
}

fn found(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(p, n)| ((*p).to_owned(), (*n).to_owned())).collect()
}

fn p3(body: &str) -> String {
    format!("syntax = \"proto3\";\npackage shop;\n{body}")
}

fn p2(body: &str) -> String {
    format!("syntax = \"proto2\";\npackage shop;\n{body}")
}

#[test]
fn it_is_a_builtin_for_protobuf() {
    assert!(builtin::COMPAT_NAMES.contains(&"protobuf-compat"));
    assert_eq!(builtin::compat("protobuf-compat"), Some(PROTOBUF_COMPAT));
    assert_eq!(checker().supports(), ["PROTOBUF"]);
    assert_eq!(checker().info().name, "protobuf-compat");
}

#[test]
fn proto_text_normalizes_to_a_canonical_text_that_round_trips() {
    let text = r#"
        syntax = "proto3";
        package shop.v1;
        import "google/protobuf/wrappers.proto";
        import "google/protobuf/timestamp.proto";
        // Comments and layout do not survive.
        message Order {
          string id = 1;
          google.protobuf.Timestamp placed_at = 2;
          repeated Line lines = 3;
          map<string, int64> counts = 4;
          oneof payment { string card = 5; string iban = 6; }
          optional google.protobuf.StringValue note = 7;
          message Line { int32 qty = 1; }
        }"#;
    let canonical = normalize(text).unwrap();
    // Confluent's normalized print (ProtobufSchemaUtils.toNormalizedString).
    let expected = r#"syntax = "proto3";
package shop.v1;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  string id = 1;
  .google.protobuf.Timestamp placed_at = 2;
  repeated .shop.v1.Order.Line lines = 3;
  map<string, int64> counts = 4;
  optional .google.protobuf.StringValue note = 7;

  oneof payment {
    string card = 5;
    string iban = 6;
  }

  message Line {
    int32 qty = 1;
  }
}
"#;
    assert_eq!(canonical, expected);
    assert_eq!(normalize(&canonical).unwrap(), canonical);
}

#[test]
fn proto2_normalizes_with_labels_defaults_and_groups() {
    let canonical =
        normalize(&p2("message User { required string name = 1; optional int32 age = 2 [default = -1]; \
         optional group Address = 3 { optional string city = 1; } }"))
        .unwrap();
    assert!(
        canonical.contains("  required string name = 1;\n  optional int32 age = 2 [default = -1];\n"),
        "{canonical}"
    );
    assert!(
        canonical.contains("  optional group Address = 3 {\n    optional string city = 1;\n  }\n"),
        "{canonical}"
    );
    assert_eq!(normalize(&canonical).unwrap(), canonical);
}

/// `shop.Order { string id = 1; google.protobuf.Timestamp at = 2; }` as
/// confluent-kafka's Python serializer sends it: a serialized FileDescriptorProto,
/// as protoc makes it (fully qualified type names, json_name set), in base64.
fn order_descriptor_base64() -> String {
    let field =
        |name: &str, number: i32, ty: Type, type_name: Option<&str>, json: &str| FieldDescriptorProto {
            name: Some(name.into()),
            number: Some(number),
            label: Some(Label::Optional as i32),
            r#type: Some(ty as i32),
            type_name: type_name.map(Into::into),
            json_name: Some(json.into()),
            ..Default::default()
        };
    let file = FileDescriptorProto {
        name: Some("order.proto".into()),
        package: Some("shop".into()),
        dependency: vec!["google/protobuf/timestamp.proto".into()],
        message_type: vec![DescriptorProto {
            name: Some("Order".into()),
            field: vec![
                field("id", 1, Type::String, None, "id"),
                field("placed_at", 2, Type::Message, Some(".google.protobuf.Timestamp"), "placedAt"),
            ],
            ..Default::default()
        }],
        syntax: Some("proto3".into()),
        ..Default::default()
    };
    base64::engine::general_purpose::STANDARD.encode(file.encode_to_vec())
}

#[test]
fn a_base64_descriptor_is_accepted_and_normalizes_like_its_text() {
    let text = p3("import \"google/protobuf/timestamp.proto\";\n\
                   message Order { string id = 1; google.protobuf.Timestamp placed_at = 2; }");
    let from_descriptor = normalize(&order_descriptor_base64()).unwrap();
    assert_eq!(from_descriptor, normalize(&text).unwrap());
    // A descriptor and a text are checked against each other like two texts.
    assert!(backward(&order_descriptor_base64(), &text).is_empty());
    let changed = p3("import \"google/protobuf/timestamp.proto\";\n\
                      message Order { int64 id = 1; google.protobuf.Timestamp placed_at = 2; }");
    assert_eq!(
        backward(&order_descriptor_base64(), &changed),
        found(&[("#/Order/1", "FIELD_SCALAR_KIND_CHANGED")])
    );
}

#[test]
fn invalid_schemas_are_refused_with_a_reason_and_a_place() {
    let err = normalize("syntax = \"proto3\";\nmessage M {\n  int32 a = 1\n}\n").unwrap_err();
    assert_eq!(err, "invalid .proto schema at line 4, column 1: expected ';' or '[', but found '}'");
    let err = normalize("syntax = \"proto3\";\nmessage M {\n  Missing a = 1;\n}\n").unwrap_err();
    assert_eq!(err, "invalid .proto schema at line 3, column 3: name 'Missing' is not defined");
    let err = normalize("syntax = \"proto3\";\nimport \"shop/other.proto\";\nmessage M {}\n").unwrap_err();
    assert!(err.contains("line 2") && err.contains("import 'shop/other.proto' not found"), "{err}");
    let err = normalize("c29tZSBieXRlcw==").unwrap_err();
    assert!(err.contains("neither .proto text nor base64 of a FileDescriptorProto"), "{err}");
    let err = normalize(&p3("enum E { A = 0; }")).unwrap_err();
    assert!(err.contains("no message type"), "{err}");
    // check reports an unparsable schema as an incompatibility, not a failure.
    let found = check(CompatLevel::Backward, "message {", &[&p3("message M {}")]);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].1, "the new schema is invalid");
}

#[test]
fn fields_added_and_removed_are_compatible_both_ways() {
    let old = p3("message Order { string id = 1; int64 total = 2; }");
    let new = p3("message Order { string id = 1; string note = 3; }");
    assert!(check(CompatLevel::Full, &new, &[&old]).is_empty());
}

#[test]
fn package_changed() {
    let old = p3("message Order { string id = 1; }");
    assert!(backward(&old, &p3("message Order { string id = 1; }")).is_empty());
    let moved = "syntax = \"proto3\";\npackage store;\nmessage Order { string id = 1; }";
    assert_eq!(backward(&old, moved), found(&[("#/", "PACKAGE_CHANGED")]));
}

#[test]
fn message_removed_or_renamed() {
    let old = p3("message Order { string id = 1; Line line = 2; }\nmessage Line { int32 qty = 1; }");
    let added = p3(
        "message Order { string id = 1; Line line = 2; }\nmessage Line { int32 qty = 1; }\nmessage New {}",
    );
    assert!(backward(&old, &added).is_empty());
    let renamed = p3("message Order { string id = 1; Item line = 2; }\nmessage Item { int32 qty = 1; }");
    assert_eq!(
        backward(&old, &renamed),
        found(&[("#/Line", "MESSAGE_REMOVED"), ("#/Order/2", "FIELD_NAMED_TYPE_CHANGED")])
    );
}

#[test]
fn field_kind_changed() {
    let old =
        p3("message M { int32 a = 1; N b = 2; map<string, int32> c = 3; }\nmessage N {}\nenum E { Z = 0; }");
    let enum_for_int =
        p3("message M { E a = 1; N b = 2; map<string, int32> c = 3; }\nmessage N {}\nenum E { Z = 0; }");
    assert!(backward(&old, &enum_for_int).is_empty());
    let swapped =
        p3("message M { N a = 1; map<string, int32> b = 2; int32 c = 3; }\nmessage N {}\nenum E { Z = 0; }");
    assert_eq!(
        backward(&old, &swapped),
        found(&[
            ("#/M/1", "FIELD_KIND_CHANGED"),
            ("#/M/2", "FIELD_KIND_CHANGED"),
            ("#/M/3", "FIELD_KIND_CHANGED")
        ])
    );
}

#[test]
fn field_scalar_kind_changed_outside_the_compatible_groups() {
    let field = |ty: &str| p3(&format!("message M {{ {ty} f = 1; }}"));
    for (a, b) in [
        ("int32", "uint32"),
        ("int32", "int64"),
        ("uint64", "bool"),
        ("sint32", "sint64"),
        ("fixed32", "sfixed32"),
        ("fixed64", "sfixed64"),
        ("string", "bytes"),
    ] {
        assert!(backward(&field(a), &field(b)).is_empty(), "{a} -> {b}");
    }
    for (a, b) in [
        ("int32", "sint32"),
        ("int64", "fixed64"),
        ("float", "double"),
        ("string", "int32"),
        ("bytes", "fixed32"),
    ] {
        assert_eq!(
            backward(&field(a), &field(b)),
            found(&[("#/M/1", "FIELD_SCALAR_KIND_CHANGED")]),
            "{a} -> {b}"
        );
    }
}

#[test]
fn field_named_type_changed() {
    let old = p3("message M { A f = 1; }\nmessage A { int32 x = 1; }\nmessage B { int32 x = 1; }");
    assert_eq!(
        backward(&old, &p3("message M { B f = 1; }\nmessage A { int32 x = 1; }\nmessage B { int32 x = 1; }")),
        found(&[("#/M/1", "FIELD_NAMED_TYPE_CHANGED")])
    );
    // Only the package differs: the same type.
    let other_package = "syntax = \"proto3\";\npackage store;\nmessage M { A f = 1; }\nmessage A { int32 x = 1; }\nmessage B { int32 x = 1; }";
    assert_eq!(backward(&old, other_package), found(&[("#/", "PACKAGE_CHANGED")]));
}

#[test]
fn field_numeric_label_changed() {
    let old = p3("message M { int32 a = 1; string b = 2; N c = 3; }\nmessage N {}");
    // Strings, bytes and messages read singular and repeated alike.
    let text_and_messages =
        p3("message M { int32 a = 1; repeated string b = 2; repeated N c = 3; }\nmessage N {}");
    assert!(backward(&old, &text_and_messages).is_empty());
    let numbers = p3("message M { repeated int32 a = 1; string b = 2; N c = 3; }\nmessage N {}");
    assert_eq!(backward(&old, &numbers), found(&[("#/M/1", "FIELD_NUMERIC_LABEL_CHANGED")]));
}

#[test]
fn required_fields_added_and_removed() {
    let old = p2("message M { required string id = 1; optional int32 a = 2; }");
    let optional_added =
        p2("message M { required string id = 1; optional int32 a = 2; optional int32 b = 3; }");
    assert!(check(CompatLevel::Full, &optional_added, &[&old]).is_empty());
    let required_added =
        p2("message M { required string id = 1; optional int32 a = 2; required int32 b = 3; }");
    assert_eq!(backward(&old, &required_added), found(&[("#/M/3", "REQUIRED_FIELD_ADDED")]));
    let required_removed = p2("message M { optional int32 a = 2; }");
    assert_eq!(backward(&old, &required_removed), found(&[("#/M/1", "REQUIRED_FIELD_REMOVED")]));
}

#[test]
fn oneof_changes() {
    let old = p3("message M { int32 a = 1; int32 b = 2; oneof o { int32 c = 3; int32 d = 4; } }");
    let compatible = [
        "message M { int32 a = 1; int32 b = 2; oneof o { int32 c = 3; int32 d = 4; int32 e = 5; } }",
        "message M { int32 a = 1; int32 b = 2; int32 c = 3; oneof o { int32 d = 4; } }",
        "message M { oneof n { int32 a = 1; } int32 b = 2; oneof o { int32 c = 3; int32 d = 4; } }",
        "message M { int32 a = 1; int32 b = 2; }",
    ];
    for new in compatible {
        assert!(backward(&old, &p3(new)).is_empty(), "{new}");
    }
    let removed = p3("message M { int32 a = 1; int32 b = 2; oneof o { int32 c = 3; } }");
    assert_eq!(backward(&old, &removed), found(&[("#/M/o/4", "ONEOF_FIELD_REMOVED")]));
    let moved_many =
        p3("message M { oneof n { int32 a = 1; int32 b = 2; } oneof o { int32 c = 3; int32 d = 4; } }");
    assert_eq!(backward(&old, &moved_many), found(&[("#/M/n", "MULTIPLE_FIELDS_MOVED_TO_ONEOF")]));
    let moved_into_existing =
        p3("message M { int32 b = 2; oneof o { int32 a = 1; int32 c = 3; int32 d = 4; } }");
    assert_eq!(backward(&old, &moved_into_existing), found(&[("#/M/o", "FIELD_MOVED_TO_EXISTING_ONEOF")]));
}

#[test]
fn enum_changes_are_compatible() {
    let old = p3("enum Status { UNKNOWN = 0; OK = 1; }\nmessage M { Status s = 1; }");
    let changed =
        p3("enum Status { UNKNOWN = 0; FAILED = 2; }\nenum Extra { X = 0; }\nmessage M { Status s = 1; }");
    assert!(check(CompatLevel::Full, &changed, &[&old]).is_empty());
}

#[test]
fn every_incompatibility_is_reported_with_its_path() {
    let old =
        p3("message Order { int32 a = 1; string b = 2; message Line { int32 q = 1; } }\nmessage Gone {}");
    let new = "syntax = \"proto3\";\npackage other;\nmessage Order { string a = 1; Order b = 2; message Line { double q = 1; } }";
    assert_eq!(
        backward(&old, new),
        found(&[
            ("#/", "PACKAGE_CHANGED"),
            ("#/Gone", "MESSAGE_REMOVED"),
            ("#/Order/1", "FIELD_SCALAR_KIND_CHANGED"),
            ("#/Order/2", "FIELD_KIND_CHANGED"),
            ("#/Order/Line/1", "FIELD_SCALAR_KIND_CHANGED"),
        ])
    );
}

#[test]
fn levels_pick_the_direction_and_the_versions() {
    let v1 = p2("message M { optional string id = 1; }");
    let v2 = p2("message M { optional string id = 1; required int32 n = 2; }");
    // Backward: the new schema reads old data, which lacks the required field.
    assert_eq!(check(CompatLevel::Backward, &v2, &[&v1]), found(&[("#/M/2", "REQUIRED_FIELD_ADDED")]));
    // Forward: the old schema reads new data; as in Confluent, the writer's
    // required field missing from the reader is incompatible too.
    assert_eq!(check(CompatLevel::Forward, &v2, &[&v1]), found(&[("#/M/2", "REQUIRED_FIELD_REMOVED")]));
    assert_eq!(
        check(CompatLevel::Full, &v2, &[&v1]),
        found(&[("#/M/2", "REQUIRED_FIELD_ADDED"), ("#/M/2", "REQUIRED_FIELD_REMOVED")])
    );
    assert!(check(CompatLevel::None, &v2, &[&v1]).is_empty());
}

#[test]
fn transitive_levels_check_every_version_given() {
    let v1 = p3("message M { string id = 1; }");
    let v2 = p3("message M { string id = 1; int32 n = 2; }");
    let v3 = p3("message M { string id = 1; sint32 n = 2; }");
    // v3 against v1 alone is fine; against v2 the field's encoding changed.
    assert!(check(CompatLevel::Backward, &v3, &[&v1]).is_empty());
    for level in [CompatLevel::BackwardTransitive, CompatLevel::ForwardTransitive] {
        assert_eq!(
            check(level, &v3, &[&v1, &v2]),
            found(&[("#/M/2", "FIELD_SCALAR_KIND_CHANGED")]),
            "{level}"
        );
    }
    // Both directions, each reported with its own reader and writer.
    let full = checker()
        .check(CompatLevel::FullTransitive, &Schema::new(&v3), &[Schema::new(&v1), Schema::new(&v2)])
        .unwrap();
    assert_eq!(full.len(), 2);
    assert!(full[0].message.contains("in the new schema cannot read"), "{}", full[0].message);
    assert!(full[1].message.contains("in the old schema cannot read"), "{}", full[1].message);
}
