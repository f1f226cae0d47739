//! The JSON shapes of the schema registry's routes (`http/schemas.rs`), as the
//! handlers read and write them, so `/openapi.json` describes exactly what goes
//! over the wire. The state machine's own types (`es_schema_registry::types`)
//! convert into these.

use es_schema_registry::record::ConfigValue;
use es_schema_registry::types::{Reference, RegisterRequest, SchemaById, SchemaType, SubjectVersion};
use es_schema_registry::{CompatLevel, Mode};
use serde::{Deserialize, Serialize};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, OneOfBuilder, Schema, SchemaFormat, Type};
use utoipa::{PartialSchema, ToSchema};

/// A version in a path: a number in `[1, 2^31-1]`, `latest`, or `-1` (the latest).
/// Anything else is 42202.
pub struct VersionParam;

impl PartialSchema for VersionParam {
    fn schema() -> RefOr<Schema> {
        let number = ObjectBuilder::new()
            .schema_type(Type::Integer)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Int32)))
            .minimum(Some(1))
            .maximum(Some(i32::MAX));
        let minus_one = ObjectBuilder::new().schema_type(Type::Integer).enum_values(Some([-1]));
        let latest = ObjectBuilder::new().schema_type(Type::String).enum_values(Some(["latest"]));
        OneOfBuilder::new()
            .item(number)
            .item(minus_one)
            .item(latest)
            .description(Some("A version number (1..2^31-1), `latest` or `-1`"))
            .into()
    }
}

impl ToSchema for VersionParam {}

/// Every refusal under `/registry`, in Confluent's shape.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RegistryErrorBody {
    /// Confluent's code: the HTTP status, or the status followed by two digits
    /// (40401 subject not found, 42201 invalid schema, 50001 store error, ...).
    pub error_code: u32,
    pub message: String,
}

/// A schema type with an installed checker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaTypeName {
    Avro,
    Json,
    Protobuf,
}

impl From<SchemaType> for SchemaTypeName {
    fn from(t: SchemaType) -> Self {
        match t {
            SchemaType::Avro => SchemaTypeName::Avro,
            SchemaType::Json => SchemaTypeName::Json,
            SchemaType::Protobuf => SchemaTypeName::Protobuf,
        }
    }
}

/// A schema's reference to a version of another subject.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SchemaReference {
    /// The name the referring schema uses (an Avro full name, a Protobuf import path, a URL).
    pub name: String,
    pub subject: String,
    /// A version number, or -1 for the latest.
    pub version: i32,
}

impl From<SchemaReference> for Reference {
    fn from(r: SchemaReference) -> Self {
        Reference { name: r.name, subject: r.subject, version: r.version }
    }
}

impl From<Reference> for SchemaReference {
    fn from(r: Reference) -> Self {
        SchemaReference { name: r.name, subject: r.subject, version: r.version }
    }
}

/// The body of a registration, a lookup and a compatibility test. Unknown fields
/// (`metadata`, `ruleSet`, ...) are accepted and ignored.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"schema": "{\"type\": \"record\", \"name\": \"Order\", \"fields\": [{\"name\": \"id\", \"type\": \"long\"}]}"}))]
pub struct SchemaRequest {
    /// The schema text (Avro or JSON Schema as JSON text; Protobuf as `.proto` text
    /// or a base64 `FileDescriptorProto`).
    pub schema: String,
    /// AVRO when absent; any case is accepted.
    #[serde(default)]
    #[schema(value_type = Option<SchemaTypeName>)]
    pub schema_type: Option<String>,
    #[serde(default)]
    pub references: Vec<SchemaReference>,
    /// An explicit id: IMPORT mode only.
    #[serde(default)]
    pub id: Option<i32>,
    /// An explicit version: IMPORT mode, or the next version.
    #[serde(default)]
    pub version: Option<i32>,
}

impl From<SchemaRequest> for RegisterRequest {
    fn from(r: SchemaRequest) -> Self {
        RegisterRequest {
            schema: r.schema,
            schema_type: r.schema_type,
            references: r.references.into_iter().map(Reference::from).collect(),
            id: r.id,
            version: r.version,
        }
    }
}

/// One version of a subject. `schemaType` is left out for AVRO and `references`
/// when empty, as Confluent does; `deleted` is present (true) only on a
/// soft-deleted version asked for with `deleted=true`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaVersion {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    pub schema: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_type: Option<SchemaTypeName>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<SchemaReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
}

fn unless_avro(t: SchemaType) -> Option<SchemaTypeName> {
    (t != SchemaType::Avro).then(|| t.into())
}

impl From<SubjectVersion> for SchemaVersion {
    fn from(v: SubjectVersion) -> Self {
        SchemaVersion {
            subject: v.subject,
            version: v.version,
            id: v.id,
            schema: v.schema,
            schema_type: unless_avro(v.schema_type),
            references: v.references.into_iter().map(SchemaReference::from).collect(),
            deleted: v.deleted.then_some(true),
        }
    }
}

/// `GET /schemas/ids/{id}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaText {
    pub schema: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_type: Option<SchemaTypeName>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<SchemaReference>,
}

