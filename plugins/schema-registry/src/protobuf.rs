//! Protobuf payloads. Confluent's Protobuf serializers write, after the 5-byte
//! header, the message indexes that select the record's message type in the
//! registered schema (a zigzag varint count, then that many zigzag varint
//! indexes: the first into the file's top-level messages, each next one into the
//! nested messages of the one before, counting declared messages only; a count of 0, the single byte 0, stands for
//! `[0]`, the first message), then the message itself.
//!
//! A schema is compiled once, in `configure`: `.proto` text or base64 of a
//! `FileDescriptorProto`, as the registry stores what was registered (the same
//! reading as the `protobuf-compat` checker's), with its references (the
//! registry's, each in either form) importable by their names and the
//! well-known types (`google/protobuf/*.proto`) by theirs. The message tree is kept as
//! a table, so selecting a message per record walks slices and allocates nothing.

use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage, Value};
use prost_types::FileDescriptorProto;
use std::collections::HashMap;

use es_protobuf_files::{Resolver, looks_like_base64};
use protox::Compiler;
use protox::file::File;

/// The file name a schema given as `.proto` text is compiled under.
const TEXT_FILE_NAME: &str = "schema.proto";
/// The most message indexes a record may carry (nesting depth).
const MAX_INDEXES: i64 = 100;

/// A violation: its code and reason.
pub type Finding = (&'static str, String);

/// A compiled Protobuf schema.
pub struct ProtobufSchema {
    /// The file's top-level messages in declaration order, each with its declared
    /// nested ones. A map field's synthetic entry message is not one: Confluent's
    /// Java serializer and deserializer count the messages of the `.proto` file,
    /// where a map is a field (its Python and Go clients count the descriptor's
    /// nested types, map entries included, which differs when a map field is
    /// declared before a nested message).
    messages: Vec<MessageNode>,
    /// With RecordNameStrategy, the subjects this schema is registered under: the
    /// selected message's full name must be one of them. `None`: any message.
    subjects: Option<Vec<String>>,
}

struct MessageNode {
    descriptor: MessageDescriptor,
    children: Vec<MessageNode>,
}

impl MessageNode {
    fn new(descriptor: MessageDescriptor) -> Self {
        let children =
            descriptor.child_messages().filter(|m| !m.is_map_entry()).map(MessageNode::new).collect();
        MessageNode { descriptor, children }
    }
}

impl ProtobufSchema {
    /// Compiles `.proto` text or base64 of a `FileDescriptorProto` whose imports
    /// may name the `references` (import path, schema in either form).
    pub fn parse(
        input: &str,
        references: &[(&str, &str)],
        subjects: Option<Vec<String>>,
    ) -> Result<Self, String> {
        let file = if looks_like_base64(input) {
            File::from_file_descriptor_proto(decode_descriptor(input, TEXT_FILE_NAME)?)
        } else {
            File::from_source(TEXT_FILE_NAME, input).map_err(|e| format!("invalid .proto schema: {e}"))?
        };
        let mut imports = HashMap::with_capacity(references.len());
        for &(name, text) in references {
            let in_reference = |e: String| format!("the referenced schema `{name}`: {e}");
            let file = if looks_like_base64(text) {
                let mut descriptor = decode_descriptor(text, name).map_err(in_reference)?;
                // The import names it by the reference's name, whatever it called itself.
                descriptor.name = Some(name.to_owned());
                File::from_file_descriptor_proto(descriptor)
            } else {
                File::from_source(name, text)
                    .map_err(|e| in_reference(format!("invalid .proto schema: {e}")))?
            };
            imports.insert(name.to_owned(), file);
        }
        let name = file.name().to_owned();
        let mut compiler = Compiler::with_file_resolver(Resolver { name: name.clone(), file, imports });
        compiler.include_imports(true);
        compiler.open_file(&name).map_err(|e| match e.file() {
            Some(file) if file != name && references.iter().any(|(n, _)| *n == file) => {
                format!("the referenced schema `{file}`: invalid Protobuf schema: {e}")
            }
            _ => format!("invalid Protobuf schema: {e}"),
        })?;
        let file = compiler
            .descriptor_pool()
            .get_file_by_name(&name)
            .ok_or_else(|| format!("invalid Protobuf schema: the compiled file `{name}` is missing"))?;
        let messages: Vec<MessageNode> = file.messages().map(MessageNode::new).collect();
        if messages.is_empty() {
            return Err("invalid Protobuf schema: it defines no message type".into());
        }
        Ok(ProtobufSchema { messages, subjects })
    }

    /// Checks a payload (what follows the 5-byte header) written with this schema.
    pub fn check(&self, id: u32, mut payload: &[u8]) -> Result<(), Finding> {
        let message = self.select(&mut payload)?;
        let name = message.full_name();
        if let Some(subjects) = &self.subjects
            && !subjects.iter().any(|s| s == name)
        {
            return Err((
                "schema-not-allowed",
                format!(
                    "the message indexes select {name}, but schema {id} is registered under [{}], \
                     not under that name (RecordNameStrategy)",
                    subjects.join(", ")
                ),
            ));
        }
        let decoded = DynamicMessage::decode(message.clone(), payload).map_err(|e| {
            ("protobuf-decode", format!("protobuf payload does not decode as message {name}: {e}"))
        })?;
        // A field number the message does not define: the payload was not written
        // with the schema its id names (or trailing bytes happened to parse).
        if let Some((number, within)) = first_unknown(&decoded) {
            return Err((
                "protobuf-decode",
                format!(
                    "protobuf payload does not decode as message {name}: field number {number} is not a field of {} in schema {id}",
                    within.full_name()
                ),
            ));
        }
        Ok(())
    }

    /// Reads the message indexes off the front of `payload` and returns the
    /// message they select.
    fn select(&self, payload: &mut &[u8]) -> Result<&MessageDescriptor, Finding> {
        let count = varint(payload)?;
        if !(0..=MAX_INDEXES).contains(&count) {
            return Err(bad_indexes(format!("count {count} is out of range (0 to {MAX_INDEXES})")));
        }
        let mut level: &[MessageNode] = &self.messages;
        let mut selected = &self.messages[0];
        for depth in 0..count {
            let index = varint(payload)?;
            let node = usize::try_from(index)
                .map_err(|_| bad_indexes(format!("index {index} is negative")))
                .map(|i| level.get(i))?;
            let Some(node) = node else {
                let within = if depth == 0 {
                    "the schema has".to_owned()
                } else {
                    format!("{} has", selected.descriptor.full_name())
                };
                return Err((
                    "protobuf-message-index",
                    format!(
                        "message index {index} at depth {depth} names no message: {within} {} {}",
                        level.len(),
                        if depth == 0 { "top-level messages" } else { "nested messages" }
                    ),
                ));
            };
            selected = node;
            level = &node.children;
        }
        Ok(&selected.descriptor)
    }

    /// The full names of every message in the schema, nested ones included.
    #[cfg(test)]
    fn message_names(&self) -> Vec<String> {
        fn walk(nodes: &[MessageNode], out: &mut Vec<String>) {
            for n in nodes {
                out.push(n.descriptor.full_name().to_owned());
                walk(&n.children, out);
            }
        }
        let mut out = Vec::new();
        walk(&self.messages, &mut out);
        out
    }
}

fn bad_indexes(why: String) -> Finding {
    ("wire-format", format!("Protobuf message indexes: {why}"))
}

/// One zigzag varint.
fn varint(buf: &mut &[u8]) -> Result<i64, Finding> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let Some((&byte, rest)) = buf.split_first() else { return Err(bad_indexes("cut short".into())) };
        *buf = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok((value >> 1) as i64 ^ -((value & 1) as i64));
        }
    }
    Err(bad_indexes("a varint longer than 10 bytes".into()))
}

