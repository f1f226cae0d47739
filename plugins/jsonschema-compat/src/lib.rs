//! The built-in `jsonschema-compat` plugin: Confluent-style compatibility checks
//! for JSON Schema, in the `schema-compat` world.

pub mod check;
pub mod document;
pub mod normalize;
pub mod report;
pub mod shape;
