//! TLS on the listeners (rustls, ring provider, TLS 1.2 and 1.3 only): the PEM
//! files of one listener, its acceptor with optional mTLS, and the identity a
//! verified client certificate maps to (`identity.rs`). Certificates are read once
//! at start; a change needs a restart (docs/security.md, "TLS").

mod config;
mod identity;
mod stream;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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

/// A listener's TLS: the acceptor and the rules that turn a client certificate
/// into a key.
#[derive(Clone)]
pub struct ServerTls {
    acceptor: tokio_rustls::TlsAcceptor,
    rules: Arc<[PrincipalRule]>,
    mtls: bool,
}

impl std::fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerTls").field("mtls", &self.mtls).field("rules", &self.rules.len()).finish()
    }
}

impl ServerTls {
    /// Reads the files and builds the acceptor. `alpn` is what the listener speaks
    /// (HTTP offers `http/1.1`; the binary and Kafka protocols offer nothing).
    pub fn load(files: &TlsFiles, rules: &[PrincipalRule], alpn: &[&[u8]]) -> Result<ServerTls, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let chain = read_certs(&files.cert_setting, &files.cert)?;
        let key = PrivateKeyDer::from_pem_file(&files.key)
            .map_err(|e| pem_error(&files.key_setting, &files.key, e))?;
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
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider).build().map_err(
                        |e| TlsError::Config { listener: files.listener.clone(), message: e.to_string() },
                    )?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_single_cert(chain, key).map_err(|e| TlsError::Config {
            listener: files.listener.clone(),
            message: format!("{} and {} do not fit together: {e}", files.cert_setting, files.key_setting),
        })?;
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(ServerTls {
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            rules: rules.into(),
            mtls: files.client_ca.is_some(),
        })
    }

    /// Whether this listener requires client certificates.
    pub fn mtls(&self) -> bool {
        self.mtls
    }

    /// Runs the server handshake (bounded in time) and maps a verified client
    /// certificate to its key. `None` when the client failed or gave up.
    pub async fn accept(&self, tcp: TcpStream, addr: SocketAddr) -> Option<(Stream, Peer)> {
        let limit = Duration::from_millis(crate::limits::TLS_HANDSHAKE_TIMEOUT_MS);
        let tls = match tokio::time::timeout(limit, self.acceptor.accept(tcp)).await {
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
