//! The registry's validator bindings and plugins: loading a topic's chain, keeping
//! it fresh for the schema registry's generation, binding, and the plugin store's
//! upload and remove rules (which depend on what topics bind).

use super::*;

impl Registry {
    /// Uploaded schema-compat checkers replace the built-in checker of each type
    /// they support; one that no longer loads is reported and skipped.
    pub(super) fn install_uploaded_checkers(&self, repairs: &mut Vec<String>) {
        for manifest in self.plugins.uploaded_checkers() {
            let loaded =
                self.plugins.wasm(&manifest).and_then(|wasm| self.plugins.load_checker(&manifest, &wasm));
            match loaded {
                Ok(checker) => {
                    crate::schemas::install(self.schemas().checkers(), Arc::new(checker));
                }
                Err(e) => repairs.push(format!(
                    "schema checker plugin {:?} cannot be loaded ({e}); the built-in checkers stay in use",
                    manifest.name
                )),
            }
        }
    }

    pub fn plugins(&self) -> &Plugins {
        &self.plugins
    }

    /// Loads the validators of a topic at startup. A binding that cannot be loaded
    /// (its plugin is gone or refuses its config) is kept and fails every batch
    /// under its policy, so a topic never silently loses its validation.
    pub(super) fn load_chain(
        &self,
        topic: &str,
        specs: &[ValidatorBinding],
        repairs: &mut Vec<String>,
    ) -> Chain {
        let links = specs
            .iter()
            .map(|spec| {
                let loaded = self.plugins.get(&spec.plugin).and_then(|m| {
                    let wasm = self.plugins.wasm(&m)?;
                    let config = self.binding_config(topic, spec)?;
                    Ok((m.sha256.clone(), self.plugins.load_validator(&m, &wasm, &config)?))
                });
                match loaded {
                    Ok((sha, validator)) => Link::new(spec.clone(), sha, Ok(validator)),
                    // In a cluster: the blob is on its way; the chain is rebuilt when it arrives.
                    Err(BrokerError::PluginUnavailable { sha256, .. }) => {
                        Link::awaiting_blob(spec.clone(), sha256)
                    }
                    Err(e) => {
                        repairs.push(format!(
                            "topic {topic:?}: validator {:?} cannot be loaded ({e}); produce to it fails until it is rebound",
                            spec.plugin
                        ));
                        Link::new(spec.clone(), String::new(), Err(e.to_string()))
                    }
                }
            })
            .collect();
        Chain { links, schema_generation: self.schema_generation(specs) }
    }

    /// The registry's generation when a chain enforces registered schemas (it must
    /// be rebuilt once the registry changes); before the registry is open, a value
    /// that never matches, so the first produce rebuilds it.
    pub(super) fn schema_generation(&self, specs: &[ValidatorBinding]) -> Option<u64> {
        specs
            .iter()
            .any(|s| s.plugin == crate::schemas::ENFORCE_PLUGIN)
            .then(|| self.schemas.get().map_or(u64::MAX, |s| s.generation()))
    }

    /// A binding's config as its validator gets it: the `schema-registry`
    /// validator's comes from the schema registry (the user sets only its
    /// strategy), every other one is the binding's own.
    pub(super) fn binding_config(
        &self,
        topic: &str,
        spec: &ValidatorBinding,
    ) -> Result<BTreeMap<String, String>> {
        if spec.plugin != crate::schemas::ENFORCE_PLUGIN {
            return Ok(spec.config.clone());
        }
        let Some(schemas) = self.schemas.get() else {
            return Err(BrokerError::Internal("the schema registry is not open yet".into()));
        };
        schemas
            .read(|state| Ok(crate::schemas::enforcement_config(state, topic, &spec.config)))
            .map_err(|e| BrokerError::Internal(e.to_string()))?
            .map_err(|e| BrokerError::InvalidConfig(format!("validator {:?}: {e}", spec.plugin)))
    }

