//! The harness's Kafka attacks: each tenant, logged in over SASL PLAIN on a raw
//! connection, reads, writes, seeks, describes, alters and deletes another
//! tenant's topics, joins, syncs, heartbeats, leaves, commits, fetches offsets of,
//! describes, lists and deletes its groups, reuses its producer id, and asks
//! Metadata for its topics by name and by id; then malformed SASL exchanges, each
//! followed by a liveness check, SCRAM user enumeration by salt, SASL guessing, and
//! revocation on an open connection.
//!
//! A refusal must be explicit: an authorization error code in the answer (a closed
//! connection for the SASL attacks); a timeout or an I/O error is a breakout, and so
//! is any canary or victim name in any answer.

use std::fmt::Debug;

use es_tests::kafka_wire::{KafkaConn, records, split_key};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use rand::Rng;
use rand::rngs::StdRng;

use super::{Ledger, Tenant};

const TOPIC_DENIED: i16 = 29;
const GROUP_DENIED: i16 = 30;
const UNKNOWN_TOPIC_ID: i16 = 100;
const UNKNOWN_PRODUCER_ID: i16 = 59;

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_owned())
}

fn topic(name: &str) -> TopicName {
    TopicName(s(name))
}

fn group(name: &str) -> GroupId {
    GroupId(s(name))
}

/// Every `error_code: N` in a response's Debug text.
fn codes(text: &str) -> Vec<i16> {
    text.split("error_code: ")
        .skip(1)
        .filter_map(|rest| {
            let end = rest.find(|c: char| c != '-' && !c.is_ascii_digit()).unwrap_or(rest.len());
            rest[..end].parse().ok()
        })
        .collect()
}

impl Ledger {
    /// A Kafka attack: the answer holds one of `expect` and nothing of `secrets`.
    pub fn kafka<T: Debug>(
        &mut self,
        kind: &'static str,
        what: &str,
        r: std::io::Result<T>,
        expect: &[i16],
        secrets: &[String],
    ) {
        *self.attacks.entry(kind).or_default() += 1;
        let text = match r {
            Ok(answer) => format!("{answer:?}"),
            Err(e) => return self.breakouts.push(format!("{kind}: {what}: no answer ({e})")),
        };
        if !codes(&text).iter().any(|c| expect.contains(c)) {
            self.breakouts.push(format!("{kind}: {what}: not refused: {text:.600}"));
        }
        if let Some(leak) = secrets.iter().find(|c| text.contains(c.as_str())) {
            self.breakouts.push(format!("{kind}: {what}: leaked {leak}"));
        }
    }
}

pub fn login(addr: &str, t: &Tenant) -> KafkaConn {
    KafkaConn::login(addr, &t.key).expect("a tenant logs in over SASL PLAIN")
}

fn fetch(name: &str, offset: i64) -> FetchRequest {
    let partition = fetch_request::FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(offset)
        .with_partition_max_bytes(1 << 20)
        .with_current_leader_epoch(-1)
        .with_log_start_offset(-1);
    let t = fetch_request::FetchTopic::default().with_topic(topic(name)).with_partitions(vec![partition]);
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(0)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![t])
}

fn produce(name: &str, batch: bytes::Bytes) -> ProduceRequest {
    let p = produce_request::PartitionProduceData::default().with_index(0).with_records(Some(batch));
    let t = produce_request::TopicProduceData::default().with_name(topic(name)).with_partition_data(vec![p]);
    ProduceRequest::default().with_acks(-1).with_timeout_ms(5_000).with_topic_data(vec![t])
}

fn list_offsets(name: &str, timestamp: i64) -> ListOffsetsRequest {
    let p = list_offsets_request::ListOffsetsPartition::default()
        .with_partition_index(0)
        .with_current_leader_epoch(-1)
        .with_timestamp(timestamp);
    let t = list_offsets_request::ListOffsetsTopic::default().with_name(topic(name)).with_partitions(vec![p]);
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_topics(vec![t])
}

