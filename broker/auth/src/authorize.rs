//! Authorization over the auth state: grants (the rules are in [`crate::grant`]) and
//! ownership of groups and producer ids.
//!
//! Ownership: a group belongs to the key that first claimed it (the broker claims on
//! the first join or commit), a producer id to the key it was issued to. Another key
//! is denied even when its grants cover the group; `Admin` on the group (or the
//! superuser) overrides, so an operator can clean up. A producer id has no override
//! below the superuser: nobody else has a reason to write with it. Owners stay after
//! their key is revoked, so a revoked key's groups cannot be taken over by a claim.

use crate::error::{AuthError, Result};
use crate::grant::{CLUSTER_NAME, Decision, DenyReason, Operation, Principal, ResourceType, check_name};
use crate::key::KeyId;
use crate::state::{AuthState, Command};

impl AuthState {
    /// May `principal` do `op` on `resource` `name`? Grants only; groups and producer
    /// ids also need [`AuthState::authorize_group`] / [`AuthState::authorize_producer_id`].
    pub fn authorize(
        &self,
        principal: &Principal,
        resource: ResourceType,
        name: &str,
        op: Operation,
    ) -> Decision {
        let id = match self.active_principal(principal) {
            Ok(id) => id,
            Err(reason) => return Decision::Denied(reason),
        };
        if check_name(name).is_err() || (resource == ResourceType::Cluster && name != CLUSTER_NAME) {
            return Decision::Denied(DenyReason::InvalidName);
        }
        if self.is_superuser(id) || self.holds(id, resource, name, op) {
            return Decision::Allowed;
        }
        Decision::Denied(DenyReason::NoGrant)
    }

    /// Grants and ownership for a group request.
    pub fn authorize_group(&self, principal: &Principal, group: &str, op: Operation) -> Decision {
        let decision = self.authorize(principal, ResourceType::Group, group, op);
        let (Decision::Allowed, Some(id)) = (decision, principal.key()) else { return decision };
        match self.group_owner(group) {
            Some(owner) if owner != id => {
                let admin = self.authorize(principal, ResourceType::Group, group, Operation::Admin);
                if admin.is_allowed() { admin } else { Decision::Denied(DenyReason::NotOwner) }
            }
            Some(_) | None => Decision::Allowed,
        }
    }

    /// May `principal` write with `producer_id`? (The topic needs `Write` as well.)
    pub fn authorize_producer_id(&self, principal: &Principal, producer_id: i64) -> Decision {
        let id = match self.active_principal(principal) {
            Ok(id) => id,
            Err(reason) => return Decision::Denied(reason),
        };
        // An unowned id was never issued to anyone while auth was on.
        let owned = self.producer_id_owner(producer_id) == Some(id);
        if owned || self.is_superuser(id) {
            Decision::Allowed
        } else {
            Decision::Denied(DenyReason::NotOwner)
        }
    }

    /// The claim to store when `principal` first uses `group`; `None` if it owns it.
    /// Call after [`AuthState::authorize_group`] allowed the request.
    pub fn plan_claim_group(&self, principal: &Principal, group: &str) -> Result<Option<Command>> {
        let owner = self.claimant(principal)?;
        check_name(group).map_err(AuthError::InvalidResourceName)?;
        match self.group_owner(group) {
            Some(current) if *current == owner => Ok(None),
            Some(_) => Err(AuthError::NotOwner { resource: "group", name: group.to_owned() }),
            None => Ok(Some(Command::ClaimGroup { group: group.to_owned(), owner })),
        }
    }

    /// The claim to store when the broker issues `producer_id` to `principal`.
    pub fn plan_claim_producer_id(&self, principal: &Principal, producer_id: i64) -> Result<Command> {
        let owner = self.claimant(principal)?;
        match self.producer_id_owner(producer_id) {
            Some(current) if *current != owner => {
                Err(AuthError::NotOwner { resource: "producer id", name: producer_id.to_string() })
            }
            Some(_) | None => Ok(Command::ClaimProducerId { producer_id, owner }),
        }
    }

    /// The principal a mechanism outside this crate (an authenticator plugin) named,
    /// accepted only when it is an active key: a plugin can prove who a client is,
    /// never make up a principal (and so never mint an admin).
    pub fn accept_principal(&self, name: &str) -> Option<Principal> {
        let id = KeyId::parse(name).ok()?;
        self.active_key(&id).map(|_| Principal::Key(id))
    }

    fn active_principal<'p>(&self, principal: &'p Principal) -> Result<&'p KeyId, DenyReason> {
        let id = principal.key().ok_or(DenyReason::Anonymous)?;
        self.active_key(id).map(|_| id).ok_or(DenyReason::KeyInactive)
    }

    fn claimant(&self, principal: &Principal) -> Result<KeyId> {
        let id = principal.key().ok_or(AuthError::KeyNotFound("anonymous".into()))?;
        match self.active_key(id) {
            Some(_) => Ok(id.clone()),
            None if self.key(id).is_some() => Err(AuthError::KeyRevoked(id.to_string())),
            None => Err(AuthError::KeyNotFound(id.to_string())),
        }
    }
}
