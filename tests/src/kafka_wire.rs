//! A minimal raw Kafka connection for tests that must send what no real client
//! sends (requests before SASL, malformed SASL frames, another key's groups):
//! typed requests framed with kafka-protocol, typed responses back, a SASL PLAIN
//! login, and raw bytes. Blocking, with a read timeout on every call.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::BytesMut;
use kafka_protocol::messages::{
    RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// How long one answer may take before the call fails (a timeout is never a refusal).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

pub struct KafkaConn {
    stream: TcpStream,
    correlation: i32,
}

fn protocol_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl KafkaConn {
    pub fn connect(addr: &str) -> io::Result<KafkaConn> {
        let stream = TcpStream::connect(addr)?;
        stream.set_read_timeout(Some(CALL_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(KafkaConn { stream, correlation: 0 })
    }

    /// Sends `req` at `version` and reads its typed response.
    pub fn call<R: Request>(&mut self, version: i16, req: &R) -> io::Result<R::Response> {
        self.correlation += 1;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_static_str("es-tests")));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version)).map_err(protocol_error)?;
        req.encode(&mut body, version).map_err(protocol_error)?;
        self.send_frame(&body)?;
        let mut frame = self.read_frame()?;
        let answer = ResponseHeader::decode(&mut frame, R::Response::header_version(version))
            .map_err(protocol_error)?;
        if answer.correlation_id != self.correlation {
            return Err(protocol_error(format!(
                "correlation id {} for {}",
                answer.correlation_id, self.correlation
            )));
        }
        R::Response::decode(&mut frame, version).map_err(protocol_error)
    }

    /// Writes `body` with its size prefix.
    pub fn send_frame(&mut self, body: &[u8]) -> io::Result<()> {
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(body);
        self.send_raw(&out)
    }

    pub fn send_raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes)
    }

    fn read_frame(&mut self) -> io::Result<BytesMut> {
        let mut prefix = [0u8; 4];
        self.stream.read_exact(&mut prefix)?;
        let mut body = vec![0u8; u32::from_be_bytes(prefix) as usize];
        self.stream.read_exact(&mut body)?;
        Ok(BytesMut::from(&body[..]))
    }

    /// True when the broker closes the connection (EOF or reset) within the call
    /// timeout; false when it answers or stays silent.
    pub fn closed_by_broker(&mut self) -> bool {
        let mut byte = [0u8; 1];
        match self.stream.read(&mut byte) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => matches!(e.kind(), io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe),
        }
    }

    /// SaslHandshake v1 for `mechanism`; its error code.
    pub fn handshake(&mut self, mechanism: &str) -> io::Result<SaslHandshakeResponse> {
        let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.to_owned()));
        self.call(1, &req)
    }

    /// One SaslAuthenticate v2 step.
    pub fn authenticate(&mut self, bytes: &[u8]) -> io::Result<SaslAuthenticateResponse> {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(bytes::Bytes::copy_from_slice(bytes));
        self.call(2, &req)
    }

    /// A SASL PLAIN login; the SaslAuthenticate error code (0 on success).
    pub fn plain_login(&mut self, user: &str, password: &str) -> io::Result<i16> {
        let shake = self.handshake("PLAIN")?;
        if shake.error_code != 0 {
            return Ok(shake.error_code);
        }
        Ok(self.authenticate(format!("\0{user}\0{password}").as_bytes())?.error_code)
    }

    /// Connects and logs in with an `es_<id>_<secret>` key over PLAIN.
    pub fn login(addr: &str, key: &str) -> io::Result<KafkaConn> {
        let mut conn = KafkaConn::connect(addr)?;
        let (id, secret) = split_key(key);
        match conn.plain_login(id, secret)? {
            0 => Ok(conn),
            code => Err(protocol_error(format!("PLAIN login failed with error {code}"))),
        }
    }
}

/// (key id, secret) of an `es_<id>_<secret>` key: the SASL user name and password.
pub fn split_key(key: &str) -> (&str, &str) {
    let rest = key.strip_prefix("es_").expect("an es key");
    let (id, secret) = rest.split_at(16);
    (id, &secret[1..])
}

/// A Produce request (acks=1) of one record holding `value` to `topic` partition 0.
pub fn produce_one(topic: &str, value: &str) -> kafka_protocol::messages::ProduceRequest {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    let partition = PartitionProduceData::default().with_index(0).with_records(Some(records(value)));
    let data = TopicProduceData::default()
        .with_name(kafka_protocol::messages::TopicName(topic.to_owned().into()))
        .with_partition_data(vec![partition]);
    kafka_protocol::messages::ProduceRequest::default()
        .with_acks(1)
        .with_timeout_ms(5000)
        .with_topic_data(vec![data])
}

/// [`produce_one`] at Produce v8 over `conn`: the partition's error code.
pub fn produce_code(conn: &mut KafkaConn, topic: &str, value: &str) -> i16 {
    let r = conn.call(8, &produce_one(topic, value)).expect("a Produce answer");
    r.responses[0].partition_responses[0].error_code
}

/// One record batch (Kafka's v2 format, as es stores it) holding `value`.
pub fn records(value: &str) -> bytes::Bytes {
    let record = es_core::Record::from_value(value.to_owned());
    bytes::Bytes::from(
        es_core::batch::encode(&[record], 1_000, es_core::ProducerInfo::NONE).expect("a batch"),
    )
}
