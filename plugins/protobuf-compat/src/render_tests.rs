//! Unit tests of the Protobuf print (render.rs): each layout rule against
//! the text Confluent prints.

use super::*;

fn print(text: &str, form: Form) -> String {
    render(&Schema::parse(text).unwrap(), form)
}

const ORDER: &str = r#"syntax = "proto3";
// A comment that goes away.
package shop.v1;
import "google/protobuf/wrappers.proto";
import "google/protobuf/timestamp.proto";
option java_package = "com.example.shop";
option java_multiple_files = true;
message Order {
  reserved 9, 11 to 15;
  string id = 1;
  google.protobuf.Timestamp placed_at = 2;
  repeated Line lines = 3 [deprecated = true, json_name = "LINES"];
  map<string, Status> tags = 4;
  optional int64 total = 5;
  oneof payment { string card = 6; string iban = 7; }
  google.protobuf.StringValue note = 8;
  message Line { int32 qty = 1; }
  enum Status { UNKNOWN = 0; OK = 1; }
}
enum Kind { A = 0; }
message Empty {}
service Shop { rpc Place(Order) returns (stream Order); }
"#;

#[test]
fn canonical_is_confluents_print_as_written() {
    let expected = r#"syntax = "proto3";
package shop.v1;

import "google/protobuf/wrappers.proto";
import "google/protobuf/timestamp.proto";

option java_package = "com.example.shop";
option java_multiple_files = true;

message Order {
  reserved 9, 11 to 15;

  string id = 1;
  google.protobuf.Timestamp placed_at = 2;
  repeated Line lines = 3 [
    deprecated = true,
    json_name = "LINES"
  ];
  map<string, Status> tags = 4;
  optional int64 total = 5;
  google.protobuf.StringValue note = 8;

  oneof payment {
    string card = 6;
    string iban = 7;
  }

  message Line {
    int32 qty = 1;
  }
  enum Status {
    UNKNOWN = 0;
    OK = 1;
  }
}
message Empty {}
enum Kind {
  A = 0;
}

service Shop {
  rpc Place (Order) returns (stream Order);
}
"#;
    assert_eq!(print(ORDER, Form::Canonical), expected);
}

#[test]
fn normalized_qualifies_and_sorts() {
    let text = print(ORDER, Form::Normalized);
    assert!(text.starts_with("syntax = \"proto3\";\npackage shop.v1;\n\nimport \"google/protobuf/timestamp.proto\";\nimport \"google/protobuf/wrappers.proto\";\n\noption java_multiple_files = true;\noption java_package = \"com.example.shop\";\n"), "{text}");
    assert!(text.contains("  .google.protobuf.Timestamp placed_at = 2;\n"), "{text}");
    assert!(text.contains("  map<string, .shop.v1.Order.Status> tags = 4;\n"), "{text}");
    assert!(text.contains("  rpc Place (.shop.v1.Order) returns (stream .shop.v1.Order);\n"), "{text}");
    // Normalizing is idempotent, and the print compiles to the same descriptor.
    assert_eq!(print(&text, Form::Normalized), text);
    let strip = |s: &Schema| {
        let mut p = s.file.file_descriptor_proto().clone();
        p.source_code_info = None;
        p.dependency.sort();
        p.message_type[0].field.sort_by_key(|f| f.number());
        p
    };
    assert_eq!(strip(&Schema::parse(&text).unwrap()), strip(&Schema::parse(ORDER).unwrap()));
}

#[test]
fn layout_and_comments_do_not_matter_but_order_does() {
    let a = "syntax = \"proto3\"; message M { int32 a = 1; string b = 2; }";
    let b = "syntax = \"proto3\";\n// hi\nmessage M {\n  int32 a = 1; /* x */\n  string b = 2;\n}\n";
    let c = "syntax = \"proto3\"; message M { string b = 2; int32 a = 1; }";
    assert_eq!(print(a, Form::Canonical), print(b, Form::Canonical));
    assert_ne!(print(a, Form::Canonical), print(c, Form::Canonical));
    assert_eq!(print(a, Form::Normalized), print(c, Form::Normalized));
}

