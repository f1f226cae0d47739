//! The SASL mechanisms the broker serves (`--auth-mechanisms`): the built-ins
//! (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and mechanisms from authenticator
//! plugins (`OAUTHBEARER:jwt`: mechanism OAUTHBEARER from the plugin named
//! `jwt`). A plugin mechanism runs as an `es_plugin_host::AuthSession` behind
//! es-auth's `MechanismSession`, so the listener treats it like a built-in; the
//! principal a plugin names is accepted only when it is an active key.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock};

use es_auth::{AuthState, CredentialSource, FailReason, KeyId, MechanismSession, ScramMechanism, Step};
use es_core::Clock;
use es_plugin_host::{AuthLookup, AuthSession, AuthStep, Authenticator, ScramSecret};

use crate::plugins::{LimitsSpec, Manifest, Plugins};
use crate::service::error::{BrokerError, Result};

/// The built-in mechanisms.
pub const PLAIN: &str = "PLAIN";
pub const SCRAM_SHA_256: &str = "SCRAM-SHA-256";
pub const SCRAM_SHA_512: &str = "SCRAM-SHA-512";

/// What is offered when `--auth-mechanisms` is not given, strongest first.
pub const DEFAULT_MECHANISMS: &[&str] = &[SCRAM_SHA_512, SCRAM_SHA_256, PLAIN];

/// One configured mechanism.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mechanism {
    /// The SASL name the client asks for. `'static` because every session and
    /// exchange names its mechanism; the configured names are leaked once at
    /// start (a handful of short strings for the process's life).
    pub name: &'static str,
    /// The authenticator plugin that implements it; `None` for a built-in.
    pub plugin: Option<String>,
}

/// Parses `--auth-mechanisms` entries: `NAME` for a built-in, `NAME:plugin`
/// for a plugin mechanism. An empty list is the default set.
pub fn parse(entries: &[String]) -> Result<Vec<Mechanism>> {
    if entries.is_empty() {
        return Ok(DEFAULT_MECHANISMS.iter().map(|name| Mechanism { name, plugin: None }).collect());
    }
    let mut out: Vec<Mechanism> = Vec::new();
    for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        let (name, plugin) = match entry.split_once(':') {
            Some((name, plugin)) => (name, Some(plugin.to_owned())),
            None => (entry, None),
        };
        let builtin = DEFAULT_MECHANISMS.iter().find(|b| **b == name).copied();
        let name: &'static str = match (builtin, &plugin) {
            (Some(b), None) => b,
            (None, Some(p)) if !p.is_empty() && valid_name(name) => {
                Box::leak(name.to_owned().into_boxed_str())
            }
            (Some(_), Some(_)) | (None, _) => {
                return Err(BrokerError::InvalidConfig(format!(
                    "auth mechanism {entry:?}: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, or NAME:plugin for a \
                     mechanism an authenticator plugin implements (e.g. OAUTHBEARER:jwt)"
                )));
            }
        };
        if out.iter().any(|m| m.name == name) {
            return Err(BrokerError::InvalidConfig(format!("auth mechanism {name} is listed twice")));
        }
        out.push(Mechanism { name, plugin });
    }
    Ok(out)
}

