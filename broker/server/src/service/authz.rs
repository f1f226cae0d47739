//! Authorization: who may do what. [`Call::access`] is the ONE table saying which
//! operation each call is (read / write / admin on a topic, read / write on a
//! group, cluster admin); every HTTP route and binary op names its [`Call`]
//! (`http::ROUTES`, `binary::call_of`), and tests check none lacks a row.
//! Allow-all today: there are no API keys yet (DESIGN.md §9).

use crate::service::error::{BrokerError, Result};

/// Who is calling. Anonymous until authentication exists.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Principal {
    /// The API key id, once there are keys; `None` is anonymous.
    pub key_id: Option<String>,
}

impl Principal {
    pub const ANONYMOUS: Principal = Principal { key_id: None };
}

/// What a call is done to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Topic(String),
    Group(String),
    Cluster,
}

/// The kind of resource a call needs, and what it does to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    TopicRead,
    TopicWrite,
    TopicAdmin,
    GroupRead,
    GroupWrite,
    ClusterRead,
    ClusterAdmin,
    /// Probes and the API document: served to anyone.
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
}

impl Call {
    /// THE table.
    pub fn access(self) -> Access {
        match self {
            Call::Health => Access::Public,
            Call::Produce => Access::TopicWrite,
            Call::Fetch | Call::ListOffsets | Call::DescribeTopic | Call::DescribeTopicConfig => {
                Access::TopicRead
            }
            Call::CreateTopic
            | Call::DeleteTopic
            | Call::AlterTopicConfig
            | Call::AddPartitions
            | Call::BindValidators => Access::TopicAdmin,
            Call::DescribeValidators => Access::TopicRead,
            // Listing filters to what the caller may see (once there are grants).
            Call::ListTopics | Call::ListGroups | Call::ListPlugins | Call::DescribePlugin => {
                Access::ClusterRead
            }
            Call::InitProducerId => Access::TopicWrite,
            Call::GroupJoin
            | Call::GroupSync
            | Call::GroupHeartbeat
            | Call::GroupLeave
            | Call::GroupCommit
            | Call::ResetGroupOffsets
            | Call::DeleteGroup => Access::GroupWrite,
            Call::GroupFetchOffsets | Call::DescribeGroup => Access::GroupRead,
            Call::UploadPlugin | Call::RemovePlugin | Call::SchemaWrite => Access::ClusterAdmin,
            Call::SchemaRead => Access::ClusterRead,
        }
    }
}

/// One authorization question: this call on this resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    pub call: Call,
    pub resource: Resource,
}

/// Answers an authorization question. Allow-all until API keys exist; the
/// refusal it will give is [`BrokerError::Unauthorized`].
pub fn authorize(principal: &Principal, op: &Operation) -> Result<()> {
    let _ = (principal, op.call.access());
    Ok::<(), BrokerError>(())
}
