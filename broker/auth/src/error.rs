//! The auth crate's error type: why a key operation, a grant or a parse was refused.

use crate::key::KeyParseError;

/// Why a command on the auth state was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    #[error("not an es API key: {0}")]
    KeyParse(#[from] KeyParseError),
    #[error("key {0} does not exist")]
    KeyNotFound(String),
    #[error("key {0} already exists")]
    KeyExists(String),
    #[error("key {0} is revoked")]
    KeyRevoked(String),
    #[error("the broker already holds {max} keys")]
    TooManyKeys { max: usize },
    #[error("key {key} already holds {max} grants")]
    TooManyGrants { key: String, max: usize },
    #[error("invalid key name: {0}")]
    InvalidKeyName(String),
    #[error("invalid resource name: {0}")]
    InvalidResourceName(String),
    #[error("invalid grant: {0}")]
    InvalidGrant(String),
    #[error("invalid quota: {0}")]
    InvalidQuota(String),
    #[error("invalid SCRAM credential: {0}")]
    InvalidCredential(String),
    #[error("{resource} {name:?} belongs to another key")]
    NotOwner { resource: &'static str, name: String },
    #[error("{resource} {name:?} has no owner")]
    NotOwned { resource: &'static str, name: String },
}

pub type Result<T, E = AuthError> = std::result::Result<T, E>;
