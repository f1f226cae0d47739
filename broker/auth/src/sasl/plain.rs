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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::testing::{pepper, state_with_keys};
    use crate::state::AuthState;

    fn session(state: &AuthState) -> PlainSession {
        PlainSession::new(Arc::new(state.clone()), pepper())
    }

    fn step(state: &AuthState, message: &str) -> Step {
        session(state).step(message.as_bytes())
    }

    #[test]
    fn the_secret_or_the_whole_key_authenticates() {
        let (state, keys) = state_with_keys(&["a", "b"]);
        let (id, secret) = (keys[0].id.as_str(), keys[0].secret.encode());
        let done = Step::Done { principal: Principal::Key(keys[0].id.clone()), final_bytes: Vec::new() };
        assert_eq!(step(&state, &format!("\0{id}\0{secret}")), done);
        assert_eq!(step(&state, &format!("{id}\0{id}\0{secret}")), done);
        assert_eq!(step(&state, &format!("\0{id}\0{}", keys[0].reveal())), done);
        // Another key's whole text, even a valid one, is not this key's password.
        let other = keys[1].reveal();
        assert_eq!(step(&state, &format!("\0{id}\0{other}")), Step::Failed(FailReason::InvalidCredentials));
    }

    #[test]
    fn every_credential_failure_has_one_reason() {
        let (mut state, keys) = state_with_keys(&["a", "b"]);
        state.apply(state.plan_revoke_key(&keys[1].id, 9).unwrap()).unwrap();
        let (id, secret) = (keys[0].id.as_str(), keys[0].secret.encode());
        let revoked = format!("\0{}\0{}", keys[1].id, keys[1].secret.encode());
        let wrong = format!("\0{id}\0{}", keys[1].secret.encode());
        let unknown = format!("\0ffffffffffffffff\0{secret}");
        let not_an_id = format!("\0{}\0{secret}", id.to_uppercase());
        let not_a_secret = format!("\0{id}\0pencil");
        for message in [revoked, wrong, unknown, not_an_id, not_a_secret, format!("\0{id}\0")] {
            assert_eq!(step(&state, &message), Step::Failed(FailReason::InvalidCredentials), "{message:?}");
        }
    }

    #[test]
    fn malformed_oversized_and_repeated_messages_fail() {
        let (state, keys) = state_with_keys(&["a"]);
        let (id, secret) = (keys[0].id.as_str(), keys[0].secret.encode());
        let malformed = |m: &str| matches!(step(&state, m), Step::Failed(FailReason::Malformed(_)));
        assert!(malformed(&format!("{id}\0{secret}")));
        assert!(malformed(&format!("\0{id}\0{secret}\0")));
        assert!(malformed(&format!("other\0{id}\0{secret}")));
        let mut s = session(&state);
        assert!(matches!(s.step(&[0xff, 0, 0]), Step::Failed(FailReason::Malformed(_))));
        assert_eq!(s.step(format!("\0{id}\0{secret}").as_bytes()), Step::Failed(FailReason::TooManySteps));
        let huge = format!("\0{id}\0{}", "a".repeat(crate::limits::SASL_MESSAGE_BYTES_MAX));
        assert_eq!(step(&state, &huge), Step::Failed(FailReason::TooLarge));
    }

    #[test]
    fn nul_tricks_and_empty_fields_never_authenticate() {
        let (state, keys) = state_with_keys(&["a", "b"]);
        let (id, secret) = (keys[0].id.as_str(), keys[0].secret.encode());
        let other = keys[1].id.as_str();
        let malformed = |m: &str| matches!(step(&state, m), Step::Failed(FailReason::Malformed(_)));
        // One NUL too many anywhere moves a field: the message is malformed.
        assert!(malformed(&format!("\0{id}\0\0{secret}")), "NUL before the password");
        assert!(malformed(&format!("\0\0{id}\0{secret}")), "NUL before the user");
        assert!(malformed(&format!("{id}\0\0{secret}")), "authzid with an empty user");
        assert!(malformed(""), "empty");
        assert!(malformed("\0"), "one NUL");
        // Acting as another key through the authzid is refused, whatever the password.
        assert!(malformed(&format!("{other}\0{id}\0{secret}")));
        // Empty fields and a NUL-padded password are just wrong credentials.
        let invalid = |m: &str| step(&state, m) == Step::Failed(FailReason::InvalidCredentials);
        assert!(invalid(&format!("\0\0{secret}")), "empty user");
        assert!(invalid("\0\0"), "empty user and password");
        assert!(invalid(&format!("\0{id}\0{secret}\u{1}")), "a control character after the secret");
        assert!(invalid(&format!("\0{id} \0{secret}")), "a space after the id");
    }
}
