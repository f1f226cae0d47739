//! Reads a Protobuf schema as the registry receives it: `.proto` text, or base64 of
//! a serialized `FileDescriptorProto` (what confluent-kafka's Python serializer
//! registers). Either way the file is compiled and checked by protox, with the
//! well-known types (`google/protobuf/*.proto`) and the schema's references
//! (Confluent's schema `references`, each under its name, the path an `import`
//! names) available as imports.

use std::collections::HashMap;

use es_protobuf_files::{Resolver, looks_like_base64};
use miette::Diagnostic;
use prost_reflect::{FileDescriptor, Syntax};
use prost_types::FileDescriptorProto;
use protox::Compiler;
use protox::file::File;

/// The file name a schema given as `.proto` text is compiled under.
const TEXT_FILE_NAME: &str = "schema.proto";

impl Schema {
    /// Base64 of the compiled file's `FileDescriptorProto` without source
    /// positions, as Confluent answers `format=serialized`. Custom options are
    /// left out: prost's descriptor types keep no extensions.
    pub fn serialized(&self) -> String {
        use base64::Engine;
        use prost::Message;
        let mut proto = self.file.file_descriptor_proto().clone();
        proto.source_code_info = None;
        base64::engine::general_purpose::STANDARD.encode(proto.encode_to_vec())
    }
}

/// Why a schema was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// The `.proto` text does not parse, or names something that does not exist.
    #[error("invalid .proto schema at line {line}, column {column}: {reason}")]
    At { line: usize, column: usize, reason: String },
    /// The schema is wrong, but the checker cannot point at a place in the text.
    #[error("invalid Protobuf schema: {0}")]
    Invalid(String),
    /// The text looked like base64 but is not a serialized `FileDescriptorProto`.
    #[error("invalid Protobuf schema: it is neither .proto text nor base64 of a FileDescriptorProto ({0})")]
    NotADescriptor(String),
    /// Valid Protobuf that this checker does not handle.
    #[error("unsupported Protobuf schema: {0}")]
    Unsupported(String),
}

/// A compiled schema: its file, with every import resolved in the same pool.
#[derive(Debug, Clone)]
pub struct Schema {
    pub file: FileDescriptor,
    /// The file as written, before names are resolved, when it came as `.proto`
    /// text (Confluent prints a schema with its names as written).
    pub source: Option<FileDescriptorProto>,
}

impl Schema {
    /// Parses `.proto` text or base64 of a `FileDescriptorProto`, without references.
    #[cfg(test)]
    pub fn parse(input: &str) -> Result<Self, SchemaError> {
        Self::parse_with(input, &[])
    }

    /// Parses `.proto` text or base64 of a `FileDescriptorProto` whose imports
    /// may name the `references` (import path, schema in either form).
    pub fn parse_with(input: &str, references: &[(&str, &str)]) -> Result<Self, SchemaError> {
        let file = if looks_like_base64(input) {
            File::from_file_descriptor_proto(decode_descriptor(input, TEXT_FILE_NAME)?)
        } else {
            File::from_source(TEXT_FILE_NAME, input).map_err(|e| located(&e, input))?
        };
        let mut imports = HashMap::with_capacity(references.len());
        for (name, text) in references {
            let file = if looks_like_base64(text) {
                decode_descriptor(text, name).map(|mut d| {
                    // The import names it by the reference's name, whatever it called itself.
                    d.name = Some((*name).to_owned());
                    File::from_file_descriptor_proto(d)
                })
            } else {
                File::from_source(name, text).map_err(|e| located(&e, text))
            };
            let file = file.map_err(|e| in_reference(name, e))?;
            imports.insert((*name).to_owned(), file);
        }
        let written = file.source().is_some().then(|| file.file_descriptor_proto().clone());
        let source = file.source().map(str::to_owned);
        let name = file.name().to_owned();
        let mut compiler = Compiler::with_file_resolver(Resolver { name: name.clone(), file, imports });
        compiler.include_imports(true);
        compiler.open_file(&name).map_err(|e| match (e.file(), &source) {
            (Some(file), _) if file != name => {
                let text = references.iter().find(|(n, _)| *n == file).map(|(_, t)| *t);
                let located = match text {
                    Some(text) if !looks_like_base64(text) => located(&e, text),
                    _ => SchemaError::Invalid(reason(&e)),
                };
                in_reference(file, located)
            }
            (_, Some(text)) => located(&e, text),
            (_, None) => SchemaError::Invalid(e.to_string()),
        })?;
        let file = compiler
            .descriptor_pool()
            .get_file_by_name(&name)
            .ok_or_else(|| SchemaError::Invalid(format!("the compiled file `{name}` is missing")))?;
        if !matches!(file.syntax(), Syntax::Proto2 | Syntax::Proto3) {
            return Err(SchemaError::Unsupported(
                "only proto2 and proto3 syntax are supported, not editions".into(),
            ));
        }
        if file.messages().len() == 0 {
            return Err(SchemaError::Invalid("the schema defines no message type".into()));
        }
        Ok(Self { file, source: written })
    }
}

/// An error in a referenced schema, saying which.
fn in_reference(name: &str, error: SchemaError) -> SchemaError {
    SchemaError::Invalid(format!("the referenced schema `{name}`: {error}"))
}

