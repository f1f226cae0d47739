//! The simple HTTP consumer session: `POST /groups/{g}/members` joins and syncs;
//! each long-poll `GET .../members/{m}/records` heartbeats, follows rebalances
//! (committing and releasing revoked partitions first), commits what the previous
//! poll returned when auto-commit is on, then reads across every assigned partition.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use es_groups::{GroupError, TopicPartition};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::groups_api::{
    GroupPartition, SessionCommitted, SessionJoined, SessionOffset, SessionPoll, SessionRecord,
};
use super::{ApiJson, ApiPath, ApiQuery, AppState, Caller};
use crate::api::{Encoding, ErrorBody};
use crate::groups::{CommittedOffset, REBALANCE_TIMEOUT_MS_DEFAULT, SESSION_TIMEOUT_MS_DEFAULT};
use crate::limits;
use crate::service::error::{BrokerError, Result};
use crate::service::fetch::{FetchPartition, FetchRequest, Replicas};
use crate::service::groups::JoinGroup;
use crate::service::{Principal, Service};

/// Rounds of rejoin/sync one poll may go through before answering.
const REBALANCE_ROUNDS_MAX: usize = 8;

/// A member's server-side session.
#[derive(Debug, Clone)]
pub struct Session {
    topics: Vec<String>,
    session_timeout_ms: u64,
    generation: i32,
    auto_commit: bool,
    start_latest: bool,
    assigned: BTreeSet<TopicPartition>,
    /// Next offset to hand out per assigned partition.
    positions: BTreeMap<TopicPartition, u64>,
    /// Positions already committed.
    committed: BTreeMap<TopicPartition, u64>,
}

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/groups/{group}/members", post(create))
        .route("/groups/{group}/members/{member}", delete(remove))
        .route("/groups/{group}/members/{member}/records", get(poll))
        .route("/groups/{group}/members/{member}/commit", post(commit_now))
}

/// `POST /groups/{g}/members`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"topics": ["st"], "client_id": "app"}))]
pub struct CreateBody {
    /// The topics to read; every member of a group subscribes to the same ones.
    #[schema(min_items = 1)]
    pub topics: Vec<String>,
    #[serde(default)]
    pub client_id: String,
    /// Default 10000; each poll is a heartbeat and waits at most half of it.
    pub session_timeout_ms: Option<u64>,
    /// Commit what the previous poll returned at each poll (default true).
    pub auto_commit: Option<bool>,
    /// Where to start without a committed offset: `earliest` (default) or `latest`.
    #[schema(pattern = "^(earliest|latest)$")]
    pub reset: Option<String>,
}

#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PollQuery {
    /// Wait up to this long (ms; at most 60000 and half the session timeout) for data when there is none yet.
    #[param(minimum = 0, maximum = 60000)]
    pub wait_ms: Option<u64>,
    /// Most records to return (default 500, at most 10000).
    #[param(minimum = 1, maximum = 10000)]
    pub max_records: Option<usize>,
    /// Preferred encoding; records that are not valid UTF-8 come back base64 anyway.
    pub encoding: Option<Encoding>,
}

type Key = (String, String);

/// The listener's server-side sessions, by (group, member): HTTP's own state, kept
/// out of the group service, which only sees their members' joins and commits.
#[derive(Debug, Clone, Default)]
pub struct Sessions(Arc<Mutex<BTreeMap<Key, Session>>>);

impl Sessions {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Key, Session>> {
        self.0.lock().expect("sessions lock")
    }

    fn get(&self, key: &Key) -> Result<Session> {
        self.lock().get(key).cloned().ok_or_else(|| {
            BrokerError::Group(GroupError::UnknownMember { group: key.0.clone(), member: key.1.clone() })
        })
    }

    fn put(&self, key: &Key, s: &Session) {
        self.lock().insert(key.clone(), s.clone());
    }

    fn remove(&self, key: &Key) {
        self.lock().remove(key);
    }
}

/// What a session operation works with: the service, the caller, the sessions.
struct Ctx<'a> {
    service: &'a Service,
    who: &'a Principal,
    sessions: &'a Sessions,
}

