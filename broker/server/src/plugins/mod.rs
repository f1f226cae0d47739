//! The broker's plugins: the store of uploaded components and the built-in ones,
//! and (in `binding`) the validators bound to topics.
//!
//! An uploaded component is kept content-addressed as `<data>/plugins/blobs/<sha256>.wasm`
//! and named by a manifest, `<data>/plugins/manifests/<name>.json` (world, version,
//! limits, default config). The blob is durable before the manifest that names it,
//! so a crash never leaves a manifest without its component; blobs no manifest names
//! are deleted at startup. Built-in plugins are embedded in the binary and have
//! manifests made at startup, never stored.
//!
//! In a cluster (`blobs.rs`) a manifest can be stored before its blob: the upload
//! is a replicated command that carries the manifest, and a node that lacks the
//! blob fetches it from a peer by its sha256; until then the blob is "missing".

pub mod binding;
mod blobs;

pub use blobs::{BLOB_CHUNK_BYTES, BlobChunk, check_blob_size};

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use es_core::{Clock, SystemClock};
use es_plugin_host::{
    Authenticator, CompatChecker, EngineLimits, PluginEngine, PluginError, PluginLimits, Validator,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use crate::limits;
use crate::service::error::{BrokerError, Result};
use crate::store::{self, MetaStore, Stored};

/// The world a record validator implements.
pub const VALIDATOR_WORLD: &str = "record-validator";
/// The world a schema compatibility checker implements.
pub const COMPAT_WORLD: &str = "schema-compat";
/// The world an authentication mechanism implements.
pub const AUTH_WORLD: &str = "authenticator";

/// What the broker knows about one plugin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Manifest {
    /// The name bindings use.
    pub name: String,
    /// Hex sha256 of the component: its identity and its blob's file name.
    pub sha256: String,
    /// The WIT world it implements, e.g. `record-validator`.
    pub world: String,
    /// The plugin's own version, as its `info()` reports it.
    pub version: String,
    pub description: String,
    /// Configuration keys the plugin documents.
    pub config_keys: Vec<String>,
    /// Configuration every binding starts from; a binding's own keys override it.
    #[serde(default)]
    pub default_config: BTreeMap<String, String>,
    /// Overrides of the sandbox's default limits.
    #[serde(default)]
    pub limits: LimitsSpec,
    pub size_bytes: u64,
    pub added_ms: i64,
    /// Embedded in the broker binary; cannot be removed or replaced.
    #[serde(default)]
    pub builtin: bool,
    /// For a schema-compat checker: the schema types it judges (it replaces the
    /// registry's checker for each). For an authenticator: the SASL mechanisms it
    /// implements (`--auth-mechanisms NAME:plugin` names one of them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supports: Vec<String>,
}

impl Stored for Manifest {
    const WHAT: &'static str = "plugin manifest";
    fn name(&self) -> &str {
        &self.name
    }
}

/// Per-plugin overrides of the sandbox limits (`es_plugin_host::limits` has the
/// defaults). Unset fields keep the default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitsSpec {
    /// Deadline of one call (one batch), milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_deadline_ms: Option<u64>,
    /// Cap on one instance's linear memory, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes_max: Option<usize>,
    /// Cap on the packed record bytes of one call; larger batches take several calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_bytes_max: Option<usize>,
    /// Idle warm instances kept per binding.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_instances_max: Option<usize>,
}

impl LimitsSpec {
    pub fn to_limits(&self) -> PluginLimits {
        let mut limits = PluginLimits::default();
        if let Some(v) = self.call_deadline_ms {
            limits.call_deadline_ms = v;
        }
        if let Some(v) = self.memory_bytes_max {
            limits.memory_bytes_max = v;
            limits.recycle_memory_bytes = limits.recycle_memory_bytes.min(v);
        }
        if let Some(v) = self.batch_bytes_max {
            limits.batch_bytes_max = v;
        }
        if let Some(v) = self.warm_instances_max {
            limits.warm_instances_max = v;
        }
        limits
    }
}

