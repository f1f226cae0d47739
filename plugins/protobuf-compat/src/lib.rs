//! The `protobuf-compat` plugin, the schema registry's checker for the `PROTOBUF`
//! schema type: reads `.proto` text or base64 of a `FileDescriptorProto`
//! (`schema`), returns a canonical `.proto` text (`render`), and checks
//! compatibility with the rules of Confluent's Protobuf schema diff (`diff`,
//! `compat`). Schema references are the files `import`s name, under the
//! reference's name. See docs/schema-registry.md.

mod compat;
mod diff;
mod render;
mod schema;

use es_plugin_sdk::{CompatLevel, Config, Incompatibility, Schema, SchemaCompat, export_schema_compat};

struct ProtobufCompat;

impl SchemaCompat for ProtobufCompat {
    const NAME: &'static str = "protobuf-compat";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "Normalizes Protobuf schemas (.proto text or base64 FileDescriptorProto) and checks compatibility as Confluent's registry does.";
    const SUPPORTS: &'static [&'static str] = &["PROTOBUF"];

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        Ok(Self)
    }

    fn normalize(&self, schema: &Schema) -> Result<String, String> {
        let schema = compat::parse(schema).map_err(|e| e.to_string())?;
        Ok(render::render(&schema.file))
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