impl From<SchemaById> for SchemaText {
    fn from(s: SchemaById) -> Self {
        SchemaText {
            schema: s.schema,
            schema_type: unless_avro(s.schema_type),
            references: s.references.into_iter().map(SchemaReference::from).collect(),
        }
    }
}

/// A subject and one of its versions (`GET /schemas/ids/{id}/versions`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SubjectVersionPair {
    pub subject: String,
    pub version: i32,
}

/// The answer of the compatibility routes.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CompatibilityAnswer {
    pub is_compatible: bool,
    /// With `verbose=true`: one line per incompatibility, then the version and the
    /// level it was checked under (empty when compatible).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<String>>,
}

/// Confluent's compatibility levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompatibilityLevel {
    None,
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
}

impl From<CompatLevel> for CompatibilityLevel {
    fn from(l: CompatLevel) -> Self {
        match l {
            CompatLevel::None => CompatibilityLevel::None,
            CompatLevel::Backward => CompatibilityLevel::Backward,
            CompatLevel::BackwardTransitive => CompatibilityLevel::BackwardTransitive,
            CompatLevel::Forward => CompatibilityLevel::Forward,
            CompatLevel::ForwardTransitive => CompatibilityLevel::ForwardTransitive,
            CompatLevel::Full => CompatibilityLevel::Full,
            CompatLevel::FullTransitive => CompatibilityLevel::FullTransitive,
        }
    }
}

/// A compatibility config as `GET` and `DELETE /config[/{subject}]` answer it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryConfig {
    pub compatibility_level: CompatibilityLevel,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub normalize: Option<bool>,
}

impl From<ConfigValue> for RegistryConfig {
    fn from(c: ConfigValue) -> Self {
        RegistryConfig { compatibility_level: c.compatibility_level.into(), normalize: c.normalize }
    }
}

/// A compatibility config as `PUT /config[/{subject}]` echoes it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RegistryConfigSet {
    pub compatibility: CompatibilityLevel,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub normalize: Option<bool>,
}

impl From<ConfigValue> for RegistryConfigSet {
    fn from(c: ConfigValue) -> Self {
        RegistryConfigSet { compatibility: c.compatibility_level.into(), normalize: c.normalize }
    }
}

/// The body of `PUT /config[/{subject}]`: a level (`compatibility`, Confluent's
/// name, or `compatibilityLevel`; any case), `normalize`, or both.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigUpdate {
    #[serde(default)]
    #[schema(value_type = Option<CompatibilityLevel>)]
    pub compatibility: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<CompatibilityLevel>)]
    pub compatibility_level: Option<String>,
    #[serde(default)]
    pub normalize: Option<bool>,
}

/// Confluent's modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ModeName {
    Readwrite,
    Readonly,
    ReadonlyOverride,
    Import,
}

impl From<Mode> for ModeName {
    fn from(m: Mode) -> Self {
        match m {
            Mode::ReadWrite => ModeName::Readwrite,
            Mode::ReadOnly => ModeName::Readonly,
            Mode::ReadOnlyOverride => ModeName::ReadonlyOverride,
            Mode::Import => ModeName::Import,
        }
    }
}

/// A mode, as every `/mode` route answers it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RegistryMode {
    pub mode: ModeName,
}

impl From<Mode> for RegistryMode {
    fn from(m: Mode) -> Self {
        RegistryMode { mode: m.into() }
    }
}

/// The body of `PUT /mode[/{subject}]` (any case).
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct ModeUpdate {
    #[schema(value_type = ModeName)]
    pub mode: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire names here are the state machine's.
    #[test]
    fn names_match_the_registry_types() {
        for l in CompatLevel::ALL {
            assert_eq!(serde_json::to_value(CompatibilityLevel::from(l)).unwrap(), l.as_str());
        }
        for m in Mode::ALL {
            assert_eq!(serde_json::to_value(ModeName::from(m)).unwrap(), m.as_str());
        }
        for t in SchemaType::ALL {
            assert_eq!(serde_json::to_value(SchemaTypeName::from(t)).unwrap(), t.as_str());
        }
    }

    /// A version serializes exactly as the state machine's own type does.
    #[test]
    fn versions_serialize_as_the_registry_types() {
        let reference = Reference { name: "a.proto".into(), subject: "a".into(), version: -1 };
        for (schema_type, references, deleted) in
            [(SchemaType::Avro, vec![], false), (SchemaType::Protobuf, vec![reference], true)]
        {
            let v = SubjectVersion {
                subject: "s".into(),
                version: 2,
                id: 7,
                schema: "x".into(),
                schema_type,
                references: references.clone(),
                deleted,
            };
            assert_eq!(
                serde_json::to_value(SchemaVersion::from(v.clone())).unwrap(),
                serde_json::to_value(&v).unwrap()
            );
            let s = SchemaById { schema: "x".into(), schema_type, references };
            assert_eq!(
                serde_json::to_value(SchemaText::from(s.clone())).unwrap(),
                serde_json::to_value(&s).unwrap()
            );
        }
    }
}
