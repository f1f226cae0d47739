//! The `avro-compat` plugin: the schema registry's checker for `AVRO` schemas.
//! `normalize` parses a schema and returns its canonical JSON; `check` applies
//! Avro's reader/writer resolution rules (`resolve.rs`) in the directions the
//! compatibility level asks for and reports every incompatibility, with
//! Confluent's names (`READER_FIELD_MISSING_DEFAULT_VALUE`, `TYPE_MISMATCH`, ...).
//!
//! Directions: BACKWARD reads each existing schema's data with the proposed one
//! (reader = proposed, writer = existing); FORWARD reads the proposed schema's
//! data with each existing one (reader = existing, writer = proposed); FULL does
//! both. The host passes the latest schema for plain levels and all of them for
//! transitive ones, so every schema given is checked. Paths point into the
//! reader's schema: the proposed one for backward problems, the existing one for
//! forward ones; messages say which ("new" is the proposed schema, "old" an
//! existing one).
//!
//! Schema references: the referenced schemas (named types defined in other
//! subjects, e.g. `com.acme.Address`) are parsed with the schema, so its fields
//! may name their types; the canonical form names them too rather than inlining
//! them, and checks follow them into the referenced definitions.
//!
//! The config key `form` picks what `normalize` returns, so the registry can load
//! one instance per form: `normalized` (the default: apache-avro's print of the
//! parsed schema, what `normalize=true` stores), `canonical` (Java Avro's
//! `Schema.toString` with referenced types by name, `print`: what Confluent
//! stores, answers and compares), `resolved` (the same print with referenced
//! types inlined, Confluent's `format=resolved`) or `serialized` (the canonical
//! print, as Confluent answers a format Avro does not have).

mod json;
mod print;
mod resolve;

use apache_avro::Schema;
use es_plugin_sdk::{CompatLevel, Config, Incompatibility, SchemaCompat, export_schema_compat};

use crate::resolve::{Found, Parsed, Problem};

/// Most incompatibilities reported by one check (the host's `INCOMPATIBILITIES_MAX`).
const REPORTED_MAX: usize = 1_000;

struct AvroCompat {
    /// `None`: the normalized form; else Java Avro's print in that form.
    print: Option<print::Form>,
}

impl SchemaCompat for AvroCompat {
    const NAME: &'static str = "avro-compat";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str =
        "Avro schema compatibility by Avro's reader/writer resolution rules, every incompatibility reported.";
    const SUPPORTS: &'static [&'static str] = &["AVRO"];

    const CONFIG_KEYS: &'static [&'static str] = &["form"];

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        let print = match config.get("form") {
            None | Some("normalized") => None,
            Some("canonical" | "serialized") => Some(print::Form::Canonical),
            Some("resolved") => Some(print::Form::Resolved),
            Some(other) => {
                return Err(format!(
                    "config key `form`: expected normalized, canonical, resolved or serialized, got `{other}`"
                ));
            }
        };
        Ok(Self { print })
    }

    fn normalize(&self, schema: &es_plugin_sdk::Schema) -> Result<String, String> {
        let parsed = parse(schema)?.schema;
        if let Some(form) = self.print {
            let references = schema.references().iter().map(es_plugin_sdk::Reference::text);
            return print::print(schema.text(), references, form)
                .map_err(|e| format!("invalid Avro schema: {e}"));
        }
        // apache-avro serializes a parsed schema with a fixed key order, full
        // names where a type is used again, and every default, alias and custom
        // attribute kept (Avro's "Parsing Canonical Form" would drop defaults and
        // aliases, which compatibility depends on).
        serde_json::to_string(&parsed).map_err(|e| format!("cannot serialize the parsed schema: {e}"))
    }

    fn check(
        &self,
        level: CompatLevel,
        proposed: &es_plugin_sdk::Schema,
        existing: &[es_plugin_sdk::Schema],
        out: &mut Vec<Incompatibility>,
    ) {
        if level == CompatLevel::None {
            return;
        }
        let new = match parse(proposed) {
            Ok(schema) => schema,
            Err(e) => {
                return out.push(Incompatibility::new("/", format!("INVALID_SCHEMA: the new schema: {e}")));
            }
        };
        let mut steps = 0;
        for (i, old) in existing.iter().enumerate() {
            let against = Against { index: i, count: existing.len() };
            let old = match parse(old) {
                Ok(schema) => schema,
                Err(e) => {
                    out.push(Incompatibility::new(
                        "/",
                        format!("INVALID_SCHEMA: the old schema{against}: {e}"),
                    ));
                    continue;
                }
            };
            if level.checks_backward() {
                out.extend(
                    resolve::check(&new, &old, &mut steps)
                        .iter()
                        .map(|f| render(f, Roles::BACKWARD, against)),
                );
            }
            if level.checks_forward() {
                out.extend(
                    resolve::check(&old, &new, &mut steps).iter().map(|f| render(f, Roles::FORWARD, against)),
                );
            }
        }
        // The host keeps no more than this either; sending more only costs copies.
        out.truncate(REPORTED_MAX);
    }
}