/// An upload: the component and how to store it.
#[derive(Debug, Default)]
pub struct Upload {
    pub name: String,
    pub wasm: Vec<u8>,
    pub default_config: BTreeMap<String, String>,
    pub limits: LimitsSpec,
    /// Replace an existing plugin of this name (bindings move to the new version).
    pub replace: bool,
}

/// The plugin store and the engine that runs every plugin.
pub struct Plugins {
    engine: PluginEngine,
    blobs: PathBuf,
    manifests: MetaStore<Manifest>,
    by_name: RwLock<BTreeMap<String, Manifest>>,
    /// Blobs (sha256) some manifest names that are not on this node yet: in a
    /// cluster a replicated upload is applied before its blob arrives from a peer
    /// (`cluster/blobs.rs`). Empty on a single node.
    missing: RwLock<BTreeSet<String>>,
    /// Blobs written for an upload whose manifest is not stored yet (a cluster
    /// upload between its proposal and its apply): kept from the unnamed-blob sweep.
    staged: Mutex<BTreeSet<String>>,
    /// Stored manifests whose blob was missing or damaged at open. A single node
    /// reports and ignores them as before; a cluster member adopts them as missing
    /// blobs and fetches them from a peer (`Plugins::adopt_stranded`).
    stranded: Mutex<Vec<Manifest>>,
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugins").field("blobs", &self.blobs).finish_non_exhaustive()
    }
}

fn io(context: String, e: std::io::Error) -> BrokerError {
    BrokerError::Internal(format!("{context}: {e}"))
}

impl Plugins {
    /// Opens `<data>/plugins`: the engine (its compile cache in `cache_dir`, by
    /// default `cache/` inside it), the built-in plugins, and every stored manifest whose blob is intact. Damage is
    /// reported in `repairs`, never fatal: a binding to a missing plugin fails
    /// closed when it is used.
    pub fn open(dir: &Path, cache_dir: Option<&Path>, repairs: &mut Vec<String>) -> Result<Self> {
        let cache_dir = cache_dir.map_or_else(|| dir.join("cache"), Path::to_path_buf);
        let engine = PluginEngine::new(cache_dir, EngineLimits::default())
            .map_err(|e| BrokerError::Internal(format!("starting the plugin engine: {e}")))?;
        let blobs = dir.join("blobs");
        fs::create_dir_all(&blobs).map_err(|e| io(format!("creating {}", blobs.display()), e))?;
        let manifests = MetaStore::<Manifest>::open(dir.join("manifests"))?;
        let mut by_name = builtin_manifests();
        let mut stranded = Vec::new();
        for manifest in manifests.load_all()? {
            match fs::read(blob_path(&blobs, &manifest.sha256)) {
                Ok(bytes) if hex_sha256(&bytes) == manifest.sha256 => {
                    by_name.insert(manifest.name.clone(), manifest);
                }
                Ok(_) => {
                    repairs.push(format!(
                        "plugin {:?}: its component does not match its sha256 {}; upload it again \
                         (a cluster member fetches it from a peer)",
                        manifest.name, manifest.sha256
                    ));
                    stranded.push(manifest);
                }
                Err(e) => {
                    repairs.push(format!(
                        "plugin {:?}: its component {} cannot be read ({e}); upload it again \
                         (a cluster member fetches it from a peer)",
                        manifest.name, manifest.sha256
                    ));
                    stranded.push(manifest);
                }
            }
        }
        let plugins = Self {
            engine,
            blobs,
            manifests,
            by_name: RwLock::new(by_name),
            missing: RwLock::default(),
            staged: Mutex::default(),
            stranded: Mutex::new(stranded),
        };
        plugins.remove_unnamed_blobs(repairs)?;
        Ok(plugins)
    }

    pub fn engine(&self) -> &PluginEngine {
        &self.engine
    }

