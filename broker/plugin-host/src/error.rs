//! The one error type of the plugin host. Every variant names the plugin, so a
//! broker log line or an API error says which plugin failed and why.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The bytes are not a WebAssembly component (a core module, or not Wasm).
    #[error("plugin `{plugin}` is not a WebAssembly component: {reason}")]
    NotAComponent { plugin: String, reason: String },

    /// The component is malformed or uses features the engine does not enable.
    #[error("plugin `{plugin}` failed to compile: {reason}")]
    Compile { plugin: String, reason: String },

    /// The component does not implement the expected world.
    #[error("plugin `{plugin}` does not implement world `{world}`: {reason}")]
    WrongWorld { plugin: String, world: &'static str, reason: String },

    /// The component imports something outside the sandbox's allowed set.
    #[error("plugin `{plugin}` imports `{import}`, which plugins may not use (allowed: {allowed})")]
    ForbiddenImport { plugin: String, import: String, allowed: String },

    /// The plugin's `configure` refused its configuration.
    #[error("plugin `{plugin}` refused its configuration: {message}")]
    Configure { plugin: String, message: String },

    /// The limits asked for are invalid or exceed the engine's.
    #[error("plugin `{plugin}`: invalid limits: {reason}")]
    Limits { plugin: String, reason: String },

    /// The guest trapped (a panic, an `unreachable`, a bad memory access...).
    #[error("plugin `{plugin}` trapped: {reason}")]
    Trap { plugin: String, reason: String },

    /// The call ran past its deadline and was interrupted.
    #[error("plugin `{plugin}` exceeded its deadline of {deadline_ms} ms")]
    Deadline { plugin: String, deadline_ms: u64 },

    /// The guest tried to grow its memory past its cap.
    #[error("plugin `{plugin}` exceeded its memory cap of {limit_bytes} bytes")]
    Memory { plugin: String, limit_bytes: usize },

    /// The guest returned something that cannot be right, e.g. an index outside
    /// the batch.
    #[error("plugin `{plugin}` returned an invalid result: {reason}")]
    Garbage { plugin: String, reason: String },

    /// One record alone is larger than the per-call batch cap.
    #[error(
        "plugin `{plugin}`: record {index} packs to {bytes} bytes, more than the {limit_bytes}-byte batch cap"
    )]
    RecordTooLarge { plugin: String, index: usize, bytes: usize, limit_bytes: usize },

    /// The batch could not be put in a call's shape (see `PackError`).
    #[error("plugin `{plugin}`: {source}")]
    Pack { plugin: String, source: crate::pack::PackError },

    /// All instance slots of the engine are in use.
    #[error("plugin `{plugin}` could not get an instance: {reason}")]
    Instantiate { plugin: String, reason: String },

    /// The compiled-artifact cache could not be read or written.
    #[error("plugin cache `{}`: {source}", path.display())]
    Cache { path: PathBuf, source: std::io::Error },

    /// The engine could not be created.
    #[error("plugin engine: {0}")]
    Engine(String),
}

impl PluginError {
    /// The plugin this error is about, if any.
    pub fn plugin(&self) -> Option<&str> {
        match self {
            Self::NotAComponent { plugin, .. }
            | Self::Compile { plugin, .. }
            | Self::WrongWorld { plugin, .. }
            | Self::ForbiddenImport { plugin, .. }
            | Self::Configure { plugin, .. }
            | Self::Limits { plugin, .. }
            | Self::Trap { plugin, .. }
            | Self::Deadline { plugin, .. }
            | Self::Memory { plugin, .. }
            | Self::Garbage { plugin, .. }
            | Self::RecordTooLarge { plugin, .. }
            | Self::Pack { plugin, .. }
            | Self::Instantiate { plugin, .. } => Some(plugin),
            Self::Cache { .. } | Self::Engine(_) => None,
        }
    }
}
