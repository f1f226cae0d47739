//! One authenticated connection to a peer: a writer task that coalesces queued
//! messages into one write, a reader task that opens frames and dispatches them,
//! and the table of calls waiting for their responses.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, ReadHalf, WriteHalf};
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use crate::config::Timeouts;
use crate::error::{PeerError, RpcError};
use crate::frame::{Envelope, Message, Opener, Sealer};
use crate::handshake::Session;
use crate::limits::{
    COALESCE_BYTES_MAX, COALESCE_FRAMES_MAX, FRAME_BYTES_MAX, IN_FLIGHT_MAX, SEND_QUEUE_MESSAGES_MAX,
};
use crate::stats::{PeerStats, add};

/// What a handler returns: the response payload or a failure for the caller.
pub type HandlerFuture = Pin<Box<dyn Future<Output = Result<Bytes, RpcError>> + Send>>;
/// The server side of every link of a node: `(from_node, group, kind, payload)`.
pub type Handler = Arc<dyn Fn(u64, u64, u8, Bytes) -> HandlerFuture + Send + Sync>;

/// Wraps an async closure as a [`Handler`].
pub fn handler<F, Fut>(f: F) -> Handler
where
    F: Fn(u64, u64, u8, Bytes) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Bytes, RpcError>> + Send + 'static,
{
    Arc::new(move |from, group, kind, payload| Box::pin(f(from, group, kind, payload)))
}

/// The failure code a caller gets when its handler's response was over the frame
/// cap (the codes below 256 are es-peer's own; handlers use the others).
pub const RESPONSE_TOO_LARGE: u16 = 1;
/// The failure code a caller gets when the handler panicked on its request.
pub const HANDLER_PANICKED: u16 = 2;

/// How a call on one link ended.
pub(crate) enum Outcome {
    NotSent,
    Done(Result<Bytes, PeerError>),
}

type Waiter = oneshot::Sender<Result<Bytes, PeerError>>;

/// Calls waiting for a response, and whether the link is closed: one lock, so a
/// call never registers after the close has failed the others.
#[derive(Default)]
struct Pending {
    closed: bool,
    waiters: HashMap<u64, Waiter>,
}

/// A live link; dropped by its node once closed.
pub(crate) struct Link {
    pub(crate) peer: u64,
    tx: mpsc::Sender<Message>,
    pending: Mutex<Pending>,
    call_slots: Semaphore,
    next_correlation: AtomicU64,
    closed: watch::Sender<bool>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link").field("peer", &self.peer).finish_non_exhaustive()
    }
}

