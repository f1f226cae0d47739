//! The `protobuf-compat` plugin, the schema registry's checker for the `PROTOBUF`
//! schema type: reads `.proto` text or base64 of a `FileDescriptorProto`
//! (`schema`), returns a canonical `.proto` text (`render`), and checks
//! compatibility with the rules of Confluent's Protobuf schema diff (`diff`,
//! `compat`). Schema references are the files `import`s name, under the
//! reference's name. See docs/schema-registry.md.
//!
//! The config key `form` picks what `normalize` returns, so the registry can
//! load one instance per form: `normalized` (the default; Confluent's
//! normalized print, what `normalize=true` stores), `canonical` (Confluent's
//! print of the schema as written, what it stores and compares otherwise),
//! `ignore_extensions` (that print without custom options, extension ranges and
//! `extend` blocks, Confluent's `format=ignore_extensions`) or `serialized`
//! (base64 of the compiled `FileDescriptorProto`, Confluent's `format=serialized`).

mod compat;
mod diff;
mod render;
mod schema;

use es_plugin_sdk::{CompatLevel, Config, Incompatibility, Schema, SchemaCompat, export_schema_compat};

/// What `normalize` returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Output {
    Print(render::Form),
    Serialized,
}

struct ProtobufCompat {
    output: Output,
}

impl SchemaCompat for ProtobufCompat {
    const NAME: &'static str = "protobuf-compat";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "Normalizes Protobuf schemas (.proto text or base64 FileDescriptorProto) and checks compatibility as Confluent's registry does.";
    const SUPPORTS: &'static [&'static str] = &["PROTOBUF"];

    const CONFIG_KEYS: &'static [&'static str] = &["form"];

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        let output = match config.get("form") {
            None | Some("normalized") => Output::Print(render::Form::Normalized),
            Some("canonical") => Output::Print(render::Form::Canonical),
            Some("ignore_extensions") => Output::Print(render::Form::IgnoreExtensions),
            Some("serialized") => Output::Serialized,
            Some(other) => {
                return Err(format!(
                    "config key `form`: expected normalized, canonical, ignore_extensions or serialized, got \
                     `{other}`"
                ));
            }
        };
        Ok(Self { output })
    }

    fn normalize(&self, schema: &Schema) -> Result<String, String> {
        let schema = compat::parse(schema).map_err(|e| e.to_string())?;
        Ok(match self.output {
            Output::Print(form) => render::render(&schema, form),
            Output::Serialized => schema.serialized(),
        })
    }

    fn check(
        &self,
        level: CompatLevel,
        proposed: &Schema,
        existing: &[Schema],
        out: &mut Vec<Incompatibility>,
    ) {
        out.extend(compat::check(level, proposed, existing));
    }
}

export_schema_compat!(ProtobufCompat);