/// Parses a schema with the named types its references define (apache-avro
/// resolves names across the list in any order; the host sends dependencies
/// first anyway).
fn parse(schema: &es_plugin_sdk::Schema) -> Result<Parsed, String> {
    let invalid = |e: apache_avro::Error| format!("invalid Avro schema: {e}");
    if schema.references().is_empty() {
        let parsed = Schema::parse_str(schema.text()).map_err(invalid)?;
        return Ok(Parsed { schema: parsed, referenced: Vec::new() });
    }
    for reference in schema.references() {
        let named = serde_json::from_str::<serde_json::Value>(reference.text())
            .is_ok_and(|v| v.get("name").is_some_and(serde_json::Value::is_string));
        if !named {
            return Err(format!(
                "invalid Avro schema: the referenced schema `{}` is not a named type (record, enum or fixed)",
                reference.name()
            ));
        }
    }
    let texts = schema.references().iter().map(es_plugin_sdk::Reference::text);
    let (parsed, referenced) = Schema::parse_str_with_list(schema.text(), texts).map_err(invalid)?;
    Ok(Parsed { schema: parsed, referenced })
}

/// Which schema reads and which wrote, in the registry's words.
#[derive(Clone, Copy)]
struct Roles {
    reader: &'static str,
    writer: &'static str,
}

impl Roles {
    const BACKWARD: Self = Self { reader: "new", writer: "old" };
    const FORWARD: Self = Self { reader: "old", writer: "new" };
}

/// Which existing schema a message is about, when there are several.
#[derive(Clone, Copy)]
struct Against {
    index: usize,
    count: usize,
}

impl std::fmt::Display for Against {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.count > 1 { write!(f, " {} of {}", self.index + 1, self.count) } else { Ok(()) }
    }
}

/// Confluent's code, then a sentence in the registry's terms.
fn render(found: &Found, roles: Roles, against: Against) -> Incompatibility {
    let Roles { reader, writer } = roles;
    let path = &found.path;
    let text = match &found.problem {
        Problem::TypeMismatch { reader: r, writer: w } => format!(
            "the type at path '{path}' is {r} in the {reader} schema, which cannot read the {w} of the \
             {writer} schema"
        ),
        Problem::NameMismatch { reader: r, writer: w } => format!(
            "the named type at path '{path}' is '{r}' in the {reader} schema but '{w}' in the {writer} \
             schema, and no alias of the {reader} type matches"
        ),
        Problem::FixedSizeMismatch { reader: r, writer: w } => format!(
            "the fixed type at path '{path}' has size {r} in the {reader} schema but {w} in the {writer} schema"
        ),
        Problem::MissingEnumSymbols { symbols } => format!(
            "the enum at path '{path}' in the {reader} schema lacks the symbols [{}] of the {writer} schema \
             and has no default symbol",
            symbols.join(", ")
        ),
        Problem::ReaderFieldMissingDefaultValue { field } => format!(
            "the field '{field}' at path '{path}' in the {reader} schema has no default value and is \
             missing in the {writer} schema"
        ),
        Problem::TooComplex { steps } => format!(
            "the check of the {reader} schema against the {writer} schema gave up after {steps} steps; \
             the schemas nest their named types too deeply to check"
        ),
        Problem::MissingUnionBranch { writer: w } => format!(
            "the union at path '{path}' in the {reader} schema has no branch that reads the {w} of the \
             {writer} schema"
        ),
    };
    let which = if against.count > 1 { format!(" (old schema{against})") } else { String::new() };
    Incompatibility::new(path.clone(), format!("{}: {text}{which}", found.problem.code()))
}

export_schema_compat!(AvroCompat);
