//! The `.proto` text the registry stores and returns for a schema, printed as
//! Confluent Schema Registry prints it (its `ProtobufSchemaUtils` layout), so
//! clients and tools that compare schema text see the same bytes.
//!
//! Two forms, as in Confluent:
//! - `Form::Canonical` (Confluent's `canonicalString`): the schema as written,
//!   comments and layout dropped. Declarations keep their order, type names and
//!   options stay as written (a base64 descriptor's names are its qualified
//!   ones). Two texts that differ only in layout or comments print the same.
//! - `Form::Normalized` (Confluent's `normalize`): types fully qualified with a
//!   leading dot, fields, oneofs, enum values, reserved and extension ranges by
//!   number, imports and options by name, `syntax` only for proto3.
//! - `Form::IgnoreExtensions` (Confluent's `format=ignore_extensions`): the
//!   canonical print without what extensions bring: custom (parenthesized)
//!   options other than Confluent's own `(confluent.*)`, `extensions` ranges
//!   and `extend` blocks.
//!
//! Either way the layout is Confluent's: a blank line before the imports, the
//! options, the types (messages first, then enums, each group in declaration
//! order, since records name a message by its index), the `extend` blocks and the
//! services, and inside a message before the reserved ranges, options, fields,
//! oneofs, groups, extension ranges, `extend` blocks and nested types; two-space
//! indents, whitespace-only lines included; several field options one per line.

use prost_reflect::{DynamicMessage, FileDescriptor, Kind, MessageDescriptor, Value};
use prost_types::field_descriptor_proto::{Label, Type};
use prost_types::{
    DescriptorProto, EnumDescriptorProto, FieldDescriptorProto, FileDescriptorProto, ServiceDescriptorProto,
    SourceCodeInfo, UninterpretedOption,
};

use crate::schema::Schema;

/// Which of Confluent's prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Canonical,
    Normalized,
    IgnoreExtensions,
}

/// Protobuf's largest field number: a range ending there is `to max`.
const MAX_TAG: i32 = 536_870_911;

/// `schema` printed in `form`.
pub fn render(schema: &Schema, form: Form) -> String {
    let compiled = schema.file.file_descriptor_proto();
    let (proto, options) = match (form, &schema.source) {
        (Form::Canonical | Form::IgnoreExtensions, Some(source)) => (source, Options::Written),
        _ => (compiled, Options::Compiled(&schema.file)),
    };
    let printer = Printer {
        normalize: form == Form::Normalized,
        ignore_extensions: form == Form::IgnoreExtensions,
        options,
        proto3: proto.syntax() == "proto3",
        // A descriptor's map fields are its entry messages; text writes `map<K, V>`.
        maps: form == Form::Normalized || schema.source.is_some(),
        locations: if matches!(options, Options::Written) { proto.source_code_info.as_ref() } else { None },
    };
    printer.file(proto)
}

/// Where an element's options come from: the text's options as written (in
/// order, names as written), or the compiled descriptor's, custom ones included.
#[derive(Clone, Copy)]
enum Options<'a> {
    Written,
    Compiled(&'a FileDescriptor),
}

