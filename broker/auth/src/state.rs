//! The auth state: keys, grants and owners, changed only by applying [`Command`]s.
//!
//! As in es-groups and es-schema-registry, a planner validates a request against the
//! current state and returns the command that carries it out (plus, for new keys, the
//! secret to show once); nothing changes until the broker has stored the command
//! durably and applies it. `apply` is deterministic (no clock, no randomness: those
//! were used by the planner and their results are in the command), so replaying the
//! stored commands in order rebuilds the same state on every node.

use std::collections::{BTreeMap, BTreeSet};

use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::error::{AuthError, Result};
use crate::grant::{Grant, ResourceType};
use crate::key::{ApiKey, KeyId, Pepper, SecretHash};
use crate::limits::{
    GRANTS_PER_KEY_MAX, KEY_NAME_BYTES_MAX, KEYS_MAX, SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN,
};
use crate::quota::QuotaOverride;
use crate::sasl::{ScramCredential, ScramMechanism};

/// What the broker stores for one key. The secret itself is never stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    pub id: KeyId,
    pub name: String,
    pub created_ms: i64,
    /// When the secret was last replaced; `None` until the first rotation.
    pub rotated_ms: Option<i64>,
    /// Set once; a revoked key never authenticates again and its id is never reused.
    pub revoked_ms: Option<i64>,
    pub secret_hash: SecretHash,
    pub scram_sha256: ScramCredential,
    pub scram_sha512: ScramCredential,
}

impl KeyRecord {
    pub fn is_active(&self) -> bool {
        self.revoked_ms.is_none()
    }

    pub fn scram(&self, mechanism: ScramMechanism) -> &ScramCredential {
        match mechanism {
            ScramMechanism::Sha256 => &self.scram_sha256,
            ScramMechanism::Sha512 => &self.scram_sha512,
        }
    }
}

/// A secret's stored forms: its hash and its SCRAM credentials.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretForms {
    pub secret_hash: SecretHash,
    pub scram_sha256: ScramCredential,
    pub scram_sha512: ScramCredential,
}

/// One durable change to the auth state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Command {
    CreateKey(KeyRecord),
    RotateKey {
        id: KeyId,
        at_ms: i64,
        forms: SecretForms,
    },
    RevokeKey {
        id: KeyId,
        at_ms: i64,
    },
    AddGrant(Grant),
    RemoveGrant(Grant),
    ClaimGroup {
        group: String,
        owner: KeyId,
    },
    ReleaseGroup {
        group: String,
    },
    ClaimProducerId {
        producer_id: i64,
        owner: KeyId,
    },
    ReleaseProducerId {
        producer_id: i64,
    },
    /// Replaces a key's own limits; an empty override returns it to the defaults.
    SetQuota {
        id: KeyId,
        quota: QuotaOverride,
    },
}

/// What a planner needs to make secrets: the pepper, randomness and the SCRAM cost.
pub struct Issuer<'a> {
    pub pepper: &'a Pepper,
    pub rng: &'a mut dyn RngCore,
    pub scram_iterations: u32,
    pub now_ms: i64,
}

impl Issuer<'_> {
    /// The stored forms of a key's secret (two PBKDF2 runs: the slow part of creation).
    pub fn forms(&mut self, key: &ApiKey) -> Result<SecretForms> {
        let range = SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX;
        if !range.contains(&self.scram_iterations) {
            let n = self.scram_iterations;
            return Err(AuthError::InvalidCredential(format!("{n} SCRAM iterations is outside {range:?}")));
        }
        let password = key.secret.encode();
        let mut scram =
            |m| ScramCredential::generate(m, password.as_bytes(), self.rng, self.scram_iterations);
        let scram_sha256 = scram(ScramMechanism::Sha256);
        let scram_sha512 = scram(ScramMechanism::Sha512);
        Ok(SecretForms { secret_hash: self.pepper.hash_secret(&key.secret), scram_sha256, scram_sha512 })
    }
}

/// A planned key creation or rotation: the command to store, and the key to show once.
#[derive(Debug)]
pub struct Issued {
    pub command: Command,
    pub key: ApiKey,
}

/// Keys, grants and owners.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthState {
    keys: BTreeMap<KeyId, KeyRecord>,
    grants: BTreeMap<KeyId, BTreeSet<Grant>>,
    groups: BTreeMap<String, KeyId>,
    producer_ids: BTreeMap<i64, KeyId>,
    /// Keys with limits of their own (absent from snapshots older than overrides).
    #[serde(default)]
    quotas: BTreeMap<KeyId, QuotaOverride>,
}

