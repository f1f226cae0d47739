//! The canonical `.proto` text of a compiled schema, which the registry stores and
//! returns (Confluent returns Protobuf schemas as `.proto` text too).
//!
//! The rendering is deterministic and parses back to the same descriptor: types
//! are written fully qualified (`.shop.Order`), messages keep their declaration
//! order (serialized records name a message by its index), imports are sorted,
//! options come in field-number order, and comments and formatting are dropped.
//! Inside a file, messages come first, then enums, extensions and services.

use std::fmt::Write;

use prost_reflect::{
    DynamicMessage, EnumDescriptor, ExtensionDescriptor, FieldDescriptor, FileDescriptor, Kind, MapKey,
    MessageDescriptor, ServiceDescriptor, Syntax, Value,
};
use prost_types::field_descriptor_proto::{Label, Type};

/// The canonical text of `file`.
pub fn render(file: &FileDescriptor) -> String {
    let mut out = Out { text: String::new(), depth: 0, proto3: file.syntax() == Syntax::Proto3 };
    let syntax = if out.proto3 { "proto3" } else { "proto2" };
    out.line(&format!("syntax = \"{syntax}\";"));
    if !file.package_name().is_empty() {
        out.line(&format!("package {};", file.package_name()));
    }
    imports(&mut out, file);
    out.options(&file.options());
    for message in file.messages() {
        out.message(&message);
    }
    for enumeration in file.enums() {
        out.enumeration(&enumeration);
    }
    out.extensions(file.extensions());
    for service in file.services() {
        out.service(&service);
    }
    out.text
}

fn imports(out: &mut Out, file: &FileDescriptor) {
    let proto = file.file_descriptor_proto();
    let mut imports: Vec<(String, &str)> = proto
        .dependency
        .iter()
        .enumerate()
        .map(|(index, name)| {
            let index = i32::try_from(index).unwrap_or(i32::MAX);
            let kind = if proto.public_dependency.contains(&index) {
                "public "
            } else if proto.weak_dependency.contains(&index) {
                "weak "
            } else {
                ""
            };
            (name.clone(), kind)
        })
        .collect();
    imports.sort();
    for (name, kind) in imports {
        out.line(&format!("import {kind}{};", quote(name.as_bytes())));
    }
}

struct Out {
    text: String,
    depth: usize,
    proto3: bool,
}

impl Out {
    fn line(&mut self, line: &str) {
        for _ in 0..self.depth {
            self.text.push_str("  ");
        }
        self.text.push_str(line);
        self.text.push('\n');
    }

    fn open(&mut self, header: &str) {
        self.line(&format!("{header} {{"));
        self.depth += 1;
    }

    fn close(&mut self) {
        self.depth -= 1;
        self.line("}");
    }

    /// `option name = value;` for every option set, in field-number order.
    fn options(&mut self, options: &DynamicMessage) {
        for (name, value) in option_values(options) {
            self.line(&format!("option {name} = {value};"));
        }
    }

    fn message(&mut self, message: &MessageDescriptor) {
        self.open(&format!("message {}", message.name()));
        self.message_body(message);
        self.close();
    }

    fn message_body(&mut self, message: &MessageDescriptor) {
        self.options(&message.options());
        let proto = message.descriptor_proto();
        let mut oneofs_done = Vec::new();
        for field in message.fields() {
            match field.containing_oneof().filter(|o| !o.is_synthetic()) {
                Some(oneof) if oneofs_done.contains(&oneof.name().to_owned()) => {}
                Some(oneof) => {
                    oneofs_done.push(oneof.name().to_owned());
                    self.open(&format!("oneof {}", oneof.name()));
                    self.options(&oneof.options());
                    for member in oneof.fields() {
                        self.field(&member, false);
                    }
                    self.close();
                }
                None => self.field(&field, true),
            }
        }
        for range in &proto.reserved_range {
            self.line(&format!(
                "reserved {};",
                range_text(range.start(), range.end() - 1, MESSAGE_FIELD_MAX)
            ));
        }
        if !proto.reserved_name.is_empty() {
            let names: Vec<String> = proto.reserved_name.iter().map(|n| quote(n.as_bytes())).collect();
            self.line(&format!("reserved {};", names.join(", ")));
        }
        for range in &proto.extension_range {
            let mut line =
                format!("extensions {}", range_text(range.start(), range.end() - 1, MESSAGE_FIELD_MAX));
            if let Some(options) = &range.options {
                let values = option_list(
                    &message.parent_pool().get_message_by_name("google.protobuf.ExtensionRangeOptions"),
                    options,
                );
                if !values.is_empty() {
                    let _ = write!(line, " [{}]", values.join(", "));
                }
            }
            line.push(';');
            self.line(&line);
        }
        for child in message.child_messages() {
            if !child.is_map_entry() && !is_group_type(message, &child) {
                self.message(&child);
            }
        }
        for enumeration in message.child_enums() {
            self.enumeration(&enumeration);
        }
        self.extensions(message.child_extensions());
    }

