//! Confluent's vocabulary: schema types, compatibility levels, modes, references,
//! version selectors, and the JSON shapes of requests and responses.

use serde::{Deserialize, Serialize};

use crate::error::{RegistryError, Result};

/// The kinds of schema the registry stores.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum SchemaType {
    Avro,
    Json,
    Protobuf,
}

impl SchemaType {
    pub const ALL: [SchemaType; 3] = [SchemaType::Avro, SchemaType::Json, SchemaType::Protobuf];

    pub fn as_str(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Json => "JSON",
            SchemaType::Protobuf => "PROTOBUF",
        }
    }

    /// `schemaType` of a request, as Confluent reads it: absent means AVRO, and
    /// the name is exact (`avro` is 42201), since Confluent looks it up as given.
    pub fn from_request(s: Option<&str>) -> Result<SchemaType> {
        let Some(s) = s else { return Ok(SchemaType::Avro) };
        SchemaType::ALL.into_iter().find(|t| t.as_str() == s).ok_or_else(|| {
            RegistryError::InvalidSchema(format!("Invalid schema type {s}; use AVRO, JSON or PROTOBUF"))
        })
    }

    /// A type name as plugins declare it: absent means AVRO; any case is accepted.
    pub fn parse(s: Option<&str>) -> Result<SchemaType> {
        let Some(s) = s else { return Ok(SchemaType::Avro) };
        SchemaType::ALL.into_iter().find(|t| t.as_str().eq_ignore_ascii_case(s)).ok_or_else(|| {
            RegistryError::InvalidSchema(format!("unknown schema type '{s}'; use AVRO, JSON or PROTOBUF"))
        })
    }
}

impl std::fmt::Display for SchemaType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Confluent's compatibility levels. BACKWARD is the default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CompatLevel {
    None,
    #[default]
    Backward,
    BackwardTransitive,
    Forward,
    ForwardTransitive,
    Full,
    FullTransitive,
}

impl CompatLevel {
    pub const ALL: [CompatLevel; 7] = [
        CompatLevel::None,
        CompatLevel::Backward,
        CompatLevel::BackwardTransitive,
        CompatLevel::Forward,
        CompatLevel::ForwardTransitive,
        CompatLevel::Full,
        CompatLevel::FullTransitive,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CompatLevel::None => "NONE",
            CompatLevel::Backward => "BACKWARD",
            CompatLevel::BackwardTransitive => "BACKWARD_TRANSITIVE",
            CompatLevel::Forward => "FORWARD",
            CompatLevel::ForwardTransitive => "FORWARD_TRANSITIVE",
            CompatLevel::Full => "FULL",
            CompatLevel::FullTransitive => "FULL_TRANSITIVE",
        }
    }

    /// A level name in any case; anything else is 42203.
    pub fn parse(s: &str) -> Result<CompatLevel> {
        CompatLevel::ALL
            .into_iter()
            .find(|l| l.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| RegistryError::InvalidCompatLevel(s.to_owned()))
    }

    /// Transitive levels check against every live version, the others against the latest.
    pub fn is_transitive(self) -> bool {
        matches!(
            self,
            CompatLevel::BackwardTransitive | CompatLevel::ForwardTransitive | CompatLevel::FullTransitive
        )
    }
}

/// Whether writes are accepted, and whether ids may be given (IMPORT).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Mode {
    #[default]
    #[serde(rename = "READWRITE")]
    ReadWrite,
    #[serde(rename = "READONLY")]
    ReadOnly,
    /// Global only in effect: every subject is read-only, whatever its own mode.
    #[serde(rename = "READONLY_OVERRIDE")]
    ReadOnlyOverride,
    #[serde(rename = "IMPORT")]
    Import,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::ReadWrite, Mode::ReadOnly, Mode::ReadOnlyOverride, Mode::Import];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::ReadWrite => "READWRITE",
            Mode::ReadOnly => "READONLY",
            Mode::ReadOnlyOverride => "READONLY_OVERRIDE",
            Mode::Import => "IMPORT",
        }
    }

    /// A mode name in any case; anything else is 42204.
    pub fn parse(s: &str) -> Result<Mode> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| RegistryError::InvalidMode(s.to_owned()))
    }
}

/// A reference from one schema to a version of another subject, by the name the
/// referring schema uses for it (an Avro full name, a Protobuf import path, a URL).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Reference {
    pub name: String,
    pub subject: String,
    pub version: i32,
}

/// A version in a path: a number in `[1, 2^31-1]`, or `latest` / `-1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionSpec {
    Latest,
    Number(i32),
}