/// A SASL mechanism name (RFC 4422: 1-20 of A-Z, 0-9, `-` and `_`).
fn valid_name(name: &str) -> bool {
    (1..=20).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

/// What an authenticator was loaded from. The same component re-uploaded with
/// another configuration (a rotated JWT key, say) is another version: comparing
/// the component alone kept the old key in force.
#[derive(PartialEq)]
struct Version {
    sha256: String,
    config: BTreeMap<String, String>,
    limits: LimitsSpec,
}

impl Version {
    fn of(manifest: &Manifest) -> Version {
        Version {
            sha256: manifest.sha256.clone(),
            config: manifest.default_config.clone(),
            limits: manifest.limits.clone(),
        }
    }
}

/// The loaded authenticator plugins, reloaded when a plugin is replaced.
#[derive(Default)]
pub struct PluginMechanisms {
    plugins: OnceLock<Arc<Plugins>>,
    /// Plugin name -> (the version it was loaded from, loaded authenticator).
    loaded: Mutex<HashMap<String, (Version, Arc<Authenticator>)>>,
}

impl PluginMechanisms {
    pub fn set_plugins(&self, plugins: Arc<Plugins>) {
        // Set once, by the registry at start; a second call is a no-op.
        let _ = self.plugins.set(plugins);
    }

    /// The authenticator `plugin` as stored now, loaded once per version (its
    /// component, configuration and limits: a replaced key must take effect). An
    /// error (no such plugin, another world, a bad configuration) fails the
    /// handshake; the broker logs it.
    fn authenticator(&self, plugin: &str) -> Result<Arc<Authenticator>> {
        let plugins = self
            .plugins
            .get()
            .ok_or_else(|| BrokerError::Internal("authenticator plugins are not available".into()))?;
        let manifest = plugins.get(plugin)?;
        let mut loaded = self.loaded.lock().expect("authenticators lock");
        let version = Version::of(&manifest);
        if let Some((loaded_from, a)) = loaded.get(plugin)
            && *loaded_from == version
        {
            return Ok(a.clone());
        }
        let wasm = plugins.wasm(&manifest)?;
        let a = Arc::new(plugins.load_authenticator(&manifest, &wasm)?);
        loaded.insert(plugin.to_owned(), (version, a.clone()));
        Ok(a)
    }

    /// A session of `mechanism` from `plugin`, or `None` (logged) when the plugin
    /// cannot start one.
    pub fn session(
        &self,
        mechanism: &'static str,
        plugin: &str,
        state: Arc<AuthState>,
        clock: Arc<dyn Clock>,
    ) -> Option<Box<dyn MechanismSession>> {
        let lookup = Arc::new(Lookup { state: state.clone(), clock });
        // Loading (the first time: compiling) and instantiating block, like a step.
        let started = off_the_runtime(|| {
            self.authenticator(plugin).and_then(|a| a.session(mechanism, lookup).map_err(BrokerError::from))
        });
        match started {
            Ok(session) => {
                Some(Box::new(PluginSession { mechanism, plugin: plugin.to_owned(), session, state }))
            }
            Err(e) => {
                tracing::warn!(mechanism, plugin, error = %e, "auth: cannot start a plugin mechanism");
                None
            }
        }
    }
}

/// The broker's answers to a plugin, over one consistent snapshot of the state.
struct Lookup {
    state: Arc<AuthState>,
    clock: Arc<dyn Clock>,
}

impl AuthLookup for Lookup {
    fn key_exists(&self, id: &str) -> bool {
        KeyId::parse(id).is_ok_and(|id| self.state.active_key(&id).is_some())
    }

    fn scram_credential(&self, mechanism: &str, id: &str) -> Option<ScramSecret> {
        let (_, c) = self.state.scram_credential(id, ScramMechanism::from_name(mechanism)?)?;
        Some(ScramSecret {
            salt: c.salt,
            iterations: c.iterations,
            stored_key: c.stored_key,
            server_key: c.server_key,
        })
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    fn random_bytes(&self, len: usize) -> Vec<u8> {
        use rand::RngCore as _;
        let mut bytes = vec![0; len];
        rand::rng().fill_bytes(&mut bytes);
        bytes
    }
}

/// A plugin's session as es-auth's mechanism session.
struct PluginSession {
    mechanism: &'static str,
    plugin: String,
    session: AuthSession,
    state: Arc<AuthState>,
}

impl MechanismSession for PluginSession {
    fn mechanism(&self) -> &'static str {
        self.mechanism
    }

    fn step(&mut self, client_bytes: &[u8]) -> Step {
        let session = &mut self.session;
        match off_the_runtime(|| session.step(client_bytes)) {
            Ok(AuthStep::Challenge(bytes)) => Step::Challenge(bytes),
            // The one check that makes a plugin safe to trust: it may prove who a
            // client is, never invent a principal (an unknown or revoked id fails
            // exactly like a wrong password).
            Ok(AuthStep::Done(name)) => match self.state.accept_principal(&name) {
                Some(principal) => Step::Done { principal, final_bytes: Vec::new() },
                None => {
                    tracing::info!(plugin = %self.plugin, "auth: the plugin named a principal that is not an active key");
                    Step::Failed(FailReason::InvalidCredentials)
                }
            },
            Ok(AuthStep::Failed(reason)) => {
                tracing::info!(plugin = %self.plugin, %reason, "auth: the plugin refused the client");
                Step::Failed(FailReason::InvalidCredentials)
            }
            Err(e) => {
                tracing::warn!(plugin = %self.plugin, error = %e, "auth: the plugin failed a handshake");
                Step::Failed(FailReason::MechanismError)
            }
        }
    }
}

/// Runs a plugin step where it may block: a step can take its whole deadline,
/// and a guest's stdio (a panic message) is flushed by wasmtime-wasi with
/// `block_on`, which panics on an async worker. On the broker's multi-thread
/// runtime the worker hands its other tasks off for the call (`block_in_place`);
/// elsewhere (a current-thread runtime in tests) the step runs on a scoped thread.
fn off_the_runtime<R: Send>(f: impl FnOnce() -> R + Send) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        Ok(_) => {
            std::thread::scope(|s| s.spawn(f).join()).unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        }
        Err(_) => f(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn mechanisms_parse_builtins_and_plugin_entries() {
        let m = parse(&entries(&["SCRAM-SHA-512", "PLAIN", "OAUTHBEARER:jwt"])).unwrap();
        assert_eq!(m.iter().map(|m| m.name).collect::<Vec<_>>(), ["SCRAM-SHA-512", "PLAIN", "OAUTHBEARER"]);
        assert_eq!(m[2].plugin.as_deref(), Some("jwt"));
        assert_eq!(parse(&[]).unwrap().len(), DEFAULT_MECHANISMS.len());
        for bad in [&["OAUTHBEARER"][..], &["PLAIN:jwt"], &["oauth:jwt"], &["X:"], &["PLAIN", "PLAIN"]] {
            assert!(parse(&entries(bad)).is_err(), "{bad:?}");
        }
    }
}
