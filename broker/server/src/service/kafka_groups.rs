//! Kafka's classic consumer groups as service calls (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, OffsetDelete, DescribeGroups,
//! ListGroups, DeleteGroups), authorized like every other call on the group
//! resource. The Kafka listener only maps its messages onto these. The offsets live
//! in the same `__es_offsets` store as es-native groups', marked with their kind, and
//! a group id is one kind or the other: using one of the other kind is refused.

use std::collections::BTreeSet;

use es_groups::classic::{
    ClassicDescription, ClassicState, JoinGroup, JoinResult, MemberRef, SyncGroup, Synced, check_group_id,
    consumer_protocol,
};
use es_groups::{Committed, GroupError, GroupKind, TopicPartition};

use super::{BrokerError, Call, Principal, Resource, Result, Service};

/// One partition of an OffsetCommit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    /// -1 when the client does not know it.
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

/// A topic partition as Kafka names it (a signed partition index).
pub type KafkaPartition = (String, i32);

/// A group as ListGroups shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaGroupListing {
    pub group: String,
    pub state: ClassicState,
    pub protocol_type: String,
}

impl Service {
    fn group_call(&self, who: &Principal, call: Call, group: &str) -> Result<()> {
        self.authorize(who, call, Resource::Group(group.to_owned()))?;
        // Kept a group refusal (not a plain invalid request): Kafka's INVALID_GROUP_ID.
        check_group_id(group).map_err(BrokerError::Group)?;
        // In a cluster only the leader of `__es_offsets` coordinates (NOT_COORDINATOR).
        self.registry.groups().check_coordinator()
    }

    /// A JoinGroup; waits at the join barrier when the group is rebalancing.
    pub async fn kafka_join_group(&self, who: &Principal, req: JoinGroup) -> Result<JoinResult> {
        self.group_call(who, Call::GroupJoin, &req.group)?;
        self.check_running()?;
        let groups = self.registry.groups();
        groups.check_kind(&req.group, GroupKind::Kafka)?;
        Ok(groups.classic.join(req).await?)
    }

    /// A SyncGroup; a follower's waits for the leader's.
    pub async fn kafka_sync_group(&self, who: &Principal, req: SyncGroup) -> Result<Synced> {
        self.group_call(who, Call::GroupSync, &req.group)?;
        self.check_running()?;
        Ok(self.registry.groups().classic.sync(req).await?)
    }

