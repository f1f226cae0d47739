//! Principals, resources, operations and grants, and the one rule set that decides
//! whether a grant covers a request.
//!
//! Rules (the whole of them):
//! - A name is compared as exact bytes: no case folding, no Unicode normalisation, no
//!   path semantics (`..` is two dots). A Cyrillic `і` is not a Latin `i`.
//! - A literal grant covers exactly its name; a prefixed grant covers every name that
//!   starts with its bytes (so end a prefix with a separator: `billing.` not `billing`).
//! - Names are 1 to 249 bytes and never hold NUL; a grant with such a name is refused
//!   when made, and a request naming one is denied.
//! - `Admin` implies `Read`, `Write` and `Describe`; `Read` and `Write` each imply
//!   `Describe`; `Read` and `Write` imply nothing else.
//! - `Cluster` has one resource, named [`CLUSTER_NAME`], granted literally. A key with
//!   `Cluster` `Admin` is a superuser: every request is allowed (the bootstrap key).
//! - Anonymous principals, unknown keys and revoked keys are denied everything.

use serde::{Deserialize, Serialize};

use crate::error::{AuthError, Result};
use crate::key::KeyId;
use crate::limits::RESOURCE_NAME_BYTES_MAX;

/// The name of the one cluster resource (Kafka calls it `kafka-cluster`).
pub const CLUSTER_NAME: &str = "cluster";

/// Who is asking.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Principal {
    /// Not authenticated (auth off, or before SASL completes). Holds no grants.
    Anonymous,
    /// Authenticated as this key.
    Key(KeyId),
}

impl Principal {
    pub fn key(&self) -> Option<&KeyId> {
        match self {
            Principal::Anonymous => None,
            Principal::Key(id) => Some(id),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
}

impl ResourceType {
    pub fn label(self) -> &'static str {
        match self {
            ResourceType::Topic => "topic",
            ResourceType::Group => "group",
            ResourceType::Cluster => "cluster",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatternType {
    Literal,
    Prefixed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// See that a resource exists, its config, its offsets (Metadata, ListGroups).
    Describe,
    /// Consume, join a group, commit and fetch a group's offsets.
    Read,
    /// Produce.
    Write,
    /// Create, delete, alter; on `Cluster`: keys, plugins, config, everything.
    Admin,
}

impl Operation {
    /// Whether holding `self` allows `wanted` on the same resource.
    pub fn implies(self, wanted: Operation) -> bool {
        match (self, wanted) {
            (Operation::Admin, _) => true,
            (Operation::Read, Operation::Read | Operation::Describe) => true,
            (Operation::Write, Operation::Write | Operation::Describe) => true,
            (Operation::Describe, Operation::Describe) => true,
            (Operation::Read | Operation::Write | Operation::Describe, _) => false,
        }
    }
}

/// One grant: `key` may do `operation` on the resources `pattern` `name` selects.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Grant {
    pub key: KeyId,
    pub resource: ResourceType,
    pub pattern: PatternType,
    pub name: String,
    pub operation: Operation,
}

impl Grant {
    /// Refuses names no request can use and cluster grants in any other shape.
    pub fn validate(&self) -> Result<()> {
        check_name(&self.name).map_err(AuthError::InvalidResourceName)?;
        let cluster_shape = self.pattern == PatternType::Literal && self.name == CLUSTER_NAME;
        if self.resource == ResourceType::Cluster && !cluster_shape {
            return Err(AuthError::InvalidGrant(format!(
                "a cluster grant is literal and names {CLUSTER_NAME:?}"
            )));
        }
        Ok(())
    }

    /// Whether this grant covers `operation` on the resource `resource` `name`.
    pub fn covers(&self, resource: ResourceType, name: &str, operation: Operation) -> bool {
        let name_matches = match self.pattern {
            PatternType::Literal => name.as_bytes() == self.name.as_bytes(),
            PatternType::Prefixed => name.as_bytes().starts_with(self.name.as_bytes()),
        };
        self.resource == resource && name_matches && self.operation.implies(operation)
    }

    /// The superuser grant.
    pub fn is_cluster_admin(&self) -> bool {
        self.resource == ResourceType::Cluster && self.operation == Operation::Admin
    }
}

/// A resource name is 1..=249 bytes without NUL. Any other byte is allowed: names are
/// compared as bytes, so an odd character can only make a name harder to match.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("a name is never empty (an empty prefix would grant everything)".into());
    }
    if name.len() > RESOURCE_NAME_BYTES_MAX {
        return Err(format!("a name holds at most {RESOURCE_NAME_BYTES_MAX} bytes"));
    }
    if name.as_bytes().contains(&0) {
        return Err("a name never holds NUL".into());
    }
    Ok(())
}

/// The answer to "may this principal do this?".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    Denied(DenyReason),
}

