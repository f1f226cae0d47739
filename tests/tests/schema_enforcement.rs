//! The built-in `schema-registry` validator on Protobuf records, against the real
//! es-broker: schemas registered over the registry API, the validator bound over
//! HTTP, records framed as Confluent's serializers frame them (magic byte 0, the
//! schema id, the message indexes, the message), built here by hand. Good records
//! are accepted; a payload that does not decode, a message index outside the
//! schema, an id not registered for the topic or a message not registered under
//! its own name (RecordNameStrategy) is refused with 422 and the finding.
//!
//! Then schemas with references, one of each type: the referenced schema is
//! registered under its own subject, the referencing one under `{topic}-value`,
//! and records that use the referenced definitions are accepted or refused by
//! what those definitions say.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use es_tests::broker::{Broker, Resp};
use serde_json::{Value, json};

/// Two top-level messages, one nested, a map, and a well-known import.
const SHOP: &str = r#"syntax = "proto3";
package com.acme;

import "google/protobuf/timestamp.proto";

message Order {
  string id = 1;
  repeated Line lines = 2;
  map<string, int32> stock = 3;
  google.protobuf.Timestamp at = 4;

  message Line {
    string sku = 1;
    int32 quantity = 2;
  }
}

message Customer {
  string name = 1;
  int64 since = 2;
}
"#;

/// A field's key: field number and wire type (0 varint, 2 length-delimited).
fn key(number: u8, wire: u8) -> u8 {
    (number << 3) | wire
}

fn varint_field(number: u8, value: u8) -> Vec<u8> {
    assert!(value < 0x80, "one-byte varints only");
    vec![key(number, 0), value]
}

fn len_field(number: u8, bytes: &[u8]) -> Vec<u8> {
    assert!(bytes.len() < 0x80, "one-byte lengths only");
    let mut out = vec![key(number, 2), bytes.len() as u8];
    out.extend_from_slice(bytes);
    out
}

fn line(sku: &str, quantity: u8) -> Vec<u8> {
    [len_field(1, sku.as_bytes()), varint_field(2, quantity)].concat()
}

/// `Order{id, lines: [line], stock: {sku: 3}, at: {seconds: 5}}`.
fn order(id: &str) -> Vec<u8> {
    let entry = [len_field(1, b"sku-1"), varint_field(2, 3)].concat();
    [
        len_field(1, id.as_bytes()),
        len_field(2, &line("sku-1", 2)),
        len_field(3, &entry),
        len_field(4, &varint_field(1, 5)),
    ]
    .concat()
}

fn customer(name: &str) -> Vec<u8> {
    [len_field(1, name.as_bytes()), varint_field(2, 7)].concat()
}

/// Confluent's Protobuf wire format, base64 for the JSON produce API. `indexes`
/// is already encoded (zigzag varints: `[0]` for the first message as the single
/// byte 0, `[2, 2]` for count 1 index 1, `[4, 0, 0]` for the path 0.0).
fn framed(id: u64, indexes: &[u8], message: &[u8]) -> String {
    let mut bytes = vec![0u8];
    bytes.extend_from_slice(&u32::try_from(id).unwrap().to_be_bytes());
    bytes.extend_from_slice(indexes);
    bytes.extend_from_slice(message);
    BASE64.encode(bytes)
}

fn register(b: &Broker, subject: &str, schema: &str) -> u64 {
    register_with(b, subject, "PROTOBUF", schema, json!([]))
}

/// Registers a schema of `schema_type` with `references` (`[{name, subject, version}]`).
fn register_with(b: &Broker, subject: &str, schema_type: &str, schema: &str, references: Value) -> u64 {
    let r = b.post(
        &format!("/registry/subjects/{subject}/versions"),
        &json!({"schemaType": schema_type, "schema": schema, "references": references}),
    );
    assert_eq!(r.status, 200, "registering under {subject}: {:?}", r.body);
    r.body["id"].as_u64().unwrap()
}

/// Confluent's framing without message indexes (Avro, JSON), base64.
fn framed_plain(id: u64, payload: &[u8]) -> String {
    framed(id, &[], payload)
}

