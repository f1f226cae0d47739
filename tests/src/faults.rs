//! A fault proxy for the cluster tests: a TCP relay on 127.0.0.1 between two nodes'
//! peer links that passes bytes, cuts the link (open connections reset, new ones
//! closed at once) or stalls one direction.
//!
//! A stalled direction models packets lost one way: the relay stops reading from
//! that side, so the bytes wait in the kernel's buffers (and then in the sender's),
//! as unacknowledged TCP segments would, and flow on intact when the stall ends.
//! Nothing is ever dropped from the middle of a stream: the link's own timeouts
//! decide when to give up on it, as they would on a real network.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the relay does with bytes, per direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Every byte flows both ways.
    Pass,
    /// No connection: open ones are reset, new ones closed at once.
    Cut,
    /// Bytes from the dialing side wait; the other way flows.
    StallFromDialer,
    /// Bytes towards the dialing side wait; the other way flows.
    StallToDialer,
}

impl Fault {
    fn code(self) -> u8 {
        match self {
            Fault::Pass => 0,
            Fault::Cut => 1,
            Fault::StallFromDialer => 2,
            Fault::StallToDialer => 3,
        }
    }

    fn of(code: u8) -> Fault {
        match code {
            1 => Fault::Cut,
            2 => Fault::StallFromDialer,
            3 => Fault::StallToDialer,
            _ => Fault::Pass,
        }
    }
}

struct Shared {
    fault: AtomicU8,
    stopped: AtomicBool,
    /// Both sockets of every open connection, to reset them on a cut.
    open: Mutex<Vec<(TcpStream, TcpStream)>>,
}

impl Shared {
    fn fault(&self) -> Fault {
        Fault::of(self.fault.load(Ordering::SeqCst))
    }
}

/// One relay: a dialer connects to [`FaultProxy::addr`], the relay connects on to
/// the target.
pub struct FaultProxy {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

/// How often a stalled copier looks again, and how often the acceptor checks stop.
const POLL: Duration = Duration::from_millis(10);

impl FaultProxy {
    /// A relay to `target` (which need not be listening yet), passing bytes.
    pub fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding a fault proxy");
        let addr = listener.local_addr().expect("proxy address");
        listener.set_nonblocking(true).expect("non-blocking accept");
        let shared = Arc::new(Shared {
            fault: AtomicU8::new(Fault::Pass.code()),
            stopped: AtomicBool::new(false),
            open: Mutex::new(Vec::new()),
        });
        let s = shared.clone();
        std::thread::spawn(move || accept(listener, target, s));
        FaultProxy { addr, shared }
    }

    /// Where dialers connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn fault(&self) -> Fault {
        self.shared.fault()
    }

    /// Applies `fault` from now on; a cut resets every open connection.
    pub fn set(&self, fault: Fault) {
        self.shared.fault.store(fault.code(), Ordering::SeqCst);
        if fault == Fault::Cut {
            reset_all(&self.shared);
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        reset_all(&self.shared);
    }
}

fn reset_all(shared: &Shared) {
    for (a, b) in shared.open.lock().expect("proxy lock").drain(..) {
        let _ = a.shutdown(Shutdown::Both);
        let _ = b.shutdown(Shutdown::Both);
    }
}

fn accept(listener: TcpListener, target: SocketAddr, shared: Arc<Shared>) {
    while !shared.stopped.load(Ordering::SeqCst) {
        let dialer = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(POLL);
                continue;
            }
            Err(_) => continue,
        };
        if shared.fault() == Fault::Cut {
            continue; // dropped: the dialer sees the connection close
        }
        let _ = dialer.set_nonblocking(false);
        let Ok(upstream) = TcpStream::connect_timeout(&target, Duration::from_secs(2)) else { continue };
        let _ = (dialer.set_nodelay(true), upstream.set_nodelay(true));
        let (Ok(d2), Ok(u2), Ok(d3), Ok(u3)) =
            (dialer.try_clone(), upstream.try_clone(), dialer.try_clone(), upstream.try_clone())
        else {
            continue;
        };
        shared.open.lock().expect("proxy lock").push((d3, u3));
        let s = shared.clone();
        std::thread::spawn(move || copy(dialer, upstream, Fault::StallFromDialer, s));
        let s = shared.clone();
        std::thread::spawn(move || copy(u2, d2, Fault::StallToDialer, s));
    }
}

/// Waits while `stall` holds this direction: false once the link is cut or the
/// proxy stops.
fn wait_unstalled(shared: &Shared, stall: Fault) -> bool {
    loop {
        match shared.fault() {
            Fault::Cut => return false,
            f if f == stall => std::thread::sleep(POLL),
            _ => return true,
        }
        if shared.stopped.load(Ordering::SeqCst) {
            return false;
        }
    }
}

/// Copies `from` to `to` until either closes, holding each chunk read while the
/// fault stalls this direction (`stall`) and closing both on a cut.
fn copy(mut from: TcpStream, mut to: TcpStream, stall: Fault, shared: Arc<Shared>) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // A stalled direction does not read at all, so the sender's buffers fill.
        if !wait_unstalled(&shared, stall) {
            break;
        }
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        // Read before the stall began: hold the chunk until it ends.
        if !wait_unstalled(&shared, stall) {
            break;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn echo_server() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                std::thread::spawn(move || {
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    fn round_trip(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        s.write_all(msg)?;
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got)?;
        Ok(got)
    }

    #[test]
    fn passes_stalls_and_cuts() {
        let proxy = FaultProxy::start(echo_server());
        let mut s = TcpStream::connect(proxy.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        assert_eq!(round_trip(&mut s, b"one").unwrap(), b"one");

        // Stalled towards the dialer: the echo waits, then arrives intact.
        proxy.set(Fault::StallToDialer);
        s.write_all(b"two").unwrap();
        let mut buf = [0u8; 3];
        assert!(s.read_exact(&mut buf).is_err(), "a stalled direction delivered bytes");
        proxy.set(Fault::Pass);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.read_exact(&mut buf).unwrap();
        assert_eq!(&buf, b"two");

        // A cut resets the open connection and refuses the next one.
        proxy.set(Fault::Cut);
        let mut buf = [0u8; 1];
        assert!(matches!(s.read(&mut buf), Ok(0) | Err(_)), "a cut connection stayed open");
        let mut again = TcpStream::connect(proxy.addr()).unwrap();
        again.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let _ = again.write_all(b"x");
        assert!(matches!(again.read(&mut buf), Ok(0) | Err(_)), "a cut proxy relayed a new connection");

        proxy.set(Fault::Pass);
        let mut healed = TcpStream::connect(proxy.addr()).unwrap();
        healed.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        assert_eq!(round_trip(&mut healed, b"three").unwrap(), b"three");
    }
}
