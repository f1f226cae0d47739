//! A peer node's configuration: its id, the other nodes' addresses, the shared
//! secrets (current and previous, for rotation) and the timeouts.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::PeerError;
use crate::limits;

/// One shared secret and the id that names it on the wire. The bytes never leave
/// the node: only MACs computed with them do.
#[derive(Clone)]
pub struct Secret {
    pub key_id: u32,
    bytes: Vec<u8>,
}

impl Secret {
    /// The caller reads `bytes` from the secret file; trailing whitespace (a file's
    /// final newline) is part of the secret only if the caller keeps it.
    pub fn new(key_id: u32, bytes: impl Into<Vec<u8>>) -> Self {
        Self { key_id, bytes: bytes.into() }
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

// The secret's bytes stay out of logs and panic messages.
impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Secret").field("key_id", &self.key_id).finish_non_exhaustive()
    }
}

/// The secrets a node holds: it dials with `current` (and falls back to `previous`
/// when the peer refuses it) and accepts either, so nodes can move to a new secret
/// one restart at a time.
#[derive(Debug, Clone)]
pub struct Secrets {
    pub current: Secret,
    pub previous: Option<Secret>,
}

impl Secrets {
    pub fn single(current: Secret) -> Self {
        Self { current, previous: None }
    }

    /// The secret named `key_id`, if this node holds it.
    pub(crate) fn by_key_id(&self, key_id: u32) -> Option<&Secret> {
        std::iter::once(&self.current).chain(self.previous.as_ref()).find(|s| s.key_id == key_id)
    }

    /// The secrets to dial with, in order of preference.
    pub(crate) fn dial_order(&self) -> impl Iterator<Item = &Secret> {
        std::iter::once(&self.current).chain(self.previous.as_ref())
    }
}

/// Timeouts and redial backoff.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub handshake: Duration,
    /// The default for [`crate::PeerNode::call`].
    pub request: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    /// A link with nothing to send for this long sends a keepalive.
    pub keepalive: Duration,
    /// A link that receives nothing for this long is closed (several keepalives).
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        let ms = Duration::from_millis;
        Self {
            connect: ms(limits::CONNECT_TIMEOUT_MS_DEFAULT),
            handshake: ms(limits::HANDSHAKE_TIMEOUT_MS_DEFAULT),
            request: ms(limits::REQUEST_TIMEOUT_MS_DEFAULT),
            backoff_min: ms(limits::BACKOFF_MS_MIN_DEFAULT),
            backoff_max: ms(limits::BACKOFF_MS_MAX_DEFAULT),
            keepalive: ms(limits::KEEPALIVE_MS_DEFAULT),
            idle: ms(limits::IDLE_TIMEOUT_MS_DEFAULT),
        }
    }
}

/// TLS under the HMAC layer (optional: the handshake authenticates the peer either
/// way; TLS adds confidentiality). The caller builds both rustls configs (es-server
/// from its certificate files), so this crate reads no files and does not depend on
/// the server crate.
#[derive(Debug, Clone)]
pub struct PeerTls {
    pub acceptor: Arc<rustls::ServerConfig>,
    pub connector: Arc<rustls::ClientConfig>,
    /// The name every peer's certificate is checked against: peers are dialed by
    /// address, so the cluster's certificates carry one shared name (e.g. `es-peer`).
    pub server_name: rustls::pki_types::ServerName<'static>,
}

/// Everything a [`crate::PeerNode`] needs.
#[derive(Debug, Clone)]
pub struct PeerConfig {
    pub node_id: u64,
    /// The other nodes: id -> `host:port` of their peer listener. This node's own id
    /// is not in it.
    pub peers: BTreeMap<u64, String>,
    pub secrets: Secrets,
    pub timeouts: Timeouts,
    /// TLS on every link of this node; all nodes of a cluster must agree.
    pub tls: Option<PeerTls>,
}

impl PeerConfig {
    /// Refuses a configuration that could not authenticate safely.
    pub fn validate(&self) -> Result<(), PeerError> {
        if self.peers.contains_key(&self.node_id) {
            return Err(PeerError::SelfInPeers(self.node_id));
        }
        if let Some(previous) = &self.secrets.previous
            && previous.key_id == self.secrets.current.key_id
        {
            return Err(PeerError::DuplicateKeyId(previous.key_id));
        }
        for secret in self.secrets.dial_order() {
            if secret.bytes.len() < limits::SECRET_BYTES_MIN {
                return Err(PeerError::SecretTooShort {
                    key_id: secret.key_id,
                    min: limits::SECRET_BYTES_MIN,
                });
            }
        }
        Ok(())
    }

    /// Whether this node dials `peer` (the lower id of a pair dials, the higher one
    /// accepts: one connection per pair, no tie-break needed).
    pub fn dials(&self, peer: u64) -> bool {
        self.node_id < peer
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(secrets: Secrets) -> PeerConfig {
        let peers = BTreeMap::from([(2, "127.0.0.1:1".to_string())]);
        PeerConfig { node_id: 1, peers, secrets, timeouts: Timeouts::default(), tls: None }
    }

    #[test]
    fn validation_refuses_what_could_not_authenticate_safely() {
        let good = Secret::new(1, [7u8; 16]);
        assert!(config(Secrets::single(good.clone())).validate().is_ok());
        let short = Secrets::single(Secret::new(1, [7u8; 15]));
        assert!(matches!(config(short).validate(), Err(PeerError::SecretTooShort { key_id: 1, .. })));
        let same_id = Secrets { current: good.clone(), previous: Some(Secret::new(1, [8u8; 16])) };
        assert!(matches!(config(same_id).validate(), Err(PeerError::DuplicateKeyId(1))));
        let mut with_self = config(Secrets::single(good));
        with_self.peers.insert(1, "127.0.0.1:2".into());
        assert!(matches!(with_self.validate(), Err(PeerError::SelfInPeers(1))));
    }

    #[test]
    fn a_secret_never_shows_in_debug_output() {
        let text = format!("{:?}", config(Secrets::single(Secret::new(3, *b"hunter2hunter2hunter2"))));
        assert!(!text.contains("hunter2") && !text.contains("104, 117"), "{text}");
        assert!(text.contains("key_id: 3"), "{text}");
    }

    #[test]
    fn the_lower_id_dials() {
        let c = config(Secrets::single(Secret::new(1, [7u8; 16])));
        assert!(c.dials(2) && !c.dials(0));
    }
}
