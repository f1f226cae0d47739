//! One pipelined connection. A writer task drains a queue of encoded frames into
//! the socket (many frames per write when they pile up); a reader task decodes
//! responses and completes the matching request by id. The number of requests in
//! flight is bounded by the window the broker announced in its `Hello`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use bytes::BytesMut;
use es_protocol::{FRAME_BYTES_MAX, Frame, Op, PROTOCOL_VERSION, Request, Response, decode_frame};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::error::{ClientError, Result};

type Pending = Arc<Mutex<Option<HashMap<u32, oneshot::Sender<Result<Response>>>>>>;

/// A connection to one broker. Cheap to share by reference; requests from many
/// tasks are pipelined over it.
#[derive(Debug)]
pub struct Connection {
    out: mpsc::Sender<Vec<u8>>,
    pending: Pending,
    next_id: AtomicU32,
    window: Arc<Semaphore>,
    pub in_flight_max: u32,
}

impl Connection {
    /// Connects and performs the version handshake.
    pub async fn connect(addr: &str) -> Result<Connection> {
        Self::connect_with_key(addr, None).await
    }

    /// Connects, performs the handshake and, given a key, logs in with it.
    pub async fn connect_with_key(addr: &str, api_key: Option<&str>) -> Result<Connection> {
        Self::connect_with(addr, api_key, None).await
    }

    /// Connects (over TLS when `tls` is set), performs the handshake and, given a
    /// key, logs in with it.
    pub async fn connect_with(
        addr: &str,
        api_key: Option<&str>,
        tls: Option<&crate::ClientTls>,
    ) -> Result<Connection> {
        let conn = Self::handshake(addr, tls).await?;
        if let Some(key) = api_key {
            conn.authenticate(key).await?;
        }
        Ok(conn)
    }

    /// Logs this connection in as `key` (the whole `es_<id>_<secret>` text);
    /// returns the key id. A refusal is `Broker { code: Unauthenticated, .. }`.
    pub async fn authenticate(&self, key: &str) -> Result<String> {
        let req = Request::Authenticate { key: es_protocol::Credential(key.to_owned()) };
        match self.request(req).await? {
            Response::Authenticate { key_id } => Ok(key_id),
            _ => Err(ClientError::UnexpectedResponse("Authenticate")),
        }
    }

    async fn handshake(addr: &str, tls: Option<&crate::ClientTls>) -> Result<Connection> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|e| ClientError::Connect { addr: addr.to_owned(), reason: e.to_string() })?;
        stream.set_nodelay(true).ok();
        let pending: Pending = Arc::new(Mutex::new(Some(HashMap::new())));
        let (out, rx) = mpsc::channel::<Vec<u8>>(1024);
        match tls {
            Some(tls) => start_io(tls.connect(addr, stream).await?, rx, &pending),
            None => start_io(stream, rx, &pending),
        }
        let mut conn = Connection {
            out,
            pending,
            next_id: AtomicU32::new(1),
            window: Arc::new(Semaphore::new(1)),
            in_flight_max: 1,
        };
        let hello = Request::Hello {
            version_min: PROTOCOL_VERSION,
            version_max: PROTOCOL_VERSION,
            client: "es-client".into(),
        };
        match conn.request(hello).await? {
            Response::Hello { in_flight_max, .. } => {
                conn.in_flight_max = in_flight_max.max(1);
                conn.window = Arc::new(Semaphore::new(conn.in_flight_max as usize));
            }
            _ => return Err(ClientError::UnexpectedResponse("Hello")),
        }
        Ok(conn)
    }

    /// Sends one request and waits for its response. A broker error comes back as
    /// `ClientError::Broker`.
    pub async fn request(&self, req: Request) -> Result<Response> {
        self.enqueue(req).await?.await
    }

    /// Queues one request for the socket and returns a future of its response.
    /// Requests queued in order are written in order, which is what keeps one
    /// partition's batches in sequence while many are in flight.
    pub async fn enqueue(
        &self,
        req: Request,
    ) -> Result<impl std::future::Future<Output = Result<Response>> + use<>> {
        let slot = self
            .window
            .clone()
            .acquire_owned()
            .await
            .map_err(|_| ClientError::Disconnected("closed".into()))?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        {
            let mut pending = self.pending.lock().expect("pending lock");
            let map =
                pending.as_mut().ok_or_else(|| ClientError::Disconnected("connection closed".into()))?;
            map.insert(id, tx);
        }
        let mut frame = Vec::new();
        req.encode(id, &mut frame);
        if self.out.send(frame).await.is_err() {
            return Err(ClientError::Disconnected("writer stopped".into()));
        }
        Ok(async move {
            let _slot = slot;
            match rx.await.map_err(|_| ClientError::Disconnected("connection closed".into()))?? {
                Response::Error { code, message } => Err(ClientError::Broker { code, message }),
                resp => Ok(resp),
            }
        })
    }

    /// True once the connection has failed; the pool replaces it.
    pub fn is_closed(&self) -> bool {
        self.pending.lock().expect("pending lock").is_none() || self.out.is_closed()
    }
}

/// Runs the writer and the reader of one connection's stream.
fn start_io<S>(stream: S, rx: mpsc::Receiver<Vec<u8>>, pending: &Pending)
where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read, write) = tokio::io::split(stream);
    tokio::spawn(write_loop(write, rx, pending.clone()));
    tokio::spawn(read_loop(read, pending.clone()));
}

/// Fails every waiting request and marks the connection closed.
fn fail_all(pending: &Pending, reason: &str) {
    if let Some(map) = pending.lock().expect("pending lock").take() {
        for (_, tx) in map {
            let _ = tx.send(Err(ClientError::Disconnected(reason.to_owned())));
        }
    }
}

async fn write_loop(mut write: impl AsyncWrite + Unpin, mut rx: mpsc::Receiver<Vec<u8>>, pending: Pending) {
    let mut buf = Vec::new();
    while let Some(frame) = rx.recv().await {
        buf.clear();
        buf.extend_from_slice(&frame);
        // Coalesce frames that queued up meanwhile into one write.
        while buf.len() < 1 << 20 {
            match rx.try_recv() {
                Ok(more) => buf.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if let Err(e) = write.write_all(&buf).await {
            fail_all(&pending, &format!("write failed: {e}"));
            return;
        }
    }
}

async fn read_loop(mut read: impl AsyncRead + Unpin, pending: Pending) {
    let mut buf = BytesMut::with_capacity(64 * 1024);
    loop {
        match decode_frame(&mut buf, FRAME_BYTES_MAX) {
            Ok(Some(frame)) => dispatch(&pending, frame),
            Ok(None) => match read.read_buf(&mut buf).await {
                Ok(0) => return fail_all(&pending, "the broker closed the connection"),
                Ok(_) => {}
                Err(e) => return fail_all(&pending, &format!("read failed: {e}")),
            },
            Err(e) => return fail_all(&pending, &format!("bad frame from the broker: {e}")),
        }
    }
}

fn dispatch(pending: &Pending, frame: Frame) {
    let id = frame.header.request_id;
    let result = Response::decode(&frame).map_err(ClientError::from);
    let waiter = pending.lock().expect("pending lock").as_mut().and_then(|m| m.remove(&id));
    match waiter {
        Some(tx) => {
            let _ = tx.send(result);
        }
        None if Op::from_u8(frame.header.op).is_ok() && id == 0 => {
            // Id 0 is the broker's own notice (for example a protocol error before
            // it closes the connection); the read loop ends at the close.
            tracing::warn!(?result, "broker notice");
        }
        None => tracing::warn!(id, "response for an unknown request id"),
    }
}
