//! Key administration (create, list, describe, revoke, rotate, grant) as the HTTP
//! routes and `es key` see it, and the grant text form both use:
//! `resource:pattern:name:operation` (`topic:prefixed:billing.:write`,
//! `group:literal:billing-workers:read`) or `cluster:operation` (`cluster:admin`).

use es_auth::{
    AuthState, Command, Grant, KeyId, KeyRecord, Operation, PatternType, QuotaOverride, ResourceType,
};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Auth, internal};
use crate::service::error::{BrokerError, Result};

/// A key as listed and described: never its secret, nor any hash of it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KeyView {
    /// The public key id (16 hex digits), also the SASL user name.
    pub id: String,
    pub name: String,
    pub created_ms: i64,
    pub rotated_ms: Option<i64>,
    pub revoked_ms: Option<i64>,
    /// In the text form `resource:pattern:name:operation`.
    pub grants: Vec<String>,
    /// The key's own limits; a field left out follows the broker's default.
    pub quota: KeyQuotaBody,
}

/// A key's own limits, each replacing the broker's default (`--quota-produce-bytes-per-s`,
/// `--quota-fetch-bytes-per-s`, `--requests-per-s-per-key`) for this key only, higher
/// or lower. Left out or null: the default applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct KeyQuotaBody {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub produce_bytes_per_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub fetch_bytes_per_s: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1)]
    pub requests_per_s: Option<u64>,
}

impl From<KeyQuotaBody> for QuotaOverride {
    fn from(b: KeyQuotaBody) -> QuotaOverride {
        QuotaOverride {
            produce_bytes_per_s: b.produce_bytes_per_s,
            fetch_bytes_per_s: b.fetch_bytes_per_s,
            requests_per_s: b.requests_per_s,
        }
    }
}

impl From<QuotaOverride> for KeyQuotaBody {
    fn from(q: QuotaOverride) -> KeyQuotaBody {
        KeyQuotaBody {
            produce_bytes_per_s: q.produce_bytes_per_s,
            fetch_bytes_per_s: q.fetch_bytes_per_s,
            requests_per_s: q.requests_per_s,
        }
    }
}

