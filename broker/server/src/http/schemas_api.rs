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

/// Confluent's data-contract metadata: `properties` values are strings.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SchemaMetadata {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<std::collections::BTreeMap<String, Vec<String>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub properties: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sensitive: Option<Vec<String>>,
}

/// Confluent's data-contract rule set, stored and returned as given.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaRuleSet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub migration_rules: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub domain_rules: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub encoding_rules: Option<Vec<serde_json::Map<String, serde_json::Value>>>,
}

/// An integer that may come as a JSON number or a string of digits, as Jackson
/// (Confluent's JSON reader) coerces `"version": "1"`.
fn lenient_i32<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    use serde::de::Error;
    match Option::<serde_json::Value>::deserialize(d)? {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::Number(n)) => n
            .as_i64()
            .and_then(|n| i32::try_from(n).ok())
            .map(Some)
            .ok_or_else(|| D::Error::custom("not an int")),
        Some(serde_json::Value::String(s)) => s.trim().parse().map(Some).map_err(D::Error::custom),
        Some(other) => Err(D::Error::custom(format!("expected an integer, got {other}"))),
    }
}

/// The body of a registration, a lookup and a compatibility test, as Confluent
/// reads it: `references: null` is no references, `version` and `id` may be
/// strings of digits, and `metadata` and `ruleSet` are stored with the schema.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"schema": "{\"type\": \"record\", \"name\": \"Order\", \"fields\": [{\"name\": \"id\", \"type\": \"long\"}]}"}))]
pub struct SchemaRequest {
    /// The schema text (Avro or JSON Schema as JSON text; Protobuf as `.proto` text
    /// or a base64 `FileDescriptorProto`). Absent on a registration: the latest
    /// version's schema (a change of metadata only), else 42201 "Empty schema".
    #[serde(default)]
    pub schema: Option<String>,
    /// AVRO when absent; exactly AVRO, JSON or PROTOBUF.
    #[serde(default)]
    #[schema(value_type = Option<SchemaTypeName>)]
    pub schema_type: Option<String>,
    #[serde(default)]
    pub references: Option<Vec<SchemaReference>>,
    /// An explicit id: IMPORT mode only, and required there.
    #[serde(default, deserialize_with = "lenient_i32")]
    #[schema(value_type = Option<i32>)]
    pub id: Option<i32>,
    /// An explicit version: in IMPORT mode any, else the next one; `-1` or 0 mean the next.
    #[serde(default, deserialize_with = "lenient_i32")]
    #[schema(value_type = Option<i32>)]
    pub version: Option<i32>,
    #[serde(default)]
    pub metadata: Option<SchemaMetadata>,
    #[serde(default)]
    pub rule_set: Option<SchemaRuleSet>,
}

impl From<SchemaRequest> for RegisterRequest {
    fn from(r: SchemaRequest) -> Self {
        RegisterRequest {
            schema: r.schema,
            schema_type: r.schema_type,
            references: r.references.unwrap_or_default().into_iter().map(Reference::from).collect(),
            id: r.id,
            version: r.version,
            metadata: r.metadata.map(to_value),
            rule_set: r.rule_set.map(to_value),
        }
    }
}

/// What a tag request names: a record (`ns.Record`; a JSON Schema `object...`
/// path) or a field (`ns.Record.field`).
#[derive(Debug, Clone, Copy, Deserialize, ToSchema)]
pub enum SchemaEntityType {
    #[serde(rename = "sr_record")]
    Record,
    #[serde(rename = "sr_field")]
    Field,
}

/// Confluent's `SchemaEntity`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaEntity {
    #[schema(example = "com.acme.User.email")]
    pub entity_path: String,
    pub entity_type: SchemaEntityType,
}

/// Tags for one record or field.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchemaTagsBody {
    pub schema_entity: SchemaEntity,
    #[serde(default)]
    pub tags: Vec<String>,
}