    /// The uploaded plugins' manifests as stored (no built-in one; nothing compiled).
    pub fn uploaded(&self) -> Vec<Manifest> {
        self.by_name.read().expect("plugins lock").values().filter(|m| !m.builtin).cloned().collect()
    }

    pub fn list(&self) -> Result<Vec<Manifest>> {
        let names: Vec<String> = self.by_name.read().expect("plugins lock").keys().cloned().collect();
        names.iter().map(|name| self.get(name)).collect()
    }

    pub fn get(&self, name: &str) -> Result<Manifest> {
        let manifest = self
            .by_name
            .read()
            .expect("plugins lock")
            .get(name)
            .cloned()
            .ok_or_else(|| BrokerError::PluginNotFound(name.to_owned()))?;
        self.complete(manifest)
    }

    /// Fills in what a built-in plugin says about itself (compiling it once; the
    /// artifact is cached in the data directory).
    fn complete(&self, mut manifest: Manifest) -> Result<Manifest> {
        if !manifest.builtin || !manifest.version.is_empty() {
            return Ok(manifest);
        }
        let wasm = self.wasm(&manifest)?;
        let info = Validator::inspect(&self.engine, &manifest.name, &wasm).map_err(BrokerError::from)?;
        manifest.version = info.version;
        manifest.description = info.description;
        manifest.config_keys = info.config_keys;
        self.by_name.write().expect("plugins lock").insert(manifest.name.clone(), manifest.clone());
        Ok(manifest)
    }

    /// The component bytes of a plugin.
    pub fn wasm(&self, manifest: &Manifest) -> Result<Arc<[u8]>> {
        if manifest.builtin {
            let bytes = es_plugin_host::builtin::builtin(&manifest.name)
                .ok_or_else(|| BrokerError::PluginNotFound(manifest.name.clone()))?;
            return Ok(Arc::from(bytes));
        }
        if self.is_missing(&manifest.sha256) {
            return Err(BrokerError::PluginUnavailable {
                plugin: manifest.name.clone(),
                sha256: manifest.sha256.clone(),
            });
        }
        let path = blob_path(&self.blobs, &manifest.sha256);
        fs::read(&path).map(Arc::from).map_err(|e| io(format!("reading plugin {}", path.display()), e))
    }

    /// Loads a validator for one binding: the plugin's default config overlaid by
    /// the binding's, under the plugin's limits.
    pub fn load_validator(
        &self,
        manifest: &Manifest,
        wasm: &[u8],
        config: &BTreeMap<String, String>,
    ) -> Result<Validator> {
        if manifest.world != VALIDATOR_WORLD {
            return Err(BrokerError::InvalidRequest(format!(
                "plugin {:?} implements `{}`, not `{VALIDATOR_WORLD}`; only record validators bind to topics",
                manifest.name, manifest.world
            )));
        }
        let mut merged = manifest.default_config.clone();
        merged.extend(config.iter().map(|(k, v)| (k.clone(), v.clone())));
        Validator::load(
            &self.engine,
            &manifest.name,
            wasm,
            merged.into_iter().collect(),
            manifest.limits.to_limits(),
        )
        .map_err(BrokerError::from)
    }

    /// Loads a schema-compat checker with the plugin's default config and limits
    /// (the compatibility deadline unless the manifest sets one).
    pub fn load_checker(&self, manifest: &Manifest, wasm: &[u8]) -> Result<CompatChecker> {
        let mut limits = manifest.limits.to_limits();
        if manifest.limits.call_deadline_ms.is_none() {
            limits.call_deadline_ms = PluginLimits::compat().call_deadline_ms;
        }
        let config = manifest.default_config.clone().into_iter().collect();
        CompatChecker::load(&self.engine, &manifest.name, wasm, config, limits).map_err(BrokerError::from)
    }

