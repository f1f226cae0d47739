//! The broker's side of es-auth: the durable auth state (keys, grants, owners),
//! the pepper, bootstrap, credential checks and the quota and auth-failure
//! limiters. Every listener authenticates through [`Auth::authenticate`] and every
//! call is authorized through `service::authz`, which reads [`Auth::state`].
//!
//! Storage: the whole `AuthState` is one JSON snapshot, `<data>/auth/state.json`,
//! written like every other metadata file (temp, fsync, rename, fsync dir). A
//! change is planned against the current state, applied to a copy, stored, and
//! only then swapped in, so a refused or failed write changes nothing and a
//! revocation is in force for the very next request.
//!
//! In a cluster the planned commands go through the metadata Raft group instead
//! (`registry::metadata::Command::Auth`): every node applies them in log order with
//! [`Auth::apply_replicated`] (to a copy, stored, swapped, as above), and the node
//! that took the request answers once it applied them itself. So a key made on one
//! node logs in on every node, and a revocation reaches each within the time its
//! applier takes (milliseconds). The snapshot is then what this node applied up to
//! its `cluster/metadata-applied` offset; applying a command again (a crash between
//! the two saves) changes nothing. The bootstrap key is imported through the log
//! too, once the node has caught up with it (`Auth::set_cluster`).

pub mod admin;
pub mod mechanisms;
pub use es_auth::KeyQuota;
mod pepper;

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use es_auth::{
    ApiKey, AuthFailureLimits, AuthState, ByteQuotas, Command, CredentialSource, Grant, Issuer, KeyId,
    MechanismSession, Operation, PatternType, Pepper, PlainSession, RequestRateLimits, ResourceType,
    ScramMechanism, ScramSession,
};
use es_core::Clock;
use serde::{Deserialize, Serialize};

use crate::service::error::{BrokerError, Result};
use crate::store::{MetaStore, Stored};

/// The name of the bootstrap key (`es key list` shows it).
pub const BOOTSTRAP_KEY_NAME: &str = "bootstrap";
/// How often a cluster node that has not imported its bootstrap key yet tries again.
const BOOTSTRAP_RETRY: std::time::Duration = std::time::Duration::from_millis(500);

/// How the broker authenticates (flags and environment of `es-broker`).
#[derive(Debug, Clone, Default)]
pub struct AuthOptions {
    /// Off: every caller may do everything (loopback quickstart). On: every
    /// request needs a key and the grants for what it does.
    pub enabled: bool,
    /// The text of the first admin key, imported when auth is on and no key exists.
    pub bootstrap_key: Option<String>,
    /// Where the pepper lives [default: `<data>/auth-pepper`, created on first start].
    pub pepper_file: Option<PathBuf>,
    /// The default byte-rate quotas of every key (a key's own, set with
    /// `es key quota`, replaces them for that key).
    pub quota: KeyQuota,
    /// Requests per second per key and per client address (`None`: unlimited).
    pub requests_per_s_per_key: Option<u64>,
    pub requests_per_s_per_address: Option<u64>,
    /// SASL on the Kafka listener.
    pub kafka: KafkaSaslOptions,
    /// SASL mechanisms offered, in order (`--auth-mechanisms`): `PLAIN`,
    /// `SCRAM-SHA-256`, `SCRAM-SHA-512`, or `NAME:plugin` for a mechanism of an
    /// authenticator plugin. Empty: the built-ins, SCRAM-SHA-512 first.
    pub mechanisms: Vec<String>,
    /// This node is a cluster member: keys come from the metadata log, the
    /// bootstrap key is imported there once the cluster is up, and the pepper file
    /// must be set (the same pepper on every node, or hashes differ between nodes).
    pub replicated: bool,
}

/// How the Kafka listener runs SASL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KafkaSaslOptions {
    /// Offer PLAIN on a listener without TLS (`--kafka-allow-plaintext-plain`): PLAIN
    /// sends the secret itself, so by default it is offered only over TLS.
    pub allow_plaintext_plain: bool,
    /// KIP-368: how long a SASL login lasts (`auth.kafka_session_lifetime_ms`); a
    /// connection that has not re-authenticated by then is closed. 0: no limit.
    pub session_lifetime_ms: u64,
}

