//! The HTTP listener's own timeouts, which hyper (as axum runs it, without a timer)
//! does not keep: a connection between requests that has sent part of a request
//! head gets `header_read_timeout` to finish it, counted from that head's first
//! byte, and one that has sent nothing gets the idle timeout, counted from the
//! connection's start or its previous response; while a request is being served (its headers are in) neither runs, so
//! a long poll is never cut. A timeout fails the read, and hyper closes the socket.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::tls::Stream;

/// What the request middleware tells the connection: a request is being served.
#[derive(Debug, Default)]
pub struct ConnWatch {
    in_flight: AtomicUsize,
    /// Set when a response is handed back: the between-requests clocks restart.
    finished: AtomicBool,
}

/// Marks one request in flight on its connection until dropped.
#[derive(Debug)]
pub struct Serving(Arc<ConnWatch>);

impl ConnWatch {
    /// Called once a request's head is parsed, before its handler runs.
    pub fn serving(self: &Arc<ConnWatch>) -> Serving {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        Serving(self.clone())
    }
}

impl Drop for Serving {
    fn drop(&mut self) {
        self.0.finished.store(true, Ordering::Release);
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The two between-requests timeouts; `None` is no limit.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub header_read: Option<Duration>,
    pub idle: Option<Duration>,
}

/// A connection's stream that fails its read when a between-requests timeout passes.
/// It also holds the connection's slots, so they are given back when hyper drops it.
pub struct Watched {
    inner: Stream,
    watch: Arc<ConnWatch>,
    timeouts: Timeouts,
    /// Start of the current between-requests period.
    since: Instant,
    /// Whether a byte arrived in this period (a request head has begun).
    begun: bool,
    timer: Pin<Box<Sleep>>,
    _slots: Box<dyn Send + Sync>,
}

impl std::fmt::Debug for Watched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched").field("begun", &self.begun).finish_non_exhaustive()
    }
}

impl Watched {
    pub fn new(
        inner: Stream,
        watch: Arc<ConnWatch>,
        timeouts: Timeouts,
        slots: Box<dyn Send + Sync>,
    ) -> Self {
        let now = Instant::now();
        Watched {
            inner,
            watch,
            timeouts,
            since: now,
            begun: false,
            timer: Box::pin(tokio::time::sleep_until(now)),
            _slots: slots,
        }
    }

    /// The deadline of the current period, when one applies now.
    fn deadline(&mut self) -> Option<Instant> {
        if self.watch.finished.swap(false, Ordering::AcqRel) {
            self.since = Instant::now();
            self.begun = false;
        }
        if self.watch.in_flight.load(Ordering::Acquire) > 0 {
            return None;
        }
        let limit = if self.begun { self.timeouts.header_read } else { self.timeouts.idle };
        limit.map(|d| self.since + d)
    }
}

impl AsyncRead for Watched {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(r) => {
                let idle = this.watch.in_flight.load(Ordering::Acquire) == 0;
                if buf.filled().len() > before && idle && !this.begun {
                    // The header-read clock starts at a request's first byte: a
                    // kept-alive connection idle for longer than it must not find
                    // its next request already late.
                    this.watch.finished.store(false, Ordering::Release);
                    this.begun = true;
                    this.since = Instant::now();
                }
                Poll::Ready(r)
            }
            Poll::Pending => {
                let Some(at) = this.deadline() else { return Poll::Pending };
                this.timer.as_mut().reset(at);
                match this.timer.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        let what = if this.begun { "request headers" } else { "a request" };
                        Poll::Ready(Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            format!("timed out waiting for {what}"),
                        )))
                    }
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let flushed = Pin::new(&mut this.inner).poll_flush(cx);
        // A response went out: hyper's read was last polled while the request was in
        // flight (no timer then), so wake the connection to poll it again and arm
        // the idle clock; without this a kept-alive connection is never timed out.
        if flushed.is_ready() && this.watch.finished.load(Ordering::Acquire) {
            cx.waker().wake_by_ref();
        }
        flushed
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