impl Link {
    /// Starts the link's tasks over an authenticated `stream`.
    pub(crate) fn start<S>(
        stream: S,
        session: Session,
        handler: Handler,
        stats: Arc<PeerStats>,
        timeouts: Timeouts,
    ) -> Arc<Self>
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (tx, rx) = mpsc::channel(SEND_QUEUE_MESSAGES_MAX);
        let link = Arc::new(Self {
            peer: session.peer,
            tx,
            pending: Mutex::new(Pending::default()),
            call_slots: Semaphore::new(IN_FLIGHT_MAX),
            next_correlation: AtomicU64::new(0),
            closed: watch::Sender::new(false),
        });
        let (read, write) = tokio::io::split(stream);
        let keepalive = timeouts.keepalive;
        let writer =
            Writer { link: link.clone(), rx, sealer: session.sealer, stats: stats.clone(), keepalive };
        tokio::spawn(writer.run(write));
        let reader =
            Reader { link: link.clone(), opener: session.opener, handler, stats, idle: timeouts.idle };
        tokio::spawn(reader.run(read));
        link
    }

    pub(crate) fn is_closed(&self) -> bool {
        *self.closed.borrow()
    }

    /// Resolves once the link is closed.
    pub(crate) async fn closed(&self) {
        let mut rx = self.closed.subscribe();
        let _ = rx.wait_for(|c| *c).await;
    }

    /// Closes the link (idempotent): both tasks stop, every waiting call fails.
    pub(crate) fn close(&self) {
        let waiters = {
            let mut pending = self.pending.lock().expect("pending lock");
            pending.closed = true;
            std::mem::take(&mut pending.waiters)
        };
        for waiter in waiters.into_values() {
            let _ = waiter.send(Err(PeerError::LinkClosed));
        }
        self.closed.send_replace(true);
    }

    /// Sends one request and waits for its response. The caller bounds the time; a
    /// dropped call forgets its correlation id, so a late response is ignored.
    /// `NotSent` means the link closed before the request was queued: the caller may
    /// try the next link, as the peer cannot have seen it.
    pub(crate) async fn call(&self, group: u64, kind: u8, payload: Bytes) -> Outcome {
        let correlation = self.next_correlation.fetch_add(1, Ordering::Relaxed);
        let request = Message::Request(Envelope { group, kind, correlation }, payload);
        if request.frame_bytes() > FRAME_BYTES_MAX {
            return Outcome::Done(Err(PeerError::FrameSize {
                len: request.frame_bytes(),
                max: FRAME_BYTES_MAX,
            }));
        }
        let Ok(_slot) = self.call_slots.acquire().await else { return Outcome::NotSent };
        let (waiter, response) = oneshot::channel();
        {
            let mut pending = self.pending.lock().expect("pending lock");
            if pending.closed {
                return Outcome::NotSent;
            }
            pending.waiters.insert(correlation, waiter);
        }
        let _forget = Forget { link: self, correlation };
        if self.tx.send(request).await.is_err() {
            return Outcome::NotSent;
        }
        Outcome::Done(response.await.unwrap_or(Err(PeerError::LinkClosed)))
    }

    fn complete(&self, correlation: u64, result: Result<Bytes, RpcError>) {
        let waiter = self.pending.lock().expect("pending lock").waiters.remove(&correlation);
        if let Some(waiter) = waiter {
            let _ = waiter.send(result.map_err(PeerError::Remote));
        }
    }
}

/// Removes a call's waiter however the call ends (answered, timed out, dropped).
struct Forget<'a> {
    link: &'a Link,
    correlation: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.link.pending.lock().expect("pending lock").waiters.remove(&self.correlation);
    }
}

/// Logs why a link ended and counts a frame that failed authentication.
fn record_end(peer: u64, side: &str, result: &Result<(), PeerError>, stats: &PeerStats) {
    match result {
        Ok(()) => tracing::debug!(peer, "peer link {side} stopped"),
        Err(e @ PeerError::FrameAuth { .. }) => {
            add(&stats.frame_auth_failures, 1);
            tracing::warn!(peer, error = %e, "peer link killed: a frame failed authentication");
        }
        Err(e) => tracing::info!(peer, error = %e, "peer link {side} ended"),
    }
}

struct Writer {
    link: Arc<Link>,
    rx: mpsc::Receiver<Message>,
    sealer: Sealer,
    stats: Arc<PeerStats>,
    keepalive: Duration,
}

impl Writer {
    async fn run<W: AsyncWrite>(mut self, write: WriteHalf<W>) {
        let result = self.write_loop(write).await;
        record_end(self.link.peer, "writer", &result, &self.stats);
        self.link.close();
    }

    async fn write_loop<W: AsyncWrite>(&mut self, mut write: WriteHalf<W>) -> Result<(), PeerError> {
        let mut closed = self.link.closed.subscribe();
        let mut buf = BytesMut::with_capacity(64 * 1024);
        loop {
            let first = tokio::select! {
                m = self.rx.recv() => match m { Some(m) => m, None => return Ok(()) },
                _ = closed.wait_for(|c| *c) => return Ok(()),
                _ = tokio::time::sleep(self.keepalive) => Message::Keepalive,
            };
            // One yield lets the tasks already woken with this one (the other groups'
            // timers of the same tick) queue their messages, so one write takes them all.
            tokio::task::yield_now().await;
            buf.clear();
            let frames = self.gather(first, &mut buf);
            tokio::select! {
                written = write.write_all(&buf) => written?,
                _ = closed.wait_for(|c| *c) => return Ok(()),
            }
            add(&self.stats.writes, 1);
            add(&self.stats.frames_sent, frames);
            add(&self.stats.bytes_sent, buf.len() as u64);
        }
    }

