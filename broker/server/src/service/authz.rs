//! Authorization: who may do what. [`Call::access`] is the ONE table saying which
//! operation each call is (describe / read / write / admin on a topic or group,
//! cluster describe or admin, any authenticated key, public); every HTTP route and
//! binary op names its [`Call`] (`http::ROUTES`, `binary::call_of`), and tests
//! check none lacks a row. [`authorize`] answers it against the durable grants
//! (es-auth's rule set) when auth is on, and allows everything when it is off.
//!
//! A refusal looks exactly like "does not exist" (same error, code, status and
//! message as a missing topic or group), and every caller authorizes before it
//! looks anything up, so a refusal never says whether the resource exists.

use es_auth::{Decision, Operation as Op, ResourceType};

use crate::auth::Auth;
use crate::service::error::{BrokerError, Result};

/// Who is calling: the key a listener authenticated, or anonymous (auth off).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Principal {
    /// The API key id; `None` is anonymous, which auth-on denies everything.
    pub key: Option<es_auth::KeyId>,
}

impl Principal {
    pub const ANONYMOUS: Principal = Principal { key: None };

    pub fn key(id: es_auth::KeyId) -> Principal {
        Principal { key: Some(id) }
    }

    fn to_auth(&self) -> es_auth::Principal {
        self.key.clone().map_or(es_auth::Principal::Anonymous, es_auth::Principal::Key)
    }
}

/// What a call is done to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Topic(String),
    Group(String),
    /// A schema-registry subject: `<topic>-key` and `<topic>-value` follow their
    /// topic's grants; every other subject needs a cluster grant.
    Subject(String),
    Cluster,
}

/// The kind of resource a call needs, and what it does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    TopicDescribe,
    TopicRead,
    TopicWrite,
    TopicAdmin,
    /// Group grants plus ownership (the key that first used a group owns it).
    GroupDescribe,
    GroupRead,
    GroupAdmin,
    /// Read a subject: its topic's `describe`, or cluster `describe`.
    SubjectRead,
    /// Register or delete under a subject: its topic's `write`, or cluster `admin`.
    SubjectWrite,
    ClusterDescribe,
    ClusterAdmin,
    /// Any active key; the answer is filtered to what it may see (listings) or
    /// belongs to it (producer ids).
    Authenticated,
    /// Probes, the API document and the login step: served to anyone.
    Public,
}

/// Every call a listener can make.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Call {
    Health,
    Produce,
    Fetch,
    ListOffsets,
    ListTopics,
    DescribeTopic,
    CreateTopic,
    DeleteTopic,
    DescribeTopicConfig,
    AlterTopicConfig,
    AddPartitions,
    /// Kafka's DeleteRecords: moving a partition's log start forward.
    DeleteRecords,
    /// Kafka's DescribeProducers: a partition's idempotent-producer state.
    DescribeProducers,
    InitProducerId,
    GroupJoin,
    GroupSync,
    GroupHeartbeat,
    GroupLeave,
    GroupCommit,
    GroupFetchOffsets,
    ListGroups,
    DescribeGroup,
    ResetGroupOffsets,
    DeleteGroup,
    ListPlugins,
    DescribePlugin,
    UploadPlugin,
    RemovePlugin,
    DescribeValidators,
    BindValidators,
    SchemaRead,
    SchemaWrite,
    /// A group session's poll (`/groups/{group}/members/{member}/records`): the
    /// group's read; the topics it reads are authorized by the fetch itself.
    GroupPoll,
    Authenticate,
    CreateKey,
    ListKeys,
    DescribeKey,
    RevokeKey,
    RotateKey,
    GrantKey,
    SetKeyQuota,
    /// `GET /metrics`: any active key; the answer holds only the series it may
    /// describe (`metrics::Scope`).
    ScrapeMetrics,
    /// Seeing broker-wide state (metrics not owned by a topic, group or key).
    DescribeBroker,
    /// Moving a partition's leadership to another node (Kafka's ElectLeaders).
    TransferLeader,
    /// Adding a node to the cluster or removing one (`es cluster add-node`,
    /// `remove-node`; Kafka's AddRaftVoter/RemoveRaftVoter).
    ChangeMembership,
    /// Taking, renewing or releasing an online snapshot (`es-tools dump --online`):
    /// it exposes every topic's records, keys' hashes and the pepper.
    Snapshot,
}