    /// The validator chain a produce to `topic` runs. A chain that enforces
    /// registered schemas is rebuilt first when the registry changed since it was
    /// built, so a newly registered schema is accepted from the next produce on.
    pub async fn validators(self: &Arc<Self>, topic: &Arc<Topic>) -> Arc<Chain> {
        let chain = topic.validators();
        let Some(built) = chain.schema_generation else { return chain };
        if self.schemas.get().is_some_and(|s| s.generation() == built) {
            return chain;
        }
        let (this, t) = (self.clone(), topic.clone());
        tokio::task::spawn_blocking(move || this.refresh_chain(&t)).await.unwrap_or(chain)
    }

    /// Rebuilds a schema-enforcing chain. It never takes the admin lock (a produce
    /// must not wait behind a create's fsyncs): the new chain is installed only if
    /// the topic's bindings are still the ones it was built from, checked under the
    /// chain's own lock, so a concurrent rebinding always wins.
    pub(super) fn refresh_chain(&self, topic: &Topic) -> Arc<Chain> {
        let current = topic.validators();
        let specs = topic.meta.lock().expect("meta lock").validators.clone();
        if current.schema_generation == self.schema_generation(&specs) {
            return current; // another produce refreshed it meanwhile
        }
        let mut problems = Vec::new();
        let chain = Arc::new(self.load_chain(&topic.name(), &specs, &mut problems));
        for problem in problems {
            tracing::warn!("{problem}");
        }
        let mut slot = topic.validators.write().expect("validators lock");
        if topic.meta.lock().expect("meta lock").validators != specs {
            return slot.clone(); // rebound meanwhile: the rebinding's chain stands
        }
        *slot = chain.clone();
        chain
    }

    /// Loads a chain for bindings the metadata accepted; any failure refuses the change.
    pub(super) fn build_chain(
        &self,
        topic: &str,
        specs: &[ValidatorBinding],
        replacing: Option<(&Manifest, &[u8])>,
    ) -> Result<Chain> {
        let mut links = Vec::new();
        for spec in specs {
            let (manifest, wasm) = match replacing {
                Some((m, wasm)) if m.name == spec.plugin => (m.clone(), Arc::from(wasm)),
                _ => {
                    let m = self.plugins.get(&spec.plugin)?;
                    let wasm = self.plugins.wasm(&m)?;
                    (m, wasm)
                }
            };
            let config = self.binding_config(topic, spec)?;
            let validator = self.plugins.load_validator(&manifest, &wasm, &config)?;
            links.push(Link::new(spec.clone(), manifest.sha256.clone(), Ok(validator)));
        }
        Ok(Chain { links, schema_generation: self.schema_generation(specs) })
    }

    /// Binds `specs` to a topic, replacing its validators: every validator is
    /// loaded and configured first, then the bindings are made durable, then the
    /// chain is swapped in. Batches in flight finish on the old chain.
    pub fn set_validators(&self, name: &str, specs: Vec<ValidatorBinding>) -> Result<Vec<ValidatorBinding>> {
        self.check_running()?;
        if let Some(cluster) = self.replicator_for(Origin::Client) {
            return self.set_validators_clustered(cluster, name, specs);
        }
        let _admin = self.admin.lock().expect("admin lock");
        let command = self.metadata().bind_validators(name, specs.clone())?;
        let topic = self.topic(name)?;
        let chain = self.build_chain(name, &specs, None)?;
        let next = self.commit(&command)?.topic(name).expect("the topic the command bound").clone();
        *topic.meta.lock().expect("meta lock") = next;
        *topic.validators.write().expect("validators lock") = Arc::new(chain);
        tracing::info!(topic = name, validators = ?specs.iter().map(|s| &s.plugin).collect::<Vec<_>>(), "bound validators");
        Ok(specs)
    }