    /// Loads an authenticator with the plugin's default config and limits (the
    /// auth-step deadline unless the manifest sets one).
    pub fn load_authenticator(&self, manifest: &Manifest, wasm: &[u8]) -> Result<Authenticator> {
        if manifest.world != AUTH_WORLD {
            return Err(BrokerError::InvalidConfig(format!(
                "plugin {:?} implements `{}`, not `{AUTH_WORLD}`",
                manifest.name, manifest.world
            )));
        }
        let limits = auth_limits(&manifest.limits);
        let config = manifest.default_config.clone().into_iter().collect();
        Authenticator::load(&self.engine, &manifest.name, wasm, config, limits).map_err(BrokerError::from)
    }

    /// Uploaded schema-compat checkers.
    pub fn uploaded_checkers(&self) -> Vec<Manifest> {
        let all = self.by_name.read().expect("plugins lock");
        all.values().filter(|m| !m.builtin && m.world == COMPAT_WORLD).cloned().collect()
    }

    /// Checks an upload (a component of a known world importing only what the
    /// sandbox allows) and returns the manifest it would get; nothing is stored.
    pub fn inspect(&self, upload: &Upload) -> Result<Manifest> {
        validate_plugin_name(&upload.name)?;
        if es_plugin_host::builtin::builtin(&upload.name).is_some() {
            return Err(BrokerError::InvalidRequest(format!(
                "{:?} is a built-in plugin and cannot be replaced; upload yours under another name",
                upload.name
            )));
        }
        if upload.wasm.len() > limits::PLUGIN_BYTES_MAX {
            return Err(BrokerError::RequestTooLarge { max: limits::PLUGIN_BYTES_MAX });
        }
        let limits = upload.limits.to_limits();
        if limits.memory_bytes_max > self.engine.limits().memory_bytes_max || limits.call_deadline_ms == 0 {
            return Err(BrokerError::InvalidRequest(format!(
                "limits: memory_bytes_max must be at most {} and call_deadline_ms at least 1",
                self.engine.limits().memory_bytes_max
            )));
        }
        let (world, info, supports) = match Validator::inspect(&self.engine, &upload.name, &upload.wasm) {
            Ok(info) => (VALIDATOR_WORLD, info, Vec::new()),
            // Not a validator: perhaps a schema compatibility checker.
            Err(PluginError::WrongWorld { reason: as_validator, .. }) => {
                let config = upload.default_config.clone().into_iter().collect();
                let mut limits = PluginLimits::compat();
                if let Some(ms) = upload.limits.call_deadline_ms {
                    limits.call_deadline_ms = ms;
                }
                match CompatChecker::load(&self.engine, &upload.name, &upload.wasm, config, limits) {
                    Ok(checker) => (COMPAT_WORLD, checker.info().clone(), checker.supports().to_vec()),
                    Err(PluginError::WrongWorld { reason: as_checker, .. }) => {
                        self.inspect_authenticator(upload, &as_validator, &as_checker)?
                    }
                    Err(e) => return Err(BrokerError::from(e)),
                }
            }
            Err(e) => return Err(BrokerError::from(e)),
        };
        Ok(Manifest {
            name: upload.name.clone(),
            sha256: hex_sha256(&upload.wasm),
            world: world.to_owned(),
            version: info.version,
            description: info.description,
            config_keys: info.config_keys,
            default_config: upload.default_config.clone(),
            limits: upload.limits.clone(),
            size_bytes: upload.wasm.len() as u64,
            added_ms: SystemClock.now_ms(),
            builtin: false,
            supports,
        })
    }