    /// Seals `first` and whatever else is already queued, up to the coalescing
    /// limits, into `buf`: the messages of many groups go out in one write.
    fn gather(&mut self, first: Message, buf: &mut BytesMut) -> u64 {
        self.sealer.seal(&first, buf);
        let mut frames = 1;
        while frames < COALESCE_FRAMES_MAX as u64 && buf.len() < COALESCE_BYTES_MAX {
            let Ok(next) = self.rx.try_recv() else { break };
            self.sealer.seal(&next, buf);
            frames += 1;
        }
        frames
    }
}

struct Reader {
    link: Arc<Link>,
    opener: Opener,
    handler: Handler,
    stats: Arc<PeerStats>,
    idle: Duration,
}

impl Reader {
    async fn run<R: AsyncRead>(mut self, read: ReadHalf<R>) {
        let mut closed = self.link.closed.subscribe();
        let result = tokio::select! {
            r = self.read_loop(read) => r,
            _ = closed.wait_for(|c| *c) => Ok(()),
        };
        record_end(self.link.peer, "reader", &result, &self.stats);
        self.link.close();
    }

    async fn read_loop<R: AsyncRead>(&mut self, read: ReadHalf<R>) -> Result<(), PeerError> {
        let mut read = BufReader::with_capacity(64 * 1024, read);
        let serving = Arc::new(Semaphore::new(IN_FLIGHT_MAX));
        loop {
            let Ok(frame) = tokio::time::timeout(self.idle, self.opener.read(&mut read)).await else {
                return Err(PeerError::IdleTimeout(self.idle));
            };
            let (body, wire_bytes) = match frame {
                Ok(frame) => frame,
                Err(PeerError::Io(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
                Err(e) => return Err(e),
            };
            add(&self.stats.frames_received, 1);
            add(&self.stats.bytes_received, wire_bytes as u64);
            match Message::decode(body)? {
                Message::Response(env, result) => self.link.complete(env.correlation, result),
                Message::Keepalive => {}
                Message::Request(env, payload) => {
                    let slot = serving.clone().acquire_owned().await.expect("never closed");
                    self.serve(env, payload, slot);
                }
            }
        }
    }

    /// Runs the handler on its own task, so a slow RPC of one group never holds up
    /// the others on this link; the response joins the writer's queue.
    fn serve(&self, env: Envelope, payload: Bytes, slot: tokio::sync::OwnedSemaphorePermit) {
        let (handler, tx, from) = (self.handler.clone(), self.link.tx.clone(), self.link.peer);
        let stats = self.stats.clone();
        tokio::spawn(async move {
            // The handler runs as a task of its own so that a panic in it becomes a
            // failure for the caller instead of a silent wait until its deadline.
            let mut result = match tokio::spawn(handler(from, env.group, env.kind, payload)).await {
                Ok(result) => result,
                Err(e) => {
                    let (group, kind) = (env.group, env.kind);
                    tracing::error!(peer = from, group, kind, error = %e, "peer RPC handler failed");
                    Err(RpcError::new(HANDLER_PANICKED, "the handler panicked"))
                }
            };
            add(&stats.requests_served, 1);
            if Message::Response(env, result.clone()).frame_bytes() > FRAME_BYTES_MAX {
                result = Err(RpcError::new(RESPONSE_TOO_LARGE, "the response exceeds the peer frame cap"));
            }
            // The link may have closed meanwhile; the caller's side then fails the call.
            let _ = tx.send(Message::Response(env, result)).await;
            drop(slot);
        });
    }
}
