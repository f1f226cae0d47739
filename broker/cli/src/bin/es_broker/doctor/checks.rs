//! The doctor's checks of the configuration, the listeners, TLS files and the clock.

use std::net::{SocketAddr, TcpListener, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use super::Finding;
use crate::resolve::Effective;

/// Certificates closer than this to their end are warned about.
const EXPIRY_WARNING: Duration = Duration::from_secs(30 * 24 * 3600);
/// A clock before this (2025-01-01) is not set.
const CLOCK_FLOOR_S: u64 = 1_735_689_600;
/// Data files this far in the future mean the clock went back.
const CLOCK_SKEW: Duration = Duration::from_secs(300);
/// How many files the clock check looks at, at most.
const CLOCK_FILES_MAX: usize = 10_000;

/// The same checks as a start (`config validate`): ranges, unsafe listeners, TLS
/// files readable and their cert and key matching.
pub fn config(cfg: &Effective) -> Vec<Finding> {
    match crate::plan(cfg) {
        Ok(_) => vec![Finding::ok("config", "every setting is valid; the broker would start with them")],
        Err(errors) => errors
            .into_iter()
            .map(|e| {
                Finding::fail("config", e, "the broker refuses to start like this: fix the setting named")
            })
            .collect(),
    }
}

/// Each listener: its port free, and who can reach it.
pub fn listeners(cfg: &Effective) -> Vec<Finding> {
    let auth = cfg.flag("auth.enabled");
    let mut out = Vec::new();
    for (id, name) in [("http.bind", "http"), ("binary.bind", "binary"), ("kafka.bind", "kafka")] {
        let bind = cfg.text(id).unwrap_or_default();
        let Ok(addrs) = bind.to_socket_addrs().map(Vec::from_iter) else {
            continue; // config() already names an address that does not resolve
        };
        let Some(addr) = addrs.first().copied() else { continue };
        out.push(port_free(name, id, addr));
        out.push(exposure(cfg, name, id, addr, auth));
    }
    out.extend(advertised(cfg));
    out
}

fn port_free(name: &str, id: &str, addr: SocketAddr) -> Finding {
    if addr.port() == 0 {
        return Finding::ok("ports", format!("{name} {addr}: port 0, a free port is picked at start"));
    }
    match TcpListener::bind(addr) {
        Ok(_) => Finding::ok("ports", format!("{name} {addr} is free")),
        Err(e) => Finding::fail(
            "ports",
            format!("{name} {addr} cannot be bound: {e}"),
            format!(
                "another process (a running broker?) may hold it: stop it, or set {id} to another address"
            ),
        ),
    }
}

fn exposure(cfg: &Effective, name: &str, id: &str, addr: SocketAddr, auth: bool) -> Finding {
    let tls = tls_files(cfg, name).is_some();
    match (addr.ip().is_loopback(), auth, tls) {
        (true, _, _) => Finding::ok("exposure", format!("{name} listens on loopback only")),
        (false, false, _) => Finding::fail(
            "exposure",
            format!("{name} {addr} is reachable from the network without auth"),
            format!("set auth.enabled = true (--auth) or bind {id} to 127.0.0.1"),
        ),
        (false, true, false) => Finding::warn(
            "exposure",
            format!("{name} {addr} is reachable from the network without TLS: API keys travel in the clear"),
            "set tls.cert_file and tls.key_file (docs/security.md, \"TLS\")",
        ),
        (false, true, true) => {
            Finding::ok("exposure", format!("{name} {addr} is on the network with auth and TLS"))
        }
    }
}

/// The Kafka address clients are told about must resolve where they run; here it
/// must at least resolve.
fn advertised(cfg: &Effective) -> Option<Finding> {
    let host = cfg.text("kafka.advertised_host")?;
    let port = cfg.int("kafka.advertised_port").unwrap_or(9092);
    let resolved = (host.as_str(), u16::try_from(port).unwrap_or(0)).to_socket_addrs().map(|mut a| a.next());
    Some(match resolved {
        Ok(Some(_)) => {
            Finding::ok("kafka", format!("advertised host {host} resolves; clients connect to {host}:{port}"))
        }
        Ok(None) | Err(_) => Finding::fail(
            "kafka",
            format!("advertised host {host} does not resolve here"),
            "set kafka.advertised_host to a name or IP Kafka clients can reach",
        ),
    })
}

/// A listener's certificate file, if it speaks TLS.
fn tls_files(cfg: &Effective, listener: &str) -> Option<PathBuf> {
    cfg.path(&format!("{listener}.tls_cert_file")).or_else(|| cfg.path("tls.cert_file"))
}

/// Days left on each listener's certificate.
pub fn tls_expiry(cfg: &Effective) -> Vec<Finding> {
    let mut paths: Vec<PathBuf> =
        ["http", "binary", "kafka"].iter().filter_map(|l| tls_files(cfg, l)).collect();
    paths.dedup();
    paths.iter().filter_map(|p| expiry(p)).collect()
}

fn expiry(path: &Path) -> Option<Finding> {
    // Unreadable or invalid files are config()'s findings already.
    let der = CertificateDer::pem_file_iter(path).ok()?.next()?.ok()?;
    let (_, cert) = x509_parser::parse_x509_certificate(&der).ok()?;
    let now = now_s() as i64;
    let left = cert.validity().not_after.timestamp() - now;
    let days = left / 86_400;
    let file = path.display();
    Some(if left <= 0 {
        Finding::fail("tls", format!("{file} expired {} days ago", -days), "install a renewed certificate")
    } else if cert.validity().not_before.timestamp() > now {
        Finding::fail(
            "tls",
            format!("{file} is not valid yet"),
            "check the clock, or the certificate's start date",
        )
    } else if left < EXPIRY_WARNING.as_secs() as i64 {
        Finding::warn(
            "tls",
            format!("{file} expires in {days} days"),
            "renew it before then; a restart loads it",
        )
    } else {
        Finding::ok("tls", format!("{file} is valid for {days} more days"))
    })
}

fn now_s() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The clock is set, and not behind the data it would stamp new records after.
pub fn clock(data_dir: &Path) -> Vec<Finding> {
    if now_s() < CLOCK_FLOOR_S {
        return vec![Finding::fail(
            "clock",
            "the system clock is before 2025: it is not set",
            "set the time (enable NTP, e.g. systemd-timesyncd or chrony)",
        )];
    }
    let newest = newest_mtime(data_dir);
    match newest.and_then(|t| t.duration_since(SystemTime::now() + CLOCK_SKEW).ok()) {
        Some(ahead) => vec![Finding::warn(
            "clock",
            format!(
                "files in {} are {}s in the future: the clock went back",
                data_dir.display(),
                ahead.as_secs()
            ),
            "fix the time before starting: record timestamps and time-based retention follow the clock",
        )],
        None => vec![Finding::ok("clock", "the clock is set and not behind the data")],
    }
}

/// The newest modification time under `dir`, over a bounded number of files.
fn newest_mtime(dir: &Path) -> Option<SystemTime> {
    let mut stack = vec![dir.to_owned()];
    let (mut seen, mut newest) = (0, None);
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else { continue };
        for entry in entries.flatten() {
            seen += 1;
            if seen > CLOCK_FILES_MAX {
                return newest;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            }
            newest = newest.max(meta.modified().ok());
        }
    }
    newest
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::{Inputs, resolve};

    fn cfg(file: &str) -> Effective {
        resolve(&Inputs { file: Some(("es.toml".into(), file.to_owned())), ..Inputs::default() }).unwrap()
    }

    #[test]
    fn a_port_in_use_fails_and_port_zero_is_fine() {
        let held = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = held.local_addr().unwrap();
        let c = cfg(&format!("[http]\nbind = \"{addr}\"\n[binary]\nbind = \"127.0.0.1:0\"\n"));
        let found = listeners(&c);
        let http = found.iter().find(|f| f.check == "ports" && f.message.starts_with("http")).unwrap();
        assert_eq!(http.status, super::super::Status::Fail, "{found:?}");
        let binary = found.iter().find(|f| f.check == "ports" && f.message.starts_with("binary")).unwrap();
        assert_eq!(binary.status, super::super::Status::Ok);
    }

    #[test]
    fn a_network_bind_without_auth_fails() {
        let found = listeners(&cfg("[kafka]\nbind = \"0.0.0.0:0\"\n"));
        let kafka = found.iter().find(|f| f.check == "exposure" && f.message.starts_with("kafka")).unwrap();
        assert_eq!(kafka.status, super::super::Status::Fail);
    }

    /// A self-signed certificate valid from `days_from` to `days_to` days from now.
    fn cert(dir: &Path, days_from: i64, days_to: i64) -> PathBuf {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let day = |d: i64| rcgen::date_time_ymd(1970, 1, 1) + time_days(now_s() as i64 / 86_400 + d);
        params.not_before = day(days_from);
        params.not_after = day(days_to);
        let key = rcgen::KeyPair::generate().unwrap();
        let path = dir.join(format!("cert{days_from}{days_to}.pem"));
        std::fs::write(&path, params.self_signed(&key).unwrap().pem()).unwrap();
        path
    }

    fn time_days(days: i64) -> Duration {
        Duration::from_secs(u64::try_from(days).unwrap() * 86_400)
    }

    #[test]
    fn certificates_near_or_past_their_end_are_flagged() {
        use super::super::Status;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(expiry(&cert(dir.path(), -1, 365)).unwrap().status, Status::Ok);
        let soon = expiry(&cert(dir.path(), -1, 10)).unwrap();
        assert_eq!(soon.status, Status::Warn);
        assert!(
            soon.message.contains("expires in 9 days") || soon.message.contains("expires in 10 days"),
            "{soon:?}"
        );
        assert_eq!(expiry(&cert(dir.path(), -30, -2)).unwrap().status, Status::Fail);
        assert_eq!(expiry(&cert(dir.path(), 2, 30)).unwrap().status, Status::Fail);
        assert!(expiry(&dir.path().join("absent.pem")).is_none());
    }

    #[test]
    fn files_from_the_future_mean_the_clock_went_back() {
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("x")).unwrap();
        file.set_modified(SystemTime::now() + Duration::from_secs(3600)).unwrap();
        assert_eq!(clock(dir.path())[0].status, super::super::Status::Warn);
        file.set_modified(SystemTime::now()).unwrap();
        assert_eq!(clock(dir.path())[0].status, super::super::Status::Ok);
    }
}
