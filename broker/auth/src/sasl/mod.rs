//! SASL server sessions: one [`MechanismSession`] per handshake, fed the client's
//! messages in order until it is done or has failed.
//!
//! - [`PlainSession`]: RFC 4616; user name = key id, password = the key's secret.
//! - [`ScramSession`]: RFC 5802 / RFC 7677, SCRAM-SHA-256 and SCRAM-SHA-512, server
//!   side, without channel binding (`-PLUS` is not offered).
//!
//! A Wasm authenticator plugin will be one more implementation of the trait. Sessions
//! read credentials through [`CredentialSource`], which the broker implements over its
//! stored [`AuthState`] (as does `AuthState` itself).

mod credential;
mod plain;
mod scram;

pub use credential::{ScramCredential, ScramMechanism};
pub use plain::PlainSession;
pub use scram::ScramSession;

use std::fmt;

use crate::grant::Principal;
use crate::key::{KeyId, SecretHash};
use crate::limits::{SASL_MESSAGE_BYTES_MAX, SASL_STEPS_MAX};
use crate::state::AuthState;

/// What a session answers to one client message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Send these bytes to the client and pass its answer to the next `step`.
    Challenge(Vec<u8>),
    /// Authenticated; send `final_bytes` (SCRAM's server signature; empty for PLAIN).
    Done { principal: Principal, final_bytes: Vec<u8> },
    /// Refused. The reason is for the broker's log; the client gets one generic error.
    Failed(FailReason),
}

/// Why a handshake failed. An unknown user, a revoked key and a wrong password are
/// all [`FailReason::InvalidCredentials`], so the log line cannot tell them apart either.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// The message breaks the mechanism's grammar.
    Malformed(&'static str),
    InvalidCredentials,
    /// The client asked for channel binding (`p=`), which es does not offer.
    ChannelBindingUnsupported,
    /// A message above [`SASL_MESSAGE_BYTES_MAX`].
    TooLarge,
    /// More messages than the mechanism has, or a message after the session ended.
    TooManySteps,
    /// The mechanism itself broke (an authenticator plugin trapped, ran past its
    /// deadline or memory cap, or answered nonsense); the broker logs which.
    MechanismError,
}

impl fmt::Display for FailReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FailReason::Malformed(what) => write!(f, "malformed message: {what}"),
            FailReason::InvalidCredentials => f.write_str("invalid credentials"),
            FailReason::ChannelBindingUnsupported => f.write_str("channel binding is not supported"),
            FailReason::TooLarge => write!(f, "a SASL message holds at most {SASL_MESSAGE_BYTES_MAX} bytes"),
            FailReason::TooManySteps => f.write_str("the handshake has already ended"),
            FailReason::MechanismError => f.write_str("the mechanism failed"),
        }
    }
}

/// One server-side handshake with one client.
pub trait MechanismSession: Send {
    /// The SASL mechanism name (`PLAIN`, `SCRAM-SHA-256`, ...).
    fn mechanism(&self) -> &'static str;
    /// Takes the client's next message. After `Done` or `Failed`, every call fails.
    fn step(&mut self, client_bytes: &[u8]) -> Step;
}

/// The lookups a mechanism may make. Only active keys are ever returned.
pub trait CredentialSource: Send + Sync {
    fn secret_hash(&self, id: &KeyId) -> Option<SecretHash>;
    /// The key a SCRAM user name names and its credential for `mechanism`.
    fn scram_credential(&self, username: &str, mechanism: ScramMechanism)
    -> Option<(KeyId, ScramCredential)>;
}

impl CredentialSource for AuthState {
    fn secret_hash(&self, id: &KeyId) -> Option<SecretHash> {
        self.active_key(id).map(|k| k.secret_hash.clone())
    }

    fn scram_credential(
        &self,
        username: &str,
        mechanism: ScramMechanism,
    ) -> Option<(KeyId, ScramCredential)> {
        let id = KeyId::parse(username).ok()?;
        self.active_key(&id).map(|k| (id, k.scram(mechanism).clone()))
    }
}

/// Counts steps and checks sizes, the bounds every mechanism shares.
#[derive(Debug, Default)]
struct StepGuard {
    steps: u32,
    ended: bool,
}

impl StepGuard {
    fn admit(&mut self, client_bytes: &[u8]) -> Result<(), FailReason> {
        if self.ended || self.steps >= SASL_STEPS_MAX {
            self.ended = true;
            return Err(FailReason::TooManySteps);
        }
        self.steps += 1;
        if client_bytes.len() > SASL_MESSAGE_BYTES_MAX {
            self.ended = true;
            return Err(FailReason::TooLarge);
        }
        Ok(())
    }

    /// Records the end of the session when `step` is final.
    fn finish(&mut self, step: Step) -> Step {
        if !matches!(step, Step::Challenge(_)) {
            self.ended = true;
        }
        step
    }
}

#[cfg(test)]
pub(crate) mod testing;