impl<'a> Ctx<'a> {
    fn new(state: &'a AppState, who: &'a Principal) -> Ctx<'a> {
        Ctx { service: &state.service, who, sessions: &state.sessions }
    }

    fn join(
        &self,
        group: &str,
        member: Option<String>,
        client_id: &str,
        s: &Session,
    ) -> Result<es_groups::Joined> {
        let join = JoinGroup {
            group: group.to_owned(),
            member_id: member,
            client_id: client_id.to_owned(),
            topics: s.topics.clone(),
            session_timeout_ms: s.session_timeout_ms,
            rebalance_timeout_ms: REBALANCE_TIMEOUT_MS_DEFAULT.max(s.session_timeout_ms),
        };
        self.service.join_group(self.who, join)
    }
}

#[utoipa::path(post, path = "/groups/{group}/members", tag = "groups",
    params(("group" = String, Path, description = "Group id")),
    request_body = CreateBody,
    responses(
        (status = 201, description = "Joined and synced: a server-side session", body = SessionJoined),
        (status = 400, description = "bad_json, invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found", body = ErrorBody),
        (status = 409, description = "inconsistent_subscription, rebalance_in_progress, unknown_member (evicted meanwhile)", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(group): ApiPath<String>,
    ApiJson(b): ApiJson<CreateBody>,
) -> Result<(StatusCode, Json<SessionJoined>)> {
    let start_latest = match b.reset.as_deref() {
        None | Some("earliest") => false,
        Some("latest") => true,
        Some(other) => {
            return Err(BrokerError::InvalidRequest(format!("reset is earliest or latest; got {other:?}")));
        }
    };
    let ctx = Ctx::new(&state, &who);
    let mut session = Session {
        topics: b.topics,
        session_timeout_ms: b.session_timeout_ms.unwrap_or(SESSION_TIMEOUT_MS_DEFAULT),
        generation: 0,
        auto_commit: b.auto_commit.unwrap_or(true),
        start_latest,
        assigned: BTreeSet::new(),
        positions: BTreeMap::new(),
        committed: BTreeMap::new(),
    };
    let joined = ctx.join(&group, None, &b.client_id, &session)?;
    session.generation = joined.generation;
    let key = (group, joined.member_id.clone());
    ctx.sessions.put(&key, &session);
    let session = follow(&ctx, &key).await?;
    let body =
        SessionJoined { member_id: key.1, generation: session.generation, assignment: assignment(&session) };
    Ok((StatusCode::CREATED, Json(body)))
}

fn assignment(s: &Session) -> Vec<GroupPartition> {
    s.assigned.iter().cloned().map(GroupPartition::from).collect()
}

/// Heartbeats, and on a rebalance rejoins, syncs, commits revoked partitions and
/// heartbeats again so they are released; returns the up-to-date session.
async fn follow(ctx: &Ctx<'_>, key: &Key) -> Result<Session> {
    let (group, member) = (&key.0, &key.1);
    let mut s = ctx.sessions.get(key)?;
    for _ in 0..REBALANCE_ROUNDS_MAX {
        match ctx.service.heartbeat(ctx.who, group, member, s.generation) {
            Ok(()) => break,
            Err(BrokerError::Group(GroupError::RebalanceInProgress(_))) => {}
            Err(e) => {
                ctx.sessions.remove(key);
                return Err(e);
            }
        }
        let joined =
            ctx.join(group, Some(member.clone()), "", &s).inspect_err(|_| ctx.sessions.remove(key))?;
        let synced = ctx.service.sync_group(ctx.who, group, member, joined.generation)?;
        s.generation = synced.generation;
        let now: BTreeSet<TopicPartition> = synced.assignment.into_iter().collect();
        if s.auto_commit {
            commit_positions(ctx, key, &mut s).await?;
        }
        s.positions.retain(|tp, _| now.contains(tp));
        s.committed.retain(|tp, _| now.contains(tp));
        s.assigned = now;
    }
    ctx.sessions.put(key, &s);
    Ok(s)
}

/// Commits every position that moved since the last commit.
async fn commit_positions(ctx: &Ctx<'_>, key: &Key, s: &mut Session) -> Result<()> {
    let changed: Vec<CommittedOffset> = s
        .positions
        .iter()
        .filter(|(tp, o)| s.committed.get(*tp) != Some(*o))
        .map(|(tp, o)| CommittedOffset {
            topic: tp.topic.clone(),
            partition: tp.partition,
            offset: *o,
            metadata: String::new(),
        })
        .collect();
    if changed.is_empty() {
        return Ok(());
    }
    ctx.service.commit_offsets(ctx.who, &key.0, &key.1, s.generation, changed).await?;
    s.committed.extend(s.positions.clone());
    Ok(())
}

#[utoipa::path(get, path = "/groups/{group}/members/{member}/records", tag = "groups",
    params(
        ("group" = String, Path, description = "Group id"),
        ("member" = String, Path, description = "The session's member id"),
        PollQuery),
    responses(
        (status = 200, description = "Records across every assigned partition (a heartbeat; follows rebalances)", body = SessionPoll),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 404, description = "topic_not_found, partition_not_found (a subscribed topic was deleted)", body = ErrorBody),
        (status = 409, description = "unknown_member (no such session, or evicted), illegal_generation, rebalance_in_progress", body = ErrorBody),
        (status = 429, description = "throttled: the caller's fetch quota is spent (retry after `Retry-After`)", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody),
        (status = 504, description = "timeout: in a cluster, no replica of a partition placed on other nodes answered; retry", body = ErrorBody)))]