impl Call {
    /// THE table.
    pub fn access(self) -> Access {
        match self {
            Call::Health | Call::Authenticate => Access::Public,
            Call::Produce => Access::TopicWrite,
            // Kafka asks READ on the topic for DescribeProducers.
            Call::Fetch | Call::DescribeProducers => Access::TopicRead,
            Call::ListOffsets
            | Call::DescribeTopic
            | Call::DescribeTopicConfig
            | Call::DescribeValidators => Access::TopicDescribe,
            Call::CreateTopic
            | Call::DeleteTopic
            | Call::AlterTopicConfig
            | Call::AddPartitions
            | Call::DeleteRecords
            | Call::BindValidators => Access::TopicAdmin,
            // Listings filter to what the caller may describe; plugins are shared
            // by every topic admin who binds them; a producer id is its caller's.
            Call::ListTopics | Call::ListGroups | Call::ListPlugins | Call::DescribePlugin => {
                Access::Authenticated
            }
            Call::InitProducerId | Call::ScrapeMetrics => Access::Authenticated,
            Call::DescribeBroker => Access::ClusterDescribe,
            Call::GroupJoin
            | Call::GroupSync
            | Call::GroupHeartbeat
            | Call::GroupLeave
            | Call::GroupCommit
            | Call::GroupPoll
            | Call::ResetGroupOffsets => Access::GroupRead,
            Call::GroupFetchOffsets | Call::DescribeGroup => Access::GroupDescribe,
            Call::DeleteGroup => Access::GroupAdmin,
            Call::SchemaRead => Access::SubjectRead,
            Call::SchemaWrite => Access::SubjectWrite,
            Call::UploadPlugin
            | Call::RemovePlugin
            | Call::CreateKey
            | Call::ListKeys
            | Call::DescribeKey
            | Call::RevokeKey
            | Call::RotateKey
            | Call::GrantKey
            | Call::SetKeyQuota
            | Call::TransferLeader
            | Call::ChangeMembership
            | Call::Snapshot => Access::ClusterAdmin,
        }
    }

    /// Calls whose first use of a group claims it for the caller.
    fn claims_group(self) -> bool {
        matches!(self, Call::GroupJoin | Call::GroupCommit)
    }
}

/// One authorization question: this call on this resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub call: Call,
    pub resource: Resource,
}

/// A refusal: the resource the caller may not use (for logs and the listener).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied {
    pub resource: Resource,
}

/// Answers an authorization question; a refusal is the resource's not-found error.
/// The first join or commit of an unowned group claims it for the caller (one
/// small fsync of the auth state, once per group).
pub fn authorize(auth: &Auth, principal: &Principal, op: &Operation) -> Result<()> {
    check(auth, principal, op).map_err(|d| denied(&d.resource))?;
    claim(auth, principal, op)
}

/// After an allowed call: the first join or commit of an unowned group claims
/// it for the caller (blocking: an fsync, once per group).
pub fn claim(auth: &Auth, principal: &Principal, op: &Operation) -> Result<()> {
    let claims = op.call.claims_group() && auth.enabled();
    if let (true, Some(key), Resource::Group(group)) = (claims, &principal.key, &op.resource) {
        auth.claim_group(key, group)?;
    }
    Ok(())
}

/// The topics a group call names (a subscription, committed offsets, a reset):
/// each must be one the caller may read, so a group is never a side door into
/// another key's topic (its existence, partitions or offsets). Refused as that
/// topic's not-found.
pub fn authorize_topics<'a>(
    auth: &Auth,
    principal: &Principal,
    topics: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    for topic in topics {
        let op = Operation { call: Call::Fetch, resource: Resource::Topic(topic.to_owned()) };
        check(auth, principal, &op).map_err(|d| denied(&d.resource))?;
    }
    Ok(())
}

