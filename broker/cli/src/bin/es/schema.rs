//! `es schema register|get|list|versions|check|config|delete`, over the broker's
//! Confluent-compatible schema registry (`/registry`).

use anyhow::{Context, bail};
use clap::{Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::client::Client;
use crate::segment;
use crate::topic::{array, text};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SchemaKind {
    Avro,
    Json,
    Protobuf,
}

impl SchemaKind {
    fn name(self) -> &'static str {
        match self {
            SchemaKind::Avro => "AVRO",
            SchemaKind::Json => "JSON",
            SchemaKind::Protobuf => "PROTOBUF",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum SchemaCommand {
    /// Register the schema in FILE under SUBJECT (the same schema keeps its id).
    Register {
        subject: String,
        file: std::path::PathBuf,
        /// The schema's type (default: the subject's latest type, else from the file's
        /// extension: .avsc avro, .json json, .proto protobuf; else avro).
        #[arg(long = "type", value_enum)]
        kind: Option<SchemaKind>,
        /// A reference to another subject's version: name=subject:version (repeatable).
        #[arg(long = "reference")]
        references: Vec<String>,
    },
    /// Print a schema: by id, or a subject's version (default latest).
    Get {
        #[arg(long, conflicts_with_all = ["subject", "version"])]
        id: Option<u32>,
        #[arg(required_unless_present = "id")]
        subject: Option<String>,
        version: Option<String>,
    },
    /// List subjects.
    List {
        /// Include soft-deleted subjects.
        #[arg(long)]
        deleted: bool,
    },
    /// List a subject's versions.
    Versions { subject: String },
    /// Test FILE against SUBJECT under its compatibility level; exit code 1 when incompatible.
    Check {
        subject: String,
        file: std::path::PathBuf,
        /// Check against this version only (default: the versions the level selects).
        #[arg(long)]
        version: Option<String>,
        /// The schema's type (default: as for `es schema register`).
        #[arg(long = "type", value_enum)]
        kind: Option<SchemaKind>,
    },
    /// Show or set the compatibility level (global, or of SUBJECT).
    Config {
        subject: Option<String>,
        /// NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, FULL, FULL_TRANSITIVE.
        #[arg(long)]
        set: Option<String>,
    },
    /// Soft-delete a subject or one version; --permanent after a soft delete removes it.
    Delete {
        subject: String,
        #[arg(long)]
        version: Option<String>,
        #[arg(long)]
        permanent: bool,
    },
}

/// Runs a schema command; `Ok(false)` means "done, but exit 1" (an incompatible check).
pub fn run(client: &Client, cmd: SchemaCommand, json_out: bool) -> anyhow::Result<bool> {
    let print = |v: &Value, plain: &dyn Fn(&Value)| if json_out { println!("{v}") } else { plain(v) };
    match cmd {
        SchemaCommand::Register { subject, file, kind, references } => {
            let kind = infer_kind(client, &subject, &file, kind)?;
            let body = schema_body(&file, kind, &references)?;
            let registered =
                client.post(&format!("/registry/subjects/{}/versions", segment(&subject)), &body)?;
            // The registry answers `{"id"}` alone, as Confluent's does: the lookup says which version.
            let found = client.post(&format!("/registry/subjects/{}", segment(&subject)), &body)?;
            let v =
                serde_json::json!({"subject": subject, "version": found["version"], "id": registered["id"]});
            print(&v, &|v| {
                println!("subject {subject} version {} id {}", text(&v["version"]), text(&v["id"]))
            });
        }
        SchemaCommand::Get { id: Some(id), .. } => {
            let v = client.get(&format!("/registry/schemas/ids/{id}"))?;
            print(&v, &|v| println!("{}", text(&v["schema"])));
        }
        SchemaCommand::Get { id: None, subject, version } => {
            let subject = subject.context("give a SUBJECT or --id")?;
            let version = version.unwrap_or_else(|| "latest".into());
            let v = client.get(&format!(
                "/registry/subjects/{}/versions/{}",
                segment(&subject),
                segment(&version)
            ))?;
            print(&v, &|v| {
                let kind = v["schemaType"].as_str().unwrap_or("AVRO");
                println!(
                    "subject {} version {} id {} type {kind}",
                    text(&v["subject"]),
                    text(&v["version"]),
                    text(&v["id"])
                );
                println!("{}", text(&v["schema"]));
            });
        }
        SchemaCommand::List { deleted } => {
            let v = client.get(&format!("/registry/subjects?deleted={deleted}"))?;
            print(&v, &|v| array(v).iter().for_each(|s| println!("{}", text(s))));
        }
        SchemaCommand::Versions { subject } => {
            let v = client.get(&format!("/registry/subjects/{}/versions", segment(&subject)))?;
            print(&v, &|v| array(v).iter().for_each(|n| println!("{}", text(n))));
        }
        SchemaCommand::Check { subject, file, version, kind } => {
            return check(client, &subject, &file, version, kind, json_out);
        }
        SchemaCommand::Config { subject, set } => {
            let path = subject
                .as_ref()
                .map_or("/registry/config".to_owned(), |s| format!("/registry/config/{}", segment(s)));
            let v = match set {
                Some(level) => client.put(&path, &json!({"compatibility": level.to_uppercase()}))?,
                None if subject.is_some() => client.get(&format!("{path}?defaultToGlobal=true"))?,
                None => client.get(&path)?,
            };
            print(&v, &|v| {
                println!(
                    "{}",
                    text(if v["compatibility"].is_null() {
                        &v["compatibilityLevel"]
                    } else {
                        &v["compatibility"]
                    })
                )
            });
        }
        SchemaCommand::Delete { subject, version, permanent } => {
            let base = format!("/registry/subjects/{}", segment(&subject));
            let path = match &version {
                Some(v) => format!("{base}/versions/{}?permanent={permanent}", segment(v)),
                None => format!("{base}?permanent={permanent}"),
            };
            let v = client.delete(&path)?;
            let how = if permanent { "permanently deleted" } else { "soft-deleted" };
            print(&v, &|v| {
                let versions: Vec<String> =
                    if v.is_array() { array(v).iter().map(text).collect() } else { vec![text(v)] };
                println!("{how} subject {subject} version {}", versions.join(", "));
            });
        }
    }
    Ok(true)
}

fn check(
    client: &Client,
    subject: &str,
    file: &std::path::Path,
    version: Option<String>,
    kind: Option<SchemaKind>,
    json_out: bool,
) -> anyhow::Result<bool> {
    let kind = infer_kind(client, subject, file, kind)?;
    let body = schema_body(file, kind, &[])?;
    let mut path = format!("/registry/compatibility/subjects/{}/versions", segment(subject));
    if let Some(v) = version {
        path = format!("{path}/{}", segment(&v));
    }
    let v = client.post(&format!("{path}?verbose=true"), &body)?;
    let compatible = v["is_compatible"].as_bool().context("the broker's answer has no is_compatible")?;
    if json_out {
        println!("{v}");
    } else if compatible {
        println!("compatible");
    } else {
        // Confluent's `{errorType:...}` lines are the findings; the trailing
        // `{oldSchemaVersion: ..}`, `{oldSchema: ..}` and `{validateFields: .., compatibility: ..}` are context.
        let finding = |m: &String| m.starts_with("{errorType:") || !m.starts_with('{');
        for m in array(&v["messages"]).iter().map(text).filter(finding) {
            println!("{m}");
        }
    }
    Ok(compatible)
}

/// The schema type: `--type`, else the subject's latest version's type (a subject
/// keeps one type), else the file's extension, else AVRO (Confluent's default).
fn infer_kind(
    client: &Client,
    subject: &str,
    file: &std::path::Path,
    given: Option<SchemaKind>,
) -> anyhow::Result<SchemaKind> {
    if let Some(kind) = given {
        return Ok(kind);
    }
    let latest = client.get(&format!("/registry/subjects/{}/versions/latest", segment(subject)));
    match latest {
        Ok(v) => return Ok(kind_named(v["schemaType"].as_str().unwrap_or("AVRO"))),
        // A subject (or version) that does not exist yet: fall back to the file.
        Err(e) if e.downcast_ref::<crate::client::ApiError>().is_some_and(|a| a.status == 404) => {}
        Err(e) => return Err(e),
    }
    let ext = file.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
    Ok(match ext.as_str() {
        "json" => SchemaKind::Json,
        "proto" => SchemaKind::Protobuf,
        _ => SchemaKind::Avro,
    })
}

fn kind_named(name: &str) -> SchemaKind {
    match name {
        "JSON" => SchemaKind::Json,
        "PROTOBUF" => SchemaKind::Protobuf,
        _ => SchemaKind::Avro,
    }
}

/// `{"schema", "schemaType", "references"}` from a file and `name=subject:version` references.
fn schema_body(file: &std::path::Path, kind: SchemaKind, references: &[String]) -> anyhow::Result<Value> {
    let schema = std::fs::read_to_string(file)
        .with_context(|| format!("reading the schema file {}", file.display()))?;
    let mut refs = Vec::new();
    for r in references {
        let parsed = r.split_once('=').and_then(|(name, rest)| {
            let (subject, version) = rest.rsplit_once(':')?;
            Some((name, subject, version.parse::<i32>().ok()?))
        });
        let Some((name, subject, version)) = parsed else {
            bail!("--reference {r:?} is not name=subject:version (e.g. com.acme.Address=address-value:1)");
        };
        refs.push(json!({"name": name, "subject": subject, "version": version}));
    }
    Ok(json!({"schema": schema, "schemaType": kind.name(), "references": refs}))
}
