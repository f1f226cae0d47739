//! The Kafka listener's request handlers.

pub mod groups;