impl Default for KafkaSaslOptions {
    fn default() -> Self {
        KafkaSaslOptions {
            allow_plaintext_plain: false,
            session_lifetime_ms: crate::limits::KAFKA_SESSION_LIFETIME_MS_DEFAULT,
        }
    }
}

/// The one stored item of `<data>/auth`.
#[derive(Debug, Serialize, Deserialize)]
struct Snapshot {
    name: String,
    state: AuthState,
}

impl Stored for Snapshot {
    const WHAT: &'static str = "auth state";
    fn name(&self) -> &str {
        &self.name
    }
}

const SNAPSHOT_NAME: &str = "state";

/// Why a credential was refused. Only the listener's answer differs: a caller
/// over its failure limit is told to wait instead of being told no.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthFailure {
    /// Missing, malformed, unknown, revoked or wrong: all alike on the wire.
    Invalid,
    /// Too many failures from this address or for this key id: retry after `ms`.
    Throttled { ms: u64 },
}

pub struct Auth {
    enabled: bool,
    kafka: KafkaSaslOptions,
    pepper: Pepper,
    /// Read by every request; replaced whole by [`Auth::commit`].
    state: RwLock<Arc<AuthState>>,
    /// Serializes plan-apply-store, so two changes never race on one snapshot.
    writes: Mutex<()>,
    store: MetaStore<Snapshot>,
    clock: Arc<dyn Clock>,
    failures: Mutex<AuthFailureLimits>,
    /// Byte quotas: the default of every key, or the key's own (`AuthState::quota_of`).
    quotas: Mutex<ByteQuotas>,
    /// Request-rate limits: the defaults, or the key's own.
    requests: Mutex<RequestRateLimits>,
    /// Per-key successes, failures, denials and throttling, for metrics.
    stats: crate::metrics::KeyStats,
    /// The configured SASL mechanisms, in the order they are offered.
    mechanisms: Vec<mechanisms::Mechanism>,
    /// Authenticator plugins behind the plugin mechanisms.
    plugin_mechanisms: mechanisms::PluginMechanisms,
    /// In a cluster: changes go through its metadata log.
    cluster: OnceLock<Weak<crate::cluster::Cluster>>,
    /// The bootstrap key, kept until a cluster node has imported it through the log.
    bootstrap_key: Option<String>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth").field("enabled", &self.enabled).finish_non_exhaustive()
    }
}

fn internal(e: es_auth::AuthError) -> BrokerError {
    BrokerError::Internal(format!("auth state: {e}"))
}

impl Auth {
    /// Opens `<data>/auth`, the pepper, and imports the bootstrap key when auth is
    /// on and there is no key yet. Refuses to start with auth on and nothing to
    /// log in with: there is never a built-in default key.
    pub fn open(data_dir: &std::path::Path, options: &AuthOptions, clock: Arc<dyn Clock>) -> Result<Auth> {
        if options.enabled && options.replicated && options.pepper_file.is_none() {
            return Err(BrokerError::InvalidConfig(
                "auth is on in a cluster, so every node must hash keys with the same pepper: make one \
                 (`openssl rand -hex 32 > auth.pepper`), copy it to every node and set auth.pepper_file \
                 (--auth-pepper-file) to it"
                    .into(),
            ));
        }
        let pepper_path = options.pepper_file.clone().unwrap_or_else(|| data_dir.join("auth-pepper"));
        let pepper = pepper::load_or_create(&pepper_path)?;
        let store = MetaStore::<Snapshot>::open(data_dir.join("auth"))?;
        let state = store.load_all()?.into_iter().find(|s| s.name == SNAPSHOT_NAME).map(|s| s.state);
        let mechanisms = mechanisms::parse(&options.mechanisms)?;
        let auth = Auth {
            enabled: options.enabled,
            kafka: options.kafka,
            pepper,
            state: RwLock::new(Arc::new(state.unwrap_or_default())),
            writes: Mutex::new(()),
            store,
            clock: clock.clone(),
            failures: Mutex::new(AuthFailureLimits::new(clock.clone())),
            requests: request_limits(options, clock.clone()),
            quotas: Mutex::new(ByteQuotas::new(options.quota, clock)),
            stats: crate::metrics::KeyStats::default(),
            mechanisms,
            plugin_mechanisms: Default::default(),
            cluster: OnceLock::new(),
            bootstrap_key: options.bootstrap_key.clone(),
        };
        if options.enabled && !options.replicated {
            auth.bootstrap(options.bootstrap_key.as_deref())?;
        } else if options.enabled && options.bootstrap_key.is_none() && !auth.has_active_key() {
            tracing::warn!(
                "auth is on and this node holds no key yet: it learns keys from the cluster's metadata log \
                 (another node's bootstrap key)"
            );
        }
        Ok(auth)
    }

