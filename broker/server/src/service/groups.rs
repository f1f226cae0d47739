//! The es-native consumer-group calls every protocol shares (HTTP's member
//! protocol and its server-side sessions, the binary protocol's group ops, and the
//! admin routes: list, describe with lag, reset, delete), authorized on the group
//! resource through the one table before anything is looked up. Kafka's classic
//! groups have their own calls in [`super::kafka_groups`].

use es_groups::{GroupDescription, GroupKind, Joined, SyncResult};

use super::authz::{authorize_topics, may_describe_group};
use super::{Call, Principal, Resource, Result, Service};
use crate::groups::{CommittedOffset, PartitionLag, ResetTo};

/// A join request, as every protocol carries it.
#[derive(Debug, Clone)]
pub struct JoinGroup {
    pub group: String,
    pub member_id: Option<String>,
    pub client_id: String,
    pub topics: Vec<String>,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
}

/// A group as `GET /groups` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupListing {
    pub group: String,
    pub state: String,
    pub kind: GroupKind,
}

impl Service {
    pub fn join_group(&self, principal: &Principal, req: JoinGroup) -> Result<Joined> {
        self.authorize(principal, Call::GroupJoin, Resource::Group(req.group.clone()))?;
        authorize_topics(self.registry.auth(), principal, req.topics.iter().map(String::as_str))?;
        self.registry.groups().join(
            &self.registry,
            &req.group,
            req.member_id,
            &req.client_id,
            &req.topics,
            req.session_timeout_ms,
            req.rebalance_timeout_ms,
        )
    }

    pub fn sync_group(
        &self,
        principal: &Principal,
        group: &str,
        member: &str,
        generation: i32,
    ) -> Result<SyncResult> {
        self.authorize(principal, Call::GroupSync, Resource::Group(group.to_owned()))?;
        self.registry.groups().sync(group, member, generation)
    }

    pub fn heartbeat(&self, principal: &Principal, group: &str, member: &str, generation: i32) -> Result<()> {
        self.authorize(principal, Call::GroupHeartbeat, Resource::Group(group.to_owned()))?;
        self.registry.groups().heartbeat(group, member, generation)
    }

    pub fn leave_group(&self, principal: &Principal, group: &str, member: &str) -> Result<()> {
        self.authorize(principal, Call::GroupLeave, Resource::Group(group.to_owned()))?;
        self.registry.groups().leave(group, member)
    }

    /// Commits offsets fenced by member and generation; returns once they are fsynced.
    pub async fn commit_offsets(
        &self,
        principal: &Principal,
        group: &str,
        member: &str,
        generation: i32,
        offsets: Vec<CommittedOffset>,
    ) -> Result<()> {
        self.authorize(principal, Call::GroupCommit, Resource::Group(group.to_owned()))?;
        authorize_topics(self.registry.auth(), principal, offsets.iter().map(|o| o.topic.as_str()))?;
        self.registry.groups().commit(&self.registry, group, member, generation, offsets).await
    }

    pub fn fetch_offsets(&self, principal: &Principal, group: &str) -> Result<Vec<CommittedOffset>> {
        self.authorize(principal, Call::GroupFetchOffsets, Resource::Group(group.to_owned()))?;
        self.registry.groups().fetch(group)
    }

    /// What `es group describe` shows, for either kind: state, members, and per
    /// partition the committed offset and lag.
    pub fn describe_group(
        &self,
        who: &Principal,
        group: &str,
    ) -> Result<(GroupDescription, Vec<PartitionLag>)> {
        self.authorize(who, Call::DescribeGroup, Resource::Group(group.to_owned()))?;
        self.registry.groups().describe(&self.registry, group)
    }

    /// Groups of both kinds the caller may describe; the others are left out, as
    /// if they did not exist.
    pub fn list_groups(&self, principal: &Principal) -> Result<Vec<GroupListing>> {
        self.authorize(principal, Call::ListGroups, Resource::Cluster)?;
        let auth = self.registry.auth();
        let groups = self.registry.groups().list().into_iter();
        Ok(groups
            .filter(|(group, _, _)| may_describe_group(auth, principal, group))
            .map(|(group, state, kind)| GroupListing { group, state, kind })
            .collect())
    }

    /// Moves an empty group's committed offsets of `topic`; answers the topic's
    /// committed offsets afterwards (fsynced).
    pub async fn reset_group_offsets(
        &self,
        principal: &Principal,
        group: &str,
        topic: &str,
        partitions: Option<Vec<u32>>,
        to: ResetTo,
    ) -> Result<Vec<CommittedOffset>> {
        self.authorize(principal, Call::ResetGroupOffsets, Resource::Group(group.to_owned()))?;
        authorize_topics(self.registry.auth(), principal, [topic])?;
        self.registry.groups().reset(&self.registry, group, topic, partitions, to).await
    }

    /// Deletes an empty group (of either kind) with its committed offsets.
    pub async fn delete_group(&self, principal: &Principal, group: &str) -> Result<()> {
        self.authorize(principal, Call::DeleteGroup, Resource::Group(group.to_owned()))?;
        self.registry.groups().delete(group).await
    }
}
