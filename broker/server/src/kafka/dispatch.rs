//! Routes each decoded request to its API family's handler and encodes the reply.
//! Produce starts here, in frame order (the appends happen before the next frame is
//! read); every other request runs in a task of its own. Each reply is a task the
//! connection's writer awaits in request order.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use es_kafka::kafka_protocol::protocol::{Encodable, HeaderVersion};
use es_kafka::{DecodedRequest, Header, KafkaRequest, api_versions_response, encode_response};

use super::throttle::Mute;
use super::{Ctx, admin, configs, coordinator, fenced, fetch, groups, metadata, offsets, produce, producers};
use crate::service::Principal;

/// What the writer does with one request's turn.
pub enum Reply {
    /// An encoded response frame, size prefix included.
    Frame(Bytes),
    /// A frame as chunks to write in order (a Fetch response: the stored batches
    /// are chunks of their own, written without a copy).
    Chunks(Vec<Bytes>),
    /// Nothing (Produce with acks=0: a stray response would shift correlation ids).
    Nothing,
    /// Close the connection once the replies before this one are written.
    Close(String),
    /// These chunks (a whole response), then close the connection, for the reason
    /// given (`fenced.rs`).
    Last(Vec<Bytes>, &'static str),
}

/// A reply being computed; the writer awaits these in request order.
pub type Pending = tokio::task::JoinHandle<Reply>;

/// A reply known already, as a finished task.
pub fn ready(reply: Reply) -> Pending {
    tokio::spawn(async move { reply })
}

/// Encodes `response` for `header`'s request at `version`.
pub fn reply<R: Encodable + HeaderVersion>(header: &Header, version: i16, response: &R) -> Reply {
    match encode_response(header, version, response) {
        Ok(frame) => Reply::Frame(frame),
        Err(e) => Reply::Close(e.to_string()),
    }
}

/// A Fetch response: hand-encoded as chunks (`fetch_encode.rs`) when it can be,
/// else by kafka-protocol.
fn fetch_reply(
    header: &Header,
    version: i16,
    response: &es_kafka::kafka_protocol::messages::FetchResponse,
) -> Reply {
    match super::fetch_encode::encode(header, version, response) {
        Some(chunks) => Reply::Chunks(chunks),
        None => reply(header, version, response),
    }
}

/// Starts one request: phase one of a produce now, everything else in a task.
/// `who` is the connection's SASL principal (anonymous with auth off); a produce
/// or fetch over its quota holds `mute` (KIP-219).
pub async fn begin(
    ctx: &Arc<Ctx>,
    peer: SocketAddr,
    req: DecodedRequest,
    who: Principal,
    mute: Arc<Mute>,
) -> Pending {
    let DecodedRequest { header, request, .. } = req;
    let (started, api) = (std::time::Instant::now(), header.api_key as i16);
    let metrics = ctx.service.metrics().clone();
    match request {
        KafkaRequest::Produce(r) => {
            let pending = produce::begin(ctx, header, r, who, &mute).await;
            if !metrics.enabled() {
                return pending;
            }
            // The reply is ready once the appends are durable: time it there.
            tokio::spawn(async move {
                let reply =
                    pending.await.unwrap_or_else(|e| Reply::Close(format!("the produce task failed: {e}")));
                metrics.kafka_request(api, started.elapsed());
                reply
            })
        }
        other => {
            let ctx = ctx.clone();
            tokio::spawn(async move {
                let reply = answer(&ctx, peer, &header, other, &who, &mute).await;
                metrics.kafka_request(api, started.elapsed());
                reply
            })
        }
    }
}

/// Answers every request but Produce. Exhaustive: an API the codec decodes does not
/// compile without its arm here.
async fn answer(
    ctx: &Ctx,
    peer: SocketAddr,
    h: &Header,
    req: KafkaRequest,
    who: &Principal,
    mute: &Mute,
) -> Reply {
    let v = h.api_version;
    match req {
        KafkaRequest::ApiVersions(_) => {
            let (body, at) = api_versions_response(v);
            reply(h, at, &body)
        }
        KafkaRequest::Metadata(r) => {
            let response = metadata::metadata(ctx, who, v, r);
            fenced::last_if(fenced::in_metadata(ctx, &response), reply(h, v, &response))
        }
        KafkaRequest::DescribeCluster(r) => reply(h, v, &metadata::describe_cluster(ctx, who, v, r)),
        KafkaRequest::Fetch(r) => {
            let response = fetch::fetch(ctx, who, v, r, mute).await;
            fenced::last_if(fenced::in_fetch(ctx, &response), fetch_reply(h, v, &response))
        }
        KafkaRequest::ListOffsets(r) => reply(h, v, &offsets::list_offsets(ctx, who, v, r).await),
        KafkaRequest::OffsetForLeaderEpoch(r) => reply(h, v, &offsets::offset_for_leader_epoch(ctx, who, r)),
        KafkaRequest::InitProducerId(r) => reply(h, v, &producers::init_producer_id(ctx, who, r).await),
        KafkaRequest::DescribeProducers(r) => reply(h, v, &producers::describe_producers(ctx, who, r)),
        KafkaRequest::FindCoordinator(r) => reply(h, v, &coordinator::find_coordinator(ctx, v, r)),
        KafkaRequest::CreateTopics(r) => reply(h, v, &admin::create_topics(ctx, who, v, r).await),
        KafkaRequest::DeleteTopics(r) => reply(h, v, &admin::delete_topics(ctx, who, v, r).await),
        KafkaRequest::CreatePartitions(r) => reply(h, v, &admin::create_partitions(ctx, who, r).await),
        KafkaRequest::DeleteRecords(r) => reply(h, v, &admin::delete_records(ctx, who, r).await),
        KafkaRequest::DescribeLogDirs(r) => reply(h, v, &admin::describe_log_dirs(ctx, who, v, r)),
        KafkaRequest::DescribeConfigs(r) => reply(h, v, &configs::describe_configs(ctx, who, v, r)),
        KafkaRequest::AlterConfigs(r) => reply(h, v, &configs::alter_configs(ctx, who, r).await),
        KafkaRequest::IncrementalAlterConfigs(r) => {
            reply(h, v, &configs::incremental_alter_configs(ctx, who, r).await)
        }
        // ---- Consumer groups: Kafka's classic protocol (`groups.rs`).
        KafkaRequest::JoinGroup(r) => {
            let client_id = h.client_id.as_ref().map_or("", |c| c.as_str());
            let host = format!("/{}", peer.ip());
            reply(h, v, &groups::join_group_as(&ctx.service, who, client_id, &host, v, r).await)
        }
        KafkaRequest::SyncGroup(r) => reply(h, v, &groups::sync_group(&ctx.service, who, v, r).await),
        KafkaRequest::Heartbeat(r) => reply(h, v, &groups::heartbeat(&ctx.service, who, v, r).await),
        KafkaRequest::LeaveGroup(r) => reply(h, v, &groups::leave_group(&ctx.service, who, v, r).await),
        KafkaRequest::OffsetCommit(r) => reply(h, v, &groups::offset_commit(&ctx.service, who, v, r).await),
        KafkaRequest::OffsetFetch(r) => reply(h, v, &groups::offset_fetch(&ctx.service, who, v, r).await),
        KafkaRequest::OffsetDelete(r) => reply(h, v, &groups::offset_delete(&ctx.service, who, v, r).await),
        KafkaRequest::DescribeGroups(r) => {
            reply(h, v, &groups::describe_groups(&ctx.service, who, v, r).await)
        }
        KafkaRequest::ListGroups(r) => reply(h, v, &groups::list_groups(&ctx.service, who, v, r).await),
        KafkaRequest::DeleteGroups(r) => reply(h, v, &groups::delete_groups(&ctx.service, who, v, r).await),
        // The connection answers the SASL exchange itself (`sasl.rs`), in order.
        KafkaRequest::SaslHandshake(_) | KafkaRequest::SaslAuthenticate(_) => {
            Reply::Close("a SASL request reached the dispatcher".into())
        }
        KafkaRequest::Produce(_) => Reply::Close("a produce reached the non-produce path".into()),
    }
}