/// An element of the file, to find its compiled options.
enum Place<'a> {
    File,
    Message(&'a [usize]),
    Field(&'a [usize], &'a str),
    Oneof(&'a [usize], usize),
    Enum(&'a [usize], usize),
    EnumValue(&'a [usize], usize, &'a str),
    Service(usize),
    Method(usize, &'a str),
    Extension(&'a str),
}

/// One option: the name it sorts by (custom options without parentheses, as
/// Confluent sorts them) and its `name = value` text.
struct Opt {
    key: String,
    text: String,
}

struct Printer<'a> {
    normalize: bool,
    /// Leave out custom options, extension ranges and `extend` blocks.
    ignore_extensions: bool,
    options: Options<'a>,
    proto3: bool,
    maps: bool,
    /// The text's source positions (as written only): which ranges one
    /// `reserved` statement listed.
    locations: Option<&'a SourceCodeInfo>,
}

impl Printer<'_> {
    fn file(&self, proto: &FileDescriptorProto) -> String {
        let mut out = String::new();
        if self.proto3 || (!self.normalize && syntax_written(proto)) {
            out.push_str(&format!("syntax = \"{}\";\n", if self.proto3 { "proto3" } else { "proto2" }));
        }
        if !proto.package().is_empty() {
            out.push_str(&format!("package {};\n", proto.package()));
        }
        self.imports(&mut out, proto);
        let options =
            self.options_of(&Place::File, written(proto.options.as_ref().map(|o| &o.uninterpreted_option)));
        if !options.is_empty() {
            out.push('\n');
            for option in options {
                out.push_str(&format!("option {};\n", option.text));
            }
        }
        if !proto.message_type.is_empty() || !proto.enum_type.is_empty() {
            out.push('\n');
            for (i, message) in proto.message_type.iter().enumerate() {
                out.push_str(&self.message(message, &[i]));
            }
            for (i, enumeration) in proto.enum_type.iter().enumerate() {
                out.push_str(&self.enumeration(enumeration, &[], i));
            }
        }
        if !proto.extension.is_empty() && !self.ignore_extensions {
            out.push('\n');
            out.push_str(&self.extends(&proto.extension));
        }
        if !proto.service.is_empty() {
            out.push('\n');
            for (i, service) in proto.service.iter().enumerate() {
                out.push_str(&self.service(service, i));
            }
        }
        out
    }

    fn imports(&self, out: &mut String, proto: &FileDescriptorProto) {
        let public: Vec<usize> =
            proto.public_dependency.iter().filter_map(|i| usize::try_from(*i).ok()).collect();
        let mut plain: Vec<&str> = Vec::new();
        let mut public_names: Vec<&str> = Vec::new();
        for (i, name) in proto.dependency.iter().enumerate() {
            if public.contains(&i) { public_names.push(name) } else { plain.push(name) }
        }
        if plain.is_empty() && public_names.is_empty() {
            return;
        }
        if self.normalize {
            for list in [&mut plain, &mut public_names] {
                list.sort_unstable();
                list.dedup();
            }
        }
        out.push('\n');
        for name in plain {
            out.push_str(&format!("import \"{name}\";\n"));
        }
        for name in public_names {
            out.push_str(&format!("import public \"{name}\";\n"));
        }
    }

    /// A message; `path` is its index at each nesting level.
    fn message(&self, message: &DescriptorProto, path: &[usize]) -> String {
        let mut out = format!("message {} {{", message.name());
        let ranges: Vec<(i32, i32)> =
            message.reserved_range.iter().map(|r| (r.start(), r.end() - 1)).collect();
        let at = Reserved { element: message_location(path), ranges_field: 9, names_field: 10 };
        self.reserved(&mut out, &ranges, &message.reserved_name, &at);
        let options = self.options_of(
            &Place::Message(path),
            written(message.options.as_ref().map(|o| &o.uninterpreted_option)),
        );
        section(&mut out, options.iter().map(|o| format!("option {};\n", o.text)));
        let groups: Vec<&FieldDescriptorProto> =
            message.field.iter().filter(|f| f.r#type() == Type::Group).collect();
        let plain = message.field.iter().filter(|f| f.r#type() != Type::Group && !in_oneof(f));
        let mut plain: Vec<&FieldDescriptorProto> = plain.collect();
        if self.normalize {
            plain.sort_by_key(|f| f.number());
        }
        section(&mut out, plain.iter().map(|f| self.field(f, message, path, true)));
        section(&mut out, self.oneofs(message, path));
        section(&mut out, groups.iter().map(|g| self.group(g, message, path)));
        let mut ranges: Vec<(i32, i32)> =
            message.extension_range.iter().map(|r| (r.start(), r.end() - 1)).collect();
        if self.normalize {
            ranges.sort_unstable();
        }
        if self.ignore_extensions {
            ranges.clear();
        }
        section(&mut out, ranges.iter().map(|r| format!("extensions {};\n", self.range(*r))));
        if !message.extension.is_empty() && !self.ignore_extensions {
            out.push('\n');
            out.push_str(&indented(&self.extends(&message.extension)));
        }
        let nested: Vec<(usize, &DescriptorProto)> = message
            .nested_type
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                !(groups.iter().any(|g| type_simple_name(g) == n.name()) || self.maps && is_map_entry(n))
            })
            .collect();
        if !nested.is_empty() || !message.enum_type.is_empty() {
            out.push('\n');
            for (i, child) in nested {
                let child_path: Vec<usize> = path.iter().copied().chain([i]).collect();
                out.push_str(&indented(&self.message(child, &child_path)));
            }
            for (i, enumeration) in message.enum_type.iter().enumerate() {
                out.push_str(&indented(&self.enumeration(enumeration, path, i)));
            }
        }
        out.push_str("}\n");
        out
    }

    /// The oneofs (synthetic ones of proto3 `optional` fields left out), each
    /// with its fields; normalized, each by number and the oneofs by their first.
    fn oneofs(&self, message: &DescriptorProto, path: &[usize]) -> Vec<String> {
        let mut oneofs: Vec<(usize, Vec<&FieldDescriptorProto>)> = Vec::new();
        for (i, _) in message.oneof_decl.iter().enumerate() {
            let fields: Vec<&FieldDescriptorProto> = message
                .field
                .iter()
                .filter(|f| in_oneof(f) && usize::try_from(f.oneof_index()).ok() == Some(i))
                .collect();
            if !fields.is_empty()
                || !message
                    .field
                    .iter()
                    .any(|f| f.proto3_optional() && usize::try_from(f.oneof_index()).ok() == Some(i))
            {
                oneofs.push((i, fields));
            }
        }
        if self.normalize {
            oneofs.retain(|(_, fields)| !fields.is_empty());
            for (_, fields) in &mut oneofs {
                fields.sort_by_key(|f| f.number());
            }
            oneofs.sort_by_key(|(_, fields)| fields[0].number());
        }
        oneofs
            .into_iter()
            .map(|(i, fields)| {
                let decl = &message.oneof_decl[i];
                let mut out = format!("oneof {} {{", decl.name());
                let options = self.options_of(
                    &Place::Oneof(path, i),
                    written(decl.options.as_ref().map(|o| &o.uninterpreted_option)),
                );
                section(&mut out, options.iter().map(|o| format!("option {};\n", o.text)));
                section(&mut out, fields.iter().map(|f| self.field(f, message, path, false)));
                out.push_str("}\n");
                out
            })
            .collect()
    }

    /// One field line; `labelled` is false inside a oneof.
    fn field(
        &self,
        field: &FieldDescriptorProto,
        parent: &DescriptorProto,
        path: &[usize],
        labelled: bool,
    ) -> String {
        let map = self.map_type(field, parent);
        let label = if labelled && map.is_none() { self.label(field) } else { "" };
        let ty = map.unwrap_or_else(|| self.type_name(field));
        let options = self.field_options(field, Place::Field(path, field.name()));
        format!("{label}{ty} {} = {}{};\n", field.name(), field.number(), option_list(&options))
    }

    /// A field's options: its own, then `default` and `json_name`, as Confluent
    /// lists them (normalized: every one by name).
    fn field_options(&self, field: &FieldDescriptorProto, place: Place<'_>) -> Vec<Opt> {
        let mut options =
            self.options_of(&place, written(field.options.as_ref().map(|o| &o.uninterpreted_option)));
        if let Some(default) = &field.default_value {
            let value = match field.r#type() {
                Type::String => quote(default),
                Type::Bool | Type::Enum | Type::Message | Type::Group | Type::Bytes => default.clone(),
                _ => self.number_text(default),
            };
            options.push(Opt { key: "default".into(), text: format!("default = {value}") });
        }
        let json_written = match self.options {
            Options::Written => field.json_name.is_some(),
            // Compiled descriptors carry a json_name for every field; it was
            // written only when it is not the default one.
            Options::Compiled(_) => {
                field.json_name.as_deref().is_some_and(|j| j != default_json_name(field.name()))
            }
        };
        if json_written {
            options.push(Opt {
                key: "json_name".into(),
                text: format!("json_name = {}", quote(field.json_name())),
            });
        }
        if self.normalize {
            options.sort_by(|a, b| a.key.cmp(&b.key));
        }
        options
    }

    fn group(&self, field: &FieldDescriptorProto, parent: &DescriptorProto, path: &[usize]) -> String {
        let name = type_simple_name(field);
        let mut out = format!("{}group {name} = {} {{", self.label(field), field.number());
        if let Some((i, body)) = parent.nested_type.iter().enumerate().find(|(_, n)| n.name() == name) {
            let body_path: Vec<usize> = path.iter().copied().chain([i]).collect();
            let mut fields: Vec<&FieldDescriptorProto> = body.field.iter().collect();
            if self.normalize {
                fields.sort_by_key(|f| f.number());
            }
            section(&mut out, fields.iter().map(|f| self.field(f, body, &body_path, true)));
        }
        out.push_str("}\n");
        out
    }

    fn label(&self, field: &FieldDescriptorProto) -> &'static str {
        match field.label() {
            Label::Repeated => "repeated ",
            Label::Required => "required ",
            Label::Optional if !self.proto3 || field.proto3_optional() => "optional ",
            Label::Optional => "",
        }
    }

    /// `map<K, V>` when `field` is a map written as one.
    fn map_type(&self, field: &FieldDescriptorProto, parent: &DescriptorProto) -> Option<String> {
        if !self.maps
            || field.label() != Label::Repeated
            || field.r#type.is_some_and(|t| t != Type::Message as i32)
        {
            return None;
        }
        let entry =
            parent.nested_type.iter().find(|n| n.name() == type_simple_name(field) && is_map_entry(n))?;
        let key = entry.field.iter().find(|f| f.number() == 1)?;
        let value = entry.field.iter().find(|f| f.number() == 2)?;
        Some(format!("map<{}, {}>", self.type_name(key), self.type_name(value)))
    }

    fn type_name(&self, field: &FieldDescriptorProto) -> String {
        match field.r#type {
            Some(t) if t != Type::Message as i32 && t != Type::Enum as i32 && t != Type::Group as i32 => {
                scalar_name(field.r#type())
            }
            _ => field.type_name().to_owned(),
        }
    }

    /// An enum; `parent` is the path of the message it is nested in (empty at the
    /// top), `index` its place there.
    fn enumeration(&self, enumeration: &EnumDescriptorProto, parent: &[usize], index: usize) -> String {
        let mut out = format!("enum {} {{", enumeration.name());
        let ranges: Vec<(i32, i32)> =
            enumeration.reserved_range.iter().map(|r| (r.start(), r.end())).collect();
        let mut element = if parent.is_empty() { vec![5] } else { message_location(parent) };
        element.extend(
            [if parent.is_empty() { None } else { Some(4) }, Some(index_i32(index))].into_iter().flatten(),
        );
        let at = Reserved { element, ranges_field: 4, names_field: 5 };
        self.reserved(&mut out, &ranges, &enumeration.reserved_name, &at);
        let options = self.options_of(
            &Place::Enum(parent, index),
            written(enumeration.options.as_ref().map(|o| &o.uninterpreted_option)),
        );
        if ranges.is_empty()
            && enumeration.reserved_name.is_empty()
            && (!options.is_empty() || !enumeration.value.is_empty())
        {
            out.push('\n');
        }
        for option in &options {
            out.push_str(&indented(&format!("option {};\n", option.text)));
        }
        let mut values: Vec<_> = enumeration.value.iter().collect();
        if self.normalize {
            values.sort_by(|a, b| (a.number(), a.name()).cmp(&(b.number(), b.name())));
        }
        for value in values {
            let place = Place::EnumValue(parent, index, value.name());
            let options =
                self.options_of(&place, written(value.options.as_ref().map(|o| &o.uninterpreted_option)));
            out.push_str(&indented(&format!(
                "{} = {}{};\n",
                value.name(),
                value.number(),
                option_list(&options)
            )));
        }
        out.push_str("}\n");
        out
    }

    /// `reserved` statements, one per range or name (a descriptor keeps no
    /// grouping); normalized, by number, then the names.
    fn reserved(&self, out: &mut String, ranges: &[(i32, i32)], names: &[String], at: &Reserved) {
        if let Some(statements) = self.locations.and_then(|l| written_reserved(l, at, ranges, names)) {
            section(
                out,
                statements.into_iter().map(|items| {
                    let items: Vec<String> = items
                        .into_iter()
                        .map(|item| match item {
                            Item::Range(r) => self.range(r),
                            Item::Name(n) => format!("\"{n}\""),
                        })
                        .collect();
                    format!("reserved {};\n", items.join(", "))
                }),
            );
            return;
        }
        let mut lines: Vec<(i32, String)> =
            ranges.iter().map(|r| (r.0, format!("reserved {};\n", self.range(*r)))).collect();
        lines.extend(names.iter().map(|n| (i32::MAX, format!("reserved \"{n}\";\n"))));
        if self.normalize {
            lines.sort();
        }
        section(out, lines.into_iter().map(|(_, line)| line));
    }

    /// An inclusive range: `5`, `5 to 9` or `5 to max`.
    fn range(&self, (start, end): (i32, i32)) -> String {
        if start == end {
            start.to_string()
        } else if end >= MAX_TAG {
            format!("{start} to max")
        } else {
            format!("{start} to {end}")
        }
    }

    /// `extend` blocks, one per extended message in order of first appearance.
    fn extends(&self, fields: &[FieldDescriptorProto]) -> String {
        let mut blocks: Vec<(&str, Vec<&FieldDescriptorProto>)> = Vec::new();
        for field in fields {
            match blocks.iter_mut().find(|(name, _)| *name == field.extendee()) {
                Some((_, list)) => list.push(field),
                None => blocks.push((field.extendee(), vec![field])),
            }
        }
        let mut out = String::new();
        for (extendee, mut list) in blocks {
            if self.normalize {
                list.sort_by_key(|f| f.number());
            }
            out.push_str(&format!("extend {extendee} {{"));
            let lines = list.iter().map(|f| {
                let options = self.field_options(f, Place::Extension(f.name()));
                format!(
                    "{}{} {} = {}{};\n",
                    self.label(f),
                    self.type_name(f),
                    f.name(),
                    f.number(),
                    option_list(&options)
                )
            });
            section(&mut out, lines);
            out.push_str("}\n");
        }
        out
    }

    fn service(&self, service: &ServiceDescriptorProto, index: usize) -> String {
        let mut out = format!("service {} {{", service.name());
        let options = self.options_of(
            &Place::Service(index),
            written(service.options.as_ref().map(|o| &o.uninterpreted_option)),
        );
        section(&mut out, options.iter().map(|o| format!("option {};\n", o.text)));
        let rpcs = service.method.iter().map(|m| {
            let stream = |yes: bool| if yes { "stream " } else { "" };
            let mut rpc = format!(
                "rpc {} ({}{}) returns ({}{})",
                m.name(),
                stream(m.client_streaming()),
                m.input_type(),
                stream(m.server_streaming()),
                m.output_type()
            );
            let options = self.options_of(
                &Place::Method(index, m.name()),
                written(m.options.as_ref().map(|o| &o.uninterpreted_option)),
            );
            if !options.is_empty() {
                rpc.push_str(" {\n");
                for option in options {
                    rpc.push_str(&indented(&format!("option {};\n", option.text)));
                }
                rpc.push('}');
            }
            rpc.push_str(";\n");
            rpc
        });
        section(&mut out, rpcs);
        out.push_str("}\n");
        out
    }

    /// The options of an element, as written or as compiled; normalized, by name.
    fn options_of(&self, place: &Place<'_>, written: &[UninterpretedOption]) -> Vec<Opt> {
        let mut options = match self.options {
            Options::Written => written.iter().map(written_option).collect(),
            Options::Compiled(file) => {
                compiled_options(file, place).map_or_else(Vec::new, |o| self.dynamic_options(&o))
            }
        };
        if self.ignore_extensions {
            // Confluent keeps its own `(confluent.field_meta)`-style options.
            options.retain(|o| !o.text.starts_with('(') || o.text.starts_with("(confluent."));
        }
        if self.normalize {
            options.sort_by(|a, b| a.key.cmp(&b.key));
        }
        options
    }

    /// The options set in a compiled options message, standard ones by number,
    /// then custom ones; a repeated option gives one per element.
    fn dynamic_options(&self, options: &DynamicMessage) -> Vec<Opt> {
        let mut fields: Vec<(String, String, Kind, Value)> = options
            .fields()
            .filter(|(f, _)| f.name() != "uninterpreted_option")
            .map(|(f, v)| (f.name().to_owned(), f.name().to_owned(), f.kind(), v.clone()))
            .collect();
        let mut extensions: Vec<_> = options.extensions().collect();
        extensions.sort_by_key(|(e, _)| e.number());
        fields.extend(
            extensions.into_iter().map(|(e, v)| {
                (e.full_name().to_owned(), format!("({})", e.full_name()), e.kind(), v.clone())
            }),
        );
        let mut out = Vec::new();
        for (key, name, kind, value) in fields {
            match value {
                Value::List(values) => {
                    for v in values {
                        out.push(Opt {
                            key: key.clone(),
                            text: format!("{name} = {}", self.value_text(&kind, &v)),
                        });
                    }
                }
                value => out.push(Opt { key, text: format!("{name} = {}", self.value_text(&kind, &value)) }),
            }
        }
        out
    }

    fn value_text(&self, kind: &Kind, value: &Value) -> String {
        match value {
            Value::Bool(b) => b.to_string(),
            Value::I32(n) => n.to_string(),
            Value::I64(n) => n.to_string(),
            Value::U32(n) => n.to_string(),
            Value::U64(n) => n.to_string(),
            Value::F32(x) => self.float_text(f64::from(*x)),
            Value::F64(x) => self.float_text(*x),
            Value::String(s) => quote(s),
            Value::Bytes(b) => quote(&String::from_utf8_lossy(b)),
            Value::EnumNumber(n) => match kind {
                Kind::Enum(e) => e.get_value(*n).map_or_else(|| n.to_string(), |v| v.name().to_owned()),
                _ => n.to_string(),
            },
            Value::Message(m) => self.message_value(m),
            Value::List(values) if self.normalize && values.len() == 1 => self.value_text(kind, &values[0]),
            Value::List(values) => {
                let items: Vec<String> = values.iter().map(|v| self.value_text(kind, v)).collect();
                let last = items.len().saturating_sub(1);
                let body: String = items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| indented(&format!("{item}{}", if i == last { "" } else { "," })))
                    .collect();
                format!("[\n{body}]")
            }
            Value::Map(_) => "{\n}".into(),
        }
    }

    /// A message-valued option in Confluent's map form: `{\n  key: value,\n}`.
    fn message_value(&self, message: &DynamicMessage) -> String {
        let mut entries: Vec<(String, String)> =
            message.fields().map(|(f, v)| (f.name().to_owned(), self.value_text(&f.kind(), v))).collect();
        entries.extend(
            message
                .extensions()
                .map(|(e, v)| (format!("[{}]", e.full_name()), self.value_text(&e.kind(), v))),
        );
        if self.normalize {
            entries.sort();
        }
        let last = entries.len().saturating_sub(1);
        let body: String = entries
            .iter()
            .enumerate()
            .map(|(i, (k, v))| indented(&format!("{k}: {v}{}", if i == last { "" } else { "," })))
            .collect();
        format!("{{\n{body}}}")
    }

    /// A number as Confluent prints it: as written, or normalized through Java's
    /// `DecimalFormat` (no grouping, at most three decimals).
    fn number_text(&self, text: &str) -> String {
        match text.parse::<f64>() {
            Ok(x) if self.normalize && x.is_finite() && text.parse::<i64>().is_err() => decimal_format(x),
            _ => text.to_owned(),
        }
    }

    fn float_text(&self, x: f64) -> String {
        if !x.is_finite() {
            return if x.is_nan() {
                "nan".into()
            } else if x > 0.0 {
                "inf".into()
            } else {
                "-inf".into()
            };
        }
        if self.normalize { decimal_format(x) } else { format!("{x:?}") }
    }
}

