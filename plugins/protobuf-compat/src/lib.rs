//! The `protobuf-compat` plugin: normalizes Protobuf schemas and checks their
//! compatibility with Confluent's rules, for the schema registry.

pub mod compat;
pub mod diff;
pub mod render;
pub mod schema;