fn metadata(names: &[&str]) -> MetadataRequest {
    let topics = names
        .iter()
        .map(|n| metadata_request::MetadataRequestTopic::default().with_name(Some(topic(n))))
        .collect();
    MetadataRequest::default().with_topics(Some(topics))
}

/// Attacks on the victim's topics.
pub fn topics(c: &mut KafkaConn, a: &Tenant, v: &Tenant, ledger: &mut Ledger) {
    let secrets = &v.canaries;
    for t in &v.topics {
        for offset in [-2, -1, 0, i64::MAX] {
            ledger.kafka("kafka read/seek", t, c.call(12, &fetch(t, offset)), &[TOPIC_DENIED], secrets);
        }
        let write = produce(t, records("kafka attack"));
        ledger.kafka("kafka write", t, c.call(8, &write), &[TOPIC_DENIED], secrets);
        for ts in [-2, -1, 0, i64::MAX] {
            ledger.kafka("kafka offsets", t, c.call(7, &list_offsets(t, ts)), &[TOPIC_DENIED], secrets);
        }
        ledger.kafka("kafka metadata", t, c.call(9, &metadata(&[t])), &[TOPIC_DENIED], secrets);
        let res = describe_configs_request::DescribeConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(t));
        let describe = DescribeConfigsRequest::default().with_resources(vec![res]);
        ledger.kafka("kafka describe configs", t, c.call(4, &describe), &[TOPIC_DENIED], secrets);
        let alter = incremental_alter_configs_request::AlterConfigsResource::default()
            .with_resource_type(2)
            .with_resource_name(s(t))
            .with_configs(vec![
                incremental_alter_configs_request::AlterableConfig::default()
                    .with_name(s("retention.ms"))
                    .with_config_operation(0)
                    .with_value(Some(s("1"))),
            ]);
        let alter = IncrementalAlterConfigsRequest::default().with_resources(vec![alter]);
        ledger.kafka("kafka alter configs", t, c.call(1, &alter), &[TOPIC_DENIED], secrets);
        let grow =
            create_partitions_request::CreatePartitionsTopic::default().with_name(topic(t)).with_count(4);
        let grow = CreatePartitionsRequest::default().with_topics(vec![grow]).with_timeout_ms(5_000);
        ledger.kafka("kafka alter partitions", t, c.call(2, &grow), &[TOPIC_DENIED], secrets);
        let delete = DeleteTopicsRequest::default().with_topic_names(vec![topic(t)]).with_timeout_ms(5_000);
        ledger.kafka("kafka delete", t, c.call(4, &delete), &[TOPIC_DENIED], secrets);
    }
    let squat = format!("{}new", v.prefix);
    let create = create_topics_request::CreatableTopic::default()
        .with_name(topic(&squat))
        .with_num_partitions(1)
        .with_replication_factor(1);
    let create = CreateTopicsRequest::default().with_topics(vec![create]).with_timeout_ms(5_000);
    ledger.kafka("kafka create", &squat, c.call(5, &create), &[TOPIC_DENIED], secrets);
    // A topic that does not exist answers exactly as the victim's do.
    let ghost = format!("{}ghost", v.prefix);
    ledger.kafka("kafka metadata", &ghost, c.call(9, &metadata(&[&ghost])), &[TOPIC_DENIED], secrets);
    // Metadata of everything lists none of the victim's topics.
    let all = c.call(9, &MetadataRequest::default().with_topics(None));
    *ledger.attacks.entry("kafka metadata listing").or_default() += 1;
    match all {
        Ok(md) => {
            let text = format!("{md:?}");
            if let Some(name) = v.topics.iter().find(|n| text.contains(n.as_str())) {
                ledger.breakouts.push(format!("kafka metadata listing: {} sees {name}", a.prefix));
            }
        }
        Err(e) => ledger.breakouts.push(format!("kafka metadata listing: no answer ({e})")),
    }
}