/// Where an element's reserved ranges and names are in the source positions.
struct Reserved {
    element: Vec<i32>,
    ranges_field: i32,
    names_field: i32,
}

/// One value of a `reserved` statement.
enum Item {
    Range((i32, i32)),
    Name(String),
}

/// The `reserved` statements as written, each with the ranges or names it listed,
/// from the source positions (each statement has one, and so has each of its
/// values); `None` when they do not account for every range and name.
fn written_reserved(
    locations: &SourceCodeInfo,
    at: &Reserved,
    ranges: &[(i32, i32)],
    names: &[String],
) -> Option<Vec<Vec<Item>>> {
    let under = |field: i32| {
        let mut path = at.element.clone();
        path.push(field);
        path
    };
    let (ranges_path, names_path) = (under(at.ranges_field), under(at.names_field));
    let mut statements: Vec<(&[i32], bool)> = locations
        .location
        .iter()
        .filter(|l| l.path == ranges_path || l.path == names_path)
        .map(|l| (l.span.as_slice(), l.path == ranges_path))
        .collect();
    statements.sort_by_key(|(span, _)| (span.first().copied(), span.get(1).copied()));
    let value_at = |path: &[i32], i: usize| {
        let mut path = path.to_vec();
        path.push(index_i32(i));
        locations.location.iter().find(|l| l.path == path).map(|l| l.span.as_slice())
    };
    let mut out: Vec<Vec<Item>> = statements.iter().map(|_| Vec::new()).collect();
    let mut place = |span: Option<&[i32]>, numbers: bool, item: Item| -> Option<()> {
        let k = statements.iter().position(|(s, n)| *n == numbers && span.is_some_and(|v| within(v, s)))?;
        out[k].push(item);
        Some(())
    };
    for (i, range) in ranges.iter().enumerate() {
        place(value_at(&ranges_path, i), true, Item::Range(*range))?;
    }
    for (i, name) in names.iter().enumerate() {
        place(value_at(&names_path, i), false, Item::Name(name.clone()))?;
    }
    Some(out.into_iter().filter(|items| !items.is_empty()).collect())
}

