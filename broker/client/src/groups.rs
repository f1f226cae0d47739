//! Consumer-group calls of the client: join, sync, heartbeat, leave, commit and
//! fetch committed offsets. Refusals come back as `ClientError::Broker` with
//! `UnknownMember`, `IllegalGeneration` or `RebalanceInProgress`.

use es_protocol::{GroupOffset, GroupRequest, GroupResponse, Request, Response};

use crate::client::Client;
use crate::error::{ClientError, Result};

/// A refusal the coordinator answers before acting on a group call: loading
/// (`ShuttingDown`, retriable as a broker shutting down is), or not the
/// coordinator with no successor known (`NotLeader`).
fn coordinator_not_ready(e: &ClientError) -> bool {
    matches!(
        e,
        ClientError::Broker {
            code: es_protocol::ErrorCode::ShuttingDown | es_protocol::ErrorCode::NotLeader,
            ..
        }
    )
}

/// A member's view after join: its id and the generation it joined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMember {
    pub member_id: String,
    pub generation: i32,
    pub leader: String,
    pub members: Vec<String>,
}

/// The partitions to read in a generation, and those to stop, commit and release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupAssignment {
    pub generation: i32,
    pub assignment: Vec<(String, u32)>,
    pub revoking: Vec<(String, u32)>,
}

impl Client {
    /// A group call at the coordinator. Besides the retries `retry` allows, a call
    /// the broker refused without acting on it is retried, with backoff, within
    /// the request timeout, even a first join: the coordinator is loading (after
    /// an election it rebuilds the offsets first), or no coordinator is known yet
    /// (mid-election; a known one is followed at once).
    async fn group_call(&self, req: GroupRequest, retry: bool) -> Result<GroupResponse> {
        let deadline = tokio::time::Instant::now() + self.request_timeout();
        let mut backoff = self.backoff().max(std::time::Duration::from_millis(10));
        loop {
            let req = Request::Group(req.clone());
            match self.call_routed(crate::client::COORDINATOR, 0, req, retry, true).await {
                Ok(Response::Group(g)) => return Ok(g),
                Ok(_) => return Err(ClientError::UnexpectedResponse("group request")),
                Err(e) if coordinator_not_ready(&e) && tokio::time::Instant::now() + backoff < deadline => {
                    tracing::debug!(error = %e, "the group coordinator is not ready; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(std::time::Duration::from_secs(1));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Joins `group` (a new member when `member_id` is empty) subscribed to `topics`.
    pub async fn join_group(
        &self,
        group: &str,
        member_id: &str,
        topics: &[&str],
        session_timeout_ms: u32,
    ) -> Result<GroupMember> {
        let req = GroupRequest::Join {
            group: group.to_owned(),
            member_id: member_id.to_owned(),
            client_id: "es-client".into(),
            topics: topics.iter().map(|t| (*t).to_owned()).collect(),
            session_timeout_ms,
            rebalance_timeout_ms: session_timeout_ms.max(30_000),
        };
        // A retried first join could create a second member; a rejoin is idempotent.
        match self.group_call(req, !member_id.is_empty()).await? {
            GroupResponse::Join { member_id, generation, leader, members } => {
                Ok(GroupMember { member_id, generation, leader, members })
            }
            _ => Err(ClientError::UnexpectedResponse("JoinGroup")),
        }
    }

    pub async fn sync_group(&self, group: &str, member_id: &str, generation: i32) -> Result<GroupAssignment> {
        let req = GroupRequest::Sync { group: group.to_owned(), member_id: member_id.to_owned(), generation };
        match self.group_call(req, true).await? {
            GroupResponse::Sync { generation, assignment, revoking } => {
                Ok(GroupAssignment { generation, assignment, revoking })
            }
            _ => Err(ClientError::UnexpectedResponse("SyncGroup")),
        }
    }

    pub async fn heartbeat(&self, group: &str, member_id: &str, generation: i32) -> Result<()> {
        let req =
            GroupRequest::Heartbeat { group: group.to_owned(), member_id: member_id.to_owned(), generation };
        self.group_call(req, false).await.map(|_| ())
    }

    pub async fn leave_group(&self, group: &str, member_id: &str) -> Result<()> {
        let req = GroupRequest::Leave { group: group.to_owned(), member_id: member_id.to_owned() };
        self.group_call(req, false).await.map(|_| ())
    }

    /// Commits offsets (the next offset to read per partition); returns once durable.
    pub async fn commit_offsets(
        &self,
        group: &str,
        member_id: &str,
        generation: i32,
        offsets: Vec<GroupOffset>,
    ) -> Result<()> {
        let req = GroupRequest::OffsetCommit {
            group: group.to_owned(),
            member_id: member_id.to_owned(),
            generation,
            offsets,
        };
        self.group_call(req, true).await.map(|_| ())
    }

    pub async fn fetch_offsets(&self, group: &str) -> Result<Vec<GroupOffset>> {
        match self.group_call(GroupRequest::OffsetFetch { group: group.to_owned() }, true).await? {
            GroupResponse::OffsetFetch { offsets } => Ok(offsets),
            _ => Err(ClientError::UnexpectedResponse("OffsetFetch")),
        }
    }
}