/// The body of `POST /subjects/{s}/versions/{v}/tags` (Confluent's `TagSchemaRequest`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(example = json!({"newVersion": 2, "tagsToAdd": [{"schemaEntity": {"entityPath": "User.email", "entityType": "sr_field"}, "tags": ["PII"]}]}))]
pub struct TagSchemaBody {
    /// The version to register; absent or 0: the next one.
    #[serde(default, deserialize_with = "lenient_i32")]
    #[schema(value_type = Option<i32>)]
    pub new_version: Option<i32>,
    #[serde(default)]
    pub tags_to_add: Option<Vec<SchemaTagsBody>>,
    #[serde(default)]
    pub tags_to_remove: Option<Vec<SchemaTagsBody>>,
    /// The new version's metadata; absent: the tagged version's.
    #[serde(default)]
    pub metadata: Option<SchemaMetadata>,
    /// The new version's rules; not with `rulesToMerge` / `rulesToRemove`.
    #[serde(default)]
    pub rule_set: Option<SchemaRuleSet>,
    /// Rules merged by name into the previous version's.
    #[serde(default)]
    pub rules_to_merge: Option<SchemaRuleSet>,
    /// Names of the previous version's rules to drop.
    #[serde(default)]
    pub rules_to_remove: Option<Vec<String>>,
}

impl From<SchemaTagsBody> for es_schema_registry::tags::SchemaTags {
    fn from(t: SchemaTagsBody) -> Self {
        use es_schema_registry::tags::{EntityType, SchemaEntity};
        let entity_type = match t.schema_entity.entity_type {
            SchemaEntityType::Record => EntityType::Record,
            SchemaEntityType::Field => EntityType::Field,
        };
        es_schema_registry::tags::SchemaTags {
            schema_entity: SchemaEntity { entity_path: t.schema_entity.entity_path, entity_type },
            tags: t.tags,
        }
    }
}

impl From<TagSchemaBody> for es_schema_registry::tags::TagSchemaRequest {
    fn from(r: TagSchemaBody) -> Self {
        let tags = |l: Option<Vec<SchemaTagsBody>>| l.map(|l| l.into_iter().map(Into::into).collect());
        es_schema_registry::tags::TagSchemaRequest {
            new_version: r.new_version,
            tags_to_add: tags(r.tags_to_add),
            tags_to_remove: tags(r.tags_to_remove),
            metadata: r.metadata.map(to_value),
            rule_set: r.rule_set.map(to_value),
            rules_to_merge: r.rules_to_merge.map(to_value),
            rules_to_remove: r.rules_to_remove,
        }
    }
}

fn to_value(v: impl Serialize) -> serde_json::Value {
    serde_json::to_value(v).expect("plain types serialize")
}

fn from_value<T: serde::de::DeserializeOwned>(v: Option<serde_json::Value>) -> Option<T> {
    v.and_then(|v| serde_json::from_value(v).ok())
}

/// The answer of a registration: `{"id"}` alone, as Confluent answers; the
/// whole schema when the registry filled something in (the schema from the
/// latest version, metadata or rules from the config).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegisterAnswer {
    pub id: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema_type: Option<SchemaTypeName>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub references: Vec<SchemaReference>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<SchemaMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_set: Option<SchemaRuleSet>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
}

impl RegisterAnswer {
    pub fn new(id: i32, whole: Option<SubjectVersion>) -> Self {
        let Some(v) = whole else {
            return RegisterAnswer {
                id,
                version: None,
                schema_type: None,
                references: Vec::new(),
                metadata: None,
                rule_set: None,
                schema: None,
            };
        };
        RegisterAnswer {
            id,
            version: Some(v.version),
            schema_type: unless_avro(v.schema_type),
            references: v.references.into_iter().map(SchemaReference::from).collect(),
            metadata: from_value(v.metadata),
            rule_set: from_value(v.rule_set),
            schema: Some(v.schema),
        }
    }
}

/// One version of a subject. `schemaType` is left out for AVRO, `references`
/// when empty and `metadata` / `ruleSet` when absent, as Confluent does; a
/// soft-deleted version asked for with `deleted=true` looks like any other.
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
    pub metadata: Option<SchemaMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_set: Option<SchemaRuleSet>,
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
            metadata: from_value(v.metadata),
            rule_set: from_value(v.rule_set),
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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub metadata: Option<SchemaMetadata>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule_set: Option<SchemaRuleSet>,
}

