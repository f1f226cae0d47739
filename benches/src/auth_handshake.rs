//! `es-bench auth-handshake`: what one SASL login costs on the Kafka listener,
//! built-in mechanisms against an authenticator plugin. One broker with auth on
//! and `--auth-mechanisms SCRAM-SHA-512,PLAIN,OAUTHBEARER:jwt` (the JWT example
//! uploaded as `jwt`); each login is a fresh TCP connection, SaslHandshake and
//! SaslAuthenticate (two for SCRAM), timed from connect to the last answer.
//! Mechanisms take turns in rounds so drift on a noisy machine hits all alike.
//! The client's costly part is done once: SCRAM's salted password (es's salt
//! per key is stable) and the token, so the figures are the broker's work plus
//! loopback round trips.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail, ensure};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use bytes::Bytes;
use hmac::{Hmac, Mac};
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use sha2::{Digest, Sha512};

use crate::kafka::wire::{IO_TIMEOUT, decode_response, frame};
use crate::suite::broker::{Broker, default_bin};

/// The bootstrap admin key of the benchmark's broker (its id and secret log in).
const KEY: &str = "es_00000000000000aa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";
const HS256_KEY: &str = "es-bench-hs256-key-of-at-least-32-bytes";
const MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"];

#[derive(Debug, clap::Args)]
pub struct AuthHandshakeArgs {
    /// Logins per mechanism per round.
    #[arg(long, default_value_t = 200)]
    pub logins: usize,
    /// Rounds; each runs every mechanism once, in turn.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// The es-broker binary [default: beside es-bench].
    #[arg(long)]
    pub broker_bin: Option<PathBuf>,
    /// The JWT example component [default: es_example_jwt.wasm under
    /// `<target>/es-plugins/wasm32-wasip2/release`].
    #[arg(long)]
    pub jwt_wasm: Option<PathBuf>,
}

pub fn run(args: &AuthHandshakeArgs) -> Result<()> {
    ensure!(args.logins > 0 && args.rounds > 0, "--logins and --rounds must be at least 1");
    let bin = match &args.broker_bin {
        Some(bin) => bin.clone(),
        None => default_bin()?,
    };
    let wasm_path = match &args.jwt_wasm {
        Some(p) => p.clone(),
        None => bin.with_file_name("../es-plugins/wasm32-wasip2/release/es_example_jwt.wasm"),
    };
    let wasm = std::fs::read(&wasm_path).with_context(|| format!("reading {}", wasm_path.display()))?;
    let dir = tempfile::tempdir()?;
    let flags = [
        "--auth",
        "--kafka-allow-plaintext-plain",
        "--auth-mechanisms",
        "SCRAM-SHA-512,PLAIN,OAUTHBEARER:jwt",
    ];
    let mut broker = Broker::start_with(&bin, dir.path(), &flags, &[("ES_AUTH_BOOTSTRAP_KEY", KEY)])?;
    upload_jwt(&broker.url, &wasm)?;
    let client = Client::new();
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); MECHANISMS.len()];
    for _ in 0..args.rounds {
        for (i, mechanism) in MECHANISMS.iter().enumerate() {
            for _ in 0..args.logins {
                samples[i].push(client.login(&broker.kafka_addr, mechanism)?);
            }
        }
    }
    broker.stop()?;
    println!("| mechanism | logins | median | p99 |");
    println!("|---|---|---|---|");
    for (mechanism, mut s) in MECHANISMS.iter().zip(samples) {
        s.sort_unstable();
        let at = |q: f64| s[((s.len() - 1) as f64 * q) as usize];
        println!("| {mechanism} | {} | {:.0} us | {:.0} us |", s.len(), micros(at(0.5)), micros(at(0.99)));
    }
    Ok(())
}