    pub fn kafka_heartbeat(
        &self,
        who: &Principal,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<()> {
        self.group_call(who, Call::GroupHeartbeat, group)?;
        Ok(self.registry.groups().classic.heartbeat(group, member, instance, generation)?)
    }

    /// A LeaveGroup: one answer per member, in order.
    pub fn kafka_leave_group(
        &self,
        who: &Principal,
        group: &str,
        members: &[MemberRef],
    ) -> Result<Vec<Result<()>>> {
        self.group_call(who, Call::GroupLeave, group)?;
        let answers = self.registry.groups().classic.leave(group, members);
        Ok(answers.into_iter().map(|r| r.map_err(BrokerError::from)).collect())
    }

    /// An OffsetCommit, fenced by member and generation (generation -1 without a
    /// member: a simple commit, for an empty group). The outer error is the
    /// group's; the inner ones are per partition, in order. Returns once fsynced.
    pub async fn kafka_commit_offsets(
        &self,
        who: &Principal,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
        offsets: Vec<KafkaCommit>,
    ) -> Result<Vec<Result<()>>> {
        self.group_call(who, Call::GroupCommit, group)?;
        self.check_running()?;
        let groups = self.registry.groups();
        groups.check_kind(group, GroupKind::Kafka)?;
        groups.classic.check_commit(group, member, instance, generation)?;
        let mut answers = Vec::with_capacity(offsets.len());
        let mut entries = Vec::new();
        for o in offsets {
            match self.commit_entry(who, o) {
                Ok(entry) => {
                    entries.push(entry);
                    answers.push(Ok(()));
                }
                Err(e) => answers.push(Err(e)),
            }
        }
        groups.offsets.write(group, entries).await?;
        Ok(answers)
    }

    fn commit_entry(&self, who: &Principal, o: KafkaCommit) -> Result<(TopicPartition, Option<Committed>)> {
        // Authorized before the lookup: a key's own group is never a way to learn
        // whether another key's topic exists, nor to record offsets for it.
        super::authz::authorize_topics(self.registry.auth(), who, [o.topic.as_str()])?;
        let partition = self.known_partition(&o.topic, o.partition)?;
        let metadata = o.metadata.unwrap_or_default();
        if metadata.len() > es_groups::limits::OFFSET_METADATA_BYTES_MAX {
            return Err(BrokerError::InvalidRequest(format!(
                "commit metadata is {} bytes; the limit is {}",
                metadata.len(),
                es_groups::limits::OFFSET_METADATA_BYTES_MAX
            )));
        }
        let offset = u64::try_from(o.offset)
            .map_err(|_| BrokerError::InvalidRequest(format!("offset {} is negative", o.offset)))?;
        let leader_epoch = (o.leader_epoch >= 0).then_some(o.leader_epoch);
        let value = Committed { kind: GroupKind::Kafka, leader_epoch, ..Committed::new(offset, metadata) };
        Ok((TopicPartition::new(o.topic, partition), Some(value)))
    }

    /// The partition, if the topic has it.
    fn known_partition(&self, topic: &str, partition: i32) -> Result<u32> {
        let t = self.topic(topic)?;
        let p = u32::try_from(partition).map_err(|_| BrokerError::PartitionNotFound {
            topic: topic.to_owned(),
            partition: 0,
            count: t.partition_count(),
        })?;
        t.partition(u64::from(p))?;
        Ok(p)
    }

    /// An OffsetFetch of one group: every committed partition (`None`), or the
    /// listed ones, each with its commit if there is one. Reads either kind.
    pub fn kafka_fetch_offsets(
        &self,
        who: &Principal,
        group: &str,
        partitions: Option<Vec<KafkaPartition>>,
    ) -> Result<Vec<(KafkaPartition, Option<Committed>)>> {
        self.group_call(who, Call::GroupFetchOffsets, group)?;
        let committed = self.registry.groups().offsets.fetch(group);
        let Some(wanted) = partitions else {
            return Ok(committed
                .into_iter()
                .map(|(tp, c)| ((tp.topic, tp.partition as i32), Some(c)))
                .collect());
        };
        let lookup = |(topic, p): &KafkaPartition| {
            let tp = TopicPartition::new(topic.clone(), u32::try_from(*p).ok()?);
            committed.get(&tp).cloned()
        };
        Ok(wanted.into_iter().map(|k| (k.clone(), lookup(&k))).collect())
    }

    /// An OffsetDelete: refused for the topics live members subscribe to.
    pub async fn kafka_delete_offsets(
        &self,
        who: &Principal,
        group: &str,
        partitions: Vec<KafkaPartition>,
    ) -> Result<Vec<Result<()>>> {
        self.group_call(who, Call::ResetGroupOffsets, group)?;
        let groups = self.registry.groups();
        match groups.kind_of(group) {
            None => return Err(BrokerError::Group(GroupError::GroupNotFound(group.to_owned()))),
            Some(GroupKind::Es) => {
                let (kind, wanted) = (GroupKind::Es, GroupKind::Kafka);
                return Err(BrokerError::Group(GroupError::WrongKind {
                    group: group.to_owned(),
                    kind,
                    wanted,
                }));
            }
            Some(GroupKind::Kafka) => {}
        }
        let subscribed = subscribed_topics(groups.classic.describe(group), group)?;
        let committed = groups.offsets.fetch(group);
        let mut answers = Vec::with_capacity(partitions.len());
        let mut tombstones = Vec::new();
        for (topic, p) in partitions {
            let answer = self.known_partition(&topic, p).and_then(|p| {
                if subscribed.contains(&topic) {
                    let topic = topic.clone();
                    return Err(BrokerError::Group(GroupError::SubscribedToTopic {
                        group: group.to_owned(),
                        topic,
                    }));
                }
                let tp = TopicPartition::new(topic.clone(), p);
                if committed.contains_key(&tp) {
                    tombstones.push((tp, None));
                }
                Ok(())
            });
            answers.push(answer);
        }
        groups.offsets.write(group, tombstones).await?;
        Ok(answers)
    }

    /// A DescribeGroups entry; `None` is a group that does not exist (Kafka's "Dead").
    /// A Kafka group known only by its committed offsets is Empty.
    pub fn kafka_describe_group(&self, who: &Principal, group: &str) -> Result<Option<ClassicDescription>> {
        self.authorize(who, Call::DescribeGroup, Resource::Group(group.to_owned()))?;
        let groups = self.registry.groups();
        groups.check_coordinator()?;
        if let Some(d) = groups.classic.describe(group) {
            return Ok(Some(d));
        }
        Ok((groups.offsets.kind(group) == Some(GroupKind::Kafka)).then(|| ClassicDescription {
            group: group.to_owned(),
            state: ClassicState::Empty,
            generation: 0,
            protocol_type: "consumer".into(),
            protocol: String::new(),
            leader: String::new(),
            members: Vec::new(),
        }))
    }

    /// ListGroups: every Kafka group (es-native ones are not Kafka clients' to see).
    pub fn kafka_list_groups(&self, who: &Principal) -> Result<Vec<KafkaGroupListing>> {
        self.authorize(who, Call::ListGroups, Resource::Cluster)?;
        let groups = self.registry.groups();
        if groups.check_coordinator().is_err() {
            // Kafka: a broker lists the groups it coordinates; this one, none.
            return Ok(Vec::new());
        }
        let mut out: Vec<KafkaGroupListing> = groups
            .classic
            .list()
            .into_iter()
            .map(|(group, state, protocol_type)| KafkaGroupListing { group, state, protocol_type })
            .collect();
        let live: BTreeSet<String> = out.iter().map(|g| g.group.clone()).collect();
        for g in groups.offsets.groups() {
            if !live.contains(&g) && groups.offsets.kind(&g) == Some(GroupKind::Kafka) {
                let protocol_type = "consumer".into();
                out.push(KafkaGroupListing { group: g, state: ClassicState::Empty, protocol_type });
            }
        }
        out.sort_by(|a, b| a.group.cmp(&b.group));
        Ok(out)
    }

    /// DeleteGroups: each empty Kafka group goes with its offsets (one answer per group).
    pub async fn kafka_delete_groups(&self, who: &Principal, names: &[String]) -> Vec<Result<()>> {
        let mut answers = Vec::with_capacity(names.len());
        for group in names {
            answers.push(self.kafka_delete_group(who, group).await);
        }
        answers
    }

    async fn kafka_delete_group(&self, who: &Principal, group: &str) -> Result<()> {
        self.group_call(who, Call::DeleteGroup, group)?;
        let groups = self.registry.groups();
        groups.check_kind(group, GroupKind::Kafka)?;
        groups.delete(group).await
    }
}

/// The topics a live "consumer" group's members subscribe to; any other protocol
/// type is opaque, so its offsets can only be deleted while it is empty.
fn subscribed_topics(d: Option<ClassicDescription>, group: &str) -> Result<BTreeSet<String>> {
    let Some(d) = d.filter(|d| !d.members.is_empty()) else { return Ok(BTreeSet::new()) };
    if d.protocol_type != "consumer" {
        return Err(BrokerError::Group(GroupError::GroupNotEmpty(group.to_owned())));
    }
    let topics = d.members.iter().filter_map(|m| consumer_protocol::subscription_topics(&m.metadata));
    Ok(topics.flatten().collect())
}