/// Why a request was denied: for the broker's log and tests. Every reason must look
/// the same on the wire, and the same as "does not exist".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DenyReason {
    Anonymous,
    /// The key is unknown or revoked.
    KeyInactive,
    InvalidName,
    NoGrant,
    /// The group or producer id belongs to another key.
    NotOwner,
}

impl Decision {
    pub fn is_allowed(self) -> bool {
        self == Decision::Allowed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id() -> KeyId {
        KeyId::parse("00112233445566aa").unwrap()
    }

    fn grant(pattern: PatternType, name: &str, operation: Operation) -> Grant {
        Grant { key: id(), resource: ResourceType::Topic, pattern, name: name.into(), operation }
    }

    #[test]
    fn the_implication_table_is_exactly_the_documented_one() {
        use Operation::*;
        let all = [Describe, Read, Write, Admin];
        let implied = |held: Operation| all.iter().copied().filter(|w| held.implies(*w)).collect::<Vec<_>>();
        assert_eq!(implied(Admin), vec![Describe, Read, Write, Admin]);
        assert_eq!(implied(Read), vec![Describe, Read]);
        assert_eq!(implied(Write), vec![Describe, Write]);
        assert_eq!(implied(Describe), vec![Describe]);
    }

    #[test]
    fn a_literal_grant_covers_its_name_byte_for_byte() {
        let g = grant(PatternType::Literal, "billing", Operation::Read);
        assert!(g.covers(ResourceType::Topic, "billing", Operation::Read));
        for other in ["Billing", "billing ", "billing.x", "bill", "bіlling", "billing\u{200b}", "./billing"]
        {
            assert!(!g.covers(ResourceType::Topic, other, Operation::Read), "{other:?}");
        }
        assert!(!g.covers(ResourceType::Group, "billing", Operation::Read));
        assert!(!g.covers(ResourceType::Topic, "billing", Operation::Write));
    }

    #[test]
    fn a_prefixed_grant_does_not_drift() {
        let g = grant(PatternType::Prefixed, "billing.", Operation::Write);
        assert!(g.covers(ResourceType::Topic, "billing.invoices", Operation::Write));
        // `..` has no meaning: a name under the prefix stays under it, one outside stays out.
        assert!(g.covers(ResourceType::Topic, "billing...", Operation::Write));
        for other in
            ["billing", "billingx", "Billing.x", "BILLING.x", "bіlling.x", "xbilling.x", "../billing.x"]
        {
            assert!(!g.covers(ResourceType::Topic, other, Operation::Write), "{other:?}");
        }
        // A decomposed é is not the precomposed one: no normalisation.
        let accented = grant(PatternType::Prefixed, "caf\u{e9}.", Operation::Read);
        assert!(!accented.covers(ResourceType::Topic, "cafe\u{301}.x", Operation::Read));
    }

    #[test]
    fn names_that_could_widen_a_grant_are_refused() {
        assert!(grant(PatternType::Prefixed, "", Operation::Read).validate().is_err());
        assert!(grant(PatternType::Literal, "a\0b", Operation::Read).validate().is_err());
        assert!(grant(PatternType::Literal, &"x".repeat(250), Operation::Read).validate().is_err());
        assert!(grant(PatternType::Literal, &"x".repeat(249), Operation::Read).validate().is_ok());
        let cluster = |pattern, name: &str| Grant {
            key: id(),
            resource: ResourceType::Cluster,
            pattern,
            name: name.into(),
            operation: Operation::Admin,
        };
        assert!(cluster(PatternType::Literal, CLUSTER_NAME).validate().is_ok());
        assert!(cluster(PatternType::Prefixed, "c").validate().is_err());
        assert!(cluster(PatternType::Literal, "other").validate().is_err());
    }
}
