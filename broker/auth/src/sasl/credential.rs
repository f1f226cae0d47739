//! SCRAM credentials (RFC 5802 §3): what the broker stores per key and mechanism, and
//! the hash functions each mechanism names.

use std::fmt;

use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256, Sha512};

use crate::error::{AuthError, Result};
use crate::limits::{SCRAM_ITERATIONS_MAX, SCRAM_ITERATIONS_MIN, SCRAM_SALT_BYTES};

/// The SCRAM mechanisms es serves (no `-PLUS`: channel binding is not offered).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];

    /// The SASL mechanism name.
    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// Output size of the hash, which is also the size of every SCRAM key.
    pub fn key_bytes(self) -> usize {
        match self {
            ScramMechanism::Sha256 => 32,
            ScramMechanism::Sha512 => 64,
        }
    }

    pub(crate) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
            ScramMechanism::Sha512 => {
                let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("HMAC takes any key length");
                mac.update(data);
                mac.finalize().into_bytes().to_vec()
            }
        }
    }

    pub(crate) fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramMechanism::Sha256 => Sha256::digest(data).to_vec(),
            ScramMechanism::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, i)` of RFC 5802: PBKDF2 with HMAC of this hash.
    pub(crate) fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.key_bytes()];
        match self {
            ScramMechanism::Sha256 => pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out),
            ScramMechanism::Sha512 => pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out),
        }
        out
    }
}

/// One key's credential for one SCRAM mechanism. The password itself is never kept.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScramCredential {
    #[serde(with = "crate::b64")]
    pub salt: Vec<u8>,
    pub iterations: u32,
    /// `H(HMAC(SaltedPassword, "Client Key"))`: checks a client's proof.
    #[serde(with = "crate::b64")]
    pub stored_key: Vec<u8>,
    /// `HMAC(SaltedPassword, "Server Key")`: signs the server's final message.
    #[serde(with = "crate::b64")]
    pub server_key: Vec<u8>,
}

impl ScramCredential {
    /// Derives the credential of `password` (for es keys: the secret's text form; it is
    /// ASCII, so SASLprep leaves it unchanged and is not applied).
    pub fn derive(mechanism: ScramMechanism, password: &[u8], salt: &[u8], iterations: u32) -> Self {
        let salted = mechanism.salted_password(password, salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        ScramCredential {
            salt: salt.to_vec(),
            iterations,
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(&salted, b"Server Key"),
        }
    }

    /// A credential with a fresh random salt.
    pub fn generate(
        mechanism: ScramMechanism,
        password: &[u8],
        rng: &mut dyn RngCore,
        iterations: u32,
    ) -> Self {
        let mut salt = [0u8; SCRAM_SALT_BYTES];
        rng.fill_bytes(&mut salt);
        ScramCredential::derive(mechanism, password, &salt, iterations)
    }

    /// Refuses a stored credential a session could not use safely.
    pub fn validate(&self, mechanism: ScramMechanism) -> Result<()> {
        let size = mechanism.key_bytes();
        if !(SCRAM_ITERATIONS_MIN..=SCRAM_ITERATIONS_MAX).contains(&self.iterations) {
            return Err(AuthError::InvalidCredential(format!(
                "{} iterations is outside {SCRAM_ITERATIONS_MIN}..={SCRAM_ITERATIONS_MAX}",
                self.iterations
            )));
        }
        if self.salt.is_empty() || self.stored_key.len() != size || self.server_key.len() != size {
            return Err(AuthError::InvalidCredential(format!(
                "a {} credential has a salt and {size}-byte keys",
                mechanism.name()
            )));
        }
        Ok(())
    }
}

impl fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ScramCredential").field("iterations", &self.iterations).finish_non_exhaustive()
    }
}