    /// Stores an uploaded plugin. A new version of a bound plugin (`replace`) is
    /// loaded for every binding first; the swap happens only if all load. In a
    /// cluster the checks are the same and the upload is then replicated
    /// (`cluster_plugins.rs`): every node swaps when it applies it.
    pub fn add_plugin(&self, upload: Upload) -> Result<(Manifest, bool)> {
        self.check_running()?;
        let manifest = self.plugins.inspect(&upload)?;
        let checker = if manifest.world == crate::plugins::COMPAT_WORLD {
            Some(Arc::new(self.plugins.load_checker(&manifest, &upload.wasm)?))
        } else {
            None
        };
        let admin = self.admin.lock().expect("admin lock");
        let existing = self.plugins.get(&upload.name).ok();
        if let Some(old) = &existing {
            if old.sha256 == manifest.sha256
                && old.default_config == manifest.default_config
                && old.limits == manifest.limits
            {
                return Ok((old.clone(), false));
            }
            if !upload.replace {
                return Err(BrokerError::PluginExists(upload.name));
            }
        }
        let mut swaps = Vec::new();
        for topic in self.list() {
            let specs = topic.meta.lock().expect("meta lock").validators.clone();
            if specs.iter().any(|s| s.plugin == manifest.name) {
                let chain = self.build_chain(&topic.name(), &specs, Some((&manifest, &upload.wasm)))?;
                swaps.push((topic, chain));
            }
        }
        if let Some(cluster) = self.replicator_for(Origin::Client) {
            drop(admin);
            let manifest = self.add_plugin_clustered(cluster, manifest, &upload.wasm, upload.replace)?;
            return Ok((manifest, existing.is_none()));
        }
        self.plugins.store(&manifest, &upload.wasm)?;
        if let Some(checker) = checker {
            let types = crate::schemas::install(self.schemas().checkers(), checker);
            tracing::info!(plugin = %manifest.name, ?types, "schema compatibility checker installed");
        }
        for (topic, chain) in swaps {
            *topic.validators.write().expect("validators lock") = Arc::new(chain);
            tracing::info!(topic = %topic.name(), plugin = %manifest.name, sha256 = %manifest.sha256, "validator moved to a new plugin version");
        }
        Ok((manifest, existing.is_none()))
    }

    /// Topics whose validators use plugin `name`.
    pub fn plugin_users(&self, name: &str) -> Vec<String> {
        self.list()
            .iter()
            .filter(|t| t.meta.lock().expect("meta lock").validators.iter().any(|s| s.plugin == name))
            .map(|t| t.name())
            .collect()
    }

    /// Forgets an uploaded plugin; refused for built-ins and while it is bound. In
    /// a cluster the removal is replicated and re-checked where it is applied.
    pub fn remove_plugin(&self, name: &str) -> Result<()> {
        self.check_running()?;
        let admin = self.admin.lock().expect("admin lock");
        let manifest = self.removable_plugin(name)?;
        if let Some(cluster) = self.replicator_for(Origin::Client) {
            drop(admin);
            return cluster.replicate(Command::RemovePlugin { name: name.to_owned() });
        }
        self.finish_remove_plugin(&manifest)
    }

    /// The plugin `name`, if it may be removed: uploaded and bound to no topic.
    pub(super) fn removable_plugin(&self, name: &str) -> Result<Manifest> {
        let manifest = self.plugins.get(name)?;
        if manifest.builtin {
            return Err(BrokerError::InvalidRequest(format!(
                "{name:?} is a built-in plugin and cannot be removed"
            )));
        }
        let topics = self.plugin_users(name);
        if !topics.is_empty() {
            return Err(BrokerError::PluginInUse { name: name.to_owned(), topics });
        }
        Ok(manifest)
    }

    /// Removes a plugin `removable_plugin` allowed; the caller holds the admin lock.
    pub(super) fn finish_remove_plugin(&self, manifest: &Manifest) -> Result<()> {
        let name = manifest.name.as_str();
        self.plugins.remove(name)?;
        if manifest.world == crate::plugins::COMPAT_WORLD {
            // Its schema types go back to the built-in checkers.
            let builtin = crate::schemas::builtin_checkers(self.plugins.engine());
            self.schemas().checkers().restore(&builtin, &manifest.supports);
        }
        tracing::info!(plugin = name, "removed plugin");
        Ok(())
    }
}
