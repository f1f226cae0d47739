//! Shared helpers for the es black-box tests.

pub mod broker;
