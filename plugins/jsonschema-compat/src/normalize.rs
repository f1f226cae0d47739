//! Parsing and canonical form: a schema must be JSON, an object or a boolean, valid
//! against its draft's meta-schema, with every `$ref` resolvable inside it. The
//! canonical form has sorted keys and no whitespace, so equal schemas compare equal
//! as text whatever their key order or layout.

use crate::document::{Document, External};
use serde_json::Value;
use std::fmt;

/// Why a text is not a schema this checker accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SchemaError {
    NotJson(String),
    NotASchema(&'static str),
    Invalid(String),
    UnresolvedRef {
        reference: String,
        reason: &'static str,
    },
    /// A referenced schema (Confluent's `references`) is not JSON.
    Reference {
        name: String,
        reason: String,
    },
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaError::NotJson(e) => write!(f, "the schema is not JSON: {e}"),
            SchemaError::NotASchema(got) => write!(f, "a JSON Schema is an object or a boolean, got {got}"),
            SchemaError::Invalid(e) => write!(f, "invalid JSON Schema: {e}"),
            SchemaError::UnresolvedRef { reference, reason } => {
                write!(f, "invalid JSON Schema: cannot resolve $ref `{reference}`: {reason}")
            }
            SchemaError::Reference { name, reason } => {
                write!(f, "invalid JSON Schema: the referenced schema `{name}` is not JSON: {reason}")
            }
        }
    }
}

impl std::error::Error for SchemaError {}

/// Parses and checks a schema: JSON, an object or a boolean, references that
/// resolve, and valid against its draft's meta-schema.
pub fn parse(text: &str) -> Result<Value, SchemaError> {
    parse_with(text, &[])
}

/// [`parse`] for a schema whose `$ref`s may name the referenced documents
/// `externals` (see [`externals`]).
pub fn parse_with(text: &str, externals: &[External]) -> Result<Value, SchemaError> {
    let schema = parse_document(text, externals)?;
    // Building a validator checks the schema against its draft's meta-schema and
    // compiles its regexes; without resolver features it fetches nothing but the
    // referenced documents, served from memory. A schema without `$schema` is read
    // as draft 7, Confluent's default.
    let options = match schema.get("$schema") {
        Some(_) => jsonschema::options(),
        None => jsonschema::options().with_draft(jsonschema::Draft::Draft7),
    };
    let options = options.with_retriever(References(externals.to_vec()));
    options.build(&schema).map_err(|e| SchemaError::Invalid(e.to_string()))?;
    Ok(schema)
}

/// The referenced schemas of a schema, parsed, under their reference names.
pub fn externals<'a>(
    references: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Result<Vec<External>, SchemaError> {
    references
        .into_iter()
        .map(|(name, text)| match serde_json::from_str::<Value>(text) {
            Ok(root) => Ok(External::new(name, root)),
            Err(e) => Err(SchemaError::Reference { name: name.to_owned(), reason: e.to_string() }),
        })
        .collect()
}

/// Serves the referenced documents to the validator that checks a schema against
/// its meta-schema. The validator asks for a `$ref`'s URL resolved against the
/// schema's base (`json-schema:///address.json` for `address.json` without an
/// `$id`), so a document matches by its name, its `$id`, or as the last segments
/// of that URL.
struct References(Vec<External>);

impl jsonschema::Retrieve for References {
    fn retrieve(
        &self,
        uri: &jsonschema::Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        let wanted = uri.as_str();
        let found = self.0.iter().find(|e| {
            let name = e.name().trim_start_matches("./");
            wanted == name
                || e.root().get("$id").and_then(Value::as_str) == Some(wanted)
                || wanted.strip_suffix(name).is_some_and(|rest| rest.ends_with('/'))
        });
        match found {
            Some(external) => Ok(external.root().clone()),
            None => Err(format!("`{wanted}` is not among the schema's references").into()),
        }
    }
}

/// The checks a comparison needs, without the meta-schema validation (the
/// registry validated stored schemas when they were registered): JSON, an object
/// or a boolean, references that resolve (inside it or into `externals`).
pub fn parse_document(text: &str, externals: &[External]) -> Result<Value, SchemaError> {
    let schema: Value = serde_json::from_str(text).map_err(|e| SchemaError::NotJson(e.to_string()))?;
    let kind = match &schema {
        Value::Object(_) | Value::Bool(_) => None,
        Value::Null => Some("null"),
        Value::Number(_) => Some("a number"),
        Value::String(_) => Some("a string"),
        Value::Array(_) => Some("an array"),
    };
    if let Some(kind) = kind {
        return Err(SchemaError::NotASchema(kind));
    }
    Document::with_externals(&schema, externals)
        .check_refs()
        .map_err(|e| SchemaError::UnresolvedRef { reference: e.reference, reason: e.reason })?;
    Ok(schema)
}

/// The canonical text of a schema: keys sorted, no whitespace.
pub fn canonical(schema: &Value) -> String {
    let mut out = String::new();
    write_canonical(schema, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, value)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_sorts_keys_at_every_level_and_drops_whitespace() {
        let schema = parse(r#"{ "type": "object", "properties": { "b": {"type":"string"}, "a": { "type": "integer", "minimum": 1 } } }"#)
            .unwrap();
        assert_eq!(
            canonical(&schema),
            r#"{"properties":{"a":{"minimum":1,"type":"integer"},"b":{"type":"string"}},"type":"object"}"#
        );
        assert_eq!(canonical(&parse("true").unwrap()), "true");
    }

    #[test]
    fn refuses_what_is_not_a_schema() {
        assert!(matches!(parse("{"), Err(SchemaError::NotJson(_))));
        assert_eq!(parse("\"string\""), Err(SchemaError::NotASchema("a string")));
        assert_eq!(parse("[]"), Err(SchemaError::NotASchema("an array")));
        assert!(matches!(parse(r#"{"type": "strnig"}"#), Err(SchemaError::Invalid(_))));
        assert!(matches!(parse(r#"{"minLength": -1}"#), Err(SchemaError::Invalid(_))));
        assert!(matches!(
            parse(r##"{"$ref": "#/definitions/Nope"}"##),
            Err(SchemaError::UnresolvedRef { .. })
        ));
        let message = parse(r#"{"type": 5}"#).unwrap_err().to_string();
        assert!(message.starts_with("invalid JSON Schema: "), "{message}");
    }

    #[test]
    fn references_name_other_documents() {
        let address = r##"{"type": "object", "properties": {"street": {"$ref": "#/definitions/S"}}, "definitions": {"S": {"type": "string"}}}"##;
        let externals = externals([("address.json", address)]).unwrap();
        let schema = r#"{"properties": {"home": {"$ref": "address.json"}}}"#;
        assert!(parse_with(schema, &externals).is_ok());
        let with_id = r#"{"$id": "https://example.com/customer.json", "properties": {"home": {"$ref": "address.json"}}}"#;
        assert!(parse_with(with_id, &externals).is_ok());
        assert!(matches!(parse(schema), Err(SchemaError::UnresolvedRef { .. })));
        let err = externals_of_garbage();
        assert_eq!(
            err.to_string(),
            "invalid JSON Schema: the referenced schema `a.json` is not JSON: EOF while parsing a value at line 1 column 0"
        );
    }

    fn externals_of_garbage() -> SchemaError {
        externals([("a.json", "")]).unwrap_err()
    }
}
