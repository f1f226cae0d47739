//! Which PEM files each listener uses: `--tls-cert`, `--tls-key` and
//! `--tls-client-ca` for every listener, each overridable per listener
//! (`--http-tls-cert`, `--binary-tls-key`, `--kafka-tls-client-ca`, ...).
//! Half-configured TLS is an error that names the missing setting.

use std::path::PathBuf;

use super::{TlsError, TlsFiles};

/// One set of TLS flags (the shared ones, or one listener's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsFlags {
    pub cert: Option<PathBuf>,
    pub key: Option<PathBuf>,
    pub client_ca: Option<PathBuf>,
}

/// A listener's files: its own flags first, then the shared ones. `None` is
/// plaintext (no certificate, key or client CA anywhere).
pub fn resolve(listener: &str, own: &TlsFlags, shared: &TlsFlags) -> Result<Option<TlsFiles>, TlsError> {
    let pick = |mine: &Option<PathBuf>, all: &Option<PathBuf>, what: &str| {
        let flag = format!("--{listener}-tls-{what}");
        match (mine, all) {
            (Some(p), _) => Some((flag, p.clone())),
            (None, Some(p)) => Some((format!("--tls-{what}"), p.clone())),
            (None, None) => None,
        }
    };
    let cert = pick(&own.cert, &shared.cert, "cert");
    let key = pick(&own.key, &shared.key, "key");
    let ca = pick(&own.client_ca, &shared.client_ca, "client-ca");
    let missing = |have: &str, need: &str| TlsError::Config {
        listener: listener.to_owned(),
        message: format!("{have} is set but no {need}: add --{listener}-tls-{need} or --tls-{need}"),
    };
    let ((cert_setting, cert), (key_setting, key)) = match (cert, key) {
        (Some(c), Some(k)) => (c, k),
        (Some((flag, _)), None) => return Err(missing(&flag, "key")),
        (None, Some((flag, _))) => return Err(missing(&flag, "cert")),
        (None, None) => {
            return match ca {
                Some((flag, _)) => Err(missing(&flag, "cert")),
                None => Ok(None),
            };
        }
    };
    let (client_ca_setting, client_ca) = match ca {
        Some((flag, path)) => (flag, Some(path)),
        None => (format!("--{listener}-tls-client-ca"), None),
    };
    Ok(Some(TlsFiles {
        listener: listener.to_owned(),
        cert_setting,
        cert,
        key_setting,
        key,
        client_ca_setting,
        client_ca,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(cert: Option<&str>, key: Option<&str>, ca: Option<&str>) -> TlsFlags {
        TlsFlags {
            cert: cert.map(PathBuf::from),
            key: key.map(PathBuf::from),
            client_ca: ca.map(PathBuf::from),
        }
    }

    #[test]
    fn own_flags_override_the_shared_ones() {
        let none = TlsFlags::default();
        assert_eq!(resolve("http", &none, &none).unwrap(), None);
        let files =
            resolve("kafka", &flags(Some("k.pem"), None, None), &flags(Some("c.pem"), Some("key.pem"), None))
                .unwrap()
                .unwrap();
        assert_eq!((files.cert_setting.as_str(), files.cert.to_str()), ("--kafka-tls-cert", Some("k.pem")));
        assert_eq!((files.key_setting.as_str(), files.key.to_str()), ("--tls-key", Some("key.pem")));
        assert_eq!(files.client_ca, None);
    }

    #[test]
    fn half_configured_tls_names_the_missing_setting() {
        let none = TlsFlags::default();
        let e = resolve("binary", &flags(Some("c.pem"), None, None), &none).unwrap_err().to_string();
        assert!(e.contains("--binary-tls-cert is set but no key: add --binary-tls-key or --tls-key"), "{e}");
        let e = resolve("http", &none, &flags(None, Some("k.pem"), None)).unwrap_err().to_string();
        assert!(e.contains("--tls-key is set but no cert"), "{e}");
        let e = resolve("kafka", &none, &flags(None, None, Some("ca.pem"))).unwrap_err().to_string();
        assert!(e.contains("--tls-client-ca is set but no cert"), "{e}");
    }
}
