//! One Kafka connection: a reader that frames and decodes requests in order and
//! starts each (a produce is appended before the next frame is read), and a writer
//! that sends the replies strictly in request order. A malformed frame closes this
//! connection only, after the replies before it are written. A throttled
//! connection is muted: nothing more is read until its throttle has passed (KIP-219).

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use es_kafka::{KafkaWireError, api_versions_response, decode_request, frame_size, split_frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt, WriteHalf};
use tokio::sync::{mpsc, watch};

use super::Ctx;
use super::dispatch::{self, Pending, Reply};
use super::sasl::{Gate, SaslConn};
use super::throttle::Mute;
use crate::limits::{KAFKA_IN_FLIGHT_MAX, SHUTDOWN_DRAIN_MS};
use crate::listener::{ListenerLimits, sleep_or_never};
use crate::tls::{Peer, Stream};

/// Replies coalesced into one write at most.
const WRITE_COALESCE_BYTES: usize = 1 << 20;

/// Serves one connection. `conn` says whether it runs over TLS and which key a
/// client certificate mapped to (`conn.tls`, `conn.tls_key`). A connection is
/// closed when the client sends nothing for `limits.idle_timeout_ms`, and (auth on)
/// when it has not logged in `limits.auth_timeout_ms` after it opened.
pub async fn run(
    stream: Stream,
    conn: Peer,
    ctx: Arc<Ctx>,
    limits: ListenerLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let peer = conn.addr;
    let (mut read, write) = tokio::io::split(stream);
    let (tx, rx) = mpsc::channel::<Pending>(KAFKA_IN_FLIGHT_MAX);
    let writer = tokio::spawn(write_loop(write, rx, peer));
    let mut sasl = SaslConn::new(ctx.service.registry().auth(), conn.tls).with_certificate(conn.tls_key);
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mute = Arc::new(Mute::default());
    let login_by = tokio::time::Instant::now() + std::time::Duration::from_millis(limits.auth_timeout_ms);
    loop {
        // Muted: read nothing, not even a frame already buffered, until the
        // throttle has passed, so a client that ignores throttle_time_ms waits too.
        if let Some(at) = mute.until() {
            tokio::select! {
                _ = tokio::time::sleep_until(at.into()) => {}
                _ = shutdown.wait_for(|s| *s) => break,
                _ = tx.closed() => break,
            }
        }
        let frame_limits = sasl.frame_limits();
        let frame = match split_frame(&mut buf, frame_limits) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                // Grow to the announced (capped) frame at most, never to a wire count.
                if let Ok(Some(size)) = frame_size(&buf, frame_limits) {
                    buf.reserve((size + 4).saturating_sub(buf.len()));
                }
                tokio::select! {
                    n = read.read_buf(&mut buf) => match n {
                        Ok(0) | Err(_) => break,
                        Ok(_) => continue,
                    },
                    _ = shutdown.wait_for(|s| *s) => break,
                    _ = tx.closed() => break,
                    _ = expiry(sasl.expires_at()) => {
                        tracing::info!(%peer, "kafka: the SASL session expired; closing the connection");
                        break;
                    }
                    _ = sleep_or_never(limits.idle()) => {
                        tracing::debug!(%peer, "kafka: idle past the idle timeout; closing the connection");
                        break;
                    }
                    _ = tokio::time::sleep_until(login_by), if !sasl.has_principal() => {
                        tracing::info!(%peer, "kafka: no SASL login within the auth timeout; closing the connection");
                        break;
                    }
                }
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "kafka: closing the connection");
                break;
            }
        };
        let (pending, close) = match start(&ctx, &mut sasl, peer, frame, &mute).await {
            Ok(started) => started,
            Err(e) => {
                tracing::warn!(%peer, error = %e, "kafka: refusing a request; closing the connection");
                break;
            }
        };
        if tx.send(pending).await.is_err() {
            break;
        }
        if close {
            let _ = tx.send(dispatch::ready(Reply::Close("the SASL exchange failed".into()))).await;
            break;
        }
    }
    drop(tx);
    let _ = tokio::time::timeout(std::time::Duration::from_millis(SHUTDOWN_DRAIN_MS), writer).await;
}

/// Waits until `at` (forever when there is no expiry).
async fn expiry(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// Decodes one frame, passes it through the SASL gate and starts it; true when
/// the connection closes after its answer. The only faults answered rather than
/// closed on are the ones Kafka answers too: ApiVersions at a version es does not
/// know gets the KIP-511 v0 answer. Any other fault (unknown API, unsupported
/// version, Produce v0-2, malformed body, a request before SASL completes) closes
/// the connection, as Apache Kafka does, since no response of the client's version
/// can be typed.
async fn start(
    ctx: &Arc<Ctx>,
    sasl: &mut SaslConn,
    peer: SocketAddr,
    frame: Bytes,
    mute: &Arc<Mute>,
) -> Result<(Pending, bool), String> {
    match decode_request(frame) {
        Ok(req) => match sasl.gate(req.header.api_key, std::time::Instant::now()) {
            Gate::Serve(who) => {
                // A request over its rate limit is still served; the connection is
                // then muted like a byte-rate throttle.
                mute.hold(ctx.service.registry().auth().charge_request(peer.ip(), who.key.as_ref()));
                Ok((dispatch::begin(ctx, peer, req, who, mute.clone()).await, false))
            }
            Gate::Sasl => {
                let answer = sasl.answer(ctx.service.registry().auth(), peer, &req.header, req.request);
                Ok((answer.pending, answer.close))
            }
            Gate::Close(why) => Err(why.to_owned()),
        },
        Err(KafkaWireError::UnsupportedVersion {
            api_key: es_kafka::kafka_protocol::messages::ApiKey::ApiVersions,
            version,
            correlation_id,
        }) => {
            let (body, at) = api_versions_response(version);
            let header = es_kafka::Header {
                api_key: es_kafka::kafka_protocol::messages::ApiKey::ApiVersions,
                api_version: version,
                correlation_id,
                client_id: None,
            };
            Ok((dispatch::ready(dispatch::reply(&header, at, &body)), false))
        }
        Err(e) => Err(e.to_string()),
    }
}

/// Writes replies in request order, coalescing those already finished.
async fn write_loop(mut write: WriteHalf<Stream>, mut rx: mpsc::Receiver<Pending>, peer: SocketAddr) {
    let mut out = Vec::new();
    let mut next = rx.recv().await;
    while let Some(pending) = next.take() {
        out.clear();
        let mut closing = push(&mut out, pending.await, peer);
        while !closing && out.len() < WRITE_COALESCE_BYTES {
            match rx.try_recv() {
                Ok(p) if p.is_finished() => closing = push(&mut out, p.await, peer),
                Ok(p) => {
                    next = Some(p);
                    break;
                }
                Err(_) => break,
            }
        }
        if write.write_all(&out).await.is_err() || closing {
            break;
        }
        if next.is_none() {
            next = rx.recv().await;
        }
    }
    let _ = write.shutdown().await;
}

/// Appends one reply; true when the connection must close after what is queued.
fn push(out: &mut Vec<u8>, reply: Result<Reply, tokio::task::JoinError>, peer: SocketAddr) -> bool {
    match reply {
        Ok(Reply::Frame(bytes)) => {
            out.extend_from_slice(&bytes);
            false
        }
        Ok(Reply::Nothing) => false,
        Ok(Reply::Close(why)) => {
            tracing::warn!(%peer, reason = %why, "kafka: closing the connection");
            true
        }
        Err(e) => {
            tracing::warn!(%peer, error = %e, "kafka: a request task failed; closing the connection");
            true
        }
    }
}