    /// An upload that is neither a validator nor a checker: perhaps an
    /// authenticator, loaded with the upload's config (so a plugin that needs a
    /// key refuses an upload without one, not the first login).
    fn inspect_authenticator(
        &self,
        upload: &Upload,
        as_validator: &str,
        as_checker: &str,
    ) -> Result<(&'static str, es_plugin_host::PluginInfo, Vec<String>)> {
        let config = upload.default_config.clone().into_iter().collect();
        let limits = auth_limits(&upload.limits);
        match Authenticator::load(&self.engine, &upload.name, &upload.wasm, config, limits) {
            Ok(a) => Ok((AUTH_WORLD, a.info().clone(), a.mechanisms().to_vec())),
            Err(PluginError::WrongWorld { reason: as_auth, .. }) => {
                Err(BrokerError::InvalidRequest(format!(
                    "plugin {:?} implements none of es:plugin/record-validator@0.1.0 ({as_validator}), \
                 es:plugin/schema-compat@0.1.0 ({as_checker}) and es:plugin/authenticator@0.1.0 ({as_auth})",
                    upload.name
                )))
            }
            Err(e) => Err(BrokerError::from(e)),
        }
    }

    /// Stores `manifest` and its component durably (blob first), replacing any
    /// manifest of the same name. The caller (the registry, under its admin lock)
    /// has already checked the upload and prepared the bindings that move to it.
    pub fn store(&self, manifest: &Manifest, wasm: &[u8]) -> Result<()> {
        let path = blob_path(&self.blobs, &manifest.sha256);
        if !path.exists() {
            write_durably(&path, wasm)?;
        }
        self.manifests.save(manifest)?;
        self.by_name.write().expect("plugins lock").insert(manifest.name.clone(), manifest.clone());
        self.remove_unnamed_blobs(&mut Vec::new())
    }

    /// Forgets a plugin durably and deletes its blob unless another manifest names it.
    pub fn remove(&self, name: &str) -> Result<()> {
        self.manifests.remove(name)?;
        self.by_name.write().expect("plugins lock").remove(name);
        self.forget_unnamed_missing();
        self.remove_unnamed_blobs(&mut Vec::new())
    }

    fn remove_unnamed_blobs(&self, repairs: &mut Vec<String>) -> Result<()> {
        let mut named: BTreeSet<String> = self
            .by_name
            .read()
            .expect("plugins lock")
            .values()
            .filter(|m| !m.builtin)
            .map(|m| format!("{}.wasm", m.sha256))
            .collect();
        // A staged blob, and a missing one a fetch may be writing, are kept, along
        // with the temporary file `write_durably` renames into place.
        let staged = self.staged.lock().expect("staged lock").clone();
        let missing = self.missing.read().expect("missing lock").clone();
        for sha in staged.iter().chain(&missing) {
            named.extend([format!("{sha}.wasm"), format!("{sha}.tmp")]);
        }
        let entries =
            fs::read_dir(&self.blobs).map_err(|e| io(format!("listing {}", self.blobs.display()), e))?;
        for entry in entries {
            let entry = entry.map_err(|e| io(format!("listing {}", self.blobs.display()), e))?;
            let file = entry.file_name().to_string_lossy().into_owned();
            if named.contains(&file) {
                continue;
            }
            fs::remove_file(entry.path())
                .map_err(|e| io(format!("removing {}", entry.path().display()), e))?;
            if !file.ends_with(".tmp") {
                repairs.push(format!("removed plugin component {file} that no manifest names"));
            }
        }
        Ok(())
    }
}

fn builtin_manifests() -> BTreeMap<String, Manifest> {
    es_plugin_host::builtin::NAMES
        .iter()
        .filter_map(|name| {
            let wasm = es_plugin_host::builtin::builtin(name)?;
            Some((
                (*name).to_owned(),
                Manifest {
                    name: (*name).to_owned(),
                    sha256: hex_sha256(wasm),
                    world: VALIDATOR_WORLD.to_owned(),
                    // Filled in by `complete` on first use: reading them means
                    // compiling the plugin, which a start should not pay for.
                    version: String::new(),
                    description: String::new(),
                    config_keys: Vec::new(),
                    default_config: BTreeMap::new(),
                    limits: LimitsSpec::default(),
                    size_bytes: wasm.len() as u64,
                    added_ms: 0,
                    builtin: true,
                    supports: Vec::new(),
                },
            ))
        })
        .collect()
}