/// Decodes a base64 `FileDescriptorProto`, named `default_name` when it has no name.
fn decode_descriptor(input: &str, default_name: &str) -> Result<FileDescriptorProto, SchemaError> {
    es_protobuf_files::decode_descriptor(input, default_name).map_err(SchemaError::NotADescriptor)
}

/// Turns a protox error into one naming the line and column of its first label.
fn located(error: &protox::Error, source: &str) -> SchemaError {
    let reason = reason(error);
    let offset = first_offset(error);
    match offset {
        Some(offset) => {
            let (line, column) = line_column(source, offset);
            SchemaError::At { line, column, reason }
        }
        None => SchemaError::Invalid(reason),
    }
}

/// The error's message (the first of several), with the label of its span when
/// that adds something beyond pointing ("found here").
fn reason(error: &dyn Diagnostic) -> String {
    let first = error.related().and_then(|mut r| r.next()).unwrap_or(error);
    let reason = first.to_string();
    match first.labels().and_then(|mut l| l.next()).and_then(|l| l.label().map(str::to_owned)) {
        Some(label) if !label.ends_with(" here") && !reason.contains(&label) => format!("{reason} ({label})"),
        _ => reason,
    }
}

fn first_offset(error: &dyn Diagnostic) -> Option<usize> {
    if let Some(related) = error.related().and_then(|mut r| r.next())
        && let Some(span) = related.labels().and_then(|mut l| l.next())
    {
        return Some(span.offset());
    }
    error.labels().and_then(|mut l| l.next()).map(|span| span.offset())
}

/// One-based line and column (in characters) of a byte offset.
fn line_column(source: &str, offset: usize) -> (usize, usize) {
    let before = &source[..offset.min(source.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use base64::Engine;
    use prost::Message;

    use super::*;

    #[test]
    fn text_with_a_well_known_import_compiles() {
        let schema = Schema::parse(
            "syntax = \"proto3\";\npackage shop;\nimport \"google/protobuf/timestamp.proto\";\n\
             message Order { google.protobuf.Timestamp at = 1; }",
        )
        .unwrap();
        assert_eq!(schema.file.package_name(), "shop");
        assert_eq!(schema.file.messages().next().unwrap().full_name(), "shop.Order");
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let err = Schema::parse("syntax = \"proto3\";\nmessage M {\n  int32 a = 1\n}\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid .proto schema at line 4, column 1: expected ';' or '[', but found '}'"
        );
    }

    #[test]
    fn unknown_types_are_located() {
        let err = Schema::parse("syntax = \"proto3\";\nmessage M {\n  Missing a = 1;\n}\n").unwrap_err();
        let SchemaError::At { line, reason, .. } = err else { panic!("expected a located error") };
        assert_eq!(line, 3);
        assert_eq!(reason, "name 'Missing' is not defined");
    }

    #[test]
    fn missing_imports_are_refused() {
        let err = Schema::parse("syntax = \"proto3\";\nimport \"other.proto\";\nmessage M {}\n").unwrap_err();
        assert!(err.to_string().contains("other.proto"), "{err}");
    }

    #[test]
    fn references_are_imports_by_name() {
        let address = "syntax = \"proto3\";\npackage acme;\nmessage Address { string street = 1; }\n";
        let customer = "syntax = \"proto3\";\npackage acme;\nimport \"address.proto\";\n\
                        message Customer { Address home = 1; }\n";
        let schema = Schema::parse_with(customer, &[("address.proto", address)]).unwrap();
        let home = schema.file.messages().next().unwrap().get_field(1).unwrap();
        assert_eq!(home.kind().as_message().unwrap().full_name(), "acme.Address");
        assert!(Schema::parse(customer).unwrap_err().to_string().contains("address.proto"));
        let err = Schema::parse_with(customer, &[("address.proto", "syntax = \"proto3\";\nmessage {")])
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("invalid Protobuf schema: the referenced schema `address.proto`: "), "{err}");
        assert!(err.contains("line 2"), "{err}");
    }

    #[test]
    fn base64_descriptors_compile() {
        let descriptor = FileDescriptorProto {
            name: Some("order.proto".into()),
            package: Some("shop".into()),
            syntax: Some("proto3".into()),
            message_type: vec![prost_types::DescriptorProto {
                name: Some("Order".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = base64::engine::general_purpose::STANDARD.encode(descriptor.encode_to_vec());
        let schema = Schema::parse(&text).unwrap();
        assert_eq!(schema.file.messages().next().unwrap().full_name(), "shop.Order");
    }

    #[test]
    fn garbage_base64_is_refused() {
        let err = Schema::parse("AAAA$").unwrap_err();
        assert!(matches!(err, SchemaError::At { .. } | SchemaError::Invalid(_)), "{err}");
        let err = Schema::parse("////").unwrap_err();
        assert!(matches!(err, SchemaError::NotADescriptor(_)), "{err}");
    }

    #[test]
    fn a_schema_needs_a_message() {
        let err = Schema::parse("syntax = \"proto3\";\nenum E { A = 0; }\n").unwrap_err();
        assert_eq!(err, SchemaError::Invalid("the schema defines no message type".into()));
    }
}
