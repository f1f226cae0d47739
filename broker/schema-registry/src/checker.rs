//! The seam between the registry and its compatibility checkers. The registry
//! decides *which* existing versions a proposed schema is checked against (the
//! latest live one for plain levels, every live one for transitive levels); the
//! checker, a Wasm plugin in the broker, decides *whether* they are compatible and
//! gives a schema's canonical form. This crate holds no checking logic of its own.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

use crate::error::{RegistryError, Result};
use crate::types::{CompatLevel, SchemaType};

/// One reason a proposed schema is incompatible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Incompatibility {
    /// Where in the schema, e.g. `/fields/2/type`.
    pub path: String,
    pub message: String,
}

/// A schema as a checker receives it: its text and, resolved from the registry,
/// the schemas it references (Confluent's schema `references`), transitively and
/// in dependency order: each referenced schema once, after those it references
/// itself, never the schema itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedSchema {
    pub text: String,
    pub references: Vec<ResolvedReference>,
}

impl ResolvedSchema {
    /// A schema without references.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), references: Vec::new() }
    }
}

/// One referenced schema: the reference's name (a JSON Schema `$ref` URL, a
/// Protobuf import path) and the text of the version it points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedReference {
    pub name: String,
    pub text: String,
}

/// A checker that could not answer (as opposed to an answer of "invalid" or
/// "incompatible").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckerError {
    #[error("{0}")]
    Timeout(String),
    #[error("{0}")]
    Failed(String),
}

/// A form of a schema's text other than the normalized one, as Confluent's
/// registry prints schemas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// The schema as written, in the type's own print (Confluent's
    /// `canonicalString`): what is stored and compared without `normalize`.
    Canonical,
    /// Confluent's `format=serialized` (Protobuf: base64 of the file descriptor).
    Serialized,
    /// Confluent's `format=resolved` (Avro: the print with the referenced
    /// schemas' types inlined where first used).
    Resolved,
    /// Confluent's `format=ignore_extensions` (Protobuf: the canonical print
    /// without custom options, extension ranges and `extend` blocks).
    IgnoreExtensions,
}

impl Form {
    /// Every form, in the order of `index`.
    pub const ALL: [Form; 4] = [Form::Canonical, Form::Serialized, Form::Resolved, Form::IgnoreExtensions];

    /// The name a checker plugin's `form` config key takes.
    pub fn as_str(self) -> &'static str {
        match self {
            Form::Canonical => "canonical",
            Form::Serialized => "serialized",
            Form::Resolved => "resolved",
            Form::IgnoreExtensions => "ignore_extensions",
        }
    }

    /// Where this form is in `ALL`.
    pub fn index(self) -> usize {
        match self {
            Form::Canonical => 0,
            Form::Serialized => 1,
            Form::Resolved => 2,
            Form::IgnoreExtensions => 3,
        }
    }

    /// The form Confluent's `format` query parameter asks of a schema of
    /// `schema_type`: `resolved` for AVRO, `serialized` and `ignore_extensions`
    /// for PROTOBUF. `None` for
    /// any other (`default`, a format the type does not have, one Confluent
    /// does not know), which Confluent answers with the schema as stored.
    pub fn for_format(schema_type: SchemaType, format: &str) -> Option<Form> {
        match (schema_type, format) {
            (SchemaType::Avro, "resolved") => Some(Form::Resolved),
            (SchemaType::Protobuf, "serialized") => Some(Form::Serialized),
            (SchemaType::Protobuf, "ignore_extensions") => Some(Form::IgnoreExtensions),
            _ => None,
        }
    }
}

/// Normalization and compatibility checks for one schema type.
pub trait SchemaChecker: Send + Sync {
    /// The schema printed in `form`; `Ok(None)` when the checker has no such form
    /// (the registry then keeps the text as registered). `Ok(Some(Err(reason)))`
    /// when the schema is invalid.
    fn print(
        &self,
        _schema: &ResolvedSchema,
        _form: Form,
    ) -> Result<Option<Result<String, String>>, CheckerError> {
        Ok(None)
    }

    /// The canonical form of the schema's text, `Ok(Err(reason))` when it is not
    /// a valid schema (with the definitions its references bring).
    fn normalize(&self, schema: &ResolvedSchema) -> Result<Result<String, String>, CheckerError>;