    fn has_active_key(&self) -> bool {
        self.state().keys().any(|k| k.is_active())
    }

    /// Makes this node's auth state a replica of the cluster's metadata log, and
    /// imports the bootstrap key through it once this node has caught up with the
    /// log (every node given the key tries; the first import applied wins, the
    /// others are refused alike and skipped).
    pub fn set_cluster(self: &Arc<Self>, cluster: &Arc<crate::cluster::Cluster>) {
        if self.cluster.set(Arc::downgrade(cluster)).is_err() {
            tracing::warn!("the auth state was made a replica twice; the first cluster stays");
            return;
        }
        let Some(key) = self.bootstrap_key.clone().filter(|_| self.enabled) else { return };
        let (auth, cluster) = (Arc::downgrade(self), Arc::downgrade(cluster));
        tokio::spawn(async move {
            loop {
                let (Some(a), Some(c)) = (auth.upgrade(), cluster.upgrade()) else { return };
                if a.has_active_key() {
                    return;
                }
                if c.metadata_caught_up() {
                    let key = key.clone();
                    match tokio::task::spawn_blocking(move || a.bootstrap(Some(&key))).await {
                        Ok(Ok(())) => return,
                        Ok(Err(e)) => {
                            tracing::info!(error = %e, "importing the bootstrap key through the cluster")
                        }
                        Err(_) => return,
                    }
                }
                drop(c);
                tokio::time::sleep(BOOTSTRAP_RETRY).await;
            }
        });
    }

    fn bootstrap(&self, key: Option<&str>) -> Result<()> {
        if self.has_active_key() {
            return Ok(());
        }
        let Some(text) = key else {
            return Err(BrokerError::InvalidConfig(bootstrap_help()));
        };
        let key = ApiKey::parse(text.trim()).map_err(|e| {
            BrokerError::InvalidConfig(format!(
                "the bootstrap key is not an es API key ({e}); make one with `es key generate`"
            ))
        })?;
        let id = key.id.clone();
        let admin = cluster_admin(&id);
        self.commit(|state, issuer| {
            let issued = state.plan_import_key(BOOTSTRAP_KEY_NAME, key, issuer).map_err(internal)?;
            Ok((vec![issued.command, Command::AddGrant(admin)], ()))
        })?;
        tracing::info!(key = %id, "imported the bootstrap admin key");
        Ok(())
    }

    pub fn enabled(&self) -> bool {
        self.enabled
    }

    pub fn kafka_sasl(&self) -> KafkaSaslOptions {
        self.kafka
    }

    /// The configured SASL mechanisms, in the order SaslHandshake lists them (the
    /// listener still drops PLAIN where it is not allowed).
    pub fn mechanisms(&self) -> impl Iterator<Item = &'static str> + '_ {
        self.mechanisms.iter().map(|m| m.name)
    }

    /// Where authenticator plugins come from (the registry's plugin store).
    pub fn set_plugins(&self, plugins: Arc<crate::plugins::Plugins>) {
        self.plugin_mechanisms.set_plugins(plugins);
    }

