//! The schemas a [`SchemaCompat`](crate::SchemaCompat) checker is given.

/// A schema as the registry hands it to a checker: its text and, resolved, the
/// schemas it references (Confluent's schema `references`).
///
/// The references are complete and in dependency order: every schema reachable
/// through references appears once, after the schemas it references itself, and
/// the schema itself never does. A checker that parses them in the order given
/// never meets a name it has not seen yet.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    text: String,
    references: Vec<Reference>,
}

impl Schema {
    /// A schema without references (add them with [`Schema::with_reference`]),
    /// e.g. for a checker's own unit tests.
    pub fn new(text: impl Into<String>) -> Self {
        Self { text: text.into(), references: Vec::new() }
    }

    /// Adds a referenced schema after those already added.
    pub fn with_reference(mut self, name: impl Into<String>, text: impl Into<String>) -> Self {
        self.references.push(Reference { name: name.into(), text: text.into() });
        self
    }

    /// The schema's own text, as registered.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The schemas it references, transitively, dependencies first.
    pub fn references(&self) -> &[Reference] {
        &self.references
    }

    pub(crate) fn from_parts(text: String, references: Vec<Reference>) -> Self {
        Self { text, references }
    }
}

impl From<&str> for Schema {
    fn from(text: &str) -> Self {
        Self::new(text)
    }
}

impl From<String> for Schema {
    fn from(text: String) -> Self {
        Self::new(text)
    }
}

/// One referenced schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    name: String,
    text: String,
}

impl Reference {
    pub(crate) fn from_parts(name: String, text: String) -> Self {
        Self { name, text }
    }

    /// The name the referencing schema uses for it: the URL a JSON Schema `$ref`
    /// names, the path a Protobuf `import` names; Avro ignores it (the named
    /// types the referenced schema defines are what counts).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The referenced schema's text.
    pub fn text(&self) -> &str {
        &self.text
    }
}
