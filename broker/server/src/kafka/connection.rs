//! One Kafka connection: a reader that frames and decodes requests in order and
//! starts each (a produce is appended before the next frame is read), and a writer
//! that sends the replies strictly in request order. A malformed frame closes this
//! connection only, after the replies before it are written. A throttled
//! connection is muted: nothing more is read until its throttle has passed (KIP-219).

use std::io::IoSlice;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use es_kafka::{KafkaWireError, api_versions_response, decode_request, frame_size, split_frame};
use tokio::io::{AsyncReadExt, AsyncWrite, AsyncWriteExt, WriteHalf};
use tokio::sync::{mpsc, watch};

use super::Ctx;
use super::dispatch::{self, Pending, Reply};
use super::fetch_encode::SPLICE_MIN;
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

/// Writes replies in request order, coalescing those already finished: small
/// frames and chunks are copied into one buffer, large chunks (a Fetch's stored
/// batches) are written as they are, all with vectored writes.
async fn write_loop(mut write: WriteHalf<Stream>, mut rx: mpsc::Receiver<Pending>, peer: SocketAddr) {
    let mut out = Out::default();
    let mut next = rx.recv().await;
    while let Some(pending) = next.take() {
        let mut closing = out.push(pending.await, peer);
        while !closing && out.len < WRITE_COALESCE_BYTES {
            match rx.try_recv() {
                Ok(p) if p.is_finished() => closing = out.push(p.await, peer),
                Ok(p) => {
                    next = Some(p);
                    break;
                }
                Err(_) => break,
            }
        }
        if out.write_to(&mut write).await.is_err() || closing {
            break;
        }
        if next.is_none() {
            next = rx.recv().await;
        }
    }
    let _ = write.shutdown().await;
}

/// Replies waiting to be written: chunks in order, the small ones coalesced.
#[derive(Default)]
struct Out {
    chunks: Vec<Bytes>,
    small: BytesMut,
    /// Bytes queued in all.
    len: usize,
}

impl Out {
    /// Queues one reply; true when the connection must close after what is queued.
    fn push(&mut self, reply: Result<Reply, tokio::task::JoinError>, peer: SocketAddr) -> bool {
        match reply {
            Ok(Reply::Frame(bytes)) => {
                self.add(bytes);
                false
            }
            Ok(Reply::Chunks(chunks)) => {
                chunks.into_iter().for_each(|c| self.add(c));
                false
            }
            Ok(Reply::Nothing) => false,
            Ok(Reply::Close(why)) => {
                tracing::warn!(%peer, reason = %why, "kafka: closing the connection");
                true
            }
            Ok(Reply::Last(chunks, why)) => {
                chunks.into_iter().for_each(|c| self.add(c));
                tracing::info!(%peer, reason = why, "kafka: closing the connection after this reply");
                true
            }
            Err(e) => {
                tracing::warn!(%peer, error = %e, "kafka: a request task failed; closing the connection");
                true
            }
        }
    }

    fn add(&mut self, bytes: Bytes) {
        self.len += bytes.len();
        if bytes.len() < SPLICE_MIN {
            self.small.extend_from_slice(&bytes);
        } else {
            self.seal();
            self.chunks.push(bytes);
        }
    }

    /// Ends the current run of small pieces as a chunk.
    fn seal(&mut self) {
        if !self.small.is_empty() {
            self.chunks.push(self.small.split().freeze());
        }
    }

    /// Writes everything queued.
    async fn write_to<W: AsyncWrite + Unpin>(&mut self, write: &mut W) -> std::io::Result<()> {
        self.seal();
        self.len = 0;
        write_chunks(write, &mut self.chunks).await
    }
}

/// At most this many chunks per vectored write.
const IOVECS_MAX: usize = 64;

/// Writes `chunks` in order with vectored writes, empties the list, and flushes.
async fn write_chunks<W: AsyncWrite + Unpin>(write: &mut W, chunks: &mut Vec<Bytes>) -> std::io::Result<()> {
    let mut first = 0;
    loop {
        while chunks.get(first).is_some_and(Bytes::is_empty) {
            first += 1;
        }
        if first >= chunks.len() {
            break;
        }
        let mut n = {
            let mut slices = [IoSlice::new(&[]); IOVECS_MAX];
            let mut count = 0;
            for (slot, c) in slices.iter_mut().zip(&chunks[first..]) {
                *slot = IoSlice::new(c);
                count += 1;
            }
            write.write_vectored(&slices[..count]).await?
        };
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 && first < chunks.len() {
            let c = &mut chunks[first];
            if n >= c.len() {
                n -= c.len();
                first += 1;
            } else {
                c.advance(n);
                n = 0;
            }
        }
    }
    chunks.clear();
    // A TLS stream may keep the tail of a write in its buffer until flushed: without
    // the flush a client could wait for the end of a large Fetch until the next answer.
    write.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that takes at most `step` bytes per call, vectored or not.
    struct Trickle {
        got: Vec<u8>,
        step: usize,
    }

    impl AsyncWrite for Trickle {
        fn poll_write(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            buf: &[u8],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let n = buf.len().min(self.step);
            self.got.extend_from_slice(&buf[..n]);
            std::task::Poll::Ready(Ok(n))
        }

        fn poll_write_vectored(
            mut self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
            bufs: &[IoSlice<'_>],
        ) -> std::task::Poll<std::io::Result<usize>> {
            let mut left = self.step;
            for b in bufs {
                let n = b.len().min(left);
                self.got.extend_from_slice(&b[..n]);
                left -= n;
                if left == 0 {
                    break;
                }
            }
            std::task::Poll::Ready(Ok(self.step - left))
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }

        fn poll_shutdown(
            self: std::pin::Pin<&mut Self>,
            _: &mut std::task::Context<'_>,
        ) -> std::task::Poll<std::io::Result<()>> {
            std::task::Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn replies_are_written_whole_and_in_order_whatever_each_write_takes() {
        let peer: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let big = Bytes::from(vec![7u8; SPLICE_MIN * 2 + 3]);
        for step in [1, 5, 100, SPLICE_MIN + 1, usize::MAX] {
            let mut out = Out::default();
            assert!(!out.push(Ok(Reply::Frame(Bytes::from_static(b"abc"))), peer));
            let chunks =
                vec![Bytes::from_static(b"head"), Bytes::new(), big.clone(), Bytes::from_static(b"t")];
            assert!(!out.push(Ok(Reply::Chunks(chunks)), peer));
            assert!(!out.push(Ok(Reply::Nothing), peer));
            assert!(!out.push(Ok(Reply::Frame(big.clone())), peer));
            // Small pieces are coalesced; the large ones stay chunks of their own.
            out.seal();
            let lens: Vec<usize> = out.chunks.iter().map(Bytes::len).collect();
            assert_eq!(lens, [7, big.len(), 1, big.len()]);
            let mut w = Trickle { got: Vec::new(), step };
            out.write_to(&mut w).await.unwrap();
            let mut want = b"abchead".to_vec();
            want.extend_from_slice(&big);
            want.push(b't');
            want.extend_from_slice(&big);
            assert_eq!(w.got, want, "step {step}");
            assert!(out.chunks.is_empty() && out.len == 0);
        }
    }
}
