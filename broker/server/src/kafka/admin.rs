//! Topic administration: CreateTopics (2-7), DeleteTopics (1-6, by id from 6),
//! CreatePartitions (0-3) and DescribeLogDirs (1-4), each on the service's admin
//! calls. The replication factor is checked against the cluster's nodes (1 on a
//! single node); manual replica assignments are refused (es places replicas). DeleteRecords (0-2) moves each partition's
//! log start through the service (offset -1: the high watermark).

use std::collections::BTreeMap;

use es_kafka::kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use es_kafka::kafka_protocol::messages::create_topics_request::CreatableTopic;
use es_kafka::kafka_protocol::messages::create_topics_response::CreatableTopicResult;
use es_kafka::kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use es_kafka::kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use es_kafka::kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use es_kafka::kafka_protocol::messages::{
    CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteRecordsRequest, DeleteRecordsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
    DescribeLogDirsRequest, DescribeLogDirsResponse,
};
use serde_json::Value;
use uuid::Uuid;

use super::error::{code, kafka_code};
use super::{Ctx, configs, sb, topic_name};
use crate::TopicConfig;
use crate::limits::KAFKA_DEFAULT_PARTITIONS;
use crate::registry::REPLICATION_FACTOR;
use crate::service::Principal;

/// A refusal before the service is asked: (Kafka code, message).
type Refusal = (i16, String);

/// What CreateTopics asks for one topic. The replication factor (-1: the
/// broker's default) travels as the creation-only `replication.factor`, which
/// the registry checks against the cluster (a single node takes only 1). In a
/// cluster, manual replica assignments are refused: es places replicas itself
/// (`es cluster move` changes them); a single node takes one naming itself.
fn creation(ctx: &Ctx, t: &CreatableTopic) -> Result<(u32, BTreeMap<String, Value>), Refusal> {
    let cluster = ctx.service.registry().cluster();
    let members = cluster.map_or(1, |c| c.voters().len().max(1));
    if t.replication_factor == 0 || i64::from(t.replication_factor) > members as i64 {
        return Err((
            code::INVALID_REPLICATION_FACTOR,
            format!(
                "replication factor {} is not between 1 and the {members} broker(s) of this cluster",
                t.replication_factor
            ),
        ));
    }
    let node = ctx.node.node_id;
    if cluster.is_some() && !t.assignments.is_empty() {
        return Err((
            code::INVALID_REPLICA_ASSIGNMENT,
            "es places replicas itself: leave the assignment out (es cluster move changes a partition's \
             replicas)"
                .to_owned(),
        ));
    }
    if t.assignments.iter().any(|a| a.broker_ids.iter().any(|b| b.0 != node)) {
        return Err((code::INVALID_REPLICA_ASSIGNMENT, format!("es has one broker, id {node}")));
    }
    let partitions = match (t.num_partitions, t.assignments.len()) {
        (-1, 0) => KAFKA_DEFAULT_PARTITIONS,
        (-1, n) => n as u32,
        (n, _) => u32::try_from(n).map_err(|_| (code::INVALID_PARTITIONS, format!("{n} partitions")))?,
    };
    let mut config = BTreeMap::new();
    for c in &t.configs {
        if let Some(value) = &c.value {
            config.insert(c.name.as_str().to_owned(), Value::String(value.as_str().to_owned()));
        }
    }
    Ok((partitions, config))
}

