//! One binary-protocol connection: a reader that frames requests in order and a
//! writer that sends responses as they complete. A malformed or oversized frame gets
//! a `Malformed` answer and closes this connection only.

use std::sync::Arc;

use bytes::BytesMut;
use es_protocol::{ErrorCode, FRAME_BYTES_MAX, Op, Request, Response, decode_frame};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{Semaphore, mpsc, watch};

use super::BinaryState;
use super::command;
use crate::limits::BINARY_IN_FLIGHT_MAX;

pub async fn run(stream: TcpStream, state: BinaryState, mut shutdown: watch::Receiver<bool>) {
    stream.set_nodelay(true).ok();
    let (mut read, write) = stream.into_split();
    let (tx, rx) = mpsc::channel::<Vec<u8>>(BINARY_IN_FLIGHT_MAX);
    let writer = tokio::spawn(write_loop(write, rx));
    let window = Arc::new(Semaphore::new(BINARY_IN_FLIGHT_MAX));
    let mut buf = BytesMut::with_capacity(64 * 1024);
    let mut greeted = false;
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
        // Waiting for a slot stops reading: a client past the window is slowed down,
        // not failed.
        let Ok(slot) = window.clone().acquire_owned().await else { break };
        command::dispatch(req, id, &state, tx.clone(), slot).await;
    }
    drop(tx);
    let drain = std::time::Duration::from_millis(crate::limits::SHUTDOWN_DRAIN_MS);
    let _ = tokio::time::timeout(drain, writer).await;
}

async fn reply_error(tx: &mpsc::Sender<Vec<u8>>, id: u32, op: Op, code: ErrorCode, message: String) {
    let mut out = Vec::new();
    Response::Error { code, message }.encode(id, op, &mut out);
    let _ = tx.send(out).await;
}

/// Writes responses as they arrive, coalescing the ones that queued up meanwhile.
async fn write_loop(mut write: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<u8>>) {
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
        if write.write_all(&buf).await.is_err() {
            return;
        }
    }
    let _ = write.shutdown().await;
}