fn bind(b: &Broker, topic: &str, config: Value) {
    let r = b.put(
        &format!("/topics/{topic}/validators"),
        &json!({"validators": [{"plugin": "schema-registry", "config": config}]}),
    );
    assert_eq!(r.status, 200, "binding schema-registry to {topic}: {:?}", r.body);
}

fn send(b: &Broker, topic: &str, values: &[String]) -> Resp {
    let records: Vec<Value> = values.iter().map(|v| json!({"value": v})).collect();
    b.post(&format!("/topics/{topic}/records"), &json!({"encoding": "base64", "records": records}))
}

/// The (index, code, reason) of each refused record.
fn refused(r: &Resp) -> Vec<(u64, String, String)> {
    assert_eq!(r.status, 422, "expected 422, got {:?}", r.body);
    assert_eq!(r.code(), "validation_failed", "{:?}", r.body);
    r.body["error"]["violations"]
        .as_array()
        .unwrap_or_else(|| panic!("no violations in {:?}", r.body))
        .iter()
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or_default().to_owned();
            (f["index"].as_u64().unwrap(), s("code"), s("reason"))
        })
        .collect()
}

fn high_watermark(b: &Broker, topic: &str) -> u64 {
    let r = b.get(&format!("/topics/{topic}"));
    r.body["partitions"].as_array().unwrap().iter().map(|p| p["high_watermark"].as_u64().unwrap()).sum()
}

#[test]
fn protobuf_payloads_must_decode_as_the_message_their_indexes_select() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("orders", 1);
    let id = register(&b, "orders-value", SHOP);
    let other = register(&b, "other-value", "syntax = \"proto3\";\nmessage Other { string x = 1; }\n");
    assert_ne!(id, other);
    bind(&b, "orders", json!({}));

    let good = [
        framed(id, &[0], &order("o-1")),           // [0] as the single byte 0
        framed(id, &[2, 0], &order("o-2")),        // [0] spelled out
        framed(id, &[2, 2], &customer("ada")),     // [1]: Customer
        framed(id, &[4, 0, 0], &line("sku-9", 1)), // [0, 0]: Order.Line
        framed(id, &[0], &[]),                     // an empty Order
    ];
    let r = send(&b, "orders", &good);
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(high_watermark(&b, "orders"), 5);

    let mut truncated = order("o-3");
    truncated.truncate(truncated.len() - 2);
    let mut trailing = customer("bob");
    trailing.extend([0xff, 0xff]);
    let r = send(
        &b,
        "orders",
        &[
            framed(id, &[0], &order("o-3")),          // 0: good
            framed(id, &[0], &truncated),             // 1: cut short
            framed(id, &[2, 2], &trailing),           // 2: trailing garbage
            framed(id, &[2, 4], &customer("eve")),    // 3: index 2: no such message
            framed(id, &[4, 2, 0], &customer("eve")), // 4: [1, 0]: Customer has no nested message
            framed(other, &[0], &[]),                 // 5: not registered under orders-value
            framed(id, &[2, 2], &varint_field(9, 1)), // 6: field 9 is not in Customer
            framed(id, &[0], &len_field(1, &[0xff])), // 7: a string that is not UTF-8
            framed(id, &[2], &[]),                    // 8: indexes cut short
        ],
    );
    let found = refused(&r);
    let codes: Vec<(u64, &str)> = found.iter().map(|(i, c, _)| (*i, c.as_str())).collect();
    assert_eq!(
        codes,
        [
            (1, "protobuf-decode"),
            (2, "protobuf-decode"),
            (3, "protobuf-message-index"),
            (4, "protobuf-message-index"),
            (5, "schema-not-allowed"),
            (6, "protobuf-decode"),
            (7, "protobuf-decode"),
            (8, "wire-format"),
        ],
        "{:?}",
        r.body
    );
    let reason = |i: u64| found.iter().find(|(j, _, _)| *j == i).unwrap().2.as_str();
    assert!(
        reason(1).starts_with("value: protobuf payload does not decode as message com.acme.Order: "),
        "{}",
        reason(1)
    );
    assert!(reason(2).contains("as message com.acme.Customer"), "{}", reason(2));
    assert_eq!(
        reason(3),
        "value: message index 2 at depth 0 names no message: the schema has 2 top-level messages"
    );
    assert_eq!(
        reason(4),
        "value: message index 0 at depth 1 names no message: com.acme.Customer has 0 nested messages"
    );
    assert!(reason(5).contains(&format!("schema id {other} is not registered under this topic's subject")));
    assert!(reason(6).contains("field number 9 is not a field of com.acme.Customer"), "{}", reason(6));
    // The batch is refused as a whole.
    assert_eq!(high_watermark(&b, "orders"), 5);
}

