//! A guest's stderr, kept only as its last kilobyte: enough to put a panic
//! message into a trap error, never enough to grow without bound.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

/// Bytes of stderr kept per instance.
const TAIL_BYTES: usize = 1024;

/// The tail of one instance's stderr. Writes always succeed, so a chatty guest
/// never fails (Rust's `eprintln!` panics when stderr errors).
#[derive(Clone, Default)]
pub(crate) struct StderrTail {
    buf: Arc<Mutex<Vec<u8>>>,
}

impl StderrTail {
    /// The panic message, if the guest printed one: the last non-empty lines,
    /// without Rust's `note: run with RUST_BACKTRACE` hint.
    pub(crate) fn last_message(&self) -> Option<String> {
        let buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        let text = String::from_utf8_lossy(&buf);
        let lines: Vec<&str> =
            text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("note:")).collect();
        let tail = lines[lines.len().saturating_sub(2)..].join(" ");
        (!tail.is_empty()).then_some(tail)
    }

    fn append(&self, bytes: &[u8]) {
        let mut buf = self.buf.lock().unwrap_or_else(|e| e.into_inner());
        buf.extend_from_slice(bytes);
        if buf.len() > TAIL_BYTES {
            let excess = buf.len() - TAIL_BYTES;
            buf.drain(..excess);
        }
    }
}

impl IsTerminal for StderrTail {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for StderrTail {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    /// Only WASI p3 uses the async stream, and p3 is not linked.
    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(tokio::io::sink())
    }
}

impl OutputStream for StderrTail {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.append(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(TAIL_BYTES)
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for StderrTail {
    async fn ready(&mut self) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_tail_and_extracts_the_panic_message() {
        let tail = StderrTail::default();
        tail.append(&vec![b'x'; 5000]);
        tail.append(
            b"\nthread '<unnamed>' panicked at src/lib.rs:1:1:\nboom\nnote: run with `RUST_BACKTRACE=1`\n",
        );
        assert_eq!(tail.last_message().unwrap(), "thread '<unnamed>' panicked at src/lib.rs:1:1: boom");
        assert!(tail.buf.lock().unwrap().len() <= TAIL_BYTES);
        assert_eq!(StderrTail::default().last_message(), None);
    }
}
