//! API keys: the `es_<id>_<secret>` text form, its parser, and the peppered hash the
//! broker stores instead of the secret.
//!
//! Encoding: `es_` + the key id (16 lowercase hex digits, 8 random bytes; public, the
//! primary key, never secret) + `_` + the secret (32 random bytes in unpadded base64url,
//! 43 characters, which may themselves contain `_` and `-`). The parser splits at the
//! first `_` after the prefix, which is unambiguous because an id never holds `_`.
//! Stored: `HMAC-SHA256(pepper, secret bytes)`, compared in constant time.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::limits::{KEY_ID_BYTES, SECRET_BYTES};

/// The text every key starts with.
pub const KEY_PREFIX: &str = "es_";

/// Why a text is not an API key. The secret never appears in these messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyParseError {
    #[error("an API key starts with `es_`")]
    MissingPrefix,
    #[error("an API key is `es_<id>_<secret>`; the `_` after the id is missing")]
    MissingSeparator,
    #[error("a key id is {expected} lowercase hex digits")]
    BadId { expected: usize },
    #[error("the secret is not unpadded base64url")]
    BadSecretEncoding,
    #[error("the secret holds {got} bytes; a key's secret holds {expected}")]
    BadSecretLength { got: usize, expected: usize },
}

/// A key's public id: 16 lowercase hex digits.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct KeyId(String);

impl KeyId {
    /// Checks the form; any other text (upper case, other length, NUL) is refused, so
    /// two spellings can never name one key.
    pub fn parse(text: &str) -> Result<KeyId, KeyParseError> {
        let valid = text.len() == KEY_ID_BYTES * 2
            && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if !valid {
            return Err(KeyParseError::BadId { expected: KEY_ID_BYTES * 2 });
        }
        Ok(KeyId(text.to_owned()))
    }

    fn random(rng: &mut dyn RngCore) -> KeyId {
        let mut bytes = [0u8; KEY_ID_BYTES];
        rng.fill_bytes(&mut bytes);
        KeyId(bytes.iter().map(|b| format!("{b:02x}")).collect())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for KeyId {
    type Error = KeyParseError;
    fn try_from(text: String) -> Result<KeyId, KeyParseError> {
        KeyId::parse(&text)
    }
}

impl From<KeyId> for String {
    fn from(id: KeyId) -> String {
        id.0
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({})", self.0)
    }
}

/// A key's secret. Debug never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret([u8; SECRET_BYTES]);

impl Secret {
    pub fn random(rng: &mut dyn RngCore) -> Secret {
        let mut bytes = [0u8; SECRET_BYTES];
        rng.fill_bytes(&mut bytes);
        Secret(bytes)
    }

    /// Decodes the text form (unpadded base64url of exactly 32 bytes).
    pub fn parse(text: &str) -> Result<Secret, KeyParseError> {
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|_| KeyParseError::BadSecretEncoding)?;
        let got = bytes.len();
        let array = <[u8; SECRET_BYTES]>::try_from(bytes)
            .map_err(|_| KeyParseError::BadSecretLength { got, expected: SECRET_BYTES })?;
        Ok(Secret(array))
    }

    /// The text form, which is also the SASL password (PLAIN and SCRAM).
    pub fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0)
    }

    /// All zeros: hashed in place of a malformed password, never accepted.
    pub(crate) fn placeholder() -> Secret {
        Secret([0; SECRET_BYTES])
    }

    pub fn as_bytes(&self) -> &[u8; SECRET_BYTES] {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

/// A whole key, as shown once at creation and sent by clients.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey {
    pub id: KeyId,
    pub secret: Secret,
}

impl ApiKey {
    pub fn random(rng: &mut dyn RngCore) -> ApiKey {
        ApiKey { id: KeyId::random(rng), secret: Secret::random(rng) }
    }

    pub fn parse(text: &str) -> Result<ApiKey, KeyParseError> {
        let rest = text.strip_prefix(KEY_PREFIX).ok_or(KeyParseError::MissingPrefix)?;
        let (id, secret) = rest.split_once('_').ok_or(KeyParseError::MissingSeparator)?;
        Ok(ApiKey { id: KeyId::parse(id)?, secret: Secret::parse(secret)? })
    }

    /// The text form `es_<id>_<secret>`: the one string a user keeps.
    pub fn reveal(&self) -> String {
        format!("{KEY_PREFIX}{}_{}", self.id, self.secret.encode())
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ApiKey({}, ..)", self.id)
    }
}

/// The broker-wide secret mixed into every stored hash and fake SCRAM salt, so a
/// copy of the metadata alone neither checks guesses nor tells real users from fake.
#[derive(Clone)]
pub struct Pepper([u8; 32]);

impl Pepper {
    pub fn new(bytes: [u8; 32]) -> Pepper {
        Pepper(bytes)
    }

