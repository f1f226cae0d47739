//! Requests and responses of the binary protocol and their body encodings.
//! Every response body starts with an error code (u16); a non-zero code is followed
//! by a message string and nothing else.

use bytes::{BufMut, Bytes};

use crate::codes::ErrorCode;
use crate::frame::{FLAG_RESPONSE, Frame, FrameHeader, encode_frame};
use crate::groups::{GroupRequest, GroupResponse};
use crate::wire::{Reader, WireError, Writer};

/// The protocol version this codec speaks (negotiated by `Hello`). Version 3: the
/// produce answer lists each record a validator warned about or dead-lettered.
/// Version 2 made batches Kafka v2 RecordBatches (version 1 carried es's magic-1 layout).
pub const PROTOCOL_VERSION: u16 = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Op {
    Hello = 0,
    Produce = 1,
    Fetch = 2,
    ListOffsets = 3,
    CreateTopic = 4,
    ListTopics = 5,
    DescribeTopic = 6,
    DeleteTopic = 7,
    InitProducerId = 8,
    JoinGroup = 9,
    SyncGroup = 10,
    Heartbeat = 11,
    LeaveGroup = 12,
    OffsetCommit = 13,
    OffsetFetch = 14,
    /// After `Hello`: log in with an API key (needed when the broker has auth on).
    Authenticate = 15,
}

impl Op {
    pub fn from_u8(op: u8) -> Result<Op, WireError> {
        use Op::*;
        [
            Hello,
            Produce,
            Fetch,
            ListOffsets,
            CreateTopic,
            ListTopics,
            DescribeTopic,
            DeleteTopic,
            InitProducerId,
            JoinGroup,
            SyncGroup,
            Heartbeat,
            LeaveGroup,
            OffsetCommit,
            OffsetFetch,
            Authenticate,
        ]
        .get(usize::from(op))
        .copied()
        .ok_or(WireError::UnknownOp { op })
    }
}

/// Where `ListOffsets` looks. On the wire: -2 earliest, -1 latest, else a timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetSpec {
    Earliest,
    Latest,
    Timestamp(i64),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPartition {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
    pub max_bytes: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Hello {
        version_min: u16,
        version_max: u16,
        client: String,
    },
    /// `batch` is one Kafka v2 RecordBatch (see es-core), optionally compressed; the
    /// broker assigns its offsets and leader epoch.
    Produce {
        topic: String,
        partition: u32,
        batch: Bytes,
    },
    Fetch {
        max_wait_ms: u32,
        min_bytes: u32,
        max_bytes: u32,
        partitions: Vec<FetchPartition>,
    },
    ListOffsets {
        topic: String,
        partition: u32,
        spec: OffsetSpec,
    },
    CreateTopic {
        name: String,
        partitions: u32,
        configs: Vec<(String, String)>,
    },
    ListTopics,
    DescribeTopic {
        name: String,
    },
    DeleteTopic {
        name: String,
    },
    InitProducerId,
    /// Consumer-group ops (9 to 14).
    Group(GroupRequest),
    /// The whole API key text, `es_<id>_<secret>`.
    Authenticate {
        key: Credential,
    },
}

/// A secret on the wire: its `Debug` never prints it.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential(pub String);

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Credential(..)")
    }
}

