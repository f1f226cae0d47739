//! A loaded authenticator plugin: a SASL mechanism in the sandbox. Each handshake
//! is an [`AuthSession`] that checks out one warm instance for its whole life
//! (the guest's session resource lives in that instance's store), sets the
//! broker's lookups on it, and bounds every step: the auth-step deadline, the
//! memory cap, [`AUTH_STEPS_MAX`] steps and the size of what comes back. A
//! failed step ends the session with a typed error and the instance is dropped;
//! a session that ends well gives its instance back.

use std::sync::Arc;

use wasmtime::component::ResourceAny;

use crate::bindings::auth::exports::es::plugin::auth::StepResult;
use crate::bindings::auth::{Authenticator as AuthWorld, AuthenticatorPre};
use crate::engine::PluginEngine;
use crate::error::PluginError;
use crate::limits::{AUTH_CHALLENGE_BYTES_MAX, AUTH_PRINCIPAL_BYTES_MAX, AUTH_STEPS_MAX, PluginLimits};
use crate::pool::Warm;
use crate::runtime::{self, Plugin, PluginInfo, PluginStats, cut};

runtime::impl_world!(
    AuthWorld,
    AuthenticatorPre,
    "es:plugin/authenticator@0.1.0",
    ["es:plugin/lifecycle@0.1.", "es:plugin/auth@0.1."]
);

/// A SCRAM credential of one key, as RFC 5802 stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScramSecret {
    pub salt: Vec<u8>,
    pub iterations: u32,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
}

/// What the broker answers a mechanism during a handshake (the `auth-host` WIT
/// interface). Implementations see only active keys.
pub trait AuthLookup: Send + Sync {
    /// Whether `id` is an active API key.
    fn key_exists(&self, id: &str) -> bool;
    /// The SCRAM credential of the active key `id` for `mechanism`.
    fn scram_credential(&self, mechanism: &str, id: &str) -> Option<ScramSecret>;
    /// The broker's clock, milliseconds since the epoch.
    fn now_ms(&self) -> i64;
    /// `len` bytes from a CSPRNG.
    fn random_bytes(&self, len: usize) -> Vec<u8>;
}

/// What one step decided, as the guest said it (the broker still checks a
/// `Done` principal against its keys).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthStep {
    Done(String),
    Challenge(Vec<u8>),
    Failed(String),
}

/// An authenticator plugin ready to start sessions from any thread.
pub struct Authenticator {
    plugin: Arc<Plugin<AuthWorld>>,
    info: PluginInfo,
    mechanisms: Vec<String>,
}

impl std::fmt::Debug for Authenticator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Authenticator")
            .field("name", &self.plugin.name())
            .field("mechanisms", &self.mechanisms)
            .finish_non_exhaustive()
    }
}

impl Authenticator {
    /// Loads `wasm` as the authenticator `name`: the world and import checks,
    /// one configured instance (kept warm), and its `mechanisms()`.
    pub fn load(
        engine: &PluginEngine,
        name: &str,
        wasm: &[u8],
        config: Vec<(String, String)>,
        limits: PluginLimits,
    ) -> Result<Self, PluginError> {
        let (plugin, info) = Plugin::<AuthWorld>::load(engine, name, wasm, config, limits)?;
        let mechanisms = plugin.at_load(|b, s| b.es_plugin_auth().call_mechanisms(s))?;
        if mechanisms.is_empty() || mechanisms.iter().any(|m| !valid_mechanism(m)) {
            return Err(plugin.garbage(format!("mechanisms() must list SASL names, got {mechanisms:?}")));
        }
        Ok(Self { plugin: Arc::new(plugin), info, mechanisms })
    }

    /// The checks of `load` and `info()`, without configuring the plugin: what an
    /// upload checks before any configuration is known.
    pub fn inspect(engine: &PluginEngine, name: &str, wasm: &[u8]) -> Result<PluginInfo, PluginError> {
        Plugin::<AuthWorld>::inspect(engine, name, wasm)
    }

    pub fn info(&self) -> &PluginInfo {
        &self.info
    }

    /// The SASL mechanism names the plugin implements.
    pub fn mechanisms(&self) -> &[String] {
        &self.mechanisms
    }

    pub fn stats(&self) -> PluginStats {
        self.plugin.stats()
    }

    pub fn warm_instances(&self) -> usize {
        self.plugin.warm_instances()
    }