/// The decision alone, without side effects.
pub fn check(auth: &Auth, principal: &Principal, op: &Operation) -> std::result::Result<(), Denied> {
    let access = op.call.access();
    if !auth.enabled() || access == Access::Public {
        return Ok(());
    }
    let state = auth.state();
    let who = principal.to_auth();
    let cluster = |op| state.authorize(&who, ResourceType::Cluster, es_auth::CLUSTER_NAME, op);
    let topic = |name: &str, op| state.authorize(&who, ResourceType::Topic, name, op);
    let decision = match (access, &op.resource) {
        (Access::Public, _) => Decision::Allowed,
        (Access::Authenticated, _) => match principal.key.as_ref().and_then(|k| state.active_key(k)) {
            Some(_) => Decision::Allowed,
            None => Decision::Denied(es_auth::DenyReason::KeyInactive),
        },
        (Access::TopicDescribe, Resource::Topic(t)) => topic(t, Op::Describe),
        (Access::TopicRead, Resource::Topic(t)) => topic(t, Op::Read),
        (Access::TopicWrite, Resource::Topic(t)) => topic(t, Op::Write),
        (Access::TopicAdmin, Resource::Topic(t)) => topic(t, Op::Admin),
        (Access::GroupDescribe, Resource::Group(g)) => state.authorize_group(&who, g, Op::Describe),
        (Access::GroupRead, Resource::Group(g)) => state.authorize_group(&who, g, Op::Read),
        (Access::GroupAdmin, Resource::Group(g)) => state.authorize_group(&who, g, Op::Admin),
        (Access::SubjectRead, Resource::Subject(s)) => subject(s, Op::Describe, &topic, &cluster),
        (Access::SubjectWrite, Resource::Subject(s)) => subject(s, Op::Write, &topic, &cluster),
        (Access::SubjectRead, Resource::Cluster) | (Access::ClusterDescribe, _) => cluster(Op::Describe),
        (Access::SubjectWrite, Resource::Cluster) | (Access::ClusterAdmin, _) => cluster(Op::Admin),
        // A call on a resource of the wrong kind is a wiring mistake: deny it.
        (
            Access::TopicDescribe
            | Access::TopicRead
            | Access::TopicWrite
            | Access::TopicAdmin
            | Access::GroupDescribe
            | Access::GroupRead
            | Access::GroupAdmin
            | Access::SubjectRead
            | Access::SubjectWrite,
            _,
        ) => Decision::Denied(es_auth::DenyReason::InvalidName),
    };
    match decision {
        Decision::Allowed => Ok(()),
        Decision::Denied(reason) => {
            if let Some(c) = auth.stats().key(principal.key.as_ref(), principal.key.is_some()) {
                crate::metrics::add(&c.denials, 1);
            }
            tracing::debug!(call = ?op.call, resource = ?op.resource, key = ?principal.key, ?reason, "denied");
            Err(Denied { resource: op.resource.clone() })
        }
    }
}

/// `<topic>-key` and `<topic>-value` follow the topic (describe to read, write to
/// register); any subject is open to a cluster grant (`describe` reads, `admin` writes).
fn subject(
    name: &str,
    op: Op,
    topic: &dyn Fn(&str, Op) -> Decision,
    cluster: &dyn Fn(Op) -> Decision,
) -> Decision {
    let cluster_op = if op == Op::Describe { Op::Describe } else { Op::Admin };
    if cluster(cluster_op).is_allowed() {
        return Decision::Allowed;
    }
    match name.strip_suffix("-key").or_else(|| name.strip_suffix("-value")) {
        Some(t) => topic(t, op),
        None => Decision::Denied(es_auth::DenyReason::NoGrant),
    }
}

/// What a refusal looks like: exactly the resource's "does not exist".
pub fn denied(resource: &Resource) -> BrokerError {
    match resource {
        Resource::Topic(t) => BrokerError::Denied(Box::new(BrokerError::TopicNotFound(t.clone()))),
        Resource::Group(g) => denied_group(g),
        Resource::Subject(_) | Resource::Cluster => {
            BrokerError::Unauthorized { resource: "this call (it needs a cluster grant)".into() }
        }
    }
}

pub fn denied_group(group: &str) -> BrokerError {
    let missing = BrokerError::Group(es_groups::GroupError::GroupNotFound(group.to_owned()));
    BrokerError::Denied(Box::new(missing))
}

/// Whether `principal` may see `topic` in a listing.
pub fn may_describe_topic(auth: &Auth, principal: &Principal, topic: &str) -> bool {
    let op = Operation { call: Call::DescribeTopic, resource: Resource::Topic(topic.to_owned()) };
    check(auth, principal, &op).is_ok()
}

/// Whether `principal` may see broker-wide state (cluster `describe`).
pub fn may_describe_broker(auth: &Auth, principal: &Principal) -> bool {
    check(auth, principal, &Operation { call: Call::DescribeBroker, resource: Resource::Cluster }).is_ok()
}