/// What a validator said of one record of a produced batch that was still written:
/// a warning, or where the record was dead-lettered instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProduceFinding {
    /// The record's position in the batch.
    pub index: u32,
    pub plugin: String,
    /// The plugin's stable code, e.g. `value-too-large`.
    pub code: String,
    pub reason: String,
    /// Set when the record went to a dead-letter topic instead of the partition.
    pub dead_letter: Option<DeadLetterPlace>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeadLetterPlace {
    pub topic: String,
    pub partition: u32,
    pub offset: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchResult {
    pub error: ErrorCode,
    pub high_watermark: u64,
    pub log_start_offset: u64,
    /// Whole batches, as stored.
    pub data: Bytes,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedTopic {
    pub name: String,
    pub partitions: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDescription {
    pub partition: u32,
    pub log_start_offset: u64,
    pub high_watermark: u64,
    pub size_bytes: u64,
    pub segments: u32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    pub name: String,
    pub configs: Vec<(String, String)>,
    pub partitions: Vec<PartitionDescription>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    Error {
        code: ErrorCode,
        message: String,
    },
    Hello {
        version: u16,
        frame_bytes_max: u32,
        in_flight_max: u32,
        server: String,
    },
    /// `base_offset..=last_offset` hold the records kept on the partition, in batch
    /// order; a dead-lettered record is not among them (see `findings`).
    Produce {
        base_offset: u64,
        last_offset: u64,
        duplicate: bool,
        findings: Vec<ProduceFinding>,
    },
    Fetch {
        partitions: Vec<FetchResult>,
    },
    /// `None` when no record is at or after the timestamp.
    ListOffsets {
        offset: Option<u64>,
    },
    CreateTopic,
    ListTopics {
        topics: Vec<ListedTopic>,
    },
    DescribeTopic(TopicDescription),
    DeleteTopic,
    InitProducerId {
        producer_id: i64,
        epoch: i16,
    },
    Group(GroupResponse),
    /// Logged in as this key id; every later request on the connection is its.
    Authenticate {
        key_id: String,
    },
}

impl Request {
    pub fn op(&self) -> Op {
        match self {
            Request::Hello { .. } => Op::Hello,
            Request::Produce { .. } => Op::Produce,
            Request::Fetch { .. } => Op::Fetch,
            Request::ListOffsets { .. } => Op::ListOffsets,
            Request::CreateTopic { .. } => Op::CreateTopic,
            Request::ListTopics => Op::ListTopics,
            Request::DescribeTopic { .. } => Op::DescribeTopic,
            Request::DeleteTopic { .. } => Op::DeleteTopic,
            Request::InitProducerId => Op::InitProducerId,
            Request::Group(g) => g.op(),
            Request::Authenticate { .. } => Op::Authenticate,
        }
    }

    /// Appends this request as one frame.
    pub fn encode(&self, request_id: u32, out: &mut Vec<u8>) {
        let header = FrameHeader { request_id, op: self.op() as u8, flags: 0 };
        encode_frame(out, header, |b| self.encode_body(b));
    }

    fn encode_body(&self, b: &mut Vec<u8>) {
        match self {
            Request::Hello { version_min, version_max, client } => {
                b.put_u16(*version_min);
                b.put_u16(*version_max);
                b.string(client);
            }
            Request::Produce { topic, partition, batch } => {
                b.string(topic);
                b.put_u32(*partition);
                b.bytes(batch);
            }
            Request::Fetch { max_wait_ms, min_bytes, max_bytes, partitions } => {
                b.put_u32(*max_wait_ms);
                b.put_u32(*min_bytes);
                b.put_u32(*max_bytes);
                b.put_u32(partitions.len() as u32);
                for p in partitions {
                    b.string(&p.topic);
                    b.put_u32(p.partition);
                    b.put_u64(p.offset);
                    b.put_u32(p.max_bytes);
                }
            }
            Request::ListOffsets { topic, partition, spec } => {
                b.string(topic);
                b.put_u32(*partition);
                b.put_i64(match spec {
                    OffsetSpec::Earliest => -2,
                    OffsetSpec::Latest => -1,
                    OffsetSpec::Timestamp(t) => *t,
                });
            }
            Request::CreateTopic { name, partitions, configs } => {
                b.string(name);
                b.put_u32(*partitions);
                put_pairs(b, configs);
            }
            Request::ListTopics | Request::InitProducerId => {}
            Request::DescribeTopic { name } | Request::DeleteTopic { name } => b.string(name),
            Request::Group(g) => g.encode(b),
            Request::Authenticate { key } => b.string(&key.0),
        }
    }

    /// Decodes a request frame. The whole body must be consumed.
    pub fn decode(frame: &Frame) -> Result<Request, WireError> {
        if frame.header.flags & FLAG_RESPONSE != 0 {
            return Err(WireError::Invalid {
                position: 0,
                field: "flags",
                reason: "a response where a request was expected",
            });
        }
        let mut r = Reader::new(frame.body.clone());
        let req = match Op::from_u8(frame.header.op)? {
            Op::Hello => Request::Hello {
                version_min: r.u16("version_min")?,
                version_max: r.u16("version_max")?,
                client: r.string("client")?,
            },
            Op::Produce => Request::Produce {
                topic: r.string("topic")?,
                partition: r.u32("partition")?,
                batch: r.bytes("batch")?,
            },
            Op::Fetch => decode_fetch(&mut r)?,
            Op::ListOffsets => {
                let topic = r.string("topic")?;
                let partition = r.u32("partition")?;
                let spec = match r.i64("spec")? {
                    -2 => OffsetSpec::Earliest,
                    -1 => OffsetSpec::Latest,
                    t if t >= 0 => OffsetSpec::Timestamp(t),
                    _ => {
                        return Err(WireError::Invalid {
                            position: 0,
                            field: "spec",
                            reason: "must be -2, -1 or a timestamp",
                        });
                    }
                };
                Request::ListOffsets { topic, partition, spec }
            }
            Op::CreateTopic => Request::CreateTopic {
                name: r.string("name")?,
                partitions: r.u32("partitions")?,
                configs: get_pairs(&mut r)?,
            },
            Op::ListTopics => Request::ListTopics,
            Op::DescribeTopic => Request::DescribeTopic { name: r.string("name")? },
            Op::DeleteTopic => Request::DeleteTopic { name: r.string("name")? },
            Op::InitProducerId => Request::InitProducerId,
            Op::Authenticate => Request::Authenticate { key: Credential(r.string("key")?) },
            op => Request::Group(GroupRequest::decode(op, &mut r)?),
        };
        r.finish()?;
        Ok(req)
    }
}

fn decode_fetch(r: &mut Reader) -> Result<Request, WireError> {
    let max_wait_ms = r.u32("max_wait_ms")?;
    let min_bytes = r.u32("min_bytes")?;
    let max_bytes = r.u32("max_bytes")?;
    let n = r.count("partitions", 2 + 4 + 8 + 4)?;
    let mut partitions = Vec::with_capacity(n);
    for _ in 0..n {
        partitions.push(FetchPartition {
            topic: r.string("topic")?,
            partition: r.u32("partition")?,
            offset: r.u64("offset")?,
            max_bytes: r.u32("max_bytes")?,
        });
    }
    Ok(Request::Fetch { max_wait_ms, min_bytes, max_bytes, partitions })
}

fn put_pairs(b: &mut Vec<u8>, pairs: &[(String, String)]) {
    b.put_u32(pairs.len() as u32);
    for (k, v) in pairs {
        b.string(k);
        b.string(v);
    }
}

fn get_pairs(r: &mut Reader) -> Result<Vec<(String, String)>, WireError> {
    let n = r.count("configs", 4)?;
    (0..n).map(|_| Ok((r.string("config key")?, r.string("config value")?))).collect()
}

impl Response {
    /// Appends this response to the request `op` with `request_id` as one frame.
    pub fn encode(&self, request_id: u32, op: Op, out: &mut Vec<u8>) {
        let header = FrameHeader { request_id, op: op as u8, flags: FLAG_RESPONSE };
        encode_frame(out, header, |b| self.encode_body(b));
    }

    fn encode_body(&self, b: &mut Vec<u8>) {
        if let Response::Error { code, message } = self {
            b.put_u16(*code as u16);
            b.string(message);
            return;
        }
        b.put_u16(ErrorCode::None as u16);
        match self {
            Response::Error { .. } => unreachable!("handled above"),
            Response::Hello { version, frame_bytes_max, in_flight_max, server } => {
                b.put_u16(*version);
                b.put_u32(*frame_bytes_max);
                b.put_u32(*in_flight_max);
                b.string(server);
            }
            Response::Produce { base_offset, last_offset, duplicate, findings } => {
                b.put_u64(*base_offset);
                b.put_u64(*last_offset);
                b.put_u8(u8::from(*duplicate));
                b.put_u32(findings.len() as u32);
                for f in findings {
                    encode_finding(b, f);
                }
            }
            Response::Fetch { partitions } => {
                b.put_u32(partitions.len() as u32);
                for p in partitions {
                    b.put_u16(p.error as u16);
                    b.put_u64(p.high_watermark);
                    b.put_u64(p.log_start_offset);
                    b.bytes(&p.data);
                }
            }
            Response::ListOffsets { offset } => b.put_i64(offset.map_or(-1, |o| o as i64)),
            Response::CreateTopic | Response::DeleteTopic => {}
            Response::ListTopics { topics } => {
                b.put_u32(topics.len() as u32);
                for t in topics {
                    b.string(&t.name);
                    b.put_u32(t.partitions);
                }
            }
            Response::DescribeTopic(d) => encode_description(b, d),
            Response::InitProducerId { producer_id, epoch } => {
                b.put_i64(*producer_id);
                b.put_i16(*epoch);
            }
            Response::Group(g) => g.encode(b),
            Response::Authenticate { key_id } => b.string(key_id),
        }
    }

    /// Decodes a response frame for a request of kind `op`.
    pub fn decode(frame: &Frame) -> Result<Response, WireError> {
        if frame.header.flags & FLAG_RESPONSE == 0 {
            return Err(WireError::Invalid {
                position: 0,
                field: "flags",
                reason: "a request where a response was expected",
            });
        }
        let op = Op::from_u8(frame.header.op)?;
        let mut r = Reader::new(frame.body.clone());
        let code = r.u16("error_code")?;
        let code = ErrorCode::from_u16(code).ok_or(WireError::Invalid {
            position: 0,
            field: "error_code",
            reason: "unknown code",
        })?;
        let resp = if code != ErrorCode::None {
            Response::Error { code, message: r.string("message")? }
        } else {
            decode_ok(op, &mut r)?
        };
        r.finish()?;
        Ok(resp)
    }
}

/// index u32, three strings, the dead-letter flag.
const FINDING_BYTES_MIN: usize = 4 + 3 * 2 + 1;

fn encode_finding(b: &mut Vec<u8>, f: &ProduceFinding) {
    b.put_u32(f.index);
    b.string(&f.plugin);
    b.string(&f.code);
    b.string(&f.reason);
    match &f.dead_letter {
        None => b.put_u8(0),
        Some(d) => {
            b.put_u8(1);
            b.string(&d.topic);
            b.put_u32(d.partition);
            b.put_u64(d.offset);
        }
    }
}

fn decode_finding(r: &mut Reader) -> Result<ProduceFinding, WireError> {
    Ok(ProduceFinding {
        index: r.u32("index")?,
        plugin: r.string("plugin")?,
        code: r.string("code")?,
        reason: r.string("reason")?,
        dead_letter: if r.bool("dead_lettered")? {
            Some(DeadLetterPlace {
                topic: r.string("dead_letter_topic")?,
                partition: r.u32("dead_letter_partition")?,
                offset: r.u64("dead_letter_offset")?,
            })
        } else {
            None
        },
    })
}

fn decode_ok(op: Op, r: &mut Reader) -> Result<Response, WireError> {
    Ok(match op {
        Op::Hello => Response::Hello {
            version: r.u16("version")?,
            frame_bytes_max: r.u32("frame_bytes_max")?,
            in_flight_max: r.u32("in_flight_max")?,
            server: r.string("server")?,
        },
        Op::Produce => Response::Produce {
            base_offset: r.u64("base_offset")?,
            last_offset: r.u64("last_offset")?,
            duplicate: r.bool("duplicate")?,
            findings: {
                let n = r.count("findings", FINDING_BYTES_MIN)?;
                (0..n).map(|_| decode_finding(r)).collect::<Result<_, _>>()?
            },
        },
        Op::Fetch => {
            let n = r.count("partitions", 2 + 8 + 8 + 4)?;
            let mut partitions = Vec::with_capacity(n);
            for _ in 0..n {
                let code = r.u16("error")?;
                partitions.push(FetchResult {
                    error: ErrorCode::from_u16(code).ok_or(WireError::Invalid {
                        position: 0,
                        field: "error",
                        reason: "unknown code",
                    })?,
                    high_watermark: r.u64("high_watermark")?,
                    log_start_offset: r.u64("log_start_offset")?,
                    data: r.bytes("data")?,
                });
            }
            Response::Fetch { partitions }
        }
        Op::ListOffsets => {
            let o = r.i64("offset")?;
            Response::ListOffsets { offset: (o >= 0).then_some(o as u64) }
        }
        Op::CreateTopic => Response::CreateTopic,
        Op::DeleteTopic => Response::DeleteTopic,
        Op::ListTopics => {
            let n = r.count("topics", 6)?;
            let topics = (0..n)
                .map(|_| Ok(ListedTopic { name: r.string("name")?, partitions: r.u32("partitions")? }))
                .collect::<Result<_, WireError>>()?;
            Response::ListTopics { topics }
        }
        Op::DescribeTopic => Response::DescribeTopic(decode_description(r)?),
        Op::InitProducerId => {
            Response::InitProducerId { producer_id: r.i64("producer_id")?, epoch: r.i16("epoch")? }
        }
        Op::Authenticate => Response::Authenticate { key_id: r.string("key_id")? },
        op => Response::Group(GroupResponse::decode(op, r)?),
    })
}

fn encode_description(b: &mut Vec<u8>, d: &TopicDescription) {
    b.string(&d.name);
    put_pairs(b, &d.configs);
    b.put_u32(d.partitions.len() as u32);
    for p in &d.partitions {
        b.put_u32(p.partition);
        b.put_u64(p.log_start_offset);
        b.put_u64(p.high_watermark);
        b.put_u64(p.size_bytes);
        b.put_u32(p.segments);
    }
}

fn decode_description(r: &mut Reader) -> Result<TopicDescription, WireError> {
    let name = r.string("name")?;
    let configs = get_pairs(r)?;
    let n = r.count("partitions", 32)?;
    let partitions = (0..n)
        .map(|_| {
            Ok(PartitionDescription {
                partition: r.u32("partition")?,
                log_start_offset: r.u64("log_start_offset")?,
                high_watermark: r.u64("high_watermark")?,
                size_bytes: r.u64("size_bytes")?,
                segments: r.u32("segments")?,
            })
        })
        .collect::<Result<_, WireError>>()?;
    Ok(TopicDescription { name, configs, partitions })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::decode_frame;
    use bytes::BytesMut;
    use proptest::prelude::*;

    fn frame_of(bytes: &[u8]) -> Frame {
        decode_frame(&mut BytesMut::from(bytes), usize::MAX).unwrap().unwrap()
    }

    fn requests() -> Vec<Request> {
        vec![
            Request::Hello { version_min: 1, version_max: 1, client: "test".into() },
            Request::Produce {
                topic: "orders".into(),
                partition: 3,
                batch: Bytes::from_static(b"batch-bytes"),
            },
            Request::Fetch {
                max_wait_ms: 500,
                min_bytes: 1,
                max_bytes: 4 << 20,
                partitions: vec![FetchPartition {
                    topic: "orders".into(),
                    partition: 0,
                    offset: 42,
                    max_bytes: 1 << 20,
                }],
            },
            Request::ListOffsets { topic: "t".into(), partition: 0, spec: OffsetSpec::Timestamp(1700) },
            Request::ListOffsets { topic: "t".into(), partition: 0, spec: OffsetSpec::Earliest },
            Request::CreateTopic {
                name: "t".into(),
                partitions: 4,
                configs: vec![("retention.ms".into(), "1000".into())],
            },
            Request::ListTopics,
            Request::DescribeTopic { name: "t".into() },
            Request::DeleteTopic { name: "t".into() },
            Request::InitProducerId,
            Request::Authenticate { key: Credential("es_0123456789abcdef_secret".into()) },
        ]
    }

    #[test]
    fn every_request_round_trips() {
        for (i, req) in requests().into_iter().enumerate() {
            let mut out = Vec::new();
            req.encode(i as u32, &mut out);
            let frame = frame_of(&out);
            assert_eq!(frame.header.request_id, i as u32);
            assert_eq!(Request::decode(&frame).unwrap(), req);
        }
    }

    #[test]
    fn every_response_round_trips() {
        let responses = vec![
            (
                Op::Hello,
                Response::Hello {
                    version: 1,
                    frame_bytes_max: 1 << 26,
                    in_flight_max: 256,
                    server: "es".into(),
                },
            ),
            (
                Op::Produce,
                Response::Produce { base_offset: 10, last_offset: 19, duplicate: true, findings: vec![] },
            ),
            (
                Op::Produce,
                Response::Produce {
                    base_offset: 10,
                    last_offset: 18,
                    duplicate: false,
                    findings: vec![
                        ProduceFinding {
                            index: 3,
                            plugin: "rules".into(),
                            code: "value-too-large".into(),
                            reason: "value is 20 bytes".into(),
                            dead_letter: Some(DeadLetterPlace {
                                topic: "dlq".into(),
                                partition: 2,
                                offset: 7,
                            }),
                        },
                        ProduceFinding {
                            index: 5,
                            plugin: "rules".into(),
                            code: "key-required".into(),
                            reason: "no key".into(),
                            dead_letter: None,
                        },
                    ],
                },
            ),
            (
                Op::Fetch,
                Response::Fetch {
                    partitions: vec![FetchResult {
                        error: ErrorCode::None,
                        high_watermark: 7,
                        log_start_offset: 0,
                        data: Bytes::from_static(b"xyz"),
                    }],
                },
            ),
            (Op::ListOffsets, Response::ListOffsets { offset: None }),
            (Op::ListOffsets, Response::ListOffsets { offset: Some(5) }),
            (Op::CreateTopic, Response::CreateTopic),
            (
                Op::ListTopics,
                Response::ListTopics { topics: vec![ListedTopic { name: "a".into(), partitions: 2 }] },
            ),
            (
                Op::DescribeTopic,
                Response::DescribeTopic(TopicDescription {
                    name: "a".into(),
                    configs: vec![("k".into(), "v".into())],
                    partitions: vec![PartitionDescription {
                        partition: 0,
                        log_start_offset: 1,
                        high_watermark: 2,
                        size_bytes: 3,
                        segments: 4,
                    }],
                }),
            ),
            (Op::DeleteTopic, Response::DeleteTopic),
            (Op::InitProducerId, Response::InitProducerId { producer_id: 77, epoch: 2 }),
            (Op::Authenticate, Response::Authenticate { key_id: "0123456789abcdef".into() }),
            (Op::Produce, Response::Error { code: ErrorCode::UnknownTopic, message: "no topic x".into() }),
        ];
        for (op, resp) in responses {
            let mut out = Vec::new();
            resp.encode(9, op, &mut out);
            assert_eq!(Response::decode(&frame_of(&out)).unwrap(), resp);
        }
    }

    #[test]
    fn golden_produce_request() {
        let mut out = Vec::new();
        Request::Produce { topic: "t".into(), partition: 1, batch: Bytes::from_static(b"B") }
            .encode(5, &mut out);
        assert_eq!(out, [0, 0, 0, 18, 0, 0, 0, 5, 1, 0, 0, 1, b't', 0, 0, 0, 1, 0, 0, 0, 1, b'B']);
    }

    #[test]
    fn bad_messages_are_typed_errors() {
        let mut out = Vec::new();
        Request::DescribeTopic { name: "t".into() }.encode(1, &mut out);
        out.push(0);
        out[3] += 1;
        assert_eq!(Request::decode(&frame_of(&out)), Err(WireError::TrailingBytes { extra: 1 }));
        let unknown = frame_of(&[0, 0, 0, 6, 0, 0, 0, 1, 0x7f, 0]);
        assert_eq!(Request::decode(&unknown), Err(WireError::UnknownOp { op: 0x7f }));
        // A count that claims more items than the body can hold is refused before allocating.
        let mut body = Vec::new();
        body.put_u32(0);
        body.put_u32(0);
        body.put_u32(0);
        body.put_u32(u32::MAX);
        let mut out = Vec::new();
        encode_frame(&mut out, FrameHeader { request_id: 1, op: Op::Fetch as u8, flags: 0 }, |b| {
            b.extend(body)
        });
        assert!(matches!(
            Request::decode(&frame_of(&out)),
            Err(WireError::Invalid { field: "partitions", .. })
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        /// The decoder never panics on arbitrary bytes, whatever the op.
        #[test]
        fn arbitrary_bodies_never_panic(op in 0u8..12, flags in 0u8..2, body in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut out = Vec::new();
            encode_frame(&mut out, FrameHeader { request_id: 1, op, flags }, |b| b.extend(&body));
            let frame = frame_of(&out);
            let _ = Request::decode(&frame);
            let _ = Response::decode(&frame);
        }

        /// Truncating a valid request anywhere yields an error, never a wrong request.
        #[test]
        fn truncated_requests_fail(pick in 0usize..10, cut in 0usize..64) {
            let req = &requests()[pick];
            let mut out = Vec::new();
            req.encode(1, &mut out);
            let body_len = out.len() - 10;
            prop_assume!(body_len > 0);
            let keep = cut % body_len;
            let mut short = out[..10 + keep].to_vec();
            let len = (short.len() - 4) as u32;
            short[..4].copy_from_slice(&len.to_be_bytes());
            prop_assert!(Request::decode(&frame_of(&short)).is_err());
        }
    }
}
