//! es-tools: dump and restore of an es broker's data directory, offline (the broker
//! stopped) or online (from a snapshot the running broker takes, `online.rs`).
//!
//! A dump is a tar archive whose first entry is a manifest (format version, es
//! version, topics, partitions with offset ranges, every file with its size and
//! sha256), followed by the files it names. A restore reads the archive entry by
//! entry itself (it never unpacks blindly): only regular files the manifest names,
//! with safe relative paths, each once and of the declared size; every hash and
//! every batch CRC is checked while the files stream into a new directory beside
//! the target, which is fsynced and only then swapped in.

pub mod dump;
mod error;
pub mod layout;
pub mod limits;
mod lock;
pub mod manifest;
pub mod online;
mod progress;
pub mod restore;
mod stamp;
mod verify;

pub use error::{Result, ToolsError};
pub use progress::Progress;