    /// One field; `labelled` is false inside a oneof, where fields take no label.
    fn field(&mut self, field: &FieldDescriptor, labelled: bool) {
        let proto = field.field_descriptor_proto();
        let mut options = Vec::new();
        if let Some(default) = &proto.default_value {
            options.push(format!("default = {}", default_text(proto.r#type(), default)));
        }
        if proto.json_name.as_deref().is_some_and(|json| json != default_json_name(field.name())) {
            options.push(format!("json_name = {}", quote(proto.json_name().as_bytes())));
        }
        options.extend(option_values(&field.options()).into_iter().map(|(n, v)| format!("{n} = {v}")));
        let label =
            if labelled && !field.is_map() { self.label(proto.label(), proto.proto3_optional()) } else { "" };
        let head = format!("{label}{} {} = {}", field_type(field), field.name(), field.number());
        let options = if options.is_empty() { String::new() } else { format!(" [{}]", options.join(", ")) };
        match (field.is_group(), field.kind()) {
            (true, Kind::Message(group)) => {
                // A group's field name is its type's name in lower case; the text
                // names the type.
                self.open(&format!("{label}group {} = {}{options}", group.name(), field.number()));
                self.message_body(&group);
                self.close();
            }
            _ => self.line(&format!("{head}{options};")),
        }
    }

    fn label(&self, label: Label, proto3_optional: bool) -> &'static str {
        match label {
            Label::Repeated => "repeated ",
            Label::Required => "required ",
            Label::Optional if !self.proto3 || proto3_optional => "optional ",
            Label::Optional => "",
        }
    }

    fn enumeration(&mut self, enumeration: &EnumDescriptor) {
        self.open(&format!("enum {}", enumeration.name()));
        self.options(&enumeration.options());
        // In declaration order: `values()` orders aliases differently.
        let declared = enumeration.enum_descriptor_proto().value.iter().map(|v| v.name());
        for value in declared.filter_map(|name| enumeration.get_value_by_name(name)) {
            let options: Vec<String> =
                option_values(&value.options()).into_iter().map(|(n, v)| format!("{n} = {v}")).collect();
            let options =
                if options.is_empty() { String::new() } else { format!(" [{}]", options.join(", ")) };
            self.line(&format!("{} = {}{options};", value.name(), value.number()));
        }
        let proto = enumeration.enum_descriptor_proto();
        for range in &proto.reserved_range {
            self.line(&format!("reserved {};", range_text(range.start(), range.end(), i32::MAX)));
        }
        if !proto.reserved_name.is_empty() {
            let names: Vec<String> = proto.reserved_name.iter().map(|n| quote(n.as_bytes())).collect();
            self.line(&format!("reserved {};", names.join(", ")));
        }
        self.close();
    }

    /// `extend` blocks, one per extended message, in order of first appearance.
    fn extensions(&mut self, extensions: impl Iterator<Item = ExtensionDescriptor>) {
        let mut blocks: Vec<(String, Vec<ExtensionDescriptor>)> = Vec::new();
        for extension in extensions {
            let extendee = format!(".{}", extension.containing_message().full_name());
            match blocks.iter_mut().find(|(name, _)| *name == extendee) {
                Some((_, list)) => list.push(extension),
                None => blocks.push((extendee, vec![extension])),
            }
        }
        for (extendee, list) in blocks {
            self.open(&format!("extend {extendee}"));
            for extension in list {
                let proto = extension.field_descriptor_proto();
                let label = match proto.label() {
                    Label::Repeated => "repeated ",
                    Label::Required => "required ",
                    Label::Optional if !self.proto3 => "optional ",
                    Label::Optional => "",
                };
                let mut options = Vec::new();
                if let Some(default) = &proto.default_value {
                    options.push(format!("default = {}", default_text(proto.r#type(), default)));
                }
                options.extend(
                    option_values(&extension.options()).into_iter().map(|(n, v)| format!("{n} = {v}")),
                );
                let options =
                    if options.is_empty() { String::new() } else { format!(" [{}]", options.join(", ")) };
                let ty = kind_name(&extension.kind());
                self.line(&format!("{label}{ty} {} = {}{options};", extension.name(), extension.number()));
            }
            self.close();
        }
    }

    fn service(&mut self, service: &ServiceDescriptor) {
        self.open(&format!("service {}", service.name()));
        self.options(&service.options());
        for method in service.methods() {
            let stream = |yes: bool| if yes { "stream " } else { "" };
            let head = format!(
                "rpc {}({}.{}) returns ({}.{})",
                method.name(),
                stream(method.is_client_streaming()),
                method.input().full_name(),
                stream(method.is_server_streaming()),
                method.output().full_name()
            );
            let options = option_values(&method.options());
            if options.is_empty() {
                self.line(&format!("{head};"));
            } else {
                self.open(&head);
                for (name, value) in options {
                    self.line(&format!("option {name} = {value};"));
                }
                self.close();
            }
        }
        self.close();
    }
}

/// The largest field number; `to max` in a range.
const MESSAGE_FIELD_MAX: i32 = 536_870_911;

/// `5`, `5 to 9` or `5 to max` for an inclusive range.
fn range_text(start: i32, end: i32, max: i32) -> String {
    if start == end {
        start.to_string()
    } else if end == max {
        format!("{start} to max")
    } else {
        format!("{start} to {end}")
    }
}

/// Whether `child` is the type of a group field of `parent`; it is written inside
/// the field, not as a nested message.
fn is_group_type(parent: &MessageDescriptor, child: &MessageDescriptor) -> bool {
    parent.fields().any(|f| f.is_group() && matches!(f.kind(), Kind::Message(m) if m == *child))
}

fn field_type(field: &FieldDescriptor) -> String {
    if field.is_map()
        && let Kind::Message(entry) = field.kind()
    {
        let key = kind_name(&entry.map_entry_key_field().kind());
        let value = kind_name(&entry.map_entry_value_field().kind());
        return format!("map<{key}, {value}>");
    }
    kind_name(&field.kind())
}

fn kind_name(kind: &Kind) -> String {
    match kind {
        Kind::Double => "double".into(),
        Kind::Float => "float".into(),
        Kind::Int32 => "int32".into(),
        Kind::Int64 => "int64".into(),
        Kind::Uint32 => "uint32".into(),
        Kind::Uint64 => "uint64".into(),
        Kind::Sint32 => "sint32".into(),
        Kind::Sint64 => "sint64".into(),
        Kind::Fixed32 => "fixed32".into(),
        Kind::Fixed64 => "fixed64".into(),
        Kind::Sfixed32 => "sfixed32".into(),
        Kind::Sfixed64 => "sfixed64".into(),
        Kind::Bool => "bool".into(),
        Kind::String => "string".into(),
        Kind::Bytes => "bytes".into(),
        Kind::Message(message) => format!(".{}", message.full_name()),
        Kind::Enum(enumeration) => format!(".{}", enumeration.full_name()),
    }
}

/// A proto2 default as the descriptor stores it: strings unescaped, bytes
/// C-escaped, enum values by name, numbers as written.
fn default_text(ty: Type, default: &str) -> String {
    match ty {
        Type::String => quote(default.as_bytes()),
        Type::Bytes => format!("\"{default}\""),
        _ => default.to_owned(),
    }
}

/// protoc's JSON name: underscores dropped, the letter after each one upper-cased.
fn default_json_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut upper = false;
    for c in name.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// Every option set in `options` as (name, value text), in field-number order,
/// extensions (custom options) after the standard ones; a repeated option gives
/// one pair per element.
fn option_values(options: &DynamicMessage) -> Vec<(String, String)> {
    let mut fields: Vec<(FieldDescriptor, &Value)> =
        options.fields().filter(|(f, _)| f.name() != "uninterpreted_option").collect();
    fields.sort_by_key(|(f, _)| f.number());
    let mut out = Vec::new();
    for (field, value) in fields {
        push_values(&mut out, field.name().to_owned(), &field.kind(), value);
    }
    let mut extensions: Vec<(ExtensionDescriptor, &Value)> = options.extensions().collect();
    extensions.sort_by_key(|(e, _)| e.number());
    for (extension, value) in extensions {
        push_values(&mut out, format!("({})", extension.full_name()), &extension.kind(), value);
    }
    out
}

fn push_values(out: &mut Vec<(String, String)>, name: String, kind: &Kind, value: &Value) {
    match value {
        Value::List(values) => {
            for value in values {
                out.push((name.clone(), value_text(kind, value)));
            }
        }
        value => out.push((name, value_text(kind, value))),
    }
}

/// `name = value` pairs of an options message held as a prost-types struct.
fn option_list<M: prost::Message>(descriptor: &Option<MessageDescriptor>, options: &M) -> Vec<String> {
    let Some(descriptor) = descriptor else { return Vec::new() };
    let Ok(options) = DynamicMessage::decode(descriptor.clone(), options.encode_to_vec().as_slice()) else {
        return Vec::new();
    };
    option_values(&options).into_iter().map(|(n, v)| format!("{n} = {v}")).collect()
}

fn value_text(kind: &Kind, value: &Value) -> String {
    match value {
        Value::Bool(b) => b.to_string(),
        Value::I32(n) => n.to_string(),
        Value::I64(n) => n.to_string(),
        Value::U32(n) => n.to_string(),
        Value::U64(n) => n.to_string(),
        Value::F32(x) => float_text(f64::from(*x)),
        Value::F64(x) => float_text(*x),
        Value::String(s) => quote(s.as_bytes()),
        Value::Bytes(b) => quote(b),
        Value::EnumNumber(n) => match kind {
            Kind::Enum(e) => e.get_value(*n).map_or_else(|| n.to_string(), |v| v.name().to_owned()),
            _ => n.to_string(),
        },
        Value::Message(m) => format!("{{ {} }}", m.to_text_format()),
        Value::List(values) => {
            let items: Vec<String> = values.iter().map(|v| value_text(kind, v)).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Map(map) => map_text(kind, map),
    }
}

/// A map-typed option value, as the list of entry messages it is on the wire.
fn map_text(kind: &Kind, map: &std::collections::HashMap<MapKey, Value>) -> String {
    let Kind::Message(entry) = kind else { return "[]".into() };
    let mut entries: Vec<(&MapKey, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let items: Vec<String> = entries
        .into_iter()
        .map(|(key, value)| {
            let mut message = DynamicMessage::new(entry.clone());
            message.set_field(&entry.map_entry_key_field(), Value::from(key.clone()));
            message.set_field(&entry.map_entry_value_field(), value.clone());
            format!("{{ {} }}", message.to_text_format())
        })
        .collect();
    format!("[{}]", items.join(", "))
}

fn float_text(x: f64) -> String {
    if x.is_nan() {
        "nan".into()
    } else if x.is_infinite() {
        if x > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        format!("{x:?}")
    }
}

/// A string literal: printable ASCII as is, the rest escaped (octal for bytes).
fn quote(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() + 2);
    out.push('"');
    for &b in bytes {
        match b {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            0x20..=0x7e => out.push(char::from(b)),
            _ => {
                let _ = write!(out, "\\{b:03o}");
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;

    fn normalize(text: &str) -> String {
        render(&Schema::parse(text).unwrap().file)
    }

    /// Renders, parses the rendering and renders again: the two must match, and
    /// the descriptors (without source positions) too.
    fn round_trip(text: &str) -> String {
        let first = Schema::parse(text).unwrap();
        let rendered = render(&first.file);
        let second = Schema::parse(&rendered).unwrap_or_else(|e| panic!("{e}\n{rendered}"));
        assert_eq!(render(&second.file), rendered);
        let strip = |file: &FileDescriptor| {
            let mut proto = file.file_descriptor_proto().clone();
            proto.source_code_info = None;
            proto.name = None;
            proto.dependency.sort();
            proto
        };
        assert_eq!(strip(&first.file), strip(&second.file), "{rendered}");
        rendered
    }

    #[test]
    fn proto3_round_trip() {
        let text = round_trip(
            r#"syntax = "proto3";
            // A comment that goes away.
            package shop.v1;
            import "google/protobuf/timestamp.proto";
            import "google/protobuf/wrappers.proto";
            option java_package = "com.example.shop";
            option java_multiple_files = true;
            message Order {
              string id = 1;
              google.protobuf.Timestamp placed_at = 2;
              repeated Line lines = 3 [deprecated = true];
              map<string, Status> tags = 4;
              optional int64 total = 5;
              oneof payment { string card = 6; string iban = 7 [json_name = "IBAN"]; }
              google.protobuf.StringValue note = 8;
              reserved 9, 11 to 15, 100 to max;
              reserved "old";
              message Line { int32 qty = 1; bytes sku = 2; }
              enum Status { UNKNOWN = 0; OK = 1 [deprecated = true]; reserved 5 to 9; }
            }
            enum Kind { option allow_alias = true; A = 0; B = 0; }
            service Shop { rpc Place(Order) returns (stream Order); }"#,
        );
        assert!(text.starts_with("syntax = \"proto3\";\npackage shop.v1;\n"), "{text}");
        assert!(text.contains("  repeated .shop.v1.Order.Line lines = 3 [deprecated = true];\n"), "{text}");
        assert!(text.contains("  map<string, .shop.v1.Order.Status> tags = 4;\n"), "{text}");
        assert!(text.contains("  optional int64 total = 5;\n"), "{text}");
        assert!(text.contains("    string iban = 7 [json_name = \"IBAN\"];\n"), "{text}");
        assert!(text.contains("  reserved 100 to max;\n"), "{text}");
        assert!(!text.contains("comment"), "{text}");
    }

    #[test]
    fn proto2_round_trip() {
        round_trip(
            r#"syntax = "proto2";
            package legacy;
            import "google/protobuf/descriptor.proto";
            extend google.protobuf.FieldOptions { optional string pii = 50001; }
            message User {
              required string name = 1 [(pii) = "name"];
              optional int32 age = 2 [default = -1];
              optional string nick = 3 [default = "a \"b\"\n"];
              optional bytes raw = 4 [default = "\001\377"];
              optional double ratio = 5 [default = inf];
              repeated int32 scores = 6 [packed = true];
              optional group Address = 7 { optional string city = 1; }
              extensions 100 to 199;
            }
            extend User { optional int32 level = 100; }"#,
        );
    }

    #[test]
    fn deterministic_for_equivalent_texts() {
        let a = normalize(
            "syntax = \"proto3\"; package p; import \"google/protobuf/empty.proto\"; import \"google/protobuf/any.proto\"; message M { google.protobuf.Any a = 1; }",
        );
        let b = normalize(
            "syntax=\"proto3\";\n\npackage p;\nimport \"google/protobuf/any.proto\";\nimport \"google/protobuf/empty.proto\";\nmessage M {\n  .google.protobuf.Any a = 1;\n}\n",
        );
        assert_eq!(a, b);
    }

    #[test]
    fn a_descriptor_renders_like_its_text() {
        use base64::Engine;
        use prost::Message;
        let text = "syntax = \"proto3\";\npackage shop;\nimport \"google/protobuf/timestamp.proto\";\n\
                    message Order { google.protobuf.Timestamp at = 1; map<string, int64> counts = 2; oneof o { string a = 3; } }";
        let schema = Schema::parse(text).unwrap();
        let mut proto = schema.file.file_descriptor_proto().clone();
        proto.source_code_info = None;
        let encoded = base64::engine::general_purpose::STANDARD.encode(proto.encode_to_vec());
        assert_eq!(normalize(&encoded), normalize(text));
    }
}