/// Whether `principal` may make `call` on `topic` (for a listener that must answer
/// a refusal in its own way before the service is asked).
pub fn may_topic(auth: &Auth, principal: &Principal, call: Call, topic: &str) -> bool {
    check(auth, principal, &Operation { call, resource: Resource::Topic(topic.to_owned()) }).is_ok()
}

/// Whether `principal` may make `call` on `resource` (the decision alone: nothing
/// is claimed). Kafka's "authorized operations" bit fields are built from this.
pub fn may(auth: &Auth, principal: &Principal, call: Call, resource: Resource) -> bool {
    check(auth, principal, &Operation { call, resource }).is_ok()
}

/// Whether `principal` may see `group` in a listing.
pub fn may_describe_group(auth: &Auth, principal: &Principal, group: &str) -> bool {
    let op = Operation { call: Call::DescribeGroup, resource: Resource::Group(group.to_owned()) };
    check(auth, principal, &op).is_ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::auth::AuthOptions;

    fn auth(dir: &std::path::Path) -> (Auth, Principal) {
        let key = es_auth::ApiKey::random(&mut rand::rng()).reveal();
        let options = AuthOptions { enabled: true, bootstrap_key: Some(key), ..Default::default() };
        let auth = Auth::open(dir, &options, Arc::new(es_core::SystemClock)).unwrap();
        let made = auth
            .create_key(
                "t",
                &["topic:prefixed:a.:write".into(), "group:prefixed:a.:read".into()],
                Default::default(),
            )
            .unwrap();
        let id = es_auth::KeyId::parse(&made.view.id).unwrap();
        (auth, Principal::key(id))
    }

    fn op(call: Call, resource: Resource) -> Operation {
        Operation { call, resource }
    }

    #[test]
    fn the_table_decides_and_denials_look_missing() {
        let dir = tempfile::tempdir().unwrap();
        let (auth, who) = auth(dir.path());
        let topic = |t: &str| Resource::Topic(t.into());
        assert!(check(&auth, &who, &op(Call::Produce, topic("a.x"))).is_ok());
        assert!(check(&auth, &who, &op(Call::DescribeTopic, topic("a.x"))).is_ok(), "write implies describe");
        assert!(check(&auth, &who, &op(Call::Fetch, topic("a.x"))).is_err(), "write is not read");
        assert!(check(&auth, &who, &op(Call::Produce, topic("b.x"))).is_err());
        assert!(check(&auth, &who, &op(Call::Produce, topic("A.x"))).is_err(), "no case folding");
        assert!(check(&auth, &who, &op(Call::SchemaWrite, Resource::Subject("a.x-value".into()))).is_ok());
        assert!(check(&auth, &who, &op(Call::SchemaWrite, Resource::Subject("b.x-value".into()))).is_err());
        assert!(check(&auth, &who, &op(Call::ListTopics, Resource::Cluster)).is_ok());
        assert!(check(&auth, &who, &op(Call::CreateKey, Resource::Cluster)).is_err());
        assert!(check(&auth, &Principal::ANONYMOUS, &op(Call::ListTopics, Resource::Cluster)).is_err());
        assert!(check(&auth, &Principal::ANONYMOUS, &op(Call::Health, Resource::Cluster)).is_ok());
        // A call on a resource of the wrong kind is denied, never allowed by accident.
        assert!(check(&auth, &who, &op(Call::Produce, Resource::Group("a.x".into()))).is_err());
        let denied = authorize(&auth, &who, &op(Call::Produce, topic("b.x"))).err().unwrap();
        assert_eq!(denied.to_string(), BrokerError::TopicNotFound("b.x".into()).to_string());
        assert_eq!(denied.code(), "topic_not_found");
    }

    #[test]
    fn the_first_join_claims_a_group_for_its_key() {
        let dir = tempfile::tempdir().unwrap();
        let (auth, who) = auth(dir.path());
        let rival = auth.create_key("r", &["group:prefixed:a.:read".into()], Default::default()).unwrap();
        let rival = Principal::key(es_auth::KeyId::parse(&rival.view.id).unwrap());
        let join = op(Call::GroupJoin, Resource::Group("a.g".into()));
        authorize(&auth, &who, &join).unwrap();
        assert_eq!(authorize(&auth, &rival, &join).err().unwrap().code(), "group_not_found");
        assert!(authorize(&auth, &who, &join).is_ok(), "the owner keeps it");
    }
}
