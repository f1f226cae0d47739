//! The listeners' caps and timeouts on the real broker: HTTP's header-read and idle
//! timeouts (a half-sent request is closed, a long poll is not cut) and its cap per
//! address; the Kafka and binary listeners' idle timeouts, auth timeouts (a
//! connection that never logs in is closed) and caps per address.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use es_tests::broker::Broker;
use es_tests::kafka_wire::KafkaConn;

const ADMIN: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// How long until the broker closes `s` (EOF or reset), reading and dropping what
/// it sends; `None` when it stays open past the read timeout.
fn closed_after(s: &mut TcpStream) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(started.elapsed()),
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::ConnectionReset) => {
                return Some(started.elapsed());
            }
            Err(_) => return None,
        }
    }
}

/// One whole HTTP/1.1 response (head and `content-length` body) from `s`.
fn read_response(s: &mut TcpStream) -> std::io::Result<String> {
    let (mut got, mut buf) = (Vec::new(), [0u8; 4096]);
    loop {
        let text = String::from_utf8_lossy(&got).into_owned();
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase().strip_prefix("content-length:").map(|v| v.trim().to_owned())
                })
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if got.len() >= end + 4 + length {
                return Ok(text);
            }
        }
        match s.read(&mut buf)? {
            0 => return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "closed mid-response")),
            n => got.extend_from_slice(&buf[..n]),
        }
    }
}

fn http_addr(b: &Broker) -> String {
    b.url.trim_start_matches("http://").to_owned()
}

#[test]
fn http_closes_half_sent_requests_and_idle_connections_but_not_long_polls() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--http-header-read-timeout-ms", "500", "--http-idle-timeout-ms", "1000"];
    let b = Broker::start_with(dir.path(), &flags);
    b.create_topic("t", 1);
    let addr = http_addr(&b);
    // Headers begun and never finished: closed after the header-read timeout.
    let mut half = connect(&addr);
    half.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\nx-slow: ").unwrap();
    let took = closed_after(&mut half).expect("a half-sent request stayed open");
    assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(5), "{took:?}");
    // Nothing sent at all: closed after the idle timeout.
    let mut silent = connect(&addr);
    let took = closed_after(&mut silent).expect("a silent connection stayed open");
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(6), "{took:?}");
    // A long poll longer than both timeouts is answered, and the connection then idles out.
    let mut poll = connect(&addr);
    let started = Instant::now();
    let req = "GET /topics/t/partitions/0/records?offset=earliest&wait_ms=2500 HTTP/1.1\r\nhost: x\r\n\r\n";
    poll.write_all(req.as_bytes()).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\r\n\r\n") {
        let n = poll.read(&mut buf).expect("the long poll was answered");
        assert!(n > 0, "the long poll was cut after {:?}", started.elapsed());
        got.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
    assert!(started.elapsed() >= Duration::from_secs(2), "the poll did not wait: {:?}", started.elapsed());
    assert!(closed_after(&mut poll).is_some(), "idle after its answer, the connection stayed open");
    // Kept alive and quiet for longer than the header-read timeout (less than the
    // idle one): its next request is answered, not found late at its first byte.
    let mut kept = connect(&addr);
    for round in 0..2 {
        kept.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
        let answer = read_response(&mut kept).unwrap_or_else(|e| panic!("request {round} kept alive: {e}"));
        assert!(answer.starts_with("HTTP/1.1 200"), "request {round}: {answer}");
        std::thread::sleep(Duration::from_millis(700));
    }
    assert_eq!(b.get("/healthz").status, 200, "the broker still serves");
}

#[test]
fn every_listener_caps_connections_per_address() {
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--http-max-connections-per-address",
        "2",
        "--binary-max-connections-per-address",
        "2",
        "--kafka-max-connections-per-address",
        "2",
    ];
    let b = Broker::start_with(dir.path(), &flags);
    for addr in [http_addr(&b), b.binary_addr.clone(), b.kafka_addr.clone()] {
        let open: Vec<TcpStream> = (0..2).map(|_| connect(&addr)).collect();
        // Accepted in order: the third is refused once the first two are counted.
        std::thread::sleep(Duration::from_millis(200));
        let mut third = connect(&addr);
        assert!(closed_after(&mut third).is_some(), "{addr}: a third connection from one address was kept");
        drop(open);
        let deadline = Instant::now() + Duration::from_secs(10);
        // Closed connections give their places back: a new one is served.
        loop {
            let mut again = connect(&addr);
            again.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
            if closed_after(&mut again).is_none() {
                break;
            }
            assert!(Instant::now() < deadline, "{addr}: closed connections never gave their places back");
        }
    }
}

#[test]
fn kafka_and_binary_close_connections_that_never_log_in_or_go_idle() {
    let dir = tempfile::tempdir().unwrap();
    let flags = [
        "--auth",
        "--kafka-allow-plaintext-plain",
        "--kafka-auth-timeout-ms",
        "500",
        "--binary-auth-timeout-ms",
        "500",
    ];
    let b = Broker::start_env(dir.path(), &flags, &[("ES_AUTH_BOOTSTRAP_KEY", ADMIN)]);
    for addr in [&b.kafka_addr, &b.binary_addr] {
        let mut s = connect(addr);
        let took = closed_after(&mut s).expect("a connection that never logged in stayed open");
        assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(5), "{addr}: {took:?}");
    }
    // Logged in in time, a connection outlives the auth timeout.
    let mut conn = KafkaConn::login(&b.kafka_addr, ADMIN).unwrap();
    std::thread::sleep(Duration::from_millis(1_000));
    let versions = conn.call(3, &kafka_protocol::messages::ApiVersionsRequest::default());
    assert!(versions.is_ok(), "a logged-in connection was closed: {versions:?}");
    drop(b);

    let dir = tempfile::tempdir().unwrap();
    let flags = ["--kafka-idle-timeout-ms", "500", "--binary-idle-timeout-ms", "500"];
    let b = Broker::start_with(dir.path(), &flags);
    let mut conn = KafkaConn::connect(&b.kafka_addr).unwrap();
    conn.call(3, &kafka_protocol::messages::ApiVersionsRequest::default()).unwrap();
    let started = Instant::now();
    assert!(conn.closed_by_broker(), "an idle Kafka connection stayed open");
    assert!(started.elapsed() >= Duration::from_millis(400), "{:?}", started.elapsed());
    let mut s = connect(&b.binary_addr);
    let took = closed_after(&mut s).expect("an idle binary connection stayed open");
    assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(5), "{took:?}");
}
