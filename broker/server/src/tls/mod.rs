//! TLS on the listeners (rustls, ring provider, TLS 1.2 and 1.3 only): the PEM
//! files of one listener, its acceptor with optional mTLS, and the identity a
//! verified client certificate maps to (`identity.rs`). Certificates are read at
//! start and again by [`ServerTls::reload`] (on SIGHUP, and when [`watch_files`]
//! sees a file change): each handshake takes the config in force when it begins,
//! so open connections keep theirs and a broken new file keeps the old config
//! (docs/security.md, "TLS").

mod config;
mod identity;
mod stream;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpStream;

pub use config::{TlsFlags, resolve};
pub use identity::{PrincipalRule, RuleMatch};
pub use stream::{Peer, Stream};

/// Why a listener's TLS could not be set up. Each names the setting to fix.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{setting}: reading {path}: {message}")]
    Pem { setting: String, path: PathBuf, message: String },
    #[error("{setting}: {path} holds no certificate")]
    NoCertificate { setting: String, path: PathBuf },
    #[error("{listener} listener: {message}")]
    Config { listener: String, message: String },
    #[error("--tls-principal-rule {rule:?}: {message}")]
    Rule { rule: String, message: String },
}

/// One listener's PEM files: its certificate chain, its private key and, for
/// mTLS, the CA whose client certificates it requires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// The listener's name in messages (`http`, `binary`, `kafka`).
    pub listener: String,
    /// The flag each file came from, so an error names what to fix.
    pub cert_setting: String,
    pub cert: PathBuf,
    pub key_setting: String,
    pub key: PathBuf,
    pub client_ca_setting: String,
    pub client_ca: Option<PathBuf>,
}

/// A listener's TLS: the config in force (replaced whole by a reload; clones
/// share it) and the rules that turn a client certificate into a key.
#[derive(Clone)]
pub struct ServerTls {
    config: Arc<RwLock<Arc<rustls::ServerConfig>>>,
    /// What the config was built from, to build it again.
    files: Arc<TlsFiles>,
    alpn: Arc<[Vec<u8>]>,
    /// The files' modification times at the last load, to see a change.
    stamps: Arc<RwLock<Vec<Option<SystemTime>>>>,
    rules: Arc<[PrincipalRule]>,
    mtls: bool,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").field("mtls", &self.mtls).field("rules", &self.rules.len()).finish()
    }
}

impl ServerTls {
    /// Reads the files and builds the config. `alpn` is what the listener speaks
    /// (HTTP offers `http/1.1`; the binary and Kafka protocols offer nothing).
    pub fn load(files: &TlsFiles, rules: &[PrincipalRule], alpn: &[&[u8]]) -> Result<ServerTls, TlsError> {
        let alpn: Arc<[Vec<u8>]> = alpn.iter().map(|p| p.to_vec()).collect();
        let stamps = stamps(files);
        let config = build(files, &alpn)?;
        Ok(ServerTls {
            config: Arc::new(RwLock::new(Arc::new(config))),
            files: Arc::new(files.clone()),
            alpn,
            stamps: Arc::new(RwLock::new(stamps)),
            rules: rules.into(),
            mtls: files.client_ca.is_some(),
        })
    }

    /// Reads the files again and puts the new config in force for every later
    /// handshake; open connections keep the session they have. On an error the
    /// old config stays in force.
    pub fn reload(&self) -> Result<(), TlsError> {
        let stamps = stamps(&self.files);
        let config = build(&self.files, &self.alpn)?;
        *self.config.write().expect("tls config lock") = Arc::new(config);
        *self.stamps.write().expect("tls stamps lock") = stamps;
        tracing::info!(listener = %self.files.listener, "TLS certificates reloaded");
        Ok(())
    }

    /// Whether a file's modification time differs from the last load's.
    fn changed(&self) -> bool {
        *self.stamps.read().expect("tls stamps lock") != stamps(&self.files)
    }

    /// Whether this listener requires client certificates.
    pub fn mtls(&self) -> bool {
        self.mtls
    }