pub async fn poll(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(key): ApiPath<(String, String)>,
    ApiQuery(q): ApiQuery<PollQuery>,
) -> Result<Json<SessionPoll>> {
    let ctx = Ctx::new(&state, &who);
    let wait_ms = q.wait_ms.unwrap_or(0);
    crate::service::fetch::check_wait(wait_ms)?;
    let max_records =
        q.max_records.unwrap_or(limits::CONSUME_RECORDS_DEFAULT).clamp(1, limits::CONSUME_RECORDS_MAX);
    let mut s = follow(&ctx, &key).await?;
    // The poll is the heartbeat: never wait long enough to be evicted meanwhile.
    let wait_ms = wait_ms.min(s.session_timeout_ms / 2);
    if s.auto_commit {
        commit_positions(&ctx, &key, &mut s).await?;
    }
    start_positions(&ctx, &key.0, &mut s).await?;
    let records = read(&state, &ctx, &mut s, max_records, q.encoding.unwrap_or_default(), wait_ms).await?;
    ctx.sessions.put(&key, &s);
    Ok(Json(SessionPoll { member_id: key.1, generation: s.generation, assignment: assignment(&s), records }))
}

/// Positions of newly assigned partitions: the committed offset, else earliest or latest.
async fn start_positions(ctx: &Ctx<'_>, group: &str, s: &mut Session) -> Result<()> {
    let committed = ctx.service.fetch_offsets(ctx.who, group)?.into_iter();
    let committed: BTreeMap<(String, u32), u64> =
        committed.map(|c| ((c.topic, c.partition), c.offset)).collect();
    let fresh: Vec<TopicPartition> =
        s.assigned.iter().filter(|tp| !s.positions.contains_key(*tp)).cloned().collect();
    for tp in fresh {
        let (log_start, high_watermark) = match ctx.service.partition_info(ctx.who, &tp.topic, tp.partition) {
            Ok(info) => (info.log_start_offset, info.high_watermark),
            // Placed on other nodes: their ends, asked of a replica.
            Err(BrokerError::NotLeader { .. }) => {
                let ends = ctx.service.ends_elsewhere(ctx.who, &tp.topic, tp.partition).await?;
                (ends.log_start, ends.high_watermark)
            }
            Err(e) => return Err(e),
        };
        let start = match committed.get(&(tp.topic.clone(), tp.partition)) {
            Some(o) => (*o).max(log_start).min(high_watermark),
            None if s.start_latest => high_watermark,
            None => log_start,
        };
        s.positions.insert(tp.clone(), start);
        if let Some(o) = committed.get(&(tp.topic.clone(), tp.partition)) {
            s.committed.insert(tp.clone(), *o);
        }
    }
    Ok(())
}

/// How often a poll reads again the partitions placed on other nodes while
/// nothing came back (a replica elsewhere has no long poll to park on).
const ELSEWHERE_POLL_MS: u64 = 100;
/// How long a replica elsewhere may take to answer a read, at least (a poll with
/// no wait still gives it this long); one that takes longer gives nothing this
/// round, and the session's other partitions are read all the same.
const ELSEWHERE_ANSWER_MIN_MS: u64 = 1_000;
/// The least a read of one partition elsewhere asks for, whatever the number of
/// such partitions (all of them together ask for about `CONSUME_BYTES_MAX`).
const ELSEWHERE_BYTES_MIN: usize = 64 * 1024;

