//! Topic administration and producer ids, for every protocol.
//! Answers are protocol-neutral; each listener encodes them its own way.

use std::collections::BTreeMap;

use es_log::PartitionInfo;
use serde_json::Value;

use super::offsets::blocking;
use super::{Call, Principal, Resource, Service};
use crate::config::TopicConfig;
use crate::registry::Topic;
use crate::service::error::Result;

/// A topic as described to clients.
#[derive(Debug, Clone)]
pub struct TopicDescription {
    pub name: String,
    /// The topic's UUID (Kafka's topic id).
    pub id: [u8; 16],
    /// An internal (`__es_*`) topic, written by the broker alone.
    pub internal: bool,
    pub config: TopicConfig,
    /// Partition `i` is `partitions[i]`.
    pub partitions: Vec<PartitionInfo>,
}

/// A partition's leadership in a cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leadership {
    pub leader: Option<u64>,
    pub epoch: es_core::LeaderEpoch,
    pub replicas: Vec<u64>,
    /// The replicas the partition is placed on, its preferred leader first: where
    /// its leader is bringing `replicas` (they differ while a move or a member
    /// change is under way).
    pub assigned: Vec<u64>,
    /// The replicas caught up to the commit (Kafka's ISR).
    pub in_sync: Vec<u64>,
    /// This node was elected leader but lost its quorum, so it names no leader: a
    /// client that only reaches this node must look elsewhere (`es_raft::Group::fenced`).
    pub fenced: bool,
    /// The partition's Raft group is quiet on this node: idle, it neither ticks nor
    /// heartbeats until the next write (docs/cluster.md, "Idle groups").
    pub quiesced: bool,
}

/// A cluster as one node sees it: the nodes whose addresses it knows, the
/// metadata group's leader (the controller), the group coordinator, and every data
/// partition's leadership.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterView {
    pub node_id: u64,
    pub controller: Option<u64>,
    pub coordinator: Option<u64>,
    pub nodes: BTreeMap<u64, crate::cluster::NodeAddresses>,
    /// The members and their peer addresses, as this node last applied them.
    pub members: BTreeMap<u64, String>,
    /// (topic, partition, leadership), by topic name then partition.
    pub partitions: Vec<(String, u32, Leadership)>,
}

/// A topic as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSummary {
    pub name: String,
    pub partition_count: u32,
}

fn describe(topic: &Topic) -> TopicDescription {
    TopicDescription {
        name: topic.name(),
        id: topic.id,
        internal: topic.kind == crate::registry::TopicKind::Internal,
        config: topic.config(),
        partitions: topic.partitions.iter().map(|log| log.info()).collect(),
    }
}

impl Service {
    pub fn list_topics(&self, principal: &Principal) -> Result<Vec<TopicSummary>> {
        self.authorize(principal, Call::ListTopics, Resource::Cluster)?;
        let auth = self.registry.auth();
        Ok(self
            .registry
            .list()
            .iter()
            .filter(|t| super::authz::may_describe_topic(auth, principal, &t.name()))
            .map(|t| TopicSummary { name: t.name(), partition_count: t.partition_count() })
            .collect())
    }

    /// The name of the topic whose Kafka topic id is `id`. A name resolution, not an
    /// access: callers go on with the name, which every call authorizes.
    pub fn topic_name_by_id(&self, id: [u8; 16]) -> Option<String> {
        self.registry.topic_by_id(id).map(|t| t.name())
    }

    /// The leader epoch of every partition a single node leads (it never changes).
    pub fn leader_epoch(&self) -> es_core::LeaderEpoch {
        super::partition::LOCAL_LEADER_EPOCH
    }

    /// Who leads partition `partition` of `topic` in the cluster, its replicas and
    /// the ones in sync; `None` on a single node (or for a topic without a group).
    /// A name lookup after the caller's describe was authorized.
    pub fn leadership(&self, topic: &str, partition: u32) -> Option<Leadership> {
        let cluster = self.registry.cluster()?;
        leadership_of(cluster, &*self.registry.topic(topic).ok()?, partition)
    }

    /// Every cluster node whose client addresses are known; `None` on a single node.
    pub fn cluster_nodes(&self) -> Option<BTreeMap<u64, crate::cluster::NodeAddresses>> {
        self.registry.cluster().map(|c| c.known_nodes())
    }

    /// The cluster as this node sees it (`GET /cluster`, `es cluster status`); `None`
    /// on a single node. Broker-wide state: cluster describe.
    pub fn cluster_status(&self, principal: &Principal) -> Result<Option<ClusterView>> {
        self.authorize(principal, Call::DescribeBroker, Resource::Cluster)?;
        let Some(cluster) = self.registry.cluster() else { return Ok(None) };
        let mut topics = self.registry.list();
        topics.sort_by_key(|t| t.name());
        let partitions = topics
            .iter()
            .flat_map(|t| {
                (0..t.partition_count()).filter_map(|p| Some((t.name(), p, leadership_of(cluster, t, p)?)))
            })
            .collect();
        Ok(Some(ClusterView {
            node_id: cluster.node_id(),
            controller: cluster.controller(),
            coordinator: cluster.coordinator(),
            nodes: cluster.known_nodes(),
            members: cluster.members(),
            partitions,
        }))
    }