/// Metadata by topic id (v12): a victim's id answers as an unknown id, without its name.
pub fn topic_ids(c: &mut KafkaConn, v: &Tenant, ids: &[uuid::Uuid], ledger: &mut Ledger) {
    for id in ids {
        let t = metadata_request::MetadataRequestTopic::default().with_topic_id(*id).with_name(None);
        let req = MetadataRequest::default().with_topics(Some(vec![t]));
        let mut secrets = v.canaries.clone();
        secrets.extend(v.topics.iter().cloned());
        ledger.kafka(
            "kafka metadata by id",
            &id.to_string(),
            c.call(12, &req),
            &[UNKNOWN_TOPIC_ID],
            &secrets,
        );
    }
}

/// Attacks on the victim's group, and side doors through the attacker's own.
pub fn groups(c: &mut KafkaConn, a: &Tenant, v: &Tenant, ledger: &mut Ledger) {
    let g = &v.group;
    let secrets = &v.canaries;
    let protocol = join_group_request::JoinGroupRequestProtocol::default()
        .with_name(s("range"))
        .with_metadata(bytes::Bytes::from_static(b"\0\0\0\0\0\0\0\0\0\0"));
    let join = JoinGroupRequest::default()
        .with_group_id(group(g))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_member_id(s("attacker"))
        .with_protocol_type(s("consumer"))
        .with_protocols(vec![protocol]);
    ledger.kafka("kafka group join", g, c.call(5, &join), &[GROUP_DENIED], secrets);
    let sync =
        SyncGroupRequest::default().with_group_id(group(g)).with_generation_id(1).with_member_id(s("m"));
    ledger.kafka("kafka group sync", g, c.call(3, &sync), &[GROUP_DENIED], secrets);
    let beat =
        HeartbeatRequest::default().with_group_id(group(g)).with_generation_id(1).with_member_id(s("m"));
    ledger.kafka("kafka group heartbeat", g, c.call(3, &beat), &[GROUP_DENIED], secrets);
    let member = leave_group_request::MemberIdentity::default().with_member_id(s("m"));
    let leave = LeaveGroupRequest::default().with_group_id(group(g)).with_members(vec![member]);
    ledger.kafka("kafka group leave", g, c.call(3, &leave), &[GROUP_DENIED], secrets);
    let commit = |group_id: &str, t: &str| {
        let p = offset_commit_request::OffsetCommitRequestPartition::default()
            .with_partition_index(0)
            .with_committed_offset(0);
        let t = offset_commit_request::OffsetCommitRequestTopic::default()
            .with_name(topic(t))
            .with_partitions(vec![p]);
        OffsetCommitRequest::default()
            .with_group_id(group(group_id))
            .with_generation_id_or_member_epoch(-1)
            .with_topics(vec![t])
    };
    ledger.kafka("kafka group commit", g, c.call(8, &commit(g, &a.topics[0])), &[GROUP_DENIED], secrets);
    // The attacker's own Kafka group (its first commit claims it) naming the victim's topic.
    let own = format!("{}kafka-g", a.prefix);
    let side = commit(&own, &v.topics[0]);
    ledger.kafka("kafka group side door", &own, c.call(8, &side), &[TOPIC_DENIED], secrets);
    let fetch_offsets = |group_id: &str, topics: Option<&str>| {
        let topics = topics.map(|t| {
            vec![
                offset_fetch_request::OffsetFetchRequestTopics::default()
                    .with_name(topic(t))
                    .with_partition_indexes(vec![0]),
            ]
        });
        let one = offset_fetch_request::OffsetFetchRequestGroup::default()
            .with_group_id(group(group_id))
            .with_topics(topics);
        OffsetFetchRequest::default().with_groups(vec![one])
    };
    ledger.kafka("kafka group offsets", g, c.call(8, &fetch_offsets(g, None)), &[GROUP_DENIED], secrets);
    let side = fetch_offsets(&own, Some(&v.topics[0]));
    ledger.kafka("kafka group side door", &own, c.call(8, &side), &[TOPIC_DENIED], secrets);
    let side = fetch_offsets(&a.group, Some(&v.topics[0]));
    ledger.kafka("kafka group side door", &a.group, c.call(8, &side), &[TOPIC_DENIED], secrets);
    let describe = DescribeGroupsRequest::default().with_groups(vec![group(g)]);
    ledger.kafka("kafka group describe", g, c.call(5, &describe), &[GROUP_DENIED], secrets);
    let p = offset_delete_request::OffsetDeleteRequestPartition::default().with_partition_index(0);
    let t = offset_delete_request::OffsetDeleteRequestTopic::default()
        .with_name(topic(&v.topics[0]))
        .with_partitions(vec![p]);
    let offset_delete = OffsetDeleteRequest::default().with_group_id(group(g)).with_topics(vec![t]);
    ledger.kafka("kafka group offset delete", g, c.call(0, &offset_delete), &[GROUP_DENIED], secrets);
    let delete = DeleteGroupsRequest::default().with_groups_names(vec![group(g)]);
    ledger.kafka("kafka group delete", g, c.call(2, &delete), &[GROUP_DENIED], secrets);
    *ledger.attacks.entry("kafka group listing").or_default() += 1;
    match c.call(4, &ListGroupsRequest::default()) {
        Ok(listed) if listed.groups.iter().any(|l| l.group_id.0.as_str() == g.as_str()) => {
            ledger.breakouts.push(format!("kafka group listing: {} sees {g}", a.prefix))
        }
        Ok(_) => {}
        Err(e) => ledger.breakouts.push(format!("kafka group listing: no answer ({e})")),
    }
}