impl AuthState {
    pub fn key(&self, id: &KeyId) -> Option<&KeyRecord> {
        self.keys.get(id)
    }

    /// The key if it exists and is not revoked.
    pub fn active_key(&self, id: &KeyId) -> Option<&KeyRecord> {
        self.keys.get(id).filter(|k| k.is_active())
    }

    pub fn keys(&self) -> impl Iterator<Item = &KeyRecord> {
        self.keys.values()
    }

    pub fn grants_of(&self, id: &KeyId) -> impl Iterator<Item = &Grant> {
        self.grants.get(id).into_iter().flatten()
    }

    pub fn group_owner(&self, group: &str) -> Option<&KeyId> {
        self.groups.get(group)
    }

    pub fn producer_id_owner(&self, producer_id: i64) -> Option<&KeyId> {
        self.producer_ids.get(&producer_id)
    }

    /// The key's own limits (empty: the broker's defaults apply).
    pub fn quota_of(&self, id: &KeyId) -> QuotaOverride {
        self.quotas.get(id).copied().unwrap_or_default()
    }

    /// A new key with a random id and secret.
    pub fn plan_create_key(&self, name: &str, issuer: &mut Issuer<'_>) -> Result<Issued> {
        let mut key = ApiKey::random(issuer.rng);
        // 64 random bits collide only in tests with a fixed seed; draw again if so.
        for _ in 0..8 {
            if !self.keys.contains_key(&key.id) {
                break;
            }
            key = ApiKey::random(issuer.rng);
        }
        self.plan_import_key(name, key, issuer)
    }

    /// A key whose text the operator chose (the bootstrap key from config).
    pub fn plan_import_key(&self, name: &str, key: ApiKey, issuer: &mut Issuer<'_>) -> Result<Issued> {
        check_key_name(name)?;
        if self.keys.contains_key(&key.id) {
            return Err(AuthError::KeyExists(key.id.to_string()));
        }
        if self.keys.len() >= KEYS_MAX {
            return Err(AuthError::TooManyKeys { max: KEYS_MAX });
        }
        let forms = issuer.forms(&key)?;
        let record = KeyRecord {
            id: key.id.clone(),
            name: name.to_owned(),
            created_ms: issuer.now_ms,
            rotated_ms: None,
            revoked_ms: None,
            secret_hash: forms.secret_hash,
            scram_sha256: forms.scram_sha256,
            scram_sha512: forms.scram_sha512,
        };
        Ok(Issued { command: Command::CreateKey(record), key })
    }

    /// A new secret for an active key; the old one stops working once this applies.
    pub fn plan_rotate_key(&self, id: &KeyId, issuer: &mut Issuer<'_>) -> Result<Issued> {
        self.require_active(id)?;
        let key = ApiKey { id: id.clone(), secret: crate::key::Secret::random(issuer.rng) };
        let forms = issuer.forms(&key)?;
        Ok(Issued { command: Command::RotateKey { id: id.clone(), at_ms: issuer.now_ms, forms }, key })
    }

    pub fn plan_revoke_key(&self, id: &KeyId, now_ms: i64) -> Result<Command> {
        self.require_active(id)?;
        Ok(Command::RevokeKey { id: id.clone(), at_ms: now_ms })
    }

    /// `None` when the key already holds this grant.
    pub fn plan_add_grant(&self, grant: Grant) -> Result<Option<Command>> {
        grant.validate()?;
        self.require_active(&grant.key)?;
        let held = self.grants.get(&grant.key);
        if held.is_some_and(|g| g.contains(&grant)) {
            return Ok(None);
        }
        if held.is_some_and(|g| g.len() >= GRANTS_PER_KEY_MAX) {
            return Err(AuthError::TooManyGrants { key: grant.key.to_string(), max: GRANTS_PER_KEY_MAX });
        }
        Ok(Some(Command::AddGrant(grant)))
    }

    /// `None` when the key does not hold this grant.
    pub fn plan_remove_grant(&self, grant: Grant) -> Option<Command> {
        let held = self.grants.get(&grant.key).is_some_and(|g| g.contains(&grant));
        held.then_some(Command::RemoveGrant(grant))
    }

    /// `None` when the key already has exactly these limits.
    pub fn plan_set_quota(&self, id: &KeyId, quota: QuotaOverride) -> Result<Option<Command>> {
        quota.validate()?;
        self.require_active(id)?;
        let changed = self.quota_of(id) != quota;
        Ok(changed.then(|| Command::SetQuota { id: id.clone(), quota }))
    }