impl From<SchemaById> for SchemaText {
    fn from(s: SchemaById) -> Self {
        SchemaText {
            schema: s.schema,
            schema_type: unless_avro(s.schema_type),
            references: s.references.into_iter().map(SchemaReference::from).collect(),
            metadata: from_value(s.metadata),
            rule_set: from_value(s.rule_set),
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

/// A config as `GET` and `DELETE /config[/{subject}]` answer it: the fields it has.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RegistryConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility_level: Option<CompatibilityLevel>,
    #[serde(flatten)]
    pub rest: ConfigExtras,
}

/// The config fields besides the level, as Confluent names them in every config body.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigExtras {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub normalize: Option<bool>,
    /// Another subject this one stands for, on reads and registrations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// A metadata property name: only versions with the same value are checked for compatibility.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compatibility_group: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_metadata: Option<SchemaMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_metadata: Option<SchemaMetadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_rule_set: Option<SchemaRuleSet>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_rule_set: Option<SchemaRuleSet>,
}

impl ConfigExtras {
    fn of(c: &ConfigValue) -> Self {
        ConfigExtras {
            normalize: c.normalize,
            alias: c.alias.clone(),
            compatibility_group: c.compatibility_group.clone(),
            default_metadata: from_value(c.default_metadata.clone()),
            override_metadata: from_value(c.override_metadata.clone()),
            default_rule_set: from_value(c.default_rule_set.clone()),
            override_rule_set: from_value(c.override_rule_set.clone()),
        }
    }

    /// The state machine's config with these fields and `level`.
    pub fn into_config(self, level: Option<CompatLevel>) -> ConfigValue {
        ConfigValue {
            compatibility_level: level,
            normalize: self.normalize,
            alias: self.alias,
            compatibility_group: self.compatibility_group,
            default_metadata: self.default_metadata.map(to_value),
            override_metadata: self.override_metadata.map(to_value),
            default_rule_set: self.default_rule_set.map(to_value),
            override_rule_set: self.override_rule_set.map(to_value),
        }
    }
}

impl From<ConfigValue> for RegistryConfig {
    fn from(c: ConfigValue) -> Self {
        RegistryConfig {
            compatibility_level: c.compatibility_level.map(Into::into),
            rest: ConfigExtras::of(&c),
        }
    }
}

/// A config as `PUT /config[/{subject}]` echoes it: exactly the fields that were set.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct RegistryConfigSet {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compatibility: Option<CompatibilityLevel>,
    #[serde(flatten)]
    pub rest: ConfigExtras,
}

impl From<ConfigValue> for RegistryConfigSet {
    fn from(c: ConfigValue) -> Self {
        RegistryConfigSet { compatibility: c.compatibility_level.map(Into::into), rest: ConfigExtras::of(&c) }
    }
}

/// The body of `PUT /config[/{subject}]`: any of Confluent's config fields; a
/// level as `compatibility` (Confluent's name) or `compatibilityLevel`, any case.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigUpdate {
    #[serde(default)]
    #[schema(value_type = Option<CompatibilityLevel>)]
    pub compatibility: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<CompatibilityLevel>)]
    pub compatibility_level: Option<String>,
    #[serde(flatten)]
    pub rest: ConfigExtras,
}

/// `GET /v1/metadata/id`, Confluent's `ServerClusterId`: the Kafka cluster the
/// registry belongs to (the broker's Kafka cluster id, `es`) and the registry's own.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ServerClusterId {
    pub scope: ClusterScope,
    pub id: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ClusterScope {
    pub path: Vec<String>,
    pub clusters: std::collections::BTreeMap<String, String>,
}

/// The id the broker's Kafka listener reports (es_broker's `cluster_id`).
const KAFKA_CLUSTER_ID: &str = "es";

impl ServerClusterId {
    pub fn of_this_broker() -> Self {
        let clusters = [("kafka-cluster", KAFKA_CLUSTER_ID), ("schema-registry-cluster", "schema-registry")]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .into();
        ServerClusterId { scope: ClusterScope { path: Vec::new(), clusters }, id: String::new() }
    }
}

/// `GET /v1/metadata/version`, Confluent's `ServerVersion`: es's own version.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServerVersion {
    pub version: String,
    pub commit_id: String,
}

impl ServerVersion {
    pub fn of_this_broker() -> Self {
        ServerVersion { version: env!("CARGO_PKG_VERSION").to_owned(), commit_id: String::new() }
    }
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
                metadata: Some(serde_json::json!({"properties": {"owner": "x"}})),
                rule_set: None,
                deleted,
            };
            assert_eq!(
                serde_json::to_value(SchemaVersion::from(v.clone())).unwrap(),
                serde_json::to_value(&v).unwrap()
            );
            let s =
                SchemaById { schema: "x".into(), schema_type, references, metadata: None, rule_set: None };
            assert_eq!(
                serde_json::to_value(SchemaText::from(s.clone())).unwrap(),
                serde_json::to_value(&s).unwrap()
            );
        }
    }
}