/// A new or rotated key: the only answer that ever holds the secret.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct IssuedKey {
    /// The whole key, `es_<id>_<secret>`; shown once, never stored.
    pub key: String,
    #[serde(flatten)]
    pub view: KeyView,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct CreateKeyBody {
    pub name: String,
    #[serde(default)]
    pub grants: Vec<String>,
    /// The key's own limits, as `PUT /keys/{key}/quota` sets them.
    #[serde(default)]
    pub quota: KeyQuotaBody,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct GrantsBody {
    pub grants: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<KeyView>,
}

/// Parses a grant's text form for `key`.
pub fn parse_grant(key: &KeyId, text: &str) -> Result<Grant> {
    let bad = |why: &str| {
        BrokerError::InvalidRequest(format!(
            "grant {text:?}: {why}; write resource:pattern:name:operation \
             (topic:prefixed:billing.:write) or cluster:admin"
        ))
    };
    let (resource, rest) = text.split_once(':').ok_or_else(|| bad("no resource"))?;
    let (rest, operation) = rest.rsplit_once(':').unwrap_or(("", rest));
    let operation = match operation {
        "describe" => Operation::Describe,
        "read" => Operation::Read,
        "write" => Operation::Write,
        "admin" => Operation::Admin,
        _ => return Err(bad("the operation is describe, read, write or admin")),
    };
    let (resource, pattern, name) = match resource {
        "cluster" if rest.is_empty() => (ResourceType::Cluster, PatternType::Literal, es_auth::CLUSTER_NAME),
        "topic" | "group" => {
            let (pattern, name) = rest.split_once(':').ok_or_else(|| bad("no pattern"))?;
            let pattern = match pattern {
                "literal" => PatternType::Literal,
                "prefixed" => PatternType::Prefixed,
                _ => return Err(bad("the pattern is literal or prefixed")),
            };
            let resource = if resource == "topic" { ResourceType::Topic } else { ResourceType::Group };
            (resource, pattern, name)
        }
        _ => return Err(bad("the resource is topic, group or cluster")),
    };
    let grant = Grant { key: key.clone(), resource, pattern, name: name.to_owned(), operation };
    grant.validate().map_err(|e| bad(&e.to_string()))?;
    Ok(grant)
}

/// The text form of a grant (the inverse of [`parse_grant`]).
pub fn grant_text(g: &Grant) -> String {
    let op = match g.operation {
        Operation::Describe => "describe",
        Operation::Read => "read",
        Operation::Write => "write",
        Operation::Admin => "admin",
    };
    let pattern = match g.pattern {
        PatternType::Literal => "literal",
        PatternType::Prefixed => "prefixed",
    };
    match g.resource {
        ResourceType::Cluster => format!("cluster:{op}"),
        ResourceType::Topic | ResourceType::Group => {
            format!("{}:{pattern}:{}:{op}", g.resource.label(), g.name)
        }
    }
}

fn view(state: &AuthState, record: &KeyRecord) -> KeyView {
    KeyView {
        id: record.id.to_string(),
        name: record.name.clone(),
        created_ms: record.created_ms,
        rotated_ms: record.rotated_ms,
        revoked_ms: record.revoked_ms,
        grants: state.grants_of(&record.id).map(grant_text).collect(),
        quota: state.quota_of(&record.id).into(),
    }
}

fn key_id(text: &str) -> Result<KeyId> {
    // An id that cannot exist is simply not found: no hint about the format.
    KeyId::parse(text).map_err(|_| BrokerError::KeyNotFound(text.to_owned()))
}

fn refused(e: es_auth::AuthError) -> BrokerError {
    use es_auth::AuthError as A;
    match e {
        A::KeyNotFound(id) => BrokerError::KeyNotFound(id),
        e @ (A::KeyRevoked(_)
        | A::InvalidKeyName(_)
        | A::InvalidResourceName(_)
        | A::InvalidGrant(_)
        | A::InvalidQuota(_)
        | A::KeyParse(_)
        | A::TooManyKeys { .. }
        | A::TooManyGrants { .. }) => BrokerError::InvalidRequest(e.to_string()),
        e @ (A::KeyExists(_) | A::InvalidCredential(_) | A::NotOwner { .. } | A::NotOwned { .. }) => {
            internal(e)
        }
    }
}

impl Auth {
    /// A new key with `grants` and its own `quota`; the answer holds the secret,
    /// shown once.
    pub fn create_key(&self, name: &str, grants: &[String], quota: KeyQuotaBody) -> Result<IssuedKey> {
        let quota = QuotaOverride::from(quota);
        quota.validate().map_err(refused)?;
        let (key, id) = self.commit(|state, issuer| {
            let issued = state.plan_create_key(name, issuer).map_err(refused)?;
            let id = issued.key.id.clone();
            let mut commands = vec![issued.command];
            if !quota.is_empty() {
                commands.push(Command::SetQuota { id: id.clone(), quota });
            }
            let mut seen = std::collections::BTreeSet::new();
            for text in grants {
                let grant = parse_grant(&id, text)?;
                if seen.insert(grant.clone()) {
                    commands.push(Command::AddGrant(grant));
                }
            }
            Ok((commands, (issued.key.reveal(), id)))
        })?;
        Ok(IssuedKey { key, view: self.describe_key(id.as_str())? })
    }

    pub fn list_keys(&self) -> KeyList {
        let state = self.state();
        KeyList { keys: state.keys().map(|k| view(&state, k)).collect() }
    }

    pub fn describe_key(&self, id: &str) -> Result<KeyView> {
        let id = key_id(id)?;
        let state = self.state();
        let record = state.key(&id).ok_or_else(|| BrokerError::KeyNotFound(id.to_string()))?;
        Ok(view(&state, record))
    }

    /// Revokes a key: from the next request on, it authenticates nowhere.
    pub fn revoke_key(&self, id: &str) -> Result<KeyView> {
        let id = key_id(id)?;
        let now = self.now_ms();
        self.commit(|state, _| Ok((vec![state.plan_revoke_key(&id, now).map_err(refused)?], ())))?;
        self.quotas.lock().expect("quotas lock").forget(&id);
        self.describe_key(id.as_str())
    }

    /// A new secret for the same id; the old secret stops working at once.
    pub fn rotate_key(&self, id: &str) -> Result<IssuedKey> {
        let id = key_id(id)?;
        let key = self.commit(|state, issuer| {
            let issued = state.plan_rotate_key(&id, issuer).map_err(refused)?;
            Ok((vec![issued.command], issued.key.reveal()))
        })?;
        Ok(IssuedKey { key, view: self.describe_key(id.as_str())? })
    }

    /// Replaces a key's own limits (an empty body returns it to the defaults). The
    /// next request it makes is charged at the new rates; debt it owes is kept.
    pub fn set_key_quota(&self, id: &str, quota: KeyQuotaBody) -> Result<KeyView> {
        let id = key_id(id)?;
        self.commit(|state, _| {
            Ok((state.plan_set_quota(&id, quota.into()).map_err(refused)?.into_iter().collect(), ()))
        })?;
        self.describe_key(id.as_str())
    }

    /// Adds grants to a key (idempotent: a grant it holds is skipped).
    pub fn add_grants(&self, id: &str, grants: &[String]) -> Result<KeyView> {
        let id = key_id(id)?;
        self.commit(|state, _| {
            let mut commands = Vec::new();
            for text in grants {
                if let Some(c) = state.plan_add_grant(parse_grant(&id, text)?).map_err(refused)?
                    && !commands.contains(&c)
                {
                    commands.push(c);
                }
            }
            Ok((commands, ()))
        })?;
        self.describe_key(id.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_text_round_trips() {
        let id = KeyId::parse("0123456789abcdef").unwrap();
        for text in [
            "topic:prefixed:billing.:write",
            "group:literal:a:b:read",
            "cluster:admin",
            "topic:literal:t:describe",
        ] {
            assert_eq!(grant_text(&parse_grant(&id, text).unwrap()), text);
        }
        for bad in [
            "",
            "topic",
            "topic:prefixed::write",
            "topic:exact:t:read",
            "cluster:literal:x:admin",
            "topic:literal:t:own",
            "disk:admin",
        ] {
            assert!(parse_grant(&id, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_survive_a_restart_and_never_show_their_secret() {
        let dir = tempfile::tempdir().unwrap();
        let options = super::super::AuthOptions::default();
        let clock: std::sync::Arc<dyn es_core::Clock> = std::sync::Arc::new(es_core::SystemClock);
        let auth = Auth::open(dir.path(), &options, clock.clone()).unwrap();
        let own = KeyQuotaBody { fetch_bytes_per_s: Some(4_000), ..Default::default() };
        let made = auth.create_key("billing", &["topic:prefixed:billing.:write".into()], own).unwrap();
        assert_eq!(made.view.quota, own);
        // `es_<id>_<secret>`: the id is hex, the secret base64url (which may hold `_`).
        let secret_of = |key: &str| key.strip_prefix("es_").unwrap().split_once('_').unwrap().1.to_owned();
        let secret = secret_of(&made.key);
        let listed = serde_json::to_string(&auth.list_keys()).unwrap();
        assert!(listed.contains(&made.view.id) && !listed.contains(&secret));
        let from = std::net::IpAddr::from([127, 0, 0, 1]);
        assert_eq!(auth.authenticate(&made.key, from).unwrap().as_str(), made.view.id);
        drop(auth);
        let auth = Auth::open(dir.path(), &options, clock).unwrap();
        assert_eq!(auth.describe_key(&made.view.id).unwrap().grants, ["topic:prefixed:billing.:write"]);
        assert_eq!(auth.describe_key(&made.view.id).unwrap().quota, own, "the key's own quota is durable");
        let zero = KeyQuotaBody { requests_per_s: Some(0), ..Default::default() };
        assert!(matches!(auth.set_key_quota(&made.view.id, zero), Err(BrokerError::InvalidRequest(_))));
        let cleared = auth.set_key_quota(&made.view.id, KeyQuotaBody::default()).unwrap();
        assert_eq!(cleared.quota, KeyQuotaBody::default());
        assert!(auth.authenticate(&made.key, from).is_ok());
        let rotated = auth.rotate_key(&made.view.id).unwrap();
        assert!(auth.authenticate(&made.key, from).is_err(), "the old secret stops at once");
        assert!(auth.authenticate(&rotated.key, from).is_ok());
        auth.revoke_key(&made.view.id).unwrap();
        assert!(auth.authenticate(&rotated.key, from).is_err());
        let on_disk = std::fs::read_to_string(dir.path().join("auth/state.json")).unwrap();
        assert!(!on_disk.contains(&secret) && !on_disk.contains(&secret_of(&rotated.key)));
    }

    #[test]
    fn auth_on_without_a_key_refuses_to_start_and_bootstraps_once() {
        let dir = tempfile::tempdir().unwrap();
        let clock: std::sync::Arc<dyn es_core::Clock> = std::sync::Arc::new(es_core::SystemClock);
        let mut options = super::super::AuthOptions { enabled: true, ..Default::default() };
        let e = Auth::open(dir.path(), &options, clock.clone()).err().unwrap();
        assert!(e.to_string().contains("ES_AUTH_BOOTSTRAP_KEY"), "{e}");
        let key = es_auth::ApiKey::random(&mut rand::rng()).reveal();
        options.bootstrap_key = Some(key.clone());
        let auth = Auth::open(dir.path(), &options, clock.clone()).unwrap();
        let id = auth.authenticate(&key, std::net::IpAddr::from([127, 0, 0, 1])).unwrap();
        assert_eq!(auth.describe_key(id.as_str()).unwrap().grants, ["cluster:admin"]);
        drop(auth);
        options.bootstrap_key = None;
        assert!(Auth::open(dir.path(), &options, clock).is_ok(), "a later start needs no bootstrap key");
    }
}
