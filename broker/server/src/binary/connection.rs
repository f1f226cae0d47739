//! One binary-protocol connection: a reader that frames requests in order and a
//! writer that sends responses as they complete. A malformed or oversized frame gets
//! a `Malformed` answer and closes this connection only.

use std::sync::Arc;

use bytes::BytesMut;
use es_protocol::{ErrorCode, FRAME_BYTES_MAX, Op, Request, Response, decode_frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt, WriteHalf};
use tokio::sync::{Semaphore, mpsc, watch};

use super::BinaryState;
use super::command;
use crate::auth::AuthFailure;
use crate::limits::BINARY_IN_FLIGHT_MAX;
use crate::listener::{ListenerLimits, sleep_or_never};
use crate::service::{BrokerError, Principal};
use crate::tls::{Peer, Stream};

/// Serves one connection; closes it when the client sends nothing for
/// `limits.idle_timeout_ms`, and (auth on) when it has not authenticated
/// `limits.auth_timeout_ms` after it opened.
pub async fn run(
    stream: Stream,
    conn: Peer,
    state: BinaryState,
    limits: ListenerLimits,
    mut shutdown: watch::Receiver<bool>,
) {
    let peer = conn.addr;
    let (mut read, write) = tokio::io::split(stream);
    let (tx, rx) = mpsc::channel::<Vec<u8>>(BINARY_IN_FLIGHT_MAX);
    let writer = tokio::spawn(write_loop(write, rx));
    let window = Arc::new(Semaphore::new(BINARY_IN_FLIGHT_MAX));
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut greeted = false;
    // A client certificate a rule maps to a key is that key from the start (mTLS);
    // an Authenticate step replaces it.
    let mut who = conn.tls_key.clone().map_or(Principal::ANONYMOUS, Principal::key);
    let auth_on = state.service.registry().auth().enabled();
    let login_by = tokio::time::Instant::now() + std::time::Duration::from_millis(limits.auth_timeout_ms);
    loop {
        let frame = match decode_frame(&mut buf, FRAME_BYTES_MAX) {
            Ok(Some(frame)) => frame,
            Ok(None) => {
                tokio::select! {
                    n = read.read_buf(&mut buf) => match n {
                        Ok(0) | Err(_) => break,
                        Ok(_) => continue,
                    },
                    _ = shutdown.wait_for(|s| *s) => break,
                    _ = sleep_or_never(limits.idle()) => {
                        tracing::debug!(%peer, "binary: idle past the idle timeout; closing the connection");
                        break;
                    }
                    _ = tokio::time::sleep_until(login_by), if auth_on && who.key.is_none() => {
                        tracing::info!(%peer, "binary: no Authenticate within the auth timeout; closing the connection");
                        break;
                    }
                }
            }
            Err(e) => {
                reply_error(&tx, 0, Op::Hello, ErrorCode::Malformed, e.to_string()).await;
                break;
            }
        };
        let (id, op) = (frame.header.request_id, frame.header.op);
        let op = Op::from_u8(op).unwrap_or(Op::Hello);
        let req = match Request::decode(&frame) {
            Ok(req) => req,
            Err(e) => {
                let code = if matches!(e, es_protocol::WireError::UnknownOp { .. }) {
                    ErrorCode::UnknownOp
                } else {
                    ErrorCode::Malformed
                };
                reply_error(&tx, id, op, code, e.to_string()).await;
                break;
            }
        };
        // Before the handshake only public calls are served (Hello; later SASL).
        let public = super::call_of(op) == crate::service::Call::Health;
        if !greeted && !public {
            reply_error(&tx, id, op, ErrorCode::UnsupportedVersion, "send Hello first".into()).await;
            break;
        }
        greeted = true;
        if let Request::Authenticate { key } = &req {
            let auth = state.service.registry().auth();
            let resp = match auth.authenticate(&key.0, peer.ip()) {
                Ok(id) => {
                    who = Principal::key(id.clone());
                    Response::Authenticate { key_id: id.to_string() }
                }
                Err(failure) => {
                    who = Principal::ANONYMOUS;
                    login_refused(failure)
                }
            };
            let mut out = Vec::new();
            resp.encode(id, op, &mut out);
            let _ = tx.send(out).await;
            continue;
        }
        if let Err(e) = still_authenticated(&state, &who, op) {
            reply_error(&tx, id, op, super::error::code(&e), e.to_string()).await;
            continue;
        }
        // Waiting for a slot stops reading: a client past the window is slowed down,
        // not failed.
        let Ok(slot) = window.clone().acquire_owned().await else { break };
        command::dispatch(req, id, &state, who.clone(), tx.clone(), slot).await;
        // Over its request rate, the connection is served and then not read for the
        // throttle, as Kafka does: slowed, never refused or closed.
        let auth = state.service.registry().auth();
        let ms = auth.charge_request(peer.ip(), who.key.as_ref());
        if ms > 0 {
            tokio::select! {
                _ = tokio::time::sleep(std::time::Duration::from_millis(ms)) => {}
                _ = shutdown.wait_for(|s| *s) => break,
            }
        }
    }
    drop(tx);
    let drain = std::time::Duration::from_millis(crate::limits::SHUTDOWN_DRAIN_MS);
    let _ = tokio::time::timeout(drain, writer).await;
}

/// With auth on, every op but the handshake needs a key that is still active:
/// a revoked key stops on its connection's very next request.
fn still_authenticated(state: &BinaryState, who: &Principal, op: Op) -> crate::service::Result<()> {
    let auth = state.service.registry().auth();
    let public = super::call_of(op).access() == crate::service::Access::Public;
    let active = who.key.as_ref().is_some_and(|k| auth.state().active_key(k).is_some());
    if auth.enabled() && !public && !active {
        return Err(BrokerError::Unauthenticated);
    }
    Ok(())
}

fn login_refused(failure: AuthFailure) -> Response {
    let e = match failure {
        AuthFailure::Invalid => BrokerError::Unauthenticated,
        AuthFailure::Throttled { ms } => BrokerError::Throttled { ms },
    };
    super::error::response(&e)
}

async fn reply_error(tx: &mpsc::Sender<Vec<u8>>, id: u32, op: Op, code: ErrorCode, message: String) {
    let mut out = Vec::new();
    Response::Error { code, message }.encode(id, op, &mut out);
    let _ = tx.send(out).await;
}

/// Writes responses as they arrive, coalescing the ones that queued up meanwhile.
async fn write_loop(mut write: WriteHalf<Stream>, mut rx: mpsc::Receiver<Vec<u8>>) {
    let mut buf = Vec::new();
    while let Some(frame) = rx.recv().await {
        buf.clear();
        buf.extend_from_slice(&frame);
        while buf.len() < 1 << 20 {
            match rx.try_recv() {
                Ok(more) => buf.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        // A TLS stream may keep the tail of a large write in its buffer until
        // flushed: without the flush a client could wait for it until the next answer.
        if write.write_all(&buf).await.is_err() || write.flush().await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}