/// Whether the span `inner` starts inside `outer` (spans are `[line, column,
/// end column]` or `[line, column, end line, end column]`).
fn within(inner: &[i32], outer: &[i32]) -> bool {
    let start = |s: &[i32]| (s.first().copied().unwrap_or(0), s.get(1).copied().unwrap_or(0));
    let end = |s: &[i32]| match s {
        [line, _, end] => (*line, *end),
        [_, _, line, end, ..] => (*line, *end),
        _ => (i32::MAX, i32::MAX),
    };
    start(outer) <= start(inner) && start(inner) <= end(outer)
}

/// The source-position path of the message at `path` (indices at each level).
fn message_location(path: &[usize]) -> Vec<i32> {
    let mut out = Vec::with_capacity(path.len() * 2);
    for (level, i) in path.iter().enumerate() {
        out.push(if level == 0 { 4 } else { 3 });
        out.push(index_i32(*i));
    }
    out
}

fn index_i32(i: usize) -> i32 {
    i32::try_from(i).unwrap_or(i32::MAX)
}

/// Appends `items` indented after a newline, when there are any.
fn section(out: &mut String, items: impl IntoIterator<Item = String>) {
    let mut items = items.into_iter().peekable();
    if items.peek().is_some() {
        out.push('\n');
        for item in items {
            out.push_str(&indented(&item));
        }
    }
}