/// An authenticator's limits: the auth-step deadline unless the manifest sets one.
fn auth_limits(spec: &LimitsSpec) -> PluginLimits {
    let mut limits = spec.to_limits();
    if spec.call_deadline_ms.is_none() {
        limits.call_deadline_ms = PluginLimits::auth().call_deadline_ms;
    }
    limits
}

fn blob_path(blobs: &Path, sha256: &str) -> PathBuf {
    blobs.join(format!("{sha256}.wasm"))
}

pub fn hex_sha256(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

fn write_durably(path: &Path, bytes: &[u8]) -> Result<()> {
    store::write_durably(path, bytes).map_err(|e| io(format!("writing {}", path.display()), e))
}

/// Plugin names: like topic names, at most 100 characters of `[a-zA-Z0-9._-]`.
pub fn validate_plugin_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 100
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        && name != "."
        && name != "..";
    if ok {
        Ok(())
    } else {
        Err(BrokerError::InvalidRequest(format!(
            "invalid plugin name {name:?}: use 1 to 100 characters of a-z, A-Z, 0-9, '.', '_' and '-'"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_listed_and_uploads_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let mut repairs = Vec::new();
        let plugins = Plugins::open(dir.path(), None, &mut repairs).unwrap();
        let names: Vec<String> = plugins.list().unwrap().into_iter().map(|m| m.name).collect();
        assert_eq!(names, vec!["avro", "json-schema", "rules", "schema-registry"]);
        assert!(!plugins.get("rules").unwrap().version.is_empty(), "a built-in describes itself");
        let wasm = es_plugin_host::builtin::RULES.to_vec();
        let upload = Upload { name: "my-rules".into(), wasm: wasm.clone(), ..Upload::default() };
        let manifest = plugins.inspect(&upload).unwrap();
        assert_eq!(manifest.world, VALIDATOR_WORLD);
        assert_eq!(manifest.sha256, hex_sha256(&wasm));
        plugins.store(&manifest, &wasm).unwrap();
        // A stray blob (e.g. from a crash before its manifest was written) is removed.
        fs::write(dir.path().join("blobs/0000.wasm"), b"junk").unwrap();
        drop(plugins);
        let plugins = Plugins::open(dir.path(), None, &mut repairs).unwrap();
        assert_eq!(plugins.get("my-rules").unwrap(), manifest);
        assert!(!dir.path().join("blobs/0000.wasm").exists());
        assert!(repairs.iter().any(|r| r.contains("0000.wasm")), "{repairs:?}");
        plugins.remove("my-rules").unwrap();
        assert!(matches!(plugins.get("my-rules"), Err(BrokerError::PluginNotFound(_))));
        assert_eq!(fs::read_dir(dir.path().join("blobs")).unwrap().count(), 0);
    }

    #[test]
    fn bad_uploads_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let plugins = Plugins::open(dir.path(), None, &mut Vec::new()).unwrap();
        let upload =
            |name: &str, wasm: &[u8]| Upload { name: name.into(), wasm: wasm.to_vec(), ..Upload::default() };
        let err = plugins.inspect(&upload("x", b"not wasm")).unwrap_err().to_string();
        assert!(err.contains("not a WebAssembly component"), "{err}");
        let err = plugins.inspect(&upload("x", b"\0asm\x01\0\0\0")).unwrap_err().to_string();
        assert!(err.contains("core module"), "{err}");
        let err = plugins.inspect(&upload("rules", es_plugin_host::builtin::RULES)).unwrap_err().to_string();
        assert!(err.contains("built-in"), "{err}");
        let err = plugins.inspect(&upload("a/b", es_plugin_host::builtin::RULES)).unwrap_err().to_string();
        assert!(err.contains("invalid plugin name"), "{err}");
    }
}
