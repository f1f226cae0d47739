//! Plugins and validator bindings in a cluster. An upload, a removal and a
//! binding are planned and checked on the node that receives them, then go
//! through the metadata log like every topic change; each node applies them here.
//!
//! An upload's command carries the manifest (with the blob's sha256), not the
//! blob. The receiving node stores the blob durably before it proposes (staged:
//! kept from the unnamed-blob sweep until its manifest names it). A node that
//! applies the command without the blob records the manifest with the blob
//! missing and goes on applying later commands in order; the cluster's blob
//! fetcher (`cluster/blobs.rs`) gets the blob from a peer in the background,
//! verifies its sha256 and calls [`Registry::blob_arrived`], which rebuilds the
//! chains that bind it. Until then such a chain holds a link awaiting its blob,
//! and a produce through it is refused as retriable (`PluginUnavailable`),
//! never written unvalidated.

use std::time::{Duration, Instant};

use super::*;
use crate::cluster::Cluster;

/// How long binding a plugin whose blob is still on its way waits for it on the
/// node that plans the binding (which loads every validator first).
const BIND_BLOB_WAIT: Duration = Duration::from_secs(10);

impl Registry {
    /// An upload in a cluster (`add_plugin` checked it and prepared the swaps):
    /// the blob is staged durably here, then the manifest is committed cluster-wide.
    pub(super) fn add_plugin_clustered(
        &self,
        cluster: &Cluster,
        manifest: Manifest,
        wasm: &[u8],
        replace: bool,
    ) -> Result<Manifest> {
        self.plugins.stage(&manifest, wasm)?;
        let sha256 = manifest.sha256.clone();
        match cluster.replicate(Command::PutPlugin { manifest: manifest.clone(), replace }) {
            Ok(()) => self.plugins.unstage(&sha256)?,
            // Committed perhaps, not applied here yet: this node may be the only one
            // holding the blob, so it stays staged (a restart sweeps it if no
            // manifest names it by then).
            Err(
                e @ (BrokerError::Internal(_)
                | BrokerError::NotLeader { .. }
                | BrokerError::LeadershipLost { .. }),
            ) => return Err(e),
            // Refused alike on every node (a plugin of that name appeared meanwhile).
            Err(e) => {
                self.plugins.unstage(&sha256)?;
                return Err(e);
            }
        }
        tracing::info!(plugin = %manifest.name, sha256 = %manifest.sha256, "uploaded plugin (replicated)");
        Ok(manifest)
    }

    /// Binds validators in a cluster: every validator is loaded here first (so a
    /// refused config is refused before anything is committed), then the binding
    /// is committed; each node builds its chain when it applies it.
    pub(super) fn set_validators_clustered(
        &self,
        cluster: &Cluster,
        name: &str,
        specs: Vec<ValidatorBinding>,
    ) -> Result<Vec<ValidatorBinding>> {
        let command = {
            let _admin = self.admin.lock().expect("admin lock");
            self.metadata().bind_validators(name, specs.clone())?
        };
        self.wait_for_blobs(&specs)?;
        self.build_chain(name, &specs, None)?;
        cluster.replicate(command)?;
        tracing::info!(topic = name, validators = ?specs.iter().map(|s| &s.plugin).collect::<Vec<_>>(), "bound validators (replicated)");
        Ok(specs)
    }