pub async fn create_topics(
    ctx: &Ctx,
    who: &Principal,
    version: i16,
    req: CreateTopicsRequest,
) -> CreateTopicsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.as_str().to_owned();
        let base = CreatableTopicResult::default()
            .with_name(t.name.clone())
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        let (partitions, config) = match creation(ctx, &t) {
            Ok(c) => c,
            Err((error, message)) => {
                results.push(base.with_error_code(error).with_error_message(Some(sb(message))));
                continue;
            }
        };
        let created = if req.validate_only {
            validate(ctx, who, &name, &config).map(|c| (c, Uuid::nil()))
        } else {
            let mut config = config;
            if t.replication_factor > 0 {
                config.insert(REPLICATION_FACTOR.to_owned(), Value::from(t.replication_factor));
            }
            ctx.service
                .create_topic(who, name.clone(), partitions, config)
                .await
                .map(|d| (d.config, Uuid::from_bytes(d.id)))
        };
        let result = match created {
            Ok((config, id)) => {
                let configs = (version >= 5).then(|| configs::creatable(&config));
                let replicas = ctx.service.leadership(&name, 0).map_or(1, |l| l.replicas.len());
                let asked = if t.replication_factor > 0 { t.replication_factor as usize } else { replicas };
                base.with_num_partitions(partitions as i32)
                    .with_replication_factor(asked.max(1) as i16)
                    .with_topic_id(id)
                    .with_configs(configs)
            }
            Err(e) => base.with_error_code(kafka_code(&e)).with_error_message(Some(sb(e.to_string()))),
        };
        results.push(result);
    }
    CreateTopicsResponse::default().with_topics(results)
}

/// `validate_only`: the config must apply and the name must be free.
fn validate(
    ctx: &Ctx,
    who: &Principal,
    name: &str,
    config: &BTreeMap<String, Value>,
) -> crate::service::Result<TopicConfig> {
    let config = TopicConfig::default().with_changes(config)?;
    if ctx.service.describe_topic(who, name).is_ok() {
        return Err(crate::BrokerError::TopicExists(name.to_owned()));
    }
    Ok(config)
}

pub async fn delete_topics(
    ctx: &Ctx,
    who: &Principal,
    version: i16,
    req: DeleteTopicsRequest,
) -> DeleteTopicsResponse {
    // v6 names topics by name or id in `topics`; earlier versions by name in `topic_names`.
    let wanted: Vec<(Option<String>, Uuid)> = if version >= 6 {
        req.topics.iter().map(|t| (t.name.as_ref().map(|n| n.as_str().to_owned()), t.topic_id)).collect()
    } else {
        req.topic_names.iter().map(|n| (Some(n.as_str().to_owned()), Uuid::nil())).collect()
    };
    let mut responses = Vec::with_capacity(wanted.len());
    for (name, id) in wanted {
        let resolved =
            name.clone().filter(|n| !n.is_empty()).or_else(|| ctx.service.topic_name_by_id(id.into_bytes()));
        let base = DeletableTopicResult::default().with_name(name.clone().map(topic_name)).with_topic_id(id);
        let Some(resolved) = resolved else {
            responses.push(
                base.with_error_code(code::UNKNOWN_TOPIC_ID)
                    .with_error_message(Some(sb("no topic has this id"))),
            );
            continue;
        };
        let result = match ctx.service.delete_topic(who, resolved.clone()).await {
            Ok(()) => base.with_name(Some(topic_name(resolved))),
            Err(e) => base.with_error_code(kafka_code(&e)).with_error_message(Some(sb(e.to_string()))),
        };
        responses.push(result);
    }
    DeleteTopicsResponse::default().with_responses(responses)
}

pub async fn create_partitions(
    ctx: &Ctx,
    who: &Principal,
    req: CreatePartitionsRequest,
) -> CreatePartitionsResponse {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let base = CreatePartitionsTopicResult::default().with_name(t.name.clone());
        let name = t.name.as_str().to_owned();
        let outcome = match u32::try_from(t.count) {
            Err(_) => Err((code::INVALID_PARTITIONS, format!("{} partitions", t.count))),
            Ok(count) if req.validate_only => match ctx.service.describe_topic(who, &name) {
                Ok(d) if count as usize > d.partitions.len() => Ok(()),
                Ok(d) => Err((
                    code::INVALID_PARTITIONS,
                    format!("topic {name:?} already has {} partitions", d.partitions.len()),
                )),
                Err(e) => Err((kafka_code(&e), e.to_string())),
            },
            Ok(count) => ctx.service.add_partitions(who, name, count).await.map(|_| ()).map_err(|e| {
                // Shrinking or a count over the limit is an invalid partition count to Kafka.
                let error = if matches!(e, crate::BrokerError::InvalidRequest(_)) {
                    code::INVALID_PARTITIONS
                } else {
                    kafka_code(&e)
                };
                (error, e.to_string())
            }),
        };
        results.push(match outcome {
            Ok(()) => base,
            Err((error, message)) => base.with_error_code(error).with_error_message(Some(sb(message))),
        });
    }
    CreatePartitionsResponse::default().with_results(results)
}