/// The first unknown field in a decoded message or any message inside it: its
/// number and the message type it appeared in.
fn first_unknown(message: &DynamicMessage) -> Option<(u32, MessageDescriptor)> {
    if let Some(field) = message.unknown_fields().next() {
        return Some((field.number(), message.descriptor()));
    }
    message
        .fields()
        .find_map(|(_, value)| unknown_in(value))
        .or_else(|| message.extensions().find_map(|(_, value)| unknown_in(value)))
}

fn unknown_in(value: &Value) -> Option<(u32, MessageDescriptor)> {
    match value {
        Value::Message(m) => first_unknown(m),
        Value::List(items) => items.iter().find_map(unknown_in),
        Value::Map(entries) => entries.values().find_map(unknown_in),
        _ => None,
    }
}

/// A base64 `FileDescriptorProto`; one without a name gets `default_name`.
fn decode_descriptor(input: &str, default_name: &str) -> Result<FileDescriptorProto, String> {
    es_protobuf_files::decode_descriptor(input, default_name).map_err(|why| {
        format!("invalid Protobuf schema: neither .proto text nor base64 of a FileDescriptorProto ({why})")
    })
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use prost::Message;

    use super::*;

    const SHOP: &str = r#"
        syntax = "proto3";
        package com.acme;
        import "google/protobuf/timestamp.proto";
        message Order {
          string id = 1;
          repeated Line lines = 2;
          map<string, Line> by_sku = 3;
          google.protobuf.Timestamp at = 4;
          message Line { string sku = 1; int32 quantity = 2; }
        }
        message Customer { string name = 1; }
    "#;

    fn shop() -> ProtobufSchema {
        ProtobufSchema::parse(SHOP, &[], None).unwrap()
    }

    /// A field's key: its number and wire type.
    fn tag(number: u8, wire: u8) -> u8 {
        number << 3 | wire
    }

    fn string_field(number: u8, s: &str) -> Vec<u8> {
        let mut out = vec![tag(number, 2), s.len() as u8];
        out.extend_from_slice(s.as_bytes());
        out
    }

    /// Message indexes then the message.
    fn framed(indexes: &[u8], message: &[u8]) -> Vec<u8> {
        let mut out = indexes.to_vec();
        out.extend_from_slice(message);
        out
    }

    fn code(r: Result<(), Finding>) -> &'static str {
        r.expect_err("expected a violation").0
    }

    #[test]
    fn the_message_tree_holds_declared_messages_without_map_entries() {
        assert_eq!(shop().message_names(), ["com.acme.Order", "com.acme.Order.Line", "com.acme.Customer"]);
    }

    #[test]
    fn good_payloads_of_each_message_decode() {
        let s = shop();
        let line = [string_field(1, "sku-1"), vec![tag(2, 0), 3]].concat();
        let mut order = string_field(1, "o-1");
        order.extend([tag(2, 2), line.len() as u8]);
        order.extend(&line);
        // by_sku {"sku-1": line}: a map entry is key 1, value 2.
        let entry = [string_field(1, "sku-1"), vec![tag(2, 2), line.len() as u8], line.clone()].concat();
        order.extend([tag(3, 2), entry.len() as u8]);
        order.extend(&entry);
        // [0] written as the single byte 0, and as count 1, index 0.
        s.check(1, &framed(&[0], &order)).unwrap();
        s.check(1, &framed(&[2, 0], &order)).unwrap();
        // [1]: Customer; [0, 0]: Order.Line.
        s.check(1, &framed(&[2, 2], &string_field(1, "ada"))).unwrap();
        s.check(1, &framed(&[4, 0, 0], &line)).unwrap();
        // An empty message is a valid message.
        s.check(1, &[0]).unwrap();
    }

    #[test]
    fn payloads_that_do_not_decode_are_refused() {
        let s = shop();
        // A string cut short.
        let mut cut = string_field(1, "o-1");
        cut.pop();
        let err = s.check(1, &framed(&[0], &cut)).unwrap_err();
        assert_eq!(err.0, "protobuf-decode");
        assert!(
            err.1.starts_with("protobuf payload does not decode as message com.acme.Order: "),
            "{}",
            err.1
        );
        // A known field with the wrong wire type (id is a string, sent as a varint).
        assert_eq!(code(s.check(1, &framed(&[0], &[tag(1, 0), 1]))), "protobuf-decode");
        // Not UTF-8 in a string field.
        assert_eq!(code(s.check(1, &framed(&[0], &[tag(1, 2), 2, 0xff, 0xfe]))), "protobuf-decode");
        // Field number 0, wire type 7.
        assert_eq!(code(s.check(1, &framed(&[0], &[0xff]))), "protobuf-decode");
    }

    #[test]
    fn fields_the_schema_does_not_define_are_refused_even_when_nested() {
        let s = shop();
        let err = s.check(7, &framed(&[0], &[tag(9, 0), 1])).unwrap_err();
        assert_eq!(err.0, "protobuf-decode");
        assert!(err.1.contains("field number 9 is not a field of com.acme.Order in schema 7"), "{}", err.1);
        let line = [tag(5, 0), 1];
        let mut order = vec![tag(2, 2), line.len() as u8];
        order.extend(line);
        let err = s.check(7, &framed(&[0], &order)).unwrap_err();
        assert!(err.1.contains("field number 5 is not a field of com.acme.Order.Line"), "{}", err.1);
        // Inside a map value.
        let entry = [vec![tag(2, 2), line.len() as u8], line.to_vec()].concat();
        let order = [vec![tag(3, 2), entry.len() as u8], entry].concat();
        let err = s.check(7, &framed(&[0], &order)).unwrap_err();
        assert!(err.1.contains("field number 5 is not a field of com.acme.Order.Line"), "{}", err.1);
    }

    #[test]
    fn indexes_outside_the_schema_are_refused() {
        let s = shop();
        let err = s.check(1, &framed(&[2, 4], &[])).unwrap_err();
        assert_eq!(err.0, "protobuf-message-index");
        assert_eq!(err.1, "message index 2 at depth 0 names no message: the schema has 2 top-level messages");
        let err = s.check(1, &framed(&[4, 2, 0], &[])).unwrap_err();
        assert_eq!(
            err.1,
            "message index 0 at depth 1 names no message: com.acme.Customer has 0 nested messages"
        );
        // Malformed index lists are framing errors.
        assert_eq!(code(s.check(1, &[])), "wire-format");
        assert_eq!(code(s.check(1, &[2])), "wire-format");
        assert_eq!(code(s.check(1, &[2, 1])), "wire-format"); // index -1
        assert_eq!(code(s.check(1, &[1])), "wire-format"); // count -1
        assert_eq!(code(s.check(1, &[0x80; 11])), "wire-format");
    }

    #[test]
    fn record_name_strategy_checks_the_selected_message() {
        let s = ProtobufSchema::parse(SHOP, &[], Some(vec!["com.acme.Customer".into()])).unwrap();
        s.check(1, &framed(&[2, 2], &string_field(1, "ada"))).unwrap();
        let err = s.check(1, &framed(&[0], &[])).unwrap_err();
        assert_eq!(err.0, "schema-not-allowed");
        assert!(err.1.starts_with("the message indexes select com.acme.Order, but schema 1"), "{}", err.1);
        let nested = ProtobufSchema::parse(SHOP, &[], Some(vec!["com.acme.Order.Line".into()])).unwrap();
        nested.check(1, &framed(&[4, 0, 0], &[])).unwrap();
    }

    #[test]
    fn base64_descriptors_compile() {
        let descriptor = FileDescriptorProto {
            name: Some("py/reading.proto".into()),
            package: Some("py".into()),
            syntax: Some("proto3".into()),
            message_type: vec![prost_types::DescriptorProto {
                name: Some("Reading".into()),
                field: vec![prost_types::FieldDescriptorProto {
                    name: Some("sensor".into()),
                    number: Some(1),
                    r#type: Some(prost_types::field_descriptor_proto::Type::String as i32),
                    label: Some(prost_types::field_descriptor_proto::Label::Optional as i32),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = base64::engine::general_purpose::STANDARD.encode(descriptor.encode_to_vec());
        let s = ProtobufSchema::parse(&text, &[], None).unwrap();
        assert_eq!(s.message_names(), ["py.Reading"]);
        s.check(1, &framed(&[0], &string_field(1, "t1"))).unwrap();
    }

    #[test]
    fn references_are_imports_by_name_in_either_form() {
        let money = "syntax = \"proto3\";\npackage m;\nmessage Money { int64 cents = 1; }\n";
        let order = "syntax = \"proto3\";\nimport \"m/money.proto\";\nmessage Order { m.Money total = 1; }\n";
        let total = [tag(1, 0), 5];
        let good = framed(&[0], &[vec![tag(1, 2), total.len() as u8], total.to_vec()].concat());
        let s = ProtobufSchema::parse(order, &[("m/money.proto", money)], None).unwrap();
        assert_eq!(s.message_names(), ["Order"]);
        s.check(1, &good).unwrap();
        // A field Money does not define, inside the referenced message.
        let err = s.check(1, &framed(&[0], &[tag(1, 2), 2, tag(7, 0), 1])).unwrap_err();
        assert!(err.1.contains("field number 7 is not a field of m.Money"), "{}", err.1);

        // The referenced file as a base64 descriptor under another name of its own.
        let pool = {
            let mut compiler = Compiler::with_file_resolver(Resolver {
                name: "own.proto".into(),
                file: File::from_source("own.proto", money).unwrap(),
                imports: HashMap::new(),
            });
            compiler.open_file("own.proto").unwrap();
            compiler.file_descriptor_set()
        };
        let descriptor = base64::engine::general_purpose::STANDARD.encode(pool.file[0].encode_to_vec());
        let s = ProtobufSchema::parse(order, &[("m/money.proto", &descriptor)], None).unwrap();
        s.check(1, &good).unwrap();

        // An error in a reference says which.
        let err = ProtobufSchema::parse(order, &[("m/money.proto", "syntax = \"proto3\";\nmessage {")], None)
            .err()
            .unwrap();
        assert!(err.starts_with("the referenced schema `m/money.proto`: "), "{err}");
    }

    #[test]
    fn schemas_without_messages_or_with_unknown_imports_are_refused() {
        assert!(ProtobufSchema::parse("syntax = \"proto3\";\nenum E { A = 0; }\n", &[], None).is_err());
        let err =
            ProtobufSchema::parse("syntax = \"proto3\";\nimport \"other.proto\";\nmessage M {}\n", &[], None)
                .err()
                .unwrap();
        assert!(err.contains("other.proto"), "{err}");
    }
}
