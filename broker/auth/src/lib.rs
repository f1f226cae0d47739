//! Authentication and authorization for es as a pure library: no I/O, no sockets, no
//! async; time comes through [`es_core::Clock`] and randomness through an injected RNG.
//!
//! - [`key`]: API keys `es_<id>_<secret>`, their parser, the pepper and the stored
//!   `HMAC-SHA256(pepper, secret)`, compared in constant time.
//! - [`AuthState`] (`state`): keys, grants and owners, changed by applying
//!   [`Command`]s that planners return (create, import, rotate, revoke, grant, claim).
//! - [`grant`] and `authorize`: principals, resources, the rule set and
//!   [`AuthState::authorize`], plus ownership of groups and producer ids.
//! - [`sasl`]: the [`MechanismSession`] trait with PLAIN and SCRAM-SHA-256/512.
//! - [`quota`]: byte-rate quotas per key and direction (a default and each key's
//!   own override), request-rate and auth-failure limits per address and key id.
//! - [`limits`]: every size, count and rate limit.

mod authorize;
mod b64;
mod error;
pub mod grant;
pub mod key;
pub mod limits;
pub mod quota;
pub mod sasl;
mod state;

pub use error::{AuthError, Result};
pub use grant::{CLUSTER_NAME, Decision, DenyReason, Grant, Operation, PatternType, Principal, ResourceType};
pub use key::{ApiKey, KeyId, KeyParseError, Pepper, Secret, SecretHash};
pub use quota::{
    AuthFailureLimits, ByteQuotas, Direction, KeyQuota, QuotaOverride, RateLimiter, RequestRateLimits,
    TokenBucket,
};
pub use sasl::{
    CredentialSource, FailReason, MechanismSession, PlainSession, ScramCredential, ScramMechanism,
    ScramSession, Step,
};
pub use state::{AuthState, Command, Issued, Issuer, KeyRecord, SecretForms};

#[cfg(test)]
mod tests;