    /// A fresh server session for a configured SASL mechanism, over the current
    /// state; `None` for a name that is not configured, or a plugin mechanism
    /// whose plugin cannot start one (missing, or refusing its configuration).
    pub fn sasl_session(&self, mechanism: &str) -> Option<Box<dyn MechanismSession>> {
        use rand::SeedableRng as _;
        let configured = self.mechanisms.iter().find(|m| m.name == mechanism)?;
        if let Some(plugin) = &configured.plugin {
            return self.plugin_mechanisms.session(configured.name, plugin, self.state(), self.clock.clone());
        }
        let source: Arc<dyn CredentialSource> = self.state();
        if mechanism == "PLAIN" {
            return Some(Box::new(PlainSession::new(source, self.pepper.clone())));
        }
        let scram = ScramMechanism::from_name(mechanism)?;
        // A CSPRNG seeded from the OS for each handshake: the server nonce must be
        // unpredictable.
        let rng = Box::new(rand::rngs::StdRng::from_os_rng());
        let iterations = es_auth::limits::SCRAM_ITERATIONS_DEFAULT;
        Some(Box::new(ScramSession::new(scram, source, self.pepper.clone(), rng, iterations)))
    }

    /// The current state: cheap (an `Arc`), and consistent for the whole request.
    pub fn state(&self) -> Arc<AuthState> {
        self.state.read().expect("auth state lock").clone()
    }

    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Plans commands against the current state, applies them to a copy, stores
    /// the copy durably and swaps it in; in a cluster, commits them through the
    /// metadata log and answers once this node applied them. Blocking (an fsync, or
    /// a Raft commit): call it off the async workers when it can be on a hot path.
    pub fn commit<T>(
        &self,
        plan: impl FnOnce(&AuthState, &mut Issuer<'_>) -> Result<(Vec<Command>, T)>,
    ) -> Result<T> {
        let cluster = self.cluster.get().map(|c| c.upgrade().ok_or_else(|| self.stopping()));
        // A single node serializes plan-apply-store; a cluster serializes in its log
        // (the apply takes this lock, so the proposer must not hold it meanwhile).
        let _write = cluster.is_none().then(|| self.writes.lock().expect("auth writes lock"));
        let current = self.state();
        let mut rng = rand::rng();
        let mut issuer = Issuer {
            pepper: &self.pepper,
            rng: &mut rng,
            scram_iterations: es_auth::limits::SCRAM_ITERATIONS_DEFAULT,
            now_ms: self.clock.now_ms(),
        };
        let (commands, answer) = plan(&current, &mut issuer)?;
        if commands.is_empty() {
            return Ok(answer);
        }
        // Checked here first, so a change that cannot apply is refused before it is stored.
        let mut next = (*current).clone();
        for command in &commands {
            next.apply(command.clone()).map_err(internal)?;
        }
        if let Some(cluster) = cluster {
            let command =
                crate::registry::metadata::Command::Auth { pepper: self.pepper.fingerprint(), commands };
            replicate(&*cluster?, command)?;
            return Ok(answer);
        }
        self.install(next)?;
        Ok(answer)
    }

    /// Stores `next` durably, then swaps it in for every request that follows.
    /// The caller holds `writes`.
    fn install(&self, next: AuthState) -> Result<()> {
        self.store.save(&Snapshot { name: SNAPSHOT_NAME.into(), state: next.clone() })?;
        *self.state.write().expect("auth state lock") = Arc::new(next);
        Ok(())
    }

    fn stopping(&self) -> BrokerError {
        BrokerError::Internal("the cluster is shutting down".into())
    }

    /// Applies auth commands the metadata group committed, all or none: to a copy,
    /// stored, then swapped in. A command that does not fit the state (two nodes
    /// made the same change at once) is refused alike on every node and skipped.
    pub fn apply_replicated(&self, pepper: &str, commands: &[Command]) -> Result<()> {
        self.check_pepper(pepper);
        let _write = self.writes.lock().expect("auth writes lock");
        let current = self.state();
        let mut next = (*current).clone();
        for command in commands {
            next.apply(command.clone()).map_err(|e| {
                BrokerError::InvalidRequest(format!("a replicated auth change was refused: {e}"))
            })?;
        }
        if next == *current {
            return Ok(());
        }
        self.install(next)?;
        for command in commands {
            if let Command::RevokeKey { id, .. } = command {
                self.quotas.lock().expect("quotas lock").forget(id);
            }
        }
        Ok(())
    }

    /// The keys, grants, owners and quotas as they stand, with this node's pepper
    /// fingerprint: what a node that lags past the metadata log's start installs.
    pub fn image(&self) -> (String, AuthState) {
        (self.pepper.fingerprint(), (*self.state()).clone())
    }

    /// Installs another node's [`Auth::image`] in place of this node's state (a
    /// node that lagged past the metadata log's start; `cluster/image.rs`).
    pub fn install_image(&self, pepper: &str, state: AuthState) -> Result<()> {
        self.check_pepper(pepper);
        let _write = self.writes.lock().expect("auth writes lock");
        if *self.state() == state {
            return Ok(());
        }
        let revoked: Vec<KeyId> = state.keys().filter(|k| !k.is_active()).map(|k| k.id.clone()).collect();
        self.install(state)?;
        let mut quotas = self.quotas.lock().expect("quotas lock");
        revoked.iter().for_each(|id| quotas.forget(id));
        Ok(())
    }

    fn check_pepper(&self, pepper: &str) {
        if pepper != self.pepper.fingerprint() {
            tracing::error!(
                proposer = pepper,
                here = %self.pepper.fingerprint(),
                "an auth change was made on a node with another pepper: keys it made or rotated will not log \
                 in here with the key itself or SASL PLAIN (SCRAM still works); give every node the same \
                 auth.pepper_file"
            );
        }
    }

    /// Checks a bearer credential (the whole key text). Every path does the same
    /// HMAC, so how long it takes does not say whether the id exists.
    pub fn authenticate(&self, text: &str, from: IpAddr) -> std::result::Result<KeyId, AuthFailure> {
        let parsed = ApiKey::parse(text.trim());
        if parsed.is_err()
            && let Some(id) = self.bearer_token(text.trim())
        {
            if let Some(c) = self.stats.key(Some(&id), true) {
                crate::metrics::add(&c.auth_successes, 1);
            }
            return Ok(id);
        }
        let id = parsed.as_ref().ok().map(|k| k.id.clone());
        if let Ok(key) = &parsed {
            let hash = self.pepper.hash_secret(&key.secret);
            let state = self.state();
            let matches = state.active_key(&key.id).is_some_and(|record| record.secret_hash.matches(&hash));
            if matches {
                if let Some(c) = self.stats.key(Some(&key.id), true) {
                    crate::metrics::add(&c.auth_successes, 1);
                }
                return Ok(key.id.clone());
            }
        }
        Err(self.record_failure(from, id.as_ref()))
    }

    /// A bearer token that is not an es key (a JWT: three dot-separated parts),
    /// checked by the OAUTHBEARER plugin mechanism when one is configured, as if a
    /// Kafka client had sent it in RFC 7628's message. The principal it yields is
    /// an active key, exactly as over SASL; anything else is a failed login.
    fn bearer_token(&self, token: &str) -> Option<KeyId> {
        let oauth = self.mechanisms.iter().find(|m| m.name == "OAUTHBEARER" && m.plugin.is_some())?;
        if token.split('.').count() != 3 {
            return None;
        }
        let mut session = self.sasl_session(oauth.name)?;
        match session.step(format!("n,,\x01auth=Bearer {token}\x01\x01").as_bytes()) {
            es_auth::Step::Done { principal: es_auth::Principal::Key(id), .. } => Some(id),
            es_auth::Step::Done { principal: es_auth::Principal::Anonymous, .. }
            | es_auth::Step::Challenge(_)
            | es_auth::Step::Failed(_) => None,
        }
    }

    /// Charges one failed login to `from` and the key id it named (if any), and says
    /// how to answer it. Every listener's failures share these limits and counters.
    pub fn record_failure(&self, from: IpAddr, id: Option<&KeyId>) -> AuthFailure {
        let known = id.is_some_and(|id| self.state().active_key(id).is_some());
        if let Some(c) = self.stats.key(id, known) {
            crate::metrics::add(&c.auth_failures, 1);
        }
        let mut failures = self.failures.lock().expect("auth failures lock");
        failures.record_failure(from, id);
        match failures.delay_ms(from, id) {
            0 => AuthFailure::Invalid,
            ms => AuthFailure::Throttled { ms },
        }
    }

    /// Per-key counters for metrics.
    pub fn stats(&self) -> &crate::metrics::KeyStats {
        &self.stats
    }

    /// Charges `bytes` moved by `key` after the fact, at the key's own rate if it
    /// has one and the default otherwise; the throttle it must honour.
    pub fn charge(&self, key: &KeyId, direction: es_auth::Direction, bytes: u64) -> u64 {
        let own = self.state().quota_of(key);
        self.quotas.lock().expect("quotas lock").charge(key, direction, bytes, &own)
    }

    /// Charges one served request from `from` for `key` after the fact; the
    /// throttle it must honour (0 with no request-rate limit set).
    pub fn charge_request(&self, from: IpAddr, key: Option<&KeyId>) -> u64 {
        let own = key.and_then(|k| self.state().quota_of(k).requests_per_s);
        self.requests.lock().expect("request limits lock").charge(from, key, own)
    }

    /// How long the next request from `from` for `key` must wait, charging nothing.
    pub fn request_throttle_ms(&self, from: IpAddr, key: Option<&KeyId>) -> u64 {
        self.requests.lock().expect("request limits lock").throttle_ms(from, key)
    }

    /// Claims `group` for `key` on its first use (join or commit). A no-op when
    /// the key owns it already, which is every call but the first.
    pub fn claim_group(&self, key: &KeyId, group: &str) -> Result<()> {
        let principal = es_auth::Principal::Key(key.clone());
        if self.state().group_owner(group) == Some(key) {
            return Ok(());
        }
        let claimed = self.commit(|state, _| match state.plan_claim_group(&principal, group) {
            Ok(claim) => Ok((claim.into_iter().collect(), ())),
            Err(es_auth::AuthError::NotOwner { .. }) => Err(crate::service::authz::denied_group(group)),
            Err(other) => Err(internal(other)),
        });
        match claimed {
            // Another node's claim for another key was applied first.
            Err(_) if self.state().group_owner(group).is_some_and(|owner| owner != key) => {
                Err(crate::service::authz::denied_group(group))
            }
            other => other,
        }
    }

    /// Records that `producer_id` was issued to `key`.
    pub fn claim_producer_id(&self, key: &KeyId, producer_id: i64) -> Result<()> {
        let principal = es_auth::Principal::Key(key.clone());
        self.commit(|state, _| {
            Ok((vec![state.plan_claim_producer_id(&principal, producer_id).map_err(internal)?], ()))
        })
    }
}

/// Commits a metadata command and waits for this node's apply. On an async worker
/// (an authorization's first group claim) the runtime moves its other tasks off
/// this thread while it waits.
fn replicate(cluster: &crate::cluster::Cluster, command: crate::registry::metadata::Command) -> Result<()> {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(|| cluster.replicate(command)),
        _ => cluster.replicate(command),
    }
}

