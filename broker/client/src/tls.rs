//! TLS for the binary protocol (rustls, ring provider, TLS 1.2 and 1.3): the CA
//! that signed the broker's certificate (a private one: `es --tls-ca`,
//! `ES_TLS_CA`) and, for mTLS, a client certificate and key.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

use crate::error::{ClientError, Result};

/// How a client speaks TLS to the broker. Cheap to clone.
#[derive(Clone)]
pub struct ClientTls {
    connector: tokio_rustls::TlsConnector,
    /// The name the broker's certificate must carry [default: the host of the
    /// address connected to].
    pub server_name: Option<String>,
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").field("server_name", &self.server_name).finish_non_exhaustive()
    }
}

impl ClientTls {
    /// Trusts the CA certificates in the PEM file `ca` (and nothing else).
    pub fn from_ca_file(ca: &Path) -> Result<ClientTls> {
        Self::build(ca, None)
    }

    /// As [`ClientTls::from_ca_file`], presenting a client certificate chain and
    /// key (PEM files) to a broker that requires them.
    pub fn with_client_cert(ca: &Path, cert: &Path, key: &Path) -> Result<ClientTls> {
        Self::build(ca, Some((cert, key)))
    }

    fn build(ca: &Path, identity: Option<(&Path, &Path)>) -> Result<ClientTls> {
        let mut roots = rustls::RootCertStore::empty();
        for cert in read_certs(ca)? {
            roots.add(cert).map_err(|e| tls_error(ca, e))?;
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| tls_error(ca, e))?
            .with_root_certificates(roots);
        let config = match identity {
            Some((cert, key)) => {
                let chain = read_certs(cert)?;
                let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| tls_error(key, e))?;
                builder.with_client_auth_cert(chain, key_der).map_err(|e| tls_error(cert, e))?
            }
            None => builder.with_no_client_auth(),
        };
        Ok(ClientTls { connector: tokio_rustls::TlsConnector::from(Arc::new(config)), server_name: None })
    }

    /// Runs the client handshake over `tcp`, checking the broker's certificate
    /// against `addr`'s host (or `server_name`).
    pub(crate) async fn connect(
        &self,
        addr: &str,
        tcp: tokio::net::TcpStream,
    ) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>> {
        let host = self.server_name.clone().unwrap_or_else(|| host_of(addr).to_owned());
        let name = ServerName::try_from(host.clone()).map_err(|e| ClientError::Tls {
            addr: addr.to_owned(),
            reason: format!("{host:?} is not a server name: {e}"),
        })?;
        self.connector
            .connect(name, tcp)
            .await
            .map_err(|e| ClientError::Tls { addr: addr.to_owned(), reason: e.to_string() })
    }
}

/// The host part of `host:port`, `[v6]:port` included.
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host)
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| tls_error(path, e))?;
    if certs.is_empty() {
        return Err(tls_error(path, "no certificate in the file"));
    }
    Ok(certs)
}

fn tls_error(path: &Path, e: impl std::fmt::Display) -> ClientError {
    ClientError::TlsFiles { path: path.display().to_string(), reason: e.to_string() }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_host_of_an_address() {
        assert_eq!(host_of("127.0.0.1:9001"), "127.0.0.1");
        assert_eq!(host_of("localhost:9001"), "localhost");
        assert_eq!(host_of("[::1]:9001"), "::1");
        assert_eq!(host_of("broker"), "broker");
    }
}