    /// Hands the leadership of `topic`'s `partition` to node `to` (openraft's leader
    /// transfer: `to` starts an election it wins at once, having every committed
    /// entry), and waits up to `wait` for it to lead. Asked of a follower it is
    /// NotLeader, with the leader's address. Cluster admin, as Kafka's ElectLeaders
    /// (ALTER on the cluster).
    pub async fn transfer_leader(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
        to: u64,
        wait: std::time::Duration,
    ) -> Result<Leadership> {
        use crate::service::error::BrokerError;
        self.authorize(principal, Call::TransferLeader, Resource::Cluster)?;
        let Some(cluster) = self.registry.cluster() else {
            return Err(BrokerError::InvalidRequest(
                "this broker is a single node: it leads every partition, there is no other node to lead"
                    .into(),
            ));
        };
        let t = self.topic(topic)?;
        let Some(group) = cluster.replica(&t, partition) else {
            return Err(BrokerError::PartitionNotFound {
                topic: topic.to_owned(),
                partition: u64::from(partition),
                count: t.partition_count(),
            });
        };
        let mut leader = group.watch_leader();
        if group.status().leader.is_none() {
            // A replica that has not heard from its group yet (just opened, catching
            // up) knows neither leader nor voters: it waits to learn the leader.
            let _ = tokio::time::timeout(wait.min(LEARN_LEADER_WAIT), leader.wait_for(|(l, _)| l.is_some()))
                .await;
        }
        let status = group.status();
        // Voters unknown here still: the placement stands in for them.
        let voters =
            if status.voters.is_empty() { assigned(cluster, &t, partition) } else { status.voters.clone() };
        if !voters.contains(&to) {
            return Err(BrokerError::InvalidRequest(format!(
                "node {to} is not a replica of partition {partition} of {topic:?}; its replicas are {voters:?}"
            )));
        }
        if status.leader == Some(to) {
            return Ok(leadership(status, assigned(cluster, &t, partition)));
        }
        if !group.is_leader() {
            return Err(cluster.not_leader(topic.to_owned(), partition, status.leader));
        }
        group.transfer_leader(to).await.map_err(|e| match e {
            es_raft::ProposeError::NotLeader { leader } => {
                cluster.not_leader(topic.to_owned(), partition, leader)
            }
            es_raft::ProposeError::Unanswered { node } => BrokerError::Timeout(format!(
                "node {node} did not answer the leader of partition {partition} of {topic:?} in time \
                 (it may be down, cut off or starting); nothing was transferred: retry once it is up"
            )),
            es_raft::ProposeError::Behind { node, matched, last } => BrokerError::Timeout(format!(
                "node {node} is behind the leader of partition {partition} of {topic:?} (it holds up to \
                 index {} of {last}); nothing was transferred: retry once it caught up",
                matched.map_or("none".to_owned(), |m| m.to_string())
            )),
            other => BrokerError::Internal(format!("transferring the leadership: {other}")),
        })?;
        let moved = tokio::time::timeout(wait, leader.wait_for(|(l, _)| *l == Some(to))).await;
        match moved {
            Ok(Ok(_)) => Ok(leadership(group.status(), assigned(cluster, &t, partition))),
            Ok(Err(_)) => Err(BrokerError::ShuttingDown),
            Err(_) => Err(BrokerError::Timeout(format!(
                "node {to} did not take the leadership of partition {partition} of {topic:?} within {wait:?} \
                 (it may be behind, or unreachable); the leader is {:?} now",
                group.leader()
            ))),
        }
    }

    /// Adds node `id`, whose peer listener is at `peer`, to the cluster. Answers
    /// once the change is committed and applied here; the groups then take the
    /// node in as it catches up (watch `GET /cluster`). Cluster admin.
    pub async fn add_node(&self, principal: &Principal, id: u64, peer: String) -> Result<()> {
        self.authorize(principal, Call::ChangeMembership, Resource::Cluster)?;
        self.cluster_for_membership()?.add_node(id, peer).await
    }

    /// Removes node `id` from the cluster for good. Cluster admin.
    pub async fn remove_node(&self, principal: &Principal, id: u64) -> Result<()> {
        self.authorize(principal, Call::ChangeMembership, Resource::Cluster)?;
        self.cluster_for_membership()?.remove_node(id).await.map(|_| ())
    }

    /// Moves `topic`'s `partition` to `replicas` (`es cluster move`): answers once
    /// the move is committed and applied here; the partition's leader then adds the
    /// new replicas as learners, makes them voters once caught up and drops the
    /// old ones (watch `GET /cluster`). Cluster admin.
    pub async fn move_replicas(
        &self,
        principal: &Principal,
        topic: &str,
        partition: u32,
        replicas: Vec<u64>,
    ) -> Result<()> {
        self.authorize(principal, Call::ChangeMembership, Resource::Cluster)?;
        let cluster = self.cluster_for_membership()?;
        let t = self.topic(topic)?;
        t.partition(u64::from(partition))?;
        cluster.move_replicas(&t, partition, replicas).await
    }