    /// Starts one handshake for `mechanism` with the broker's `lookup`. The
    /// session holds an instance until it ends or is dropped.
    pub fn session(&self, mechanism: &str, lookup: Arc<dyn AuthLookup>) -> Result<AuthSession, PluginError> {
        if !self.mechanisms.iter().any(|m| m == mechanism) {
            return Err(PluginError::Garbage {
                plugin: self.plugin.name().to_owned(),
                reason: format!("mechanism {mechanism} is not one of {:?}", self.mechanisms),
            });
        }
        let mut warm = self.plugin.checkout()?;
        warm.store.data_mut().auth = Some(lookup);
        let created = self
            .plugin
            .call_on(&mut warm, |b, s| b.es_plugin_auth().session().call_constructor(s, mechanism));
        let resource = created?;
        Ok(AuthSession { plugin: self.plugin.clone(), warm: Some(warm), resource: Some(resource), steps: 0 })
    }
}

/// One handshake. After `Done`, `Failed` or an error, every further step fails.
pub struct AuthSession {
    plugin: Arc<Plugin<AuthWorld>>,
    /// `None` once the session has ended.
    warm: Option<Warm<AuthWorld>>,
    resource: Option<ResourceAny>,
    steps: u32,
}

impl std::fmt::Debug for AuthSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthSession")
            .field("plugin", &self.plugin.name())
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

impl AuthSession {
    /// Passes the client's message to the guest. A trap, the deadline, the memory
    /// cap, too many steps or an oversized answer is an error and ends the
    /// session; the instance is discarded.
    pub fn step(&mut self, response: &[u8]) -> Result<AuthStep, PluginError> {
        let (Some(warm), Some(resource)) = (self.warm.as_mut(), self.resource) else {
            return Err(self.garbage("a step after the session ended".into()));
        };
        self.steps += 1;
        if self.steps > AUTH_STEPS_MAX {
            self.discard();
            return Err(self.garbage(format!("more than {AUTH_STEPS_MAX} steps")));
        }
        let result =
            self.plugin.call_on(warm, |b, s| b.es_plugin_auth().session().call_step(s, resource, response));
        let step = match result {
            Ok(step) => step,
            Err(e) => {
                self.discard();
                return Err(e);
            }
        };
        match step {
            StepResult::Challenge(bytes) if bytes.len() <= AUTH_CHALLENGE_BYTES_MAX => {
                Ok(AuthStep::Challenge(bytes))
            }
            StepResult::Challenge(bytes) => {
                self.discard();
                Err(self.garbage(format!("a challenge of {} bytes", bytes.len())))
            }
            StepResult::Done(principal) if principal.len() <= AUTH_PRINCIPAL_BYTES_MAX => {
                self.finish();
                Ok(AuthStep::Done(principal))
            }
            StepResult::Done(principal) => {
                self.discard();
                Err(self.garbage(format!("a principal of {} bytes", principal.len())))
            }
            StepResult::Failed(reason) => {
                self.finish();
                Ok(AuthStep::Failed(cut(reason)))
            }
        }
    }

    fn garbage(&self, reason: String) -> PluginError {
        self.plugin.garbage(reason)
    }

    /// Ends the session well: drops the guest's resource and gives the instance
    /// back, without the broker's lookups.
    fn finish(&mut self) {
        let (Some(mut warm), Some(resource)) = (self.warm.take(), self.resource.take()) else {
            return;
        };
        warm.store.data_mut().auth = None;
        // A guest destructor runs here; should it fail, the instance is not reused.
        if resource.resource_drop(&mut warm.store).is_ok() {
            self.plugin.checkin(warm);
        }
    }

    /// Ends the session after a failure: the instance is dropped, never reused.
    fn discard(&mut self) {
        self.warm = None;
        self.resource = None;
    }
}

impl Drop for AuthSession {
    /// A client that disconnects mid-handshake leaves a healthy instance behind.
    fn drop(&mut self) {
        self.finish();
    }
}

/// A SASL mechanism name (RFC 4422: 1-20 of A-Z, 0-9, `-` and `_`).
fn valid_mechanism(name: &str) -> bool {
    (1..=20).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mechanism_names_follow_rfc_4422() {
        assert!(valid_mechanism("OAUTHBEARER"));
        assert!(valid_mechanism("SCRAM-SHA-512"));
        assert!(!valid_mechanism(""));
        assert!(!valid_mechanism("oauthbearer"));
        assert!(!valid_mechanism("A-MECHANISM-NAME-TOO-LONG"));
    }
}