impl VersionSpec {
    /// Anything else is 42202.
    pub fn parse(s: &str) -> Result<VersionSpec> {
        if s.eq_ignore_ascii_case("latest") || s == "-1" {
            return Ok(VersionSpec::Latest);
        }
        match s.parse::<i32>() {
            Ok(n) if n >= 1 => Ok(VersionSpec::Number(n)),
            _ => Err(RegistryError::InvalidVersion(s.to_owned())),
        }
    }
}

impl std::fmt::Display for VersionSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            VersionSpec::Latest => f.write_str("latest"),
            VersionSpec::Number(n) => write!(f, "{n}"),
        }
    }
}

/// The body of `POST /subjects/{s}/versions` and `POST /subjects/{s}` (lookup).
/// `metadata` and `ruleSet` (Confluent's data contracts) are kept as given.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisterRequest {
    /// Absent or empty: the latest version's schema when the subject has one
    /// (a registration that only changes metadata), else 42201 "Empty schema".
    #[serde(default)]
    pub schema: Option<String>,
    #[serde(default)]
    pub schema_type: Option<String>,
    #[serde(default)]
    pub references: Vec<Reference>,
    /// An explicit id: IMPORT mode only.
    #[serde(default)]
    pub id: Option<i32>,
    /// An explicit version: IMPORT mode, or the next version (`-1` or 0: the next).
    #[serde(default)]
    pub version: Option<i32>,
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
    #[serde(default)]
    pub rule_set: Option<serde_json::Value>,
}

/// A schema version as `GET /subjects/{s}/versions/{v}` and lookup return it;
/// `schemaType` is left out for AVRO and `references` when empty, as Confluent does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubjectVersion {
    pub subject: String,
    pub version: i32,
    pub id: i32,
    pub schema: String,
    #[serde(skip_serializing_if = "is_avro", default = "avro")]
    pub schema_type: SchemaType,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub references: Vec<Reference>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub metadata: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rule_set: Option<serde_json::Value>,
    /// Whether the version is soft-deleted; not on the wire (Confluent's answers
    /// do not say).
    #[serde(skip)]
    pub deleted: bool,
}

/// `GET /schemas/ids/{id}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaById {
    pub schema: String,
    #[serde(skip_serializing_if = "is_avro", default = "avro")]
    pub schema_type: SchemaType,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub references: Vec<Reference>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub metadata: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub rule_set: Option<serde_json::Value>,
}

fn is_avro(t: &SchemaType) -> bool {
    *t == SchemaType::Avro
}

fn avro() -> SchemaType {
    SchemaType::Avro
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_in_any_case_and_bad_ones_have_their_codes() {
        assert_eq!(CompatLevel::parse("full_transitive").unwrap(), CompatLevel::FullTransitive);
        assert_eq!(CompatLevel::parse("SIDEWAYS").unwrap_err().error_code(), 42203);
        assert_eq!(Mode::parse("readonly_override").unwrap(), Mode::ReadOnlyOverride);
        assert_eq!(Mode::parse("WRITEONLY").unwrap_err().error_code(), 42204);
        assert_eq!(SchemaType::parse(None).unwrap(), SchemaType::Avro);
        assert_eq!(SchemaType::parse(Some("protobuf")).unwrap(), SchemaType::Protobuf);
        assert_eq!(SchemaType::parse(Some("XML")).unwrap_err().error_code(), 42201);
        assert_eq!(SchemaType::from_request(Some("JSON")).unwrap(), SchemaType::Json);
        assert_eq!(SchemaType::from_request(Some("avro")).unwrap_err().error_code(), 42201);
        assert_eq!(serde_json::to_string(&Mode::ReadOnlyOverride).unwrap(), "\"READONLY_OVERRIDE\"");
        assert_eq!(
            serde_json::to_string(&CompatLevel::BackwardTransitive).unwrap(),
            "\"BACKWARD_TRANSITIVE\""
        );
    }

    #[test]
    fn versions_are_positive_numbers_or_latest() {
        assert_eq!(VersionSpec::parse("latest").unwrap(), VersionSpec::Latest);
        assert_eq!(VersionSpec::parse("-1").unwrap(), VersionSpec::Latest);
        assert_eq!(VersionSpec::parse("7").unwrap(), VersionSpec::Number(7));
        for bad in ["0", "-2", "x", "2147483648", ""] {
            assert_eq!(VersionSpec::parse(bad).unwrap_err().error_code(), 42202, "{bad}");
        }
    }

    #[test]
    fn avro_and_empty_references_are_left_out_of_responses() {
        let v = SubjectVersion {
            subject: "s".into(),
            version: 1,
            id: 3,
            schema: "\"int\"".into(),
            schema_type: SchemaType::Avro,
            references: vec![],
            metadata: None,
            rule_set: None,
            deleted: false,
        };
        assert_eq!(
            serde_json::to_value(&v).unwrap(),
            serde_json::json!({"subject": "s", "version": 1, "id": 3, "schema": "\"int\""})
        );
    }
}