/// An idempotent batch with the victim's producer id, to the attacker's own topic.
pub fn producer_id(c: &mut KafkaConn, a: &Tenant, pid: i64, epoch: i16, ledger: &mut Ledger) {
    let theirs = es_core::ProducerInfo { producer_id: pid, producer_epoch: epoch, base_sequence: 0 };
    let record = es_core::Record::from_value("reuse".to_owned());
    let batch = bytes::Bytes::from(es_core::batch::encode(&[record], 1_000, theirs).unwrap());
    let own = &a.topics[0];
    ledger.kafka(
        "kafka producer id reuse",
        own,
        c.call(8, &produce(own, batch)),
        &[UNKNOWN_PRODUCER_ID],
        &[],
    );
}

/// Malformed SASL exchanges on fresh connections, each followed by a liveness check.
pub fn malformed_sasl(addr: &str, live: &mut KafkaConn, rng: &mut StdRng, ledger: &mut Ledger) {
    let junk: Vec<u8> = (0..rng.random_range(1..200)).map(|_| rng.random()).collect();
    let huge = vec![b'a'; 5_000];
    let exchanges: Vec<(&str, Vec<u8>)> = vec![
        ("PLAIN", junk.clone()),
        ("PLAIN", b"\0\0".to_vec()),
        ("PLAIN", huge.clone()),
        ("SCRAM-SHA-256", junk),
        ("SCRAM-SHA-256", b"p=tls-unique,,n=x,r=abc".to_vec()),
        ("SCRAM-SHA-512", huge),
    ];
    for (mechanism, token) in exchanges {
        let verdict = (|| {
            let mut c = KafkaConn::connect(addr)?;
            c.handshake(mechanism)?;
            let code = c.authenticate(&token)?.error_code;
            Ok::<_, std::io::Error>(code != 0 && c.closed_by_broker())
        })();
        note(ledger, "kafka malformed sasl", mechanism, verdict);
        alive(live, ledger);
    }
    // Unknown mechanisms, pre-auth requests, oversized and garbage frames.
    let raw: Vec<Vec<u8>> =
        vec![(1u32 << 20).to_be_bytes().to_vec(), vec![0xff, 0xff, 0xff, 0xff], vec![0, 0, 0, 3, 0, 17, 0]];
    for bytes in raw {
        let verdict = (|| {
            let mut c = KafkaConn::connect(addr)?;
            c.send_raw(&bytes)?;
            Ok::<_, std::io::Error>(c.closed_by_broker())
        })();
        note(ledger, "kafka malformed frame", "raw", verdict);
        alive(live, ledger);
    }
    let verdict = (|| {
        let mut c = KafkaConn::connect(addr)?;
        let refused = c.handshake("GSSAPI")?.error_code == 33;
        Ok::<_, std::io::Error>(refused && c.closed_by_broker())
    })();
    note(ledger, "kafka malformed sasl", "GSSAPI", verdict);
    let verdict = (|| {
        let mut c = KafkaConn::connect(addr)?;
        Ok::<_, std::io::Error>(c.call(1, &MetadataRequest::default()).is_err())
    })();
    note(ledger, "kafka pre-auth request", "Metadata", verdict);
    alive(live, ledger);
}