fn micros(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn upload_jwt(url: &str, wasm: &[u8]) -> Result<()> {
    let url = format!("{url}/plugins/jwt?config.hs256_key={HS256_KEY}");
    let mut resp = ureq::post(&url)
        .header("authorization", format!("Bearer {KEY}"))
        .header("content-type", "application/octet-stream")
        .send(wasm)
        .with_context(|| format!("POST {url}"))?;
    let status = resp.status().as_u16();
    ensure!(status == 201, "uploading the JWT plugin: {status} {}", resp.body_mut().read_to_string()?);
    Ok(())
}

/// What the client precomputes: the key's id and secret, an HS256 token for it,
/// and (on first use) SCRAM's salted password.
struct Client {
    id: &'static str,
    secret: &'static str,
    token: String,
    salted: std::cell::RefCell<Option<(Vec<u8>, Vec<u8>)>>,
}

impl Client {
    fn new() -> Client {
        let (id, secret) = KEY[3..].split_at(16);
        let exp =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_secs()
                + 3600;
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
        let payload = URL_SAFE_NO_PAD.encode(format!(r#"{{"sub":"{id}","exp":{exp}}}"#));
        let signed = format!("{header}.{payload}");
        let mut mac = Hmac::<sha2::Sha256>::new_from_slice(HS256_KEY.as_bytes()).expect("any key length");
        mac.update(signed.as_bytes());
        let token = format!("{signed}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()));
        Client { id, secret: &secret[1..], token, salted: Default::default() }
    }

    /// One login, timed from connect to the final answer.
    fn login(&self, addr: &str, mechanism: &str) -> Result<Duration> {
        let start = Instant::now();
        let mut conn = Conn::connect(addr)?;
        let shake: SaslHandshakeResponse = conn.call(
            ApiKey::SaslHandshake,
            1,
            &SaslHandshakeRequest::default().with_mechanism(StrBytes::from(mechanism.to_owned())),
        )?;
        ensure!(shake.error_code == 0, "{mechanism}: SaslHandshake error {}", shake.error_code);
        match mechanism {
            "PLAIN" => conn.step(format!("\0{}\0{}", self.id, self.secret).into_bytes())?,
            "OAUTHBEARER" => conn.step(format!("n,,\x01auth=Bearer {}\x01\x01", self.token).into_bytes())?,
            _ => self.scram(&mut conn)?,
        };
        Ok(start.elapsed())
    }

    /// SCRAM-SHA-512 (RFC 5802) with a fixed client nonce.
    fn scram(&self, conn: &mut Conn) -> Result<Vec<u8>> {
        let first_bare = format!("n={},r=esbenchclientnonce", self.id);
        let server_first = String::from_utf8(conn.step(format!("n,,{first_bare}").into_bytes())?)?;
        let attr = |k: &str| server_first.split(',').find_map(|a| a.strip_prefix(k)).map(str::to_owned);
        let (Some(nonce), Some(salt), Some(iterations)) = (attr("r="), attr("s="), attr("i=")) else {
            bail!("a malformed server-first message: {server_first}");
        };
        let salt = STANDARD.decode(salt)?;
        let salted = self.salted_password(&salt, iterations.parse()?);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{first_bare},{server_first},{without_proof}");
        let client_key = hmac512(&salted, b"Client Key");
        let stored_key = Sha512::digest(&client_key);
        let signature = hmac512(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(a, b)| a ^ b).collect();
        conn.step(format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes())
    }

    fn salted_password(&self, salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut cached = self.salted.borrow_mut();
        if let Some((s, p)) = cached.as_ref()
            && s == salt
        {
            return p.clone();
        }
        let mut out = vec![0u8; 64];
        pbkdf2::pbkdf2_hmac::<Sha512>(self.secret.as_bytes(), salt, iterations, &mut out);
        *cached = Some((salt.to_vec(), out.clone()));
        out
    }
}

fn hmac512(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha512>::new_from_slice(key).expect("any key length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// One blocking Kafka connection.
struct Conn {
    stream: TcpStream,
    correlation: i32,
}

impl Conn {
    fn connect(addr: &str) -> Result<Conn> {
        let stream = TcpStream::connect(addr).with_context(|| format!("connecting to {addr}"))?;
        stream.set_read_timeout(Some(IO_TIMEOUT))?;
        stream.set_write_timeout(Some(IO_TIMEOUT))?;
        stream.set_nodelay(true)?;
        Ok(Conn { stream, correlation: 0 })
    }

    fn call<Q: Encodable + HeaderVersion, R: Decodable + HeaderVersion>(
        &mut self,
        key: ApiKey,
        version: i16,
        req: &Q,
    ) -> Result<R> {
        self.correlation += 1;
        self.stream.write_all(&frame(key, version, self.correlation, req)?)?;
        let mut size = [0u8; 4];
        self.stream.read_exact(&mut size)?;
        let mut body = vec![0u8; u32::from_be_bytes(size) as usize];
        self.stream.read_exact(&mut body)?;
        Ok(decode_response::<R>(Bytes::from(body), version)?.1)
    }

    /// One SaslAuthenticate (v2) step; the server's bytes.
    fn step(&mut self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        let resp: SaslAuthenticateResponse = self.call(ApiKey::SaslAuthenticate, 2, &req)?;
        ensure!(resp.error_code == 0, "SaslAuthenticate error {}: {:?}", resp.error_code, resp.error_message);
        Ok(resp.auth_bytes.to_vec())
    }
}