/// Each partition's new log start (its low watermark), or why not.
pub async fn delete_records(ctx: &Ctx, who: &Principal, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let mut topics = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let mut parts = Vec::with_capacity(t.partitions.len());
        for p in &t.partitions {
            let base = DeleteRecordsPartitionResult::default().with_partition_index(p.partition_index);
            let answer = match delete_one(ctx, who, t.name.as_str(), p.partition_index, p.offset).await {
                Ok(low) => base.with_low_watermark(low as i64),
                Err(error) => base.with_low_watermark(-1).with_error_code(error),
            };
            parts.push(answer);
        }
        topics.push(DeleteRecordsTopicResult::default().with_name(t.name).with_partitions(parts));
    }
    DeleteRecordsResponse::default().with_topics(topics)
}

/// One partition of a DeleteRecords: Kafka's -1 is "up to the high watermark".
async fn delete_one(
    ctx: &Ctx,
    who: &Principal,
    topic: &str,
    partition: i32,
    offset: i64,
) -> Result<u64, i16> {
    let partition = u32::try_from(partition).map_err(|_| code::UNKNOWN_TOPIC_OR_PARTITION)?;
    let before = match offset {
        -1 => None,
        o => Some(u64::try_from(o).map_err(|_| code::OFFSET_OUT_OF_RANGE)?),
    };
    ctx.service.delete_records(who, topic, partition, before).await.map_err(|e| kafka_code(&e))
}

/// One log directory, the data directory, with each partition's size.
pub fn describe_log_dirs(
    ctx: &Ctx,
    who: &Principal,
    version: i16,
    req: DescribeLogDirsRequest,
) -> DescribeLogDirsResponse {
    let names: Vec<(String, Option<Vec<i32>>)> = match req.topics {
        None => {
            ctx.service.list_topics(who).unwrap_or_default().into_iter().map(|t| (t.name, None)).collect()
        }
        Some(list) => list.into_iter().map(|t| (t.topic.as_str().to_owned(), Some(t.partitions))).collect(),
    };
    let mut topics = Vec::new();
    for (name, wanted) in names {
        let Ok(d) = ctx.service.describe_topic(who, &name) else { continue };
        let Ok(topic) = ctx.service.registry().topic(&name) else { continue };
        // Only the partitions this node holds a replica of are in its log dir.
        let parts: Vec<_> = d
            .partitions
            .iter()
            .enumerate()
            .filter(|(i, _)| wanted.as_ref().is_none_or(|w| w.contains(&(*i as i32))))
            .filter(|(i, _)| ctx.service.registry().hosts(&topic, *i as u32))
            .map(|(i, info)| {
                DescribeLogDirsPartition::default()
                    .with_partition_index(i as i32)
                    .with_partition_size(info.size_bytes as i64)
            })
            .collect();
        if parts.is_empty() {
            continue;
        }
        topics.push(DescribeLogDirsTopic::default().with_name(topic_name(name)).with_partitions(parts));
    }
    let dir = ctx.service.registry().options().data_dir.join("partitions");
    // The filesystem's size and what an unprivileged writer may still use (v4+;
    // -1 when it cannot be told, as Kafka).
    let (total, usable) = match rustix::fs::statvfs(&dir) {
        Ok(s) => (s.f_blocks.saturating_mul(s.f_frsize), s.f_bavail.saturating_mul(s.f_frsize)),
        Err(_) => (u64::MAX, u64::MAX),
    };
    let bytes = |n: u64| i64::try_from(n).unwrap_or(-1);
    let result = DescribeLogDirsResult::default()
        .with_log_dir(sb(dir.display().to_string()))
        .with_topics(topics)
        .with_total_bytes(if version >= 4 { bytes(total) } else { -1 })
        .with_usable_bytes(if version >= 4 { bytes(usable) } else { -1 });
    DescribeLogDirsResponse::default().with_results(vec![result])
}
