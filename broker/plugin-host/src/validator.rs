//! A loaded record-validator plugin: compiled once, instantiated into a warm pool,
//! called with packed batches under a deadline and a memory cap.

use std::sync::Arc;

use es_core::Record;

use crate::bindings::validator::exports::es::plugin::validator::{self as wit, BatchInfo};
use crate::bindings::validator::{RecordValidator, RecordValidatorPre};
use crate::engine::PluginEngine;
use crate::error::PluginError;
use crate::limits::PluginLimits;
use crate::pack::{BatchTarget, PackError, PackedBatch};
use crate::runtime::{self, Plugin, PluginInfo, PluginStats};

/// Counters of one validator (the same counters every plugin has).
pub type ValidatorStats = PluginStats;

runtime::impl_world!(
    RecordValidator,
    RecordValidatorPre,
    "es:plugin/record-validator@0.1.0",
    ["es:plugin/lifecycle@0.1.", "es:plugin/validator@0.1."]
);

/// What the broker does with a failing record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Reject,
    DeadLetter,
    Warn,
}

/// One failing record, with its index in the records passed to `validate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub index: u32,
    pub action: Action,
    pub code: String,
    pub reason: String,
}

/// A record-validator plugin ready to be called from any thread.
pub struct Validator {
    plugin: Plugin<RecordValidator>,
    info: PluginInfo,
}

impl std::fmt::Debug for Validator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Validator")
            .field("name", &self.plugin.name())
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl Validator {
    /// Loads `wasm` as the plugin `name`: checks it is a component of the
    /// record-validator world importing only what the sandbox allows, compiles it
    /// (or takes it from the cache), instantiates and configures one instance so a
    /// bad configuration fails here, and keeps that instance warm.
    pub fn load(
        engine: &PluginEngine,
        name: &str,
        wasm: &[u8],
        config: Vec<(String, String)>,
        limits: PluginLimits,
    ) -> Result<Self, PluginError> {
        let (plugin, info) = Plugin::load(engine, name, wasm, config, limits)?;
        Ok(Self { plugin, info })
    }

    /// Checks `wasm` as `load` does (a component of the record-validator world
    /// importing only what the sandbox allows) and returns what the plugin says
    /// about itself, without configuring it: what an upload checks before the
    /// plugin is stored, when no binding has given it a configuration yet.
    pub fn inspect(engine: &PluginEngine, name: &str, wasm: &[u8]) -> Result<PluginInfo, PluginError> {
        Plugin::<RecordValidator>::inspect(engine, name, wasm)
    }

    /// The name the plugin was loaded under.
    pub fn name(&self) -> &str {
        self.plugin.name()
    }

    /// What the plugin says about itself.
    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    pub fn limits(&self) -> &PluginLimits {
        self.plugin.limits()
    }

    pub fn stats(&self) -> ValidatorStats {
        self.plugin.stats()
    }

    /// Idle warm instances right now.
    pub fn warm_instances(&self) -> usize {
        self.plugin.warm_instances()
    }

    /// Validates `records` and returns one violation per failing record, with
    /// indexes into `records`: [`Validator::validate_packed`] over records packed
    /// for this call. A chain of validators packs once and calls that instead.
    pub fn validate(
        &self,
        target: BatchTarget<'_>,
        records: &[Record],
    ) -> Result<Vec<Violation>, PluginError> {
        let packed = PackedBatch::from_records(records).map_err(|e| self.unpackable(e))?;
        self.validate_packed(target, &packed)
    }

    /// Validates a packed batch and returns one violation per failing record, with
    /// indexes into the batch. Batches above the per-call cap are split into
    /// several calls. Blocks for at most about the deadline per call, and a guest's
    /// stderr blocks on the tokio runtime: call it from a blocking thread
    /// (`spawn_blocking`), never from an async task.
    pub fn validate_packed(
        &self,
        target: BatchTarget<'_>,
        batch: &PackedBatch<'_>,
    ) -> Result<Vec<Violation>, PluginError> {
        let batch_bytes_max = self.limits().batch_bytes_max;
        let ranges = batch.chunks(batch_bytes_max).map_err(|(index, bytes)| PluginError::RecordTooLarge {
            plugin: self.name().to_owned(),
            index,
            bytes,
            limit_bytes: batch_bytes_max,
        })?;
        let info = BatchInfo {
            topic: target.topic.to_owned(),
            partition: target.partition,
            schema_id: target.schema_id,
        };
        let mut out = Vec::new();
        for range in ranges {
            let chunk = batch.chunk(range.clone());
            let found = self.plugin.call(|b, store| {
                b.es_plugin_validator().call_validate(
                    store,
                    &info,
                    chunk.data,
                    &chunk.records,
                    &chunk.headers,
                    chunk.timestamps,
                )
            })?;
            for v in found {
                out.push(self.convert(v, range.start, range.len())?);
            }
        }
        Ok(out)
    }

    fn unpackable(&self, source: PackError) -> PluginError {
        PluginError::Pack { plugin: self.name().to_owned(), source }
    }

    /// `validate` on tokio's blocking pool, for callers that must not block their
    /// task even for a deadline's length (it costs a thread hop, ~10-20 us).
    pub async fn validate_blocking(
        self: Arc<Self>,
        topic: Arc<str>,
        partition: u32,
        schema_id: Option<u32>,
        records: Arc<[Record]>,
    ) -> Result<Vec<Violation>, PluginError> {
        let name = self.name().to_owned();
        tokio::task::spawn_blocking(move || {
            self.validate(BatchTarget { topic: &topic, partition, schema_id }, &records)
        })
        .await
        .map_err(|e| PluginError::Trap { plugin: name, reason: format!("host task failed: {e}") })?
    }

    /// Checks a guest's violation against the chunk it came from and shifts its
    /// index to the caller's numbering.
    fn convert(&self, v: wit::Violation, offset: usize, len: usize) -> Result<Violation, PluginError> {
        let index = v.index as usize;
        if index >= len {
            return Err(self
                .plugin
                .garbage(format!("violation index {index} is outside a batch of {len} records")));
        }
        let action = match v.action {
            wit::Action::Reject => Action::Reject,
            wit::Action::DeadLetter => Action::DeadLetter,
            wit::Action::Warn => Action::Warn,
        };
        Ok(Violation {
            index: u32::try_from(offset + index).expect("record count fits u32"),
            action,
            code: runtime::cut(v.code),
            reason: runtime::cut(v.reason),
        })
    }
}