#[test]
fn proto2_options_defaults_and_extensions() {
    let text = r#"syntax = "proto2";
package legacy;
import "google/protobuf/descriptor.proto";
extend google.protobuf.FieldOptions { optional string pii = 50001; }
message User {
  required string name = 1 [(pii) = "name"];
  optional int32 age = 2 [default = -1];
  optional string nick = 3 [default = "a\"b"];
  extensions 100 to max;
}
"#;
    let canonical = print(text, Form::Canonical);
    assert!(canonical.starts_with("syntax = \"proto2\";\n"), "{canonical}");
    assert!(canonical.contains("  required string name = 1 [(pii) = \"name\"];\n"), "{canonical}");
    assert!(canonical.contains("  optional int32 age = 2 [default = -1];\n"), "{canonical}");
    assert!(canonical.contains("  optional string nick = 3 [default = \"a\\\"b\"];\n"), "{canonical}");
    assert!(canonical.contains("\n\n  extensions 100 to max;\n}\n"), "{canonical}");
    assert!(
        canonical.contains("\nextend google.protobuf.FieldOptions {\n  optional string pii = 50001;\n}\n"),
        "{canonical}"
    );
    let normalized = print(text, Form::Normalized);
    assert!(!normalized.contains("syntax"), "{normalized}");
    assert!(normalized.contains("  required string name = 1 [(legacy.pii) = \"name\"];\n"), "{normalized}");
    assert!(normalized.contains("extend .google.protobuf.FieldOptions {"), "{normalized}");
    assert_eq!(print(&normalized, Form::Normalized), normalized);
    let ignoring = print(text, Form::IgnoreExtensions);
    assert_eq!(
        ignoring,
        "syntax = \"proto2\";\npackage legacy;\n\nimport \"google/protobuf/descriptor.proto\";\n\n\
         message User {\n  required string name = 1;\n  optional int32 age = 2 [default = -1];\n  \
         optional string nick = 3 [default = \"a\\\"b\"];\n}\n"
    );
}

#[test]
fn ignoring_extensions_keeps_standard_and_confluent_options() {
    let text = r#"syntax = "proto2";
package confluent;
import "google/protobuf/descriptor.proto";
extend google.protobuf.FileOptions { optional int32 file_opt = 50001; }
extend google.protobuf.MessageOptions { optional bool msg_opt = 50002; }
extend google.protobuf.FieldOptions { optional string field_opt = 50003; optional string field_meta = 50004; }
option java_package = "com.p";
option (file_opt) = 1;
message M {
  option (msg_opt) = true;
  optional string a = 1 [deprecated = true, (field_opt) = "x", (confluent.field_meta) = "kept"];
  extensions 100 to 200;
}
"#;
    let canonical = print(text, Form::Canonical);
    assert!(canonical.contains("(field_opt)") && canonical.contains("extend "), "{canonical}");
    let ignoring = print(text, Form::IgnoreExtensions);
    assert!(ignoring.contains("option java_package = \"com.p\";\n"), "{ignoring}");
    assert!(!ignoring.contains("_opt"), "{ignoring}");
    assert!(!ignoring.contains("extend"), "{ignoring}");
    assert!(ignoring.contains("  optional string a = 1 [\n"), "{ignoring}");
    assert!(ignoring.contains("deprecated = true"), "{ignoring}");
    assert!(ignoring.contains("(confluent.field_meta) = \"kept\""), "{ignoring}");
}
#[test]
fn a_descriptor_prints_with_its_qualified_names() {
    let schema = Schema::parse(
        "syntax = \"proto3\";\npackage shop;\nmessage Order { Line l = 1; message Line { int32 q = 1; } }",
    )
    .unwrap();
    let descriptor = Schema::parse(&schema.serialized()).unwrap();
    let text = render(&descriptor, Form::Canonical);
    assert!(text.contains("  .shop.Order.Line l = 1;\n"), "{text}");
    assert_eq!(render(&descriptor, Form::Normalized), render(&schema, Form::Normalized));
}

#[test]
fn reserved_statements_keep_their_grouping_as_written() {
    let text = "syntax = \"proto3\";\nmessage M {\n  reserved 2, 15, 9 to 11;\n  reserved \"a\", \"b\";\n  reserved 20;\n  int32 x = 1;\n  enum E { Z = 0; reserved 3, 5 to max; }\n}\n";
    let canonical = print(text, Form::Canonical);
    assert!(canonical.contains("message M {\n  reserved 2, 15, 9 to 11;\n  reserved \"a\", \"b\";\n  reserved 20;\n\n  int32 x = 1;\n"), "{canonical}");
    assert!(canonical.contains("  enum E {\n    reserved 3, 5 to max;\n    Z = 0;\n  }\n"), "{canonical}");
    let normalized = print(text, Form::Normalized);
    assert!(normalized.contains("  reserved 2;\n  reserved 9 to 11;\n  reserved 15;\n  reserved 20;\n  reserved \"a\";\n  reserved \"b\";\n"), "{normalized}");
}

#[test]
fn decimal_format_is_javas() {
    assert_eq!(decimal_format(1.5), "1.5");
    assert_eq!(decimal_format(2.0), "2");
    assert_eq!(decimal_format(0.12345), "0.123");
    assert_eq!(decimal_format(-0.0001), "0");
}