    fn require_active(&self, id: &KeyId) -> Result<&KeyRecord> {
        let record = self.keys.get(id).ok_or_else(|| AuthError::KeyNotFound(id.to_string()))?;
        if !record.is_active() {
            return Err(AuthError::KeyRevoked(id.to_string()));
        }
        Ok(record)
    }

    /// Applies a stored command. A command its planner made always applies; one that
    /// does not fit the state (a corrupt or reordered log) is refused whole.
    pub fn apply(&mut self, command: Command) -> Result<()> {
        match command {
            Command::CreateKey(record) => self.apply_create(record),
            Command::RotateKey { id, at_ms, forms } => {
                forms.scram_sha256.validate(ScramMechanism::Sha256)?;
                forms.scram_sha512.validate(ScramMechanism::Sha512)?;
                let record = self.active_mut(&id)?;
                record.rotated_ms = Some(at_ms);
                record.secret_hash = forms.secret_hash;
                record.scram_sha256 = forms.scram_sha256;
                record.scram_sha512 = forms.scram_sha512;
                Ok(())
            }
            Command::RevokeKey { id, at_ms } => {
                self.active_mut(&id)?.revoked_ms = Some(at_ms);
                Ok(())
            }
            Command::AddGrant(grant) => {
                grant.validate()?;
                self.require_active(&grant.key)?;
                self.grants.entry(grant.key.clone()).or_default().insert(grant);
                Ok(())
            }
            Command::RemoveGrant(grant) => {
                self.grants.get_mut(&grant.key).map(|g| g.remove(&grant));
                Ok(())
            }
            Command::ClaimGroup { group, owner } => self.apply_claim_group(group, owner),
            Command::ReleaseGroup { group } => {
                self.groups.remove(&group);
                Ok(())
            }
            Command::ClaimProducerId { producer_id, owner } => self.apply_claim_pid(producer_id, owner),
            Command::ReleaseProducerId { producer_id } => {
                self.producer_ids.remove(&producer_id);
                Ok(())
            }
            Command::SetQuota { id, quota } => {
                quota.validate()?;
                self.require_active(&id)?;
                if quota.is_empty() {
                    self.quotas.remove(&id);
                } else {
                    self.quotas.insert(id, quota);
                }
                Ok(())
            }
        }
    }

    fn apply_create(&mut self, record: KeyRecord) -> Result<()> {
        check_key_name(&record.name)?;
        record.scram_sha256.validate(ScramMechanism::Sha256)?;
        record.scram_sha512.validate(ScramMechanism::Sha512)?;
        if self.keys.contains_key(&record.id) {
            return Err(AuthError::KeyExists(record.id.to_string()));
        }
        self.keys.insert(record.id.clone(), record);
        Ok(())
    }

    fn active_mut(&mut self, id: &KeyId) -> Result<&mut KeyRecord> {
        self.require_active(id)?;
        Ok(self.keys.get_mut(id).expect("require_active found it"))
    }

    fn apply_claim_group(&mut self, group: String, owner: KeyId) -> Result<()> {
        self.require_active(&owner)?;
        match self.groups.get(&group) {
            Some(current) if *current != owner => Err(AuthError::NotOwner { resource: "group", name: group }),
            Some(_) => Ok(()),
            None => {
                self.groups.insert(group, owner);
                Ok(())
            }
        }
    }

    fn apply_claim_pid(&mut self, producer_id: i64, owner: KeyId) -> Result<()> {
        self.require_active(&owner)?;
        match self.producer_ids.get(&producer_id) {
            Some(current) if *current != owner => {
                Err(AuthError::NotOwner { resource: "producer id", name: producer_id.to_string() })
            }
            Some(_) => Ok(()),
            None => {
                self.producer_ids.insert(producer_id, owner);
                Ok(())
            }
        }
    }

    /// Whether the key holds the superuser grant (`Cluster` `Admin`).
    pub(crate) fn is_superuser(&self, id: &KeyId) -> bool {
        self.grants_of(id).any(Grant::is_cluster_admin)
    }

    pub(crate) fn holds(&self, id: &KeyId, resource: ResourceType, name: &str, op: crate::Operation) -> bool {
        self.grants_of(id).any(|g| g.covers(resource, name, op))
    }
}

fn check_key_name(name: &str) -> Result<()> {
    let printable = name.chars().all(|c| !c.is_control());
    if name.is_empty() || name.len() > KEY_NAME_BYTES_MAX || !printable {
        return Err(AuthError::InvalidKeyName(format!(
            "a key name is 1 to {KEY_NAME_BYTES_MAX} bytes of printable text"
        )));
    }
    Ok(())
}
