//! What each Kafka API needs authorized: the one table the security work plugs into.
//!
//! Kafka's ACL operations map onto es grants (DESIGN §9) as READ -> `Read`, WRITE ->
//! `Write`, CREATE/DELETE/ALTER/ALTER_CONFIGS -> `Admin`, DESCRIBE/DESCRIBE_CONFIGS ->
//! `Describe` (held by any grant on the resource). Rows follow what a Kafka broker
//! checks, so a client that works against Kafka's ACLs works against es's grants.

use kafka_protocol::messages::ApiKey;

/// The kind of object a grant names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    Topic,
    Group,
    Cluster,
}

/// What a grant allows on a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// See that it exists and its metadata; implied by any other grant on it.
    Describe,
    Read,
    Write,
    Admin,
}

/// What a request needs before it is served.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Served before authentication (and so needs no grant): the SASL exchange itself.
    PreAuth,
    /// Every listed (resource, operation), each on the resources the request names
    /// (a Metadata or ListGroups answer drops what the caller cannot describe).
    Needs(&'static [(Resource, Operation)]),
}

use Operation::{Admin, Describe, Read, Write};
use Resource::{Cluster, Group, Topic};

/// One row per API in the API table (a test checks none is missing).
pub static ACCESS_TABLE: &[(ApiKey, Access)] = &[
    (ApiKey::Produce, Access::Needs(&[(Topic, Write)])),
    (ApiKey::Fetch, Access::Needs(&[(Topic, Read)])),
    (ApiKey::ListOffsets, Access::Needs(&[(Topic, Describe)])),
    (ApiKey::Metadata, Access::Needs(&[(Topic, Describe)])),
    (ApiKey::OffsetCommit, Access::Needs(&[(Group, Read), (Topic, Read)])),
    (ApiKey::OffsetFetch, Access::Needs(&[(Group, Describe), (Topic, Describe)])),
    (ApiKey::FindCoordinator, Access::Needs(&[(Group, Describe)])),
    (ApiKey::JoinGroup, Access::Needs(&[(Group, Read)])),
    (ApiKey::Heartbeat, Access::Needs(&[(Group, Read)])),
    (ApiKey::LeaveGroup, Access::Needs(&[(Group, Read)])),
    (ApiKey::SyncGroup, Access::Needs(&[(Group, Read)])),
    (ApiKey::DescribeGroups, Access::Needs(&[(Group, Describe)])),
    (ApiKey::ListGroups, Access::Needs(&[(Group, Describe)])),
    (ApiKey::SaslHandshake, Access::PreAuth),
    (ApiKey::ApiVersions, Access::PreAuth),
    (ApiKey::CreateTopics, Access::Needs(&[(Topic, Admin)])),
    (ApiKey::DeleteTopics, Access::Needs(&[(Topic, Admin)])),
    // Kafka asks IDEMPOTENT_WRITE on the cluster, or WRITE on any topic (KIP-679).
    (ApiKey::InitProducerId, Access::Needs(&[(Cluster, Write)])),
    (ApiKey::OffsetForLeaderEpoch, Access::Needs(&[(Topic, Describe)])),
    // Topic resources need Describe on the topic, broker resources on the cluster.
    (ApiKey::DescribeConfigs, Access::Needs(&[(Topic, Describe), (Cluster, Describe)])),
    (ApiKey::SaslAuthenticate, Access::PreAuth),
    (ApiKey::CreatePartitions, Access::Needs(&[(Topic, Admin)])),
    (ApiKey::DeleteGroups, Access::Needs(&[(Group, Admin)])),
    (ApiKey::DeleteRecords, Access::Needs(&[(Topic, Admin)])),
    // Topic configs need Admin on the topic, broker configs on the cluster.
    (ApiKey::AlterConfigs, Access::Needs(&[(Topic, Admin), (Cluster, Admin)])),
    (ApiKey::DescribeLogDirs, Access::Needs(&[(Cluster, Describe)])),
    (ApiKey::IncrementalAlterConfigs, Access::Needs(&[(Topic, Admin), (Cluster, Admin)])),
    (ApiKey::OffsetDelete, Access::Needs(&[(Group, Admin), (Topic, Read)])),
    (ApiKey::DescribeCluster, Access::Needs(&[(Cluster, Describe)])),
    (ApiKey::DescribeProducers, Access::Needs(&[(Topic, Read)])),
];

/// The access row for `key`, if es has one.
pub fn access(key: ApiKey) -> Option<Access> {
    ACCESS_TABLE.iter().find(|(k, _)| *k == key).map(|(_, a)| *a)
}
