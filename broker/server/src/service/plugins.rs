//! Plugins and the validators bound to topics, as service calls: upload, list,
//! describe and remove a plugin (cluster-wide, shared by every topic admin), read
//! and bind a topic's validator chain. Each is authorized through the one table
//! before anything is looked up; the blocking work (compiling a component, durable
//! writes) runs off the async workers.

use std::sync::atomic::Ordering;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::offsets::blocking;
use super::{Call, Principal, Resource, Result, Service};
use crate::plugins::binding::ValidatorBinding;
use crate::plugins::{Manifest, Upload};
use crate::registry::Topic;

/// A stored plugin and the topics whose validators use it.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    pub manifest: Manifest,
    pub bound_to: Vec<String>,
}

/// One link of a topic's validator chain, with what it has done since the broker
/// started (the HTTP answer's shape too).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct BoundValidator {
    #[serde(flatten)]
    pub binding: ValidatorBinding,
    /// The plugin version (sha256) this binding runs.
    pub sha256: String,
    /// Why the binding could not be loaded; produce fails until it is rebound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_error: Option<String>,
    pub batches: u64,
    pub rejected: u64,
    pub dead_lettered: u64,
    pub warned: u64,
    pub plugin_failures: u64,
}

impl Service {
    fn plugin_info(&self, manifest: Manifest) -> PluginInfo {
        let bound_to = self.registry.plugin_users(&manifest.name);
        PluginInfo { manifest, bound_to }
    }

    pub async fn list_plugins(&self, principal: &Principal) -> Result<Vec<PluginInfo>> {
        self.authorize(principal, Call::ListPlugins, Resource::Cluster)?;
        let registry = self.registry.clone();
        let manifests = blocking(move || registry.plugins().list()).await?;
        Ok(manifests.into_iter().map(|m| self.plugin_info(m)).collect())
    }

    pub async fn describe_plugin(&self, principal: &Principal, name: String) -> Result<PluginInfo> {
        self.authorize(principal, Call::DescribePlugin, Resource::Cluster)?;
        let registry = self.registry.clone();
        let manifest = blocking(move || registry.plugins().get(&name)).await?;
        Ok(self.plugin_info(manifest))
    }

    /// Stores a component (or replaces one); `true` when it was new.
    pub async fn upload_plugin(&self, principal: &Principal, upload: Upload) -> Result<(PluginInfo, bool)> {
        self.authorize(principal, Call::UploadPlugin, Resource::Cluster)?;
        let registry = self.registry.clone();
        let (manifest, created) = blocking(move || registry.add_plugin(upload)).await?;
        Ok((self.plugin_info(manifest), created))
    }

    pub async fn remove_plugin(&self, principal: &Principal, name: String) -> Result<()> {
        self.authorize(principal, Call::RemovePlugin, Resource::Cluster)?;
        let registry = self.registry.clone();
        blocking(move || registry.remove_plugin(&name)).await
    }

    /// A topic's validator chain, in the order it runs.
    pub fn validators(&self, principal: &Principal, topic: &str) -> Result<Vec<BoundValidator>> {
        self.authorize(principal, Call::DescribeValidators, Resource::Topic(topic.to_owned()))?;
        Ok(chain_state(&*self.topic(topic)?))
    }

    /// Binds `specs` as the topic's chain (durable); new produces run it.
    pub async fn bind_validators(
        &self,
        principal: &Principal,
        topic: &str,
        specs: Vec<ValidatorBinding>,
    ) -> Result<Vec<BoundValidator>> {
        self.authorize(principal, Call::BindValidators, Resource::Topic(topic.to_owned()))?;
        let (registry, name) = (self.registry.clone(), topic.to_owned());
        blocking(move || registry.set_validators(&name, specs)).await?;
        Ok(chain_state(&*self.topic(topic)?))
    }
}

fn chain_state(topic: &Topic) -> Vec<BoundValidator> {
    let chain = topic.validators();
    let links = chain.links.iter().map(|link| {
        let c = &link.counters;
        BoundValidator {
            binding: link.spec.clone(),
            sha256: link.sha256.clone(),
            load_error: link.load_error().map(str::to_owned),
            batches: c.batches.load(Ordering::Relaxed),
            rejected: c.rejected.load(Ordering::Relaxed),
            dead_lettered: c.dead_lettered.load(Ordering::Relaxed),
            warned: c.warned.load(Ordering::Relaxed),
            plugin_failures: c.plugin_failures.load(Ordering::Relaxed),
        }
    });
    links.collect()
}
