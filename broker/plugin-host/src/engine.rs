//! The plugin engine: one wasmtime `Engine` (component model, epoch interruption
//! with a ticker thread, pooling allocator), the linker, and the on-disk cache of
//! precompiled components.

use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Linker};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

use crate::error::PluginError;
use crate::limits::{CORE_INSTANCES_PER_COMPONENT_MAX, EPOCH_TICK_MS, EngineLimits};
use crate::sandbox::{self, HostState};

/// A shared handle to the engine; cheap to clone.
#[derive(Clone)]
pub struct PluginEngine {
    inner: Arc<Inner>,
}

struct Inner {
    engine: Engine,
    linker: Linker<HostState>,
    cache_dir: PathBuf,
    /// Hex digest of the engine's compatibility hash: part of every cache file name,
    /// so an artifact is only ever loaded by an engine that can run it.
    compat: String,
    limits: EngineLimits,
    stop_ticker: Arc<AtomicBool>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

impl std::fmt::Debug for PluginEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginEngine").field("cache_dir", &self.inner.cache_dir).finish_non_exhaustive()
    }
}

impl PluginEngine {
    /// Creates an engine whose compiled artifacts are cached in `cache_dir`.
    pub fn new(cache_dir: impl Into<PathBuf>, limits: EngineLimits) -> Result<Self, PluginError> {
        let cache_dir = cache_dir.into();
        std::fs::create_dir_all(&cache_dir)
            .map_err(|source| PluginError::Cache { path: cache_dir.clone(), source })?;
        let engine = Engine::new(&config(&limits)).map_err(|e| PluginError::Engine(e.to_string()))?;
        let linker = sandbox::linker(&engine).map_err(|e| PluginError::Engine(e.to_string()))?;
        let compat = compat_hex(&engine);
        let stop_ticker = Arc::new(AtomicBool::new(false));
        spawn_ticker(engine.clone(), stop_ticker.clone())?;
        Ok(Self { inner: Arc::new(Inner { engine, linker, cache_dir, compat, limits, stop_ticker }) })
    }

    pub(crate) fn engine(&self) -> &Engine {
        &self.inner.engine
    }

    pub(crate) fn linker(&self) -> &Linker<HostState> {
        &self.inner.linker
    }

    pub fn limits(&self) -> &EngineLimits {
        &self.inner.limits
    }

    /// The cache file a component's bytes compile to.
    pub fn cache_path(&self, wasm: &[u8]) -> PathBuf {
        let digest = Sha256::digest(wasm);
        self.inner.cache_dir.join(format!("{}-{}.cwasm", hex(&digest), self.inner.compat))
    }

    /// Checks that `wasm` is a component, compiles it once (or finds it in the
    /// cache) and loads the precompiled artifact.
    pub(crate) fn load(&self, plugin: &str, wasm: &[u8]) -> Result<Component, PluginError> {
        check_component_header(plugin, wasm)?;
        let path = self.cache_path(wasm);
        if !path.exists() {
            self.compile_to(plugin, wasm, &path)?;
        }
        match self.deserialize(&path) {
            Ok(component) => Ok(component),
            // A truncated or foreign file is rebuilt once rather than trusted.
            Err(_) => {
                self.compile_to(plugin, wasm, &path)?;
                self.deserialize(&path).map_err(|e| compile_error(plugin, &e))
            }
        }
    }

    fn compile_to(&self, plugin: &str, wasm: &[u8], path: &Path) -> Result<(), PluginError> {
        let artifact = self.inner.engine.precompile_component(wasm).map_err(|e| compile_error(plugin, &e))?;
        write_atomic(path, &artifact)
    }

    fn deserialize(&self, path: &Path) -> wasmtime::Result<Component> {
        // SAFETY: `deserialize_file` trusts the file to be an artifact of a compatible
        // engine. The file is named by the sha256 of the source and this engine's
        // compatibility hash, it is written only by `compile_to` (atomically, via a
        // rename) in a directory owned by the broker, and wasmtime still checks its
        // header and engine settings before use.
        #[allow(unsafe_code)]
        unsafe {
            Component::deserialize_file(&self.inner.engine, path)
        }
    }
}

fn config(limits: &EngineLimits) -> Config {
    let mut pool = PoolingAllocationConfig::new();
    let instances = limits.instances_max;
    pool.total_component_instances(instances)
        .total_core_instances(instances * CORE_INSTANCES_PER_COMPONENT_MAX)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT_MAX)
        .total_memories(instances * 2)
        .max_memories_per_component(2)
        .total_tables(instances * CORE_INSTANCES_PER_COMPONENT_MAX)
        .max_tables_per_component(CORE_INSTANCES_PER_COMPONENT_MAX)
        .max_memory_size(limits.memory_bytes_max);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    config
}

/// Advances the engine's epoch every tick until the engine is dropped; this is
/// what interrupts a guest that runs past its deadline.
fn spawn_ticker(engine: Engine, stop: Arc<AtomicBool>) -> Result<(), PluginError> {
    std::thread::Builder::new()
        .name("es-plugin-epoch".into())
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(EPOCH_TICK_MS));
                engine.increment_epoch();
            }
        })
        .map(drop)
        .map_err(|e| PluginError::Engine(format!("cannot start the epoch ticker: {e}")))
}

/// Tells a component from a core module or non-Wasm bytes before compiling, so
/// the error says what the bytes are.
fn check_component_header(plugin: &str, wasm: &[u8]) -> Result<(), PluginError> {
    const MAGIC: &[u8] = b"\0asm";
    let reason = match (wasm.get(..4), wasm.get(4..8)) {
        (Some(MAGIC), Some([0x0d, 0x00, 0x01, 0x00])) => return Ok(()),
        (Some(MAGIC), Some([0x01, 0x00, 0x00, 0x00])) => {
            "it is a core module; wrap it with `wasm-tools component new`"
        }
        (Some(MAGIC), _) => "unknown WebAssembly version or layer",
        _ => "no WebAssembly magic number",
    };
    Err(PluginError::NotAComponent { plugin: plugin.to_owned(), reason: reason.to_owned() })
}

fn compile_error(plugin: &str, e: &wasmtime::Error) -> PluginError {
    PluginError::Compile { plugin: plugin.to_owned(), reason: format!("{e:#}") }
}

fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), PluginError> {
    let err = |source| PluginError::Cache { path: path.to_owned(), source };
    // A unique temporary name, so two loaders compiling the same plugin at once
    // never write into each other's file; the rename makes the winner visible whole.
    let tmp = path.with_extension(format!("tmp-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

/// Feeds wasmtime's compatibility hash into sha256, which (unlike `DefaultHasher`)
/// is stable across Rust releases.
fn compat_hex(engine: &Engine) -> String {
    struct ShaHasher(Sha256);
    impl Hasher for ShaHasher {
        fn finish(&self) -> u64 {
            0 // unused: the digest is read from the inner state
        }
        fn write(&mut self, bytes: &[u8]) {
            self.0.update(bytes);
        }
    }
    let mut hasher = ShaHasher(Sha256::new());
    engine.precompile_compatibility_hash().hash(&mut hasher);
    hex(&hasher.0.finalize()[..16])
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_check_names_what_the_bytes_are() {
        let core = b"\0asm\x01\0\0\0";
        let err = check_component_header("p", core).unwrap_err().to_string();
        assert!(err.contains("core module"), "{err}");
        assert!(check_component_header("p", b"hello").is_err());
        assert!(check_component_header("p", b"\0asm\x0d\0\x01\0").is_ok());
    }
}
