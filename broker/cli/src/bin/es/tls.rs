//! `--tls-ca` (and, for mTLS, `--tls-cert` with `--tls-key`): how `es` trusts a
//! broker whose certificate a private CA signed, over HTTP (ureq's rustls) and the
//! binary protocol (es-client) alike.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use clap::Args;

#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// Trust this CA (PEM) for the broker's certificate, over HTTPS and the binary
    /// protocol; without it HTTPS trusts the public web roots and binary is plaintext.
    #[arg(long, global = true, env = "ES_TLS_CA", value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
    /// A client certificate (PEM) for a broker that requires one (mTLS); needs --tls-key.
    #[arg(long, global = true, env = "ES_TLS_CERT", value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The client certificate's private key (PEM).
    #[arg(long, global = true, env = "ES_TLS_KEY", value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
}

impl TlsArgs {
    fn identity(&self) -> anyhow::Result<Option<(&PathBuf, &PathBuf)>> {
        match (&self.tls_cert, &self.tls_key) {
            (Some(c), Some(k)) => Ok(Some((c, k))),
            (None, None) => Ok(None),
            (Some(_), None) => bail!("--tls-cert needs --tls-key (the certificate's private key)"),
            (None, Some(_)) => bail!("--tls-key needs --tls-cert"),
        }
    }

    /// ureq's TLS settings: the private CA as the only root, and the client certificate.
    pub fn http(&self) -> anyhow::Result<ureq::tls::TlsConfig> {
        let mut config = ureq::tls::TlsConfig::builder();
        if let Some(ca) = &self.tls_ca {
            let roots = certs(ca)?;
            config = config.root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)));
        }
        if let Some((cert, key)) = self.identity()? {
            let chain = certs(cert)?;
            let text = std::fs::read(key).with_context(|| format!("reading --tls-key {}", key.display()))?;
            let key = ureq::tls::PrivateKey::from_pem(&text)
                .with_context(|| format!("--tls-key {}: no private key in it", key.display()))?;
            config = config.client_cert(Some(ureq::tls::ClientCert::new_with_certs(&chain, key)));
        }
        Ok(config.build())
    }

    /// es-client's TLS, when a CA is given: the binary protocol is TLS exactly then.
    pub fn binary(&self) -> anyhow::Result<Option<es_client::ClientTls>> {
        let Some(ca) = &self.tls_ca else {
            if self.identity()?.is_some() {
                bail!("--tls-cert needs --tls-ca for the binary protocol");
            }
            return Ok(None);
        };
        let tls = match self.identity()? {
            Some((cert, key)) => es_client::ClientTls::with_client_cert(ca, cert, key)?,
            None => es_client::ClientTls::from_ca_file(ca)?,
        };
        Ok(Some(tls))
    }
}

fn certs(path: &PathBuf) -> anyhow::Result<Vec<ureq::tls::Certificate<'static>>> {
    let text = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let mut out = Vec::new();
    for item in ureq::tls::parse_pem(&text) {
        if let ureq::tls::PemItem::Certificate(c) =
            item.with_context(|| format!("{}: bad PEM", path.display()))?
        {
            out.push(c);
        }
    }
    if out.is_empty() {
        bail!("{} holds no certificate", path.display());
    }
    Ok(out)
}