    fn cluster_for_membership(&self) -> Result<&std::sync::Arc<crate::cluster::Cluster>> {
        self.registry.cluster().ok_or_else(|| {
            crate::service::error::BrokerError::InvalidRequest(
                "this broker is a single node, not a cluster: start every node with --node-id, \
                 --cluster-peers and --cluster-secret-file (docs/cluster.md)"
                    .into(),
            )
        })
    }

    /// The metadata group's leader; `None` on a single node, `Some(None)` mid-election.
    pub fn cluster_controller(&self) -> Option<Option<u64>> {
        self.registry.cluster().map(|c| c.controller())
    }

    /// The group coordinator (the leader of `__es_offsets`); `None` on a single
    /// node, `Some(None)` mid-election.
    pub fn cluster_coordinator(&self) -> Option<Option<u64>> {
        self.registry.cluster().map(|c| c.coordinator())
    }

    pub fn describe_topic(&self, principal: &Principal, name: &str) -> Result<TopicDescription> {
        self.authorize(principal, Call::DescribeTopic, Resource::Topic(name.to_owned()))?;
        Ok(describe(&*self.topic(name)?))
    }

    pub fn topic_config(&self, principal: &Principal, name: &str) -> Result<TopicConfig> {
        self.authorize(principal, Call::DescribeTopicConfig, Resource::Topic(name.to_owned()))?;
        Ok(self.topic(name)?.config())
    }

    pub async fn create_topic(
        &self,
        principal: &Principal,
        name: String,
        partitions: u32,
        config: BTreeMap<String, Value>,
    ) -> Result<TopicDescription> {
        self.authorize(principal, Call::CreateTopic, Resource::Topic(name.clone()))?;
        let registry = self.registry.clone();
        blocking(move || Ok(describe(&*registry.create(&name, partitions, &config)?))).await
    }

    pub async fn delete_topic(&self, principal: &Principal, name: String) -> Result<()> {
        self.authorize(principal, Call::DeleteTopic, Resource::Topic(name.clone()))?;
        let registry = self.registry.clone();
        blocking(move || registry.delete(&name)).await
    }

    pub async fn alter_topic_config(
        &self,
        principal: &Principal,
        name: String,
        changes: BTreeMap<String, Value>,
    ) -> Result<TopicConfig> {
        self.authorize(principal, Call::AlterTopicConfig, Resource::Topic(name.clone()))?;
        let registry = self.registry.clone();
        blocking(move || registry.alter(&name, &changes)).await
    }

    /// Grows a topic to `count` partitions; partitions never shrink.
    pub async fn add_partitions(
        &self,
        principal: &Principal,
        name: String,
        count: u32,
    ) -> Result<TopicDescription> {
        self.authorize(principal, Call::AddPartitions, Resource::Topic(name.clone()))?;
        let registry = self.registry.clone();
        blocking(move || Ok(describe(&*registry.add_partitions(&name, count)?))).await
    }

    /// A new idempotent producer id (epoch 0), durable before it is answered.
    pub async fn init_producer_id(&self, principal: &Principal) -> Result<(i64, i16)> {
        self.authorize(principal, Call::InitProducerId, Resource::Cluster)?;
        let registry = self.registry.clone();
        let key = principal.key.clone().filter(|_| registry.auth().enabled());
        blocking(move || {
            let (id, epoch) = registry.allocate_producer_id()?;
            if let Some(key) = key {
                registry.auth().claim_producer_id(&key, id)?;
            }
            Ok((id, epoch))
        })
        .await
    }
}

/// Who leads `topic`'s `partition` and who is in sync, from its Raft group.
/// For a partition placed on other nodes only, what they announce: its leader and
/// term, and its replicas (which stand for its in-sync ones: only its leader knows).
fn leadership_of(cluster: &crate::cluster::Cluster, topic: &Topic, partition: u32) -> Option<Leadership> {
    if let Some(group) = cluster.replica(topic, partition) {
        return Some(leadership(group.status(), assigned(cluster, topic, partition)));
    }
    let remote = cluster.remote(topic, partition)?;
    Some(Leadership {
        leader: remote.leader,
        epoch: remote.epoch,
        in_sync: remote.replicas.clone(),
        assigned: remote.replicas.clone(),
        replicas: remote.replicas,
        fenced: false,
        quiesced: false,
    })
}

/// Where `topic`'s `partition` is placed: its replicas, or every member.
/// How long a transfer asked of a replica that knows no leader yet waits to learn it.
const LEARN_LEADER_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

fn assigned(cluster: &crate::cluster::Cluster, topic: &Topic, partition: u32) -> Vec<u64> {
    let placed = topic.meta.lock().expect("meta lock").replicas_of(partition).map(<[u64]>::to_vec);
    placed.unwrap_or_else(|| cluster.voters())
}

fn leadership(status: es_raft::GroupStatus, assigned: Vec<u64>) -> Leadership {
    Leadership {
        leader: status.leader,
        epoch: status.term,
        replicas: status.voters,
        assigned,
        in_sync: status.in_sync,
        fenced: status.fenced,
        quiesced: status.quiesced,
    }
}