/// One partition's read in a poll: where it was read from, and what came.
type PartitionRead = (TopicPartition, u64, es_log::ReadResult);

/// Reads every assigned partition from its position: those this node serves
/// through the service's one fetch (and its long poll: it waits up to `wait_ms`
/// when nothing is there yet), those placed on other nodes from a replica there
/// (`Service::read_elsewhere`), again every `ELSEWHERE_POLL_MS` within the wait.
/// The fetch quota is checked once, before any read.
async fn read(
    state: &AppState,
    ctx: &Ctx<'_>,
    s: &mut Session,
    max_records: usize,
    encoding: Encoding,
    wait_ms: u64,
) -> Result<Vec<SessionRecord>> {
    let (mut here, mut elsewhere) = (Vec::new(), Vec::new());
    for (tp, offset) in &s.positions {
        match ctx.service.partition_info(ctx.who, &tp.topic, tp.partition) {
            Ok(info) => here.push(FetchPartition {
                topic: tp.topic.clone(),
                partition: tp.partition,
                // Retention may have removed records below the position: skip to the log start.
                offset: (*offset).max(info.log_start_offset),
                max_bytes: limits::CONSUME_BYTES_DEFAULT,
                leader_epoch: None,
            }),
            Err(BrokerError::NotLeader { .. }) => elsewhere.push((tp.clone(), *offset)),
            Err(e) => return Err(e),
        }
    }
    let mut shutdown = state.shutdown.clone();
    if here.is_empty() && elsewhere.is_empty() {
        // Nothing assigned yet: the poll still waits, so a client does not spin.
        let _ = tokio::time::timeout(Duration::from_millis(wait_ms), shutdown.wait_for(|s| *s)).await;
        return Ok(Vec::new());
    }
    ctx.service.check_fetch_quota(ctx.who)?;
    let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
    let per_partition = (limits::CONSUME_BYTES_MAX / elsewhere.len().max(1))
        .clamp(ELSEWHERE_BYTES_MIN, limits::CONSUME_BYTES_DEFAULT);
    loop {
        let mut reads = read_elsewhere(ctx, &elsewhere, per_partition, deadline).await?;
        let found = reads.iter().any(|(.., r)| !r.data.is_empty());
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let step =
            if elsewhere.is_empty() { left } else { left.min(Duration::from_millis(ELSEWHERE_POLL_MS)) };
        if !here.is_empty() {
            let req = FetchRequest {
                partitions: here.clone(),
                max_wait_ms: if found { 0 } else { step.as_millis() as u64 },
                min_bytes: 1,
                max_bytes: limits::CONSUME_BYTES_MAX,
                from: Replicas::Any,
            };
            match ctx.service.fetch(ctx.who, req).await {
                Ok(local) => {
                    for (p, read) in here.iter().zip(local) {
                        let tp = TopicPartition { topic: p.topic.clone(), partition: p.partition };
                        reads.push((tp, p.offset, read?));
                    }
                }
                // The reads elsewhere were charged first: hand them out, not drop them.
                Err(BrokerError::Throttled { .. }) if found => {}
                Err(e) => return Err(e),
            }
        } else if !found && !step.is_zero() {
            let _ = tokio::time::timeout(step, shutdown.wait_for(|s| *s)).await;
        }
        let any = reads.iter().any(|(.., r)| !r.data.is_empty());
        if any || tokio::time::Instant::now() >= deadline || *shutdown.borrow() {
            // In partition order, as one fetch of them all would hand them out.
            reads.sort_by(|a, b| a.0.cmp(&b.0));
            return decode_reads(s, reads, max_records, encoding);
        }
    }
}