/// The request-rate limiters; an unset default is unlimited.
fn request_limits(options: &AuthOptions, clock: Arc<dyn Clock>) -> Mutex<RequestRateLimits> {
    let (per_address, per_key) = (options.requests_per_s_per_address, options.requests_per_s_per_key);
    let burst = es_auth::limits::REQUEST_RATE_BURST_SECONDS_DEFAULT;
    Mutex::new(RequestRateLimits::new(per_address, per_key, burst, clock))
}

pub fn cluster_admin(id: &KeyId) -> Grant {
    Grant {
        key: id.clone(),
        resource: ResourceType::Cluster,
        pattern: PatternType::Literal,
        name: es_auth::CLUSTER_NAME.into(),
        operation: Operation::Admin,
    }
}

/// What `es-broker` prints when auth is on and there is no key to log in with.
fn bootstrap_help() -> String {
    "auth is enabled and no API key exists yet, so nobody could log in. To get started:\n  \
     1. make a key:   es key generate > admin.key   (keep it secret; it is shown once)\n  \
     2. start with it: ES_AUTH_BOOTSTRAP_KEY=\"$(cat admin.key)\" es-broker --auth ...\n     \
     or: es-broker --auth --auth-bootstrap-key-file admin.key ...\n  \
     3. use it:       ES_API_KEY=\"$(cat admin.key)\" es key create --name app --grant topic:prefixed:app.:write\n\
     The bootstrap key becomes a cluster admin; it is read only while no key exists."
        .into()
}