#[test]
fn record_name_strategy_takes_the_subject_from_the_selected_message() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("events", 1);
    // A Customer producer registers the whole file under the Customer's full name.
    let id = register(&b, "com.acme.Customer", SHOP);
    // Under a TopicNameStrategy subject: not a record name.
    let topic_named = register(&b, "events-value", "syntax = \"proto3\";\nmessage Event { string x = 1; }\n");
    bind(&b, "events", json!({"subject.name.strategy": "record"}));

    let r = send(&b, "events", &[framed(id, &[2, 2], &customer("ada"))]);
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = send(
        &b,
        "events",
        &[
            framed(id, &[0], &order("o-1")),       // com.acme.Order: not a subject
            framed(id, &[4, 0, 0], &line("s", 1)), // com.acme.Order.Line: not a subject
            framed(topic_named, &[0], &[]),        // registered under events-value only
        ],
    );
    let found = refused(&r);
    let codes: Vec<&str> = found.iter().map(|(_, c, _)| c.as_str()).collect();
    assert_eq!(codes, ["schema-not-allowed"; 3], "{:?}", r.body);
    assert!(
        found[0].2.contains(&format!(
            "the message indexes select com.acme.Order, but schema {id} is registered under [com.acme.Customer]"
        )),
        "{}",
        found[0].2
    );

    // An Order producer registers the same file under the Order's name: the same
    // id, and from the next produce on its Orders are accepted too.
    assert_eq!(register(&b, "com.acme.Order", SHOP), id);
    let r = send(&b, "events", &[framed(id, &[0], &order("o-1")), framed(id, &[2, 2], &customer("bob"))]);
    assert_eq!(r.status, 200, "{:?}", r.body);
    // A nested message is its own record name.
    assert_eq!(register(&b, "com.acme.Order.Line", SHOP), id);
    let r = send(&b, "events", &[framed(id, &[4, 0, 0], &line("s", 1))]);
    assert_eq!(r.status, 200, "{:?}", r.body);
    // Decoding still applies.
    let r = send(&b, "events", &[framed(id, &[0], &[0xff])]);
    assert_eq!(refused(&r)[0].1, "protobuf-decode", "{:?}", r.body);
    assert_eq!(high_watermark(&b, "events"), 4);
}

#[test]
fn avro_records_may_use_named_types_from_referenced_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("payments", 1);
    let currency = r#"{"type": "enum", "name": "Currency", "namespace": "m", "symbols": ["EUR", "USD"]}"#;
    let money = r#"{"type": "record", "name": "Money", "namespace": "m",
        "fields": [{"name": "cents", "type": "long"}, {"name": "currency", "type": "m.Currency"}]}"#;
    let payment = r#"{"type": "record", "name": "Payment", "namespace": "p",
        "fields": [{"name": "id", "type": "string"}, {"name": "amount", "type": "m.Money"}]}"#;
    register_with(&b, "currency", "AVRO", currency, json!([]));
    register_with(
        &b,
        "money",
        "AVRO",
        money,
        json!([{"name": "m.Currency", "subject": "currency", "version": 1}]),
    );
    let id = register_with(
        &b,
        "payments-value",
        "AVRO",
        payment,
        json!([{"name": "m.Money", "subject": "money", "version": 1}]),
    );
    bind(&b, "payments", json!({}));

    // id "p1" (zigzag length 4), cents 21 (zigzag 42), currency USD (index 1, zigzag 2).
    let good = framed_plain(id, &[4, b'p', b'1', 42, 2]);
    let r = send(&b, "payments", std::slice::from_ref(&good));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = send(
        &b,
        "payments",
        &[
            good,
            framed_plain(id, &[4, b'p', b'2', 42, 8]), // 1: currency index 4: the enum has 2 symbols
            framed_plain(id, &[4, b'p', b'3', 42]),    // 2: cut short inside Money
        ],
    );
    let found = refused(&r);
    let codes: Vec<(u64, &str)> = found.iter().map(|(i, c, _)| (*i, c.as_str())).collect();
    assert_eq!(codes, [(1, "avro-decode"), (2, "avro-decode")], "{:?}", r.body);
    assert!(found.iter().all(|(_, _, reason)| reason.starts_with("value: ")), "{found:?}");
    assert_eq!(high_watermark(&b, "payments"), 1);
}