    /// Waits (bounded) until the blobs of the plugins `specs` name are here.
    fn wait_for_blobs(&self, specs: &[ValidatorBinding]) -> Result<()> {
        let deadline = Instant::now() + BIND_BLOB_WAIT;
        loop {
            let missing = specs.iter().find_map(|s| {
                let m = self.plugins.get(&s.plugin).ok()?;
                self.plugins.is_missing(&m.sha256).then_some(m)
            });
            let Some(m) = missing else { return Ok(()) };
            if Instant::now() >= deadline {
                return Err(BrokerError::PluginUnavailable { plugin: m.name, sha256: m.sha256 });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Applies a replicated upload: the manifest is stored (replacing one of the
    /// same name only when the upload said so), then the plugin is put to work
    /// if its blob is here, or the chains that bind it wait for the blob.
    pub(super) fn apply_put_plugin(&self, manifest: &Manifest, replace: bool) -> Result<Applied> {
        let _admin = self.admin.lock().expect("admin lock");
        if manifest.builtin || es_plugin_host::builtin::builtin(&manifest.name).is_some() {
            return Err(BrokerError::InvalidRequest(format!(
                "{:?} is a built-in plugin and cannot be replaced",
                manifest.name
            )));
        }
        if let Ok(old) = self.plugins.get(&manifest.name) {
            if old.sha256 == manifest.sha256
                && old.default_config == manifest.default_config
                && old.limits == manifest.limits
            {
                return Ok(Applied::Unchanged); // applied before
            }
            if !replace {
                return Err(BrokerError::PluginExists(manifest.name.clone()));
            }
        }
        if self.plugins.put_manifest(manifest)? {
            self.activate_plugin(manifest);
        } else {
            tracing::info!(plugin = %manifest.name, sha256 = %manifest.sha256, "plugin applied; its component is fetched from a peer");
            self.reload_users(&manifest.name);
        }
        Ok(Applied::Unchanged)
    }

    /// Applies a replicated removal, re-checked against the bindings as they stand.
    pub(super) fn apply_remove_plugin(&self, name: &str) -> Result<Applied> {
        let _admin = self.admin.lock().expect("admin lock");
        let manifest = self.removable_plugin(name)?;
        self.finish_remove_plugin(&manifest)?;
        Ok(Applied::Unchanged)
    }

    /// Applies a replicated binding: re-checked against this node's metadata (the
    /// same on every node), then the chain is built from whatever is here; a
    /// plugin whose blob is missing gives a link that awaits it.
    pub(super) fn apply_set_validators(
        &self,
        name: &str,
        specs: &[ValidatorBinding],
        command: &Command,
    ) -> Result<Applied> {
        let _admin = self.admin.lock().expect("admin lock");
        self.metadata().bind_validators(name, specs.to_vec())?;
        for spec in specs {
            let manifest = self.plugins.get(&spec.plugin)?;
            if manifest.world != crate::plugins::VALIDATOR_WORLD {
                return Err(BrokerError::InvalidRequest(format!(
                    "plugin {:?} implements `{}`, not `{}`; only record validators bind to topics",
                    spec.plugin,
                    manifest.world,
                    crate::plugins::VALIDATOR_WORLD
                )));
            }
        }
        let topic = self.topic(name)?;
        let next = self.commit(command)?.topic(name).expect("the topic the command bound").clone();
        *topic.meta.lock().expect("meta lock") = next;
        self.reload_chain(&topic, specs);
        Ok(Applied::Unchanged)
    }

    /// Stores a blob a peer sent (verified against `sha256`) and puts every plugin
    /// that names it to work: the chains that waited for it are rebuilt.
    pub fn blob_arrived(&self, sha256: &str, bytes: &[u8]) -> Result<()> {
        if !self.plugins.store_fetched(sha256, bytes)? {
            return Ok(());
        }
        let _admin = self.admin.lock().expect("admin lock");
        for manifest in self.plugins.naming(sha256) {
            tracing::info!(plugin = %manifest.name, %sha256, "plugin component arrived from a peer");
            self.activate_plugin(&manifest);
        }
        Ok(())
    }

    /// On joining the cluster: plugins whose blob was missing at startup are
    /// fetched from a peer, and the chains that bind them wait for it (a single
    /// node instead reports them and runs such a binding as failed).
    pub(crate) fn adopt_stranded_plugins(&self) {
        let _admin = self.admin.lock().expect("admin lock");
        for name in self.plugins.adopt_stranded() {
            tracing::warn!(plugin = %name, "plugin component missing here; fetching it from a peer");
            self.reload_users(&name);
        }
    }

    /// A plugin whose blob is here goes to work: a schema checker is installed,
    /// and the chains that bind it are rebuilt. The caller holds the admin lock.
    fn activate_plugin(&self, manifest: &Manifest) {
        if manifest.world == crate::plugins::COMPAT_WORLD {
            let loaded =
                self.plugins.wasm(manifest).and_then(|wasm| self.plugins.load_checker(manifest, &wasm));
            match loaded {
                Ok(checker) => {
                    let types = crate::schemas::install(self.schemas().checkers(), Arc::new(checker));
                    tracing::info!(plugin = %manifest.name, ?types, "schema compatibility checker installed");
                }
                Err(e) => {
                    tracing::warn!(plugin = %manifest.name, error = %e, "schema checker plugin cannot be loaded; the built-in checkers stay in use")
                }
            }
        }
        self.reload_users(&manifest.name);
    }

    /// Rebuilds the chain of every topic that binds plugin `name`.
    fn reload_users(&self, name: &str) {
        for topic in self.list() {
            let specs = topic.meta.lock().expect("meta lock").validators.clone();
            if specs.iter().any(|s| s.plugin == name) {
                self.reload_chain(&topic, &specs);
            }
        }
    }

    /// Loads `specs` as the topic's chain, a link that cannot load failing closed
    /// (or awaiting its blob), and swaps it in.
    fn reload_chain(&self, topic: &Topic, specs: &[ValidatorBinding]) {
        let mut problems = Vec::new();
        let chain = self.load_chain(&topic.name(), specs, &mut problems);
        for problem in problems {
            tracing::warn!("{problem}");
        }
        *topic.validators.write().expect("validators lock") = Arc::new(chain);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node that applies an upload and a binding before the blob arrives: the
    /// chain awaits the blob (a produce is refused), a blob with the wrong hash
    /// changes nothing, the right one loads the chain; removal is re-checked.
    #[test]
    fn a_binding_awaits_a_missing_blob_and_loads_when_a_verified_one_arrives() {
        let dir = tempfile::tempdir().unwrap();
        let r = Registry::open(BrokerOptions::new(dir.path())).unwrap().0;
        r.create("orders", 1, &BTreeMap::new()).unwrap();
        let wasm = es_plugin_host::builtin::RULES.to_vec();
        let upload = Upload { name: "gate".into(), wasm: wasm.clone(), ..Upload::default() };
        let manifest = r.plugins().inspect(&upload).unwrap();
        let put = Command::PutPlugin { manifest: manifest.clone(), replace: false };
        r.apply_replicated(&put).unwrap();
        assert!(r.plugins().is_missing(&manifest.sha256));
        r.apply_replicated(&put).unwrap(); // applied twice: unchanged

        let spec = ValidatorBinding {
            plugin: "gate".into(),
            config: BTreeMap::from([("value.format".into(), "json".into())]),
            on_failure: crate::plugins::binding::FailurePolicy::Warn,
            dead_letter_topic: None,
            mode: Default::default(),
        };
        let bind = Command::SetValidators { name: "orders".into(), validators: vec![spec.clone()] };
        r.apply_replicated(&bind).unwrap();
        let topic = r.topic("orders").unwrap();
        let chain = topic.validators();
        let awaiting = chain.awaiting_blob().expect("the link awaits its blob, even under warn");
        assert_eq!(awaiting.sha256, manifest.sha256);

        let mut wrong = wasm.clone();
        wrong[10] ^= 1;
        assert!(r.blob_arrived(&manifest.sha256, &wrong).is_err(), "a wrong hash is refused");
        assert!(topic.validators().awaiting_blob().is_some());
        r.blob_arrived(&manifest.sha256, &wasm).unwrap();
        let chain = topic.validators();
        assert!(chain.awaiting_blob().is_none());
        assert!(chain.links[0].validator().is_some(), "loaded once the blob is here");

        let remove = Command::RemovePlugin { name: "gate".into() };
        assert_eq!(r.apply_replicated(&remove).err().unwrap().code(), "plugin_in_use");
        let unbind = Command::SetValidators { name: "orders".into(), validators: Vec::new() };
        r.apply_replicated(&unbind).unwrap();
        r.apply_replicated(&remove).unwrap();
        assert_eq!(std::fs::read_dir(dir.path().join("plugins/blobs")).unwrap().count(), 0);
        let other = Command::SetValidators { name: "orders".into(), validators: vec![spec] };
        assert_eq!(r.apply_replicated(&other).err().unwrap().code(), "plugin_not_found");
    }
}