/// One read of each partition placed elsewhere, all at once. A partition no
/// replica answered in time (at least `ELSEWHERE_ANSWER_MIN_MS`, up to the
/// poll's deadline) gives nothing this round; any other error fails the poll.
async fn read_elsewhere(
    ctx: &Ctx<'_>,
    elsewhere: &[(TopicPartition, u64)],
    max_bytes: usize,
    deadline: tokio::time::Instant,
) -> Result<Vec<PartitionRead>> {
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let bound = left.max(Duration::from_millis(ELSEWHERE_ANSWER_MIN_MS));
    let asks = elsewhere.iter().map(|(tp, offset)| {
        let read = ctx.service.read_elsewhere(ctx.who, &tp.topic, tp.partition, *offset, max_bytes);
        tokio::time::timeout(bound, read)
    });
    let mut reads = Vec::new();
    for ((tp, offset), answer) in elsewhere.iter().zip(futures_util::future::join_all(asks).await) {
        match answer {
            // Below the replica's log start retention removed the records: move on.
            Ok(Ok(read)) => reads.push((tp.clone(), (*offset).max(read.log_start_offset), read)),
            Ok(Err(BrokerError::Timeout(why))) => {
                tracing::debug!(topic = %tp.topic, partition = tp.partition, why, "no replica answered a session read")
            }
            Err(_) => {
                tracing::debug!(topic = %tp.topic, partition = tp.partition, "a session read elsewhere timed out")
            }
            Ok(Err(e)) => return Err(e),
        }
    }
    Ok(reads)
}

/// Hands out up to `max_records` of `reads` and moves each partition's position
/// past what was read.
fn decode_reads(
    s: &mut Session,
    reads: Vec<PartitionRead>,
    max_records: usize,
    encoding: Encoding,
) -> Result<Vec<SessionRecord>> {
    let mut out = Vec::new();
    for (tp, offset, read) in reads {
        if out.len() >= max_records {
            break;
        }
        let room = max_records - out.len();
        let position =
            super::records::decode_read(&read, offset, room, |r| out.push(record_json(&tp, r, encoding)))?;
        s.positions.insert(tp, position);
    }
    Ok(out)
}

fn record_json(tp: &TopicPartition, r: &es_core::RecordView<'_>, preferred: Encoding) -> SessionRecord {
    SessionRecord {
        topic: tp.topic.clone(),
        partition: tp.partition,
        record: super::records::to_wire(r, preferred),
    }
}

#[utoipa::path(post, path = "/groups/{group}/members/{member}/commit", tag = "groups",
    params(
        ("group" = String, Path, description = "Group id"),
        ("member" = String, Path, description = "The session's member id")),
    responses(
        (status = 200, description = "What the session returned so far is committed (fsynced)", body = SessionCommitted),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 409, description = "unknown_member (no such session, or evicted), illegal_generation, rebalance_in_progress", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn commit_now(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(key): ApiPath<(String, String)>,
) -> Result<Json<SessionCommitted>> {
    let ctx = Ctx::new(&state, &who);
    let mut s = follow(&ctx, &key).await?;
    commit_positions(&ctx, &key, &mut s).await?;
    ctx.sessions.put(&key, &s);
    let offsets = s
        .committed
        .iter()
        .map(|(tp, o)| SessionOffset { topic: tp.topic.clone(), partition: tp.partition, offset: *o })
        .collect();
    Ok(Json(SessionCommitted { status: "ok".into(), offsets }))
}

/// Leaves the group, committing first when auto-commit is on.
#[utoipa::path(delete, path = "/groups/{group}/members/{member}", tag = "groups",
    params(
        ("group" = String, Path, description = "Group id"),
        ("member" = String, Path, description = "The session's member id")),
    responses(
        (status = 204, description = "Committed (with auto-commit) and left"),
        (status = 400, description = "invalid_request", body = ErrorBody),
        (status = 409, description = "unknown_member (no such session, or evicted), illegal_generation, rebalance_in_progress", body = ErrorBody),
        (status = 503, description = "shutting_down", body = ErrorBody)))]
pub async fn remove(
    State(state): State<AppState>,
    Caller(who): Caller,
    ApiPath(key): ApiPath<(String, String)>,
) -> Result<StatusCode> {
    let ctx = Ctx::new(&state, &who);
    let mut s = follow(&ctx, &key).await?;
    if s.auto_commit {
        commit_positions(&ctx, &key, &mut s).await?;
    }
    ctx.sessions.remove(&key);
    ctx.service.leave_group(&who, &key.0, &key.1)?;
    Ok(StatusCode::NO_CONTENT)
}
