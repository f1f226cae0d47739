//! SASL PLAIN (RFC 4616): `[authzid] NUL authcid NUL passwd` in one message. The
//! user name is a key id and the password its secret (or, for convenience, the whole
//! `es_<id>_<secret>` key of that same id). PLAIN sends the secret itself, so the
//! broker offers it only over TLS unless told otherwise.

use std::sync::Arc;

use crate::grant::Principal;
use crate::key::{ApiKey, KeyId, Pepper, Secret, SecretHash};
use crate::sasl::{CredentialSource, FailReason, MechanismSession, Step, StepGuard};

pub struct PlainSession {
    source: Arc<dyn CredentialSource>,
    pepper: Pepper,
    guard: StepGuard,
}

impl PlainSession {
    pub fn new(source: Arc<dyn CredentialSource>, pepper: Pepper) -> PlainSession {
        PlainSession { source, pepper, guard: StepGuard::default() }
    }

    fn verify(&self, message: &[u8]) -> Step {
        let Ok(text) = std::str::from_utf8(message) else {
            return Step::Failed(FailReason::Malformed("PLAIN is UTF-8"));
        };
        let mut parts = text.split('\0');
        let (Some(authzid), Some(authcid), Some(password), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Step::Failed(FailReason::Malformed("PLAIN is authzid NUL authcid NUL password"));
        };
        if !authzid.is_empty() && authzid != authcid {
            return Step::Failed(FailReason::Malformed("authzid differs from the user name"));
        }
        match self.check(authcid, password) {
            Some(id) => Step::Done { principal: Principal::Key(id), final_bytes: Vec::new() },
            None => Step::Failed(FailReason::InvalidCredentials),
        }
    }

    /// Hashes and compares even when the id or the password is unusable, so every
    /// refusal costs the same HMAC and constant-time comparison as a wrong secret.
    fn check(&self, username: &str, password: &str) -> Option<KeyId> {
        let id = KeyId::parse(username).ok();
        let secret = parse_password(password, id.as_ref());
        let offered = self.pepper.hash_secret(secret.as_ref().unwrap_or(&Secret::placeholder()));
        let stored = id.as_ref().and_then(|id| self.source.secret_hash(id));
        let matched = stored.as_ref().unwrap_or(&SecretHash::placeholder()).matches(&offered);
        let usable = stored.is_some() && secret.is_some();
        if matched && usable { id } else { None }
    }
}

/// The secret from a password that is either the secret's text or a whole key of `id`.
fn parse_password(password: &str, id: Option<&KeyId>) -> Option<Secret> {
    if let Ok(key) = ApiKey::parse(password) {
        return (Some(&key.id) == id).then_some(key.secret);
    }
    Secret::parse(password).ok()
}

impl MechanismSession for PlainSession {
    fn mechanism(&self) -> &'static str {
        "PLAIN"
    }

    fn step(&mut self, client_bytes: &[u8]) -> Step {
        if let Err(reason) = self.guard.admit(client_bytes) {
            return Step::Failed(reason);
        }
        let step = self.verify(client_bytes);
        self.guard.finish(step)
    }
}