fn note(ledger: &mut Ledger, kind: &'static str, what: &str, verdict: std::io::Result<bool>) {
    *ledger.attacks.entry(kind).or_default() += 1;
    match verdict {
        Ok(true) => {}
        Ok(false) => ledger.breakouts.push(format!("{kind}: {what}: not refused and closed")),
        Err(e) => ledger.breakouts.push(format!("{kind}: {what}: {e}")),
    }
}

fn alive(live: &mut KafkaConn, ledger: &mut Ledger) {
    if live.call(1, &MetadataRequest::default()).is_err() {
        ledger
            .breakouts
            .push("kafka liveness: the broker stopped answering after a malformed exchange".into());
    }
}

/// The SCRAM server-first message for `user`: (salt, iterations).
fn server_first(addr: &str, mechanism: &str, user: &str) -> std::io::Result<(String, String)> {
    let mut c = KafkaConn::connect(addr)?;
    c.handshake(mechanism)?;
    let first = c.authenticate(format!("n,,n={user},r=harnessnonce").as_bytes())?;
    let text = String::from_utf8_lossy(&first.auth_bytes).into_owned();
    let attr = |name: &str| text.split(',').find_map(|a| a.strip_prefix(name)).unwrap_or_default().to_owned();
    Ok((attr("s="), attr("i=")))
}

/// SCRAM user enumeration: an unknown user's salt is stable and shaped like a real one's.
pub fn scram_enumeration(addr: &str, t: &Tenant, ledger: &mut Ledger) {
    for mechanism in ["SCRAM-SHA-256", "SCRAM-SHA-512"] {
        *ledger.attacks.entry("kafka scram enumeration").or_default() += 1;
        let real = server_first(addr, mechanism, split_key(&t.key).0);
        let ghost = server_first(addr, mechanism, "00000000deadbeef");
        let again = server_first(addr, mechanism, "00000000deadbeef");
        match (real, ghost, again) {
            (Ok(real), Ok(ghost), Ok(again)) => {
                let shaped = real.0.len() == ghost.0.len() && real.1 == ghost.1 && !ghost.0.is_empty();
                if ghost != again || !shaped {
                    ledger
                        .breakouts
                        .push(format!("kafka scram enumeration: {real:?} vs {ghost:?} / {again:?}"));
                }
            }
            other => ledger.breakouts.push(format!("kafka scram enumeration: no answer: {other:?}")),
        }
    }
}

/// Wrong PLAIN secrets for a real key id from one address: refused, and then the
/// tenant still logs in.
pub fn sasl_guessing(addr: &str, t: &Tenant, ledger: &mut Ledger) {
    let (id, _) = split_key(&t.key);
    for i in 0..5u64 {
        let verdict = (|| {
            let mut c = KafkaConn::connect(addr)?;
            let code = c.plain_login(id, &format!("{i:043}"))?;
            Ok::<_, std::io::Error>(code == 58 && c.closed_by_broker())
        })();
        note(ledger, "kafka sasl brute force", id, verdict);
    }
    if KafkaConn::login(addr, &t.key).is_err() {
        ledger.breakouts.push("kafka: a valid key was locked out by others' failed guesses".into());
    }
}

/// Refused on the next request of an already open connection after revocation.
pub fn revoked_write(c: &mut KafkaConn, t: &Tenant, ledger: &mut Ledger) {
    let own = &t.topics[0];
    let write = produce(own, records("after revoke"));
    let started = std::time::Instant::now();
    ledger.kafka("revoke then write", own, c.call(8, &write), &[TOPIC_DENIED], &[]);
    if started.elapsed() > std::time::Duration::from_secs(1) {
        ledger.breakouts.push("revoke then write: the refusal took over a second".into());
    }
}