    /// Incompatibilities of `proposed` with `existing` (oldest first) under `level`;
    /// empty means compatible. Each schema carries its own references.
    fn check(
        &self,
        level: CompatLevel,
        proposed: &ResolvedSchema,
        existing: &[ResolvedSchema],
    ) -> Result<Vec<Incompatibility>, CheckerError>;
}

/// The checker of each schema type. Built at startup from the built-in plugins; a
/// type's checker can be replaced at run time (a user's own checker plugin), and a
/// type without one is refused rather than accepted unchecked.
#[derive(Default)]
pub struct SchemaCheckers {
    by_type: RwLock<BTreeMap<SchemaType, Arc<dyn SchemaChecker>>>,
}

impl std::fmt::Debug for SchemaCheckers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaCheckers").field("types", &self.types()).finish()
    }
}

impl SchemaCheckers {
    pub fn new() -> SchemaCheckers {
        SchemaCheckers::default()
    }

    /// Installs or replaces the checker of `schema_type`; calls already running
    /// finish on the old one.
    pub fn set(&self, schema_type: SchemaType, checker: Arc<dyn SchemaChecker>) {
        self.by_type.write().expect("checkers lock").insert(schema_type, checker);
    }

    /// Puts back `from`'s checker (or none) for each of `types` (names as
    /// `SchemaType::parse` takes them), e.g. when a user's checker is removed.
    pub fn restore(&self, from: &SchemaCheckers, types: &[String]) {
        let source = from.by_type.read().expect("checkers lock");
        let mut by_type = self.by_type.write().expect("checkers lock");
        for t in types.iter().filter_map(|t| SchemaType::parse(Some(t)).ok()) {
            match source.get(&t) {
                Some(checker) => by_type.insert(t, checker.clone()),
                None => by_type.remove(&t),
            };
        }
    }

    /// Removes the checker of `schema_type`: that type is refused from then on.
    pub fn remove(&self, schema_type: SchemaType) {
        self.by_type.write().expect("checkers lock").remove(&schema_type);
    }

    /// The checker of `schema_type`, or 42201 naming the missing checker.
    pub fn get(&self, schema_type: SchemaType) -> Result<Arc<dyn SchemaChecker>> {
        self.by_type.read().expect("checkers lock").get(&schema_type).cloned().ok_or_else(|| {
            RegistryError::InvalidSchema(format!(
                "schema type {schema_type} is not supported by this broker: no {schema_type} compatibility checker plugin is installed"
            ))
        })
    }

    /// The types that have a checker.
    pub fn types(&self) -> Vec<SchemaType> {
        self.by_type.read().expect("checkers lock").keys().copied().collect()
    }

    /// `schema` printed in `form`, `None` when its type's checker has no such
    /// form; 42201 when the checker calls it invalid.
    pub fn print(
        &self,
        schema_type: SchemaType,
        schema: &ResolvedSchema,
        form: Form,
    ) -> Result<Option<String>> {
        match self.get(schema_type)?.print(schema, form) {
            Ok(None) => Ok(None),
            Ok(Some(Ok(text))) => Ok(Some(text)),
            Ok(Some(Err(reason))) => Err(RegistryError::InvalidSchema(reason)),
            Err(e) => Err(checker_error(schema_type, e)),
        }
    }

    /// The canonical form of `schema`, 42201 when the checker calls it invalid.
    pub fn normalize(&self, schema_type: SchemaType, schema: &ResolvedSchema) -> Result<String> {
        match self.get(schema_type)?.normalize(schema) {
            Ok(Ok(canonical)) => Ok(canonical),
            Ok(Err(reason)) => Err(RegistryError::InvalidSchema(reason)),
            Err(e) => Err(checker_error(schema_type, e)),
        }
    }

    /// Runs the checker; `existing` is already chosen by the level.
    pub fn check(
        &self,
        schema_type: SchemaType,
        level: CompatLevel,
        proposed: &ResolvedSchema,
        existing: &[ResolvedSchema],
    ) -> Result<Vec<Incompatibility>> {
        self.get(schema_type)?.check(level, proposed, existing).map_err(|e| checker_error(schema_type, e))
    }
}

fn checker_error(schema_type: SchemaType, e: CheckerError) -> RegistryError {
    match e {
        CheckerError::Timeout(m) => {
            RegistryError::Timeout(format!("the {schema_type} compatibility checker: {m}"))
        }
        CheckerError::Failed(m) => {
            RegistryError::Checker(format!("the {schema_type} compatibility checker: {m}"))
        }
    }
}