#[test]
fn json_refs_may_name_referenced_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("customers", 1);
    let address = r#"{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
        "definitions": {"Zip": {"type": "string", "pattern": "^[0-9]{5}$"}}}"#;
    let customer = r#"{"type": "object", "properties": {
        "address": {"$ref": "address.json"},
        "zip": {"$ref": "address.json#/definitions/Zip"}}}"#;
    register_with(&b, "address", "JSON", address, json!([]));
    let id = register_with(
        &b,
        "customers-value",
        "JSON",
        customer,
        json!([{"name": "address.json", "subject": "address", "version": 1}]),
    );
    bind(&b, "customers", json!({}));

    let good = framed_plain(id, br#"{"address": {"city": "Oslo"}, "zip": "01234"}"#);
    let r = send(&b, "customers", std::slice::from_ref(&good));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = send(
        &b,
        "customers",
        &[
            good,
            framed_plain(id, br#"{"address": {"city": 5}}"#), // 1: city is not a string
            framed_plain(id, br#"{"zip": "12"}"#),            // 2: not a Zip
        ],
    );
    let found = refused(&r);
    let codes: Vec<(u64, &str)> = found.iter().map(|(i, c, _)| (*i, c.as_str())).collect();
    assert_eq!(codes, [(1, "schema-mismatch"), (2, "schema-mismatch")], "{:?}", r.body);
    assert!(found[0].2.starts_with("value: at `/address/city`: "), "{}", found[0].2);
    assert!(found[1].2.starts_with("value: at `/zip`: "), "{}", found[1].2);
    assert_eq!(high_watermark(&b, "customers"), 1);
}

#[test]
fn protobuf_imports_may_name_referenced_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    b.create_topic("invoices", 1);
    let money = "syntax = \"proto3\";\npackage m;\n\nmessage Money {\n  int64 cents = 1;\n}\n";
    let invoice = "syntax = \"proto3\";\npackage b;\n\nimport \"m/money.proto\";\n\n\
                   message Invoice {\n  string id = 1;\n  m.Money total = 2;\n}\n";
    register(&b, "money", money);
    let id = register_with(
        &b,
        "invoices-value",
        "PROTOBUF",
        invoice,
        json!([{"name": "m/money.proto", "subject": "money", "version": 1}]),
    );
    bind(&b, "invoices", json!({}));

    let invoice = |total: &[u8]| [len_field(1, b"i-1"), len_field(2, total)].concat();
    let good = framed(id, &[0], &invoice(&varint_field(1, 5)));
    let r = send(&b, "invoices", std::slice::from_ref(&good));
    assert_eq!(r.status, 200, "{:?}", r.body);
    let r = send(
        &b,
        "invoices",
        &[
            good,
            framed(id, &[0], &invoice(&varint_field(7, 1))), // 1: field 7 is not in Money
            framed(id, &[0], &invoice(&len_field(1, b"x"))), // 2: cents with the wrong wire type
        ],
    );
    let found = refused(&r);
    let codes: Vec<(u64, &str)> = found.iter().map(|(i, c, _)| (*i, c.as_str())).collect();
    assert_eq!(codes, [(1, "protobuf-decode"), (2, "protobuf-decode")], "{:?}", r.body);
    assert!(found[0].2.contains("field number 7 is not a field of m.Money"), "{}", found[0].2);
    assert!(
        found[1].2.starts_with("value: protobuf payload does not decode as message b.Invoice: "),
        "{}",
        found[1].2
    );
    assert_eq!(high_watermark(&b, "invoices"), 1);
}