/// Confluent's `appendIndented`: each line (trailing empty ones dropped, as
/// Java's `split` does) prefixed with two spaces, blank ones too.
fn indented(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.trim_end_matches('\n').split('\n') {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `[a = 1]`, or one per line when there are several, as Confluent lists them.
fn option_list(options: &[Opt]) -> String {
    match options {
        [] => String::new(),
        [one] => format!(" [{}]", one.text),
        many => {
            let last = many.len() - 1;
            let body: String = many
                .iter()
                .enumerate()
                .map(|(i, o)| indented(&format!("{}{}", o.text, if i == last { "" } else { "," })))
                .collect();
            format!(" [\n{body}]")
        }
    }
}

fn written(options: Option<&Vec<UninterpretedOption>>) -> &[UninterpretedOption] {
    options.map_or(&[], Vec::as_slice)
}

/// An option as written: `name = value`, `(custom.name).field = value`.
fn written_option(option: &UninterpretedOption) -> Opt {
    let name: Vec<String> = option
        .name
        .iter()
        .map(|p| if p.is_extension { format!("({})", p.name_part) } else { p.name_part.clone() })
        .collect();
    let name = name.join(".");
    let value = if let Some(id) = &option.identifier_value {
        id.clone()
    } else if let Some(n) = option.positive_int_value {
        n.to_string()
    } else if let Some(n) = option.negative_int_value {
        n.to_string()
    } else if let Some(x) = option.double_value {
        format!("{x:?}")
    } else if let Some(s) = &option.string_value {
        quote(&String::from_utf8_lossy(s))
    } else {
        format!("{{\n{}}}", indented(option.aggregate_value()))
    };
    Opt { key: name.trim_start_matches('(').replace(')', ""), text: format!("{name} = {value}") }
}

/// The compiled options message of the element at `place`.
fn compiled_options(file: &FileDescriptor, place: &Place<'_>) -> Option<DynamicMessage> {
    let message = |path: &[usize]| -> Option<MessageDescriptor> {
        let (first, rest) = path.split_first()?;
        let mut message = file.messages().nth(*first)?;
        for i in rest {
            let child = message.child_messages().nth(*i)?;
            message = child;
        }
        Some(message)
    };
    match place {
        Place::File => Some(file.options()),
        Place::Message(path) => message(path).map(|m| m.options()),
        Place::Field(path, name) => message(path)?.get_field_by_name(name).map(|f| f.options()),
        Place::Oneof(path, i) => message(path)?.oneofs().nth(*i).map(|o| o.options()),
        Place::Enum([], i) => file.enums().nth(*i).map(|e| e.options()),
        Place::Enum(path, i) => message(path)?.child_enums().nth(*i).map(|e| e.options()),
        Place::EnumValue(path, i, name) => {
            let enumeration =
                if path.is_empty() { file.enums().nth(*i) } else { message(path)?.child_enums().nth(*i) }?;
            enumeration.get_value_by_name(name).map(|v| v.options())
        }
        Place::Service(i) => file.services().nth(*i).map(|s| s.options()),
        Place::Method(i, name) => {
            file.services().nth(*i)?.methods().find(|m| m.name() == *name).map(|m| m.options())
        }
        Place::Extension(name) => file
            .extensions()
            .chain(file.messages().flat_map(|m| all_extensions(&m)))
            .find(|e| e.name() == *name)
            .map(|e| e.options()),
    }
}

fn all_extensions(message: &MessageDescriptor) -> Vec<prost_reflect::ExtensionDescriptor> {
    let mut out: Vec<_> = message.child_extensions().collect();
    for child in message.child_messages() {
        out.extend(all_extensions(&child));
    }
    out
}

/// Whether the text declared its syntax: `syntax = "proto2";` leaves no trace
/// in the descriptor but a source location (field 12 of the file).
fn syntax_written(proto: &FileDescriptorProto) -> bool {
    proto.syntax.is_some()
        || proto.source_code_info.as_ref().is_some_and(|info| info.location.iter().any(|l| l.path == [12]))
}

fn in_oneof(field: &FieldDescriptorProto) -> bool {
    field.oneof_index.is_some() && !field.proto3_optional()
}

fn is_map_entry(message: &DescriptorProto) -> bool {
    message.options.as_ref().is_some_and(|o| o.map_entry())
}

/// The last part of a field's type name (`.shop.Order.Line` -> `Line`).
fn type_simple_name(field: &FieldDescriptorProto) -> &str {
    field.type_name().rsplit('.').next().unwrap_or_default()
}

fn scalar_name(ty: Type) -> String {
    let name = match ty {
        Type::Double => "double",
        Type::Float => "float",
        Type::Int64 => "int64",
        Type::Uint64 => "uint64",
        Type::Int32 => "int32",
        Type::Fixed64 => "fixed64",
        Type::Fixed32 => "fixed32",
        Type::Bool => "bool",
        Type::String => "string",
        Type::Bytes => "bytes",
        Type::Uint32 => "uint32",
        Type::Sfixed32 => "sfixed32",
        Type::Sfixed64 => "sfixed64",
        Type::Sint32 => "sint32",
        Type::Sint64 => "sint64",
        Type::Group => "group",
        Type::Message => "message",
        Type::Enum => "enum",
    };
    name.to_owned()
}

/// Java's `new DecimalFormat()` without grouping: at most three decimals,
/// rounded half-even, no trailing zeros.
fn decimal_format(x: f64) -> String {
    let scaled = x * 1000.0;
    let rounded = {
        let floor = scaled.floor();
        let diff = scaled - floor;
        if (diff - 0.5).abs() < f64::EPSILON * scaled.abs().max(1.0) {
            if floor % 2.0 == 0.0 { floor } else { floor + 1.0 }
        } else {
            scaled.round()
        }
    };
    let text = format!("{:.3}", rounded / 1000.0);
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" { "0".into() } else { text.to_owned() }
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

/// A string literal escaped as Confluent's `escapeChars` does.
fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
#[path = "render_tests.rs"]
mod tests;
