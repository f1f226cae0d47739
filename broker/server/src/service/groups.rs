//! The es-native consumer-group calls every protocol shares (HTTP's member
//! protocol and its server-side sessions, the binary protocol's group ops, and the
//! admin routes: list, describe with lag, reset, delete), authorized on the group
//! resource through the one table before anything is looked up. Kafka's classic
//! groups have their own calls in [`super::kafka_groups`].

use std::collections::{BTreeMap, BTreeSet};

use es_groups::{GroupDescription, GroupKind, Joined, SyncResult};

use super::authz::{authorize_topics, may_describe_group};
use super::{Call, Principal, Resource, Result, Service};
use crate::cluster::ends::PartitionEnds;
use crate::groups::{CommittedOffset, PartitionLag, ResetTo};
use crate::registry::Topic;

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
    pub async fn describe_group(
        &self,
        who: &Principal,
        group: &str,
    ) -> Result<(GroupDescription, Vec<PartitionLag>)> {
        self.authorize(who, Call::DescribeGroup, Resource::Group(group.to_owned()))?;
        let (description, committed) = self.registry.groups().describe_state(group)?;
        let mut topics: BTreeSet<String> = description.topics.iter().cloned().collect();
        topics.extend(committed.keys().map(|tp| tp.topic.clone()));
        let mut ends = BTreeMap::new();
        for name in topics {
            // A topic deleted since the commit: nothing to show for it.
            let Ok(topic) = self.registry.topic(&name) else { continue };
            // Asked of their replicas all at once: a slow or down node costs one
            // call timeout, not one per partition.
            let asks = (0..topic.partition_count()).map(|p| self.partition_ends(&topic, p, None));
            let partitions =
                futures_util::future::join_all(asks).await.into_iter().collect::<Result<Vec<_>>>()?;
            ends.insert(name, partitions);
        }
        let lags = crate::groups::Groups::lags(&description, &committed, &ends);
        Ok((description, lags))
    }

    /// A partition's ends: this node's copy, or in a cluster a replica's when the
    /// partition is placed on other nodes (the coordinator need not replicate it).
    async fn partition_ends(
        &self,
        topic: &Topic,
        partition: u32,
        timestamp: Option<i64>,
    ) -> Result<PartitionEnds> {
        match self.registry.cluster() {
            Some(cluster) => cluster.partition_ends(topic, partition, timestamp).await,
            None => crate::cluster::ends::local(topic, partition, timestamp),
        }
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
        let groups = self.registry.groups();
        groups.check_reset(group)?;
        let t = self.registry.topic(topic)?;
        let partitions = partitions.unwrap_or_else(|| (0..t.partition_count()).collect());
        let timestamp = match to {
            ResetTo::Timestamp(ts) => Some(ts),
            ResetTo::Earliest | ResetTo::Latest | ResetTo::Offset(_) => None,
        };
        let mut offsets = Vec::new();
        for p in partitions {
            t.partition(u64::from(p))?;
            let end = self.partition_ends(&t, p, timestamp).await?;
            let offset = match to {
                ResetTo::Earliest => end.log_start,
                ResetTo::Latest => end.high_watermark,
                ResetTo::Timestamp(_) => end.at_timestamp.unwrap_or(end.high_watermark),
                ResetTo::Offset(o) => o.clamp(end.log_start, end.high_watermark),
            };
            offsets.push((p, offset));
        }
        groups.write_reset(group, topic, offsets).await
    }

    /// Deletes an empty group (of either kind) with its committed offsets.
    pub async fn delete_group(&self, principal: &Principal, group: &str) -> Result<()> {
        self.authorize(principal, Call::DeleteGroup, Resource::Group(group.to_owned()))?;
        self.registry.groups().delete(group).await
    }
}