    /// Runs the server handshake (bounded in time) and maps a verified client
    /// certificate to its key. `None` when the client failed or gave up.
    pub async fn accept(&self, tcp: TcpStream, addr: SocketAddr) -> Option<(Stream, Peer)> {
        let limit = Duration::from_millis(crate::limits::TLS_HANDSHAKE_TIMEOUT_MS);
        let config = self.config.read().expect("tls config lock").clone();
        let acceptor = tokio_rustls::TlsAcceptor::from(config);
        let tls = match tokio::time::timeout(limit, acceptor.accept(tcp)).await {
            Ok(Ok(tls)) => tls,
            Ok(Err(e)) => {
                // Debug, not warn: anyone can make a handshake fail, and logs are not theirs to fill.
                tracing::debug!(peer = %addr, error = %e, "TLS handshake failed");
                return None;
            }
            Err(_) => {
                tracing::debug!(peer = %addr, "TLS handshake timed out");
                return None;
            }
        };
        let leaf = tls.get_ref().1.peer_certificates().and_then(|chain| chain.first());
        let key = leaf.and_then(|cert| identity::principal_of(&self.rules, cert.as_ref()));
        if let (Some(_), None) = (leaf, &key) {
            tracing::info!(peer = %addr, "a verified client certificate matches no --tls-principal-rule: anonymous");
        }
        Some((Stream::Tls(Box::new(tls)), Peer { addr, tls: true, tls_key: key }))
    }
}

/// The rustls config of one listener's files (TLS 1.2 and 1.3, optional mTLS).
fn build(files: &TlsFiles, alpn: &[Vec<u8>]) -> Result<rustls::ServerConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = read_certs(&files.cert_setting, &files.cert)?;
    let key =
        PrivateKeyDer::from_pem_file(&files.key).map_err(|e| pem_error(&files.key_setting, &files.key, e))?;
    let config_error =
        |e: rustls::Error| TlsError::Config { listener: files.listener.clone(), message: e.to_string() };
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
        .map_err(config_error)?;
    let builder = match &files.client_ca {
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for cert in read_certs(&files.client_ca_setting, ca)? {
                roots.add(cert).map_err(config_error)?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| TlsError::Config { listener: files.listener.clone(), message: e.to_string() })?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| TlsError::Config {
        listener: files.listener.clone(),
        message: format!("{} and {} do not fit together: {e}", files.cert_setting, files.key_setting),
    })?;
    config.alpn_protocols = alpn.to_vec();
    Ok(config)
}

/// The modification times of a listener's files (`None` for one unreadable now).
fn stamps(files: &TlsFiles) -> Vec<Option<SystemTime>> {
    let paths = [Some(&files.cert), Some(&files.key), files.client_ca.as_ref()];
    paths.into_iter().flatten().map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok()).collect()
}

/// Reloads every listener's TLS whose files changed, looking every `every`, until
/// the task is dropped. A failed reload is logged and tried again on the next
/// change; the old config stays in force meanwhile.
pub async fn watch_files(tls: Vec<ServerTls>, every: Duration) {
    loop {
        tokio::time::sleep(every).await;
        for t in tls.iter().filter(|t| t.changed()) {
            if let Err(e) = t.reload() {
                tracing::warn!(error = %e, "TLS files changed but could not be loaded; the old ones stay in force");
                // Taken as seen, so a broken file is not retried (and logged) every tick.
                *t.stamps.write().expect("tls stamps lock") = stamps(&t.files);
            }
        }
    }
}

/// Accepts a connection on a listener with or without TLS.
pub async fn accept(tls: Option<&ServerTls>, tcp: TcpStream, addr: SocketAddr) -> Option<(Stream, Peer)> {
    // Small frames are the norm on every listener; TLS records are no exception.
    tcp.set_nodelay(true).ok();
    match tls {
        Some(tls) => tls.accept(tcp, addr).await,
        None => Some((Stream::Plain(tcp), Peer { addr, tls: false, tls_key: None })),
    }
}

/// Every certificate in a PEM file, at least one.
pub fn read_certs(setting: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|e| pem_error(setting, path, e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { setting: setting.to_owned(), path: path.to_owned() });
    }
    Ok(certs)
}

fn pem_error(setting: &str, path: &Path, e: rustls::pki_types::pem::Error) -> TlsError {
    TlsError::Pem { setting: setting.to_owned(), path: path.to_owned(), message: e.to_string() }
}