    /// HMAC-SHA256 under the pepper of a labelled message; the label keeps the uses
    /// (secret hashes, fake salts, fake keys) from ever colliding.
    pub(crate) fn mac(&self, label: &[u8], parts: &[&[u8]]) -> [u8; 32] {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(label);
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac.finalize().into_bytes().into()
    }

    /// A public name for this pepper (16 hex digits of a labelled MAC): nodes of a
    /// cluster compare it to find one whose pepper differs, without revealing it.
    pub fn fingerprint(&self) -> String {
        self.mac(b"es pepper fingerprint v1", &[])[..8].iter().map(|b| format!("{b:02x}")).collect()
    }

    /// What the broker stores for a secret.
    pub fn hash_secret(&self, secret: &Secret) -> SecretHash {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC takes any key length");
        mac.update(secret.as_bytes());
        SecretHash(mac.finalize().into_bytes().into())
    }
}

impl fmt::Debug for Pepper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Pepper(..)")
    }
}

/// `HMAC-SHA256(pepper, secret)`, stored as unpadded base64url.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SecretHash([u8; 32]);

impl SecretHash {
    /// Constant-time comparison: how long it takes says nothing about how many
    /// leading bytes of a guess were right.
    pub fn matches(&self, other: &SecretHash) -> bool {
        self.0.ct_eq(&other.0).into()
    }
}

impl SecretHash {
    /// Compared against when a key does not exist (the result is discarded).
    pub(crate) fn placeholder() -> SecretHash {
        SecretHash([0; 32])
    }
}

impl TryFrom<String> for SecretHash {
    type Error = String;
    fn try_from(text: String) -> Result<SecretHash, String> {
        let bytes = URL_SAFE_NO_PAD.decode(text).map_err(|e| format!("secret hash: {e}"))?;
        <[u8; 32]>::try_from(bytes).map(SecretHash).map_err(|_| "secret hash: not 32 bytes".to_owned())
    }
}

impl From<SecretHash> for String {
    fn from(hash: SecretHash) -> String {
        URL_SAFE_NO_PAD.encode(hash.0)
    }
}

impl fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretHash(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn key() -> ApiKey {
        ApiKey::random(&mut StdRng::seed_from_u64(7))
    }

    #[test]
    fn a_key_round_trips_through_its_text_form() {
        let key = key();
        let text = key.reveal();
        assert!(text.starts_with("es_"));
        assert_eq!(text.len(), 3 + 16 + 1 + 43);
        assert_eq!(ApiKey::parse(&text).unwrap(), key);
    }

    #[test]
    fn parse_errors_are_typed() {
        let text = key().reveal();
        let (id, secret) = text[3..].split_once('_').unwrap();
        assert_eq!(ApiKey::parse(&text[1..]), Err(KeyParseError::MissingPrefix));
        assert_eq!(ApiKey::parse(&format!("es_{id}")), Err(KeyParseError::MissingSeparator));
        let upper = format!("es_{}_{secret}", id.to_uppercase());
        assert_eq!(ApiKey::parse(&upper), Err(KeyParseError::BadId { expected: 16 }));
        assert_eq!(ApiKey::parse(&format!("es_{id}_{secret}=")), Err(KeyParseError::BadSecretEncoding));
        assert_eq!(
            ApiKey::parse(&format!("es_{id}_{}", &secret[..40])),
            Err(KeyParseError::BadSecretLength { got: 30, expected: 32 })
        );
        assert!(ApiKey::parse(&format!("es_{id}\0_{secret}")).is_err());
    }

    #[test]
    fn debug_never_prints_the_secret() {
        let key = key();
        let shown = format!("{key:?} {:?} {:?}", key.secret, Pepper::new([1; 32]).hash_secret(&key.secret));
        assert!(!shown.contains(&key.secret.encode()));
        assert!(shown.contains(key.id.as_str()));
    }

    #[test]
    fn the_hash_depends_on_the_pepper_and_matches_only_its_secret() {
        let key = key();
        let other = Secret::random(&mut StdRng::seed_from_u64(8));
        let pepper = Pepper::new([1; 32]);
        let hash = pepper.hash_secret(&key.secret);
        assert!(hash.matches(&pepper.hash_secret(&key.secret)));
        assert!(!hash.matches(&pepper.hash_secret(&other)));
        assert!(!hash.matches(&Pepper::new([2; 32]).hash_secret(&key.secret)));
        let stored = serde_json::to_string(&hash).unwrap();
        assert!(serde_json::from_str::<SecretHash>(&stored).unwrap().matches(&hash));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn parse_never_panics_and_accepts_only_its_own_output(text in "\\PC{0,80}") {
            if let Ok(key) = ApiKey::parse(&text) {
                prop_assert_eq!(key.reveal(), text);
            }
        }

        #[test]
        fn every_seed_gives_a_parseable_key(seed in any::<u64>()) {
            let key = ApiKey::random(&mut StdRng::seed_from_u64(seed));
            prop_assert_eq!(ApiKey::parse(&key.reveal()).unwrap(), key);
        }
    }
}
