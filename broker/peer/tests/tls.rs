//! Peer links over TLS: the HMAC handshake and frames run inside it, and a node
//! without TLS cannot join a cluster that uses it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::*;
use es_peer::{PeerError, PeerNode, PeerTls};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};

/// One self-signed certificate for the cluster's shared name, trusted by every node.
fn cluster_tls() -> PeerTls {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["es-peer".to_string()]).unwrap().self_signed(&key).unwrap();
    let der: CertificateDer<'static> = cert.der().clone();
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let acceptor = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![der.clone()], key_der)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der).unwrap();
    let connector = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    PeerTls {
        acceptor: Arc::new(acceptor),
        connector: Arc::new(connector),
        server_name: ServerName::try_from("es-peer").unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_nodes_talk_over_tls() {
    let tls = cluster_tls();
    let (ls, addrs) = listeners(3).await;
    let nodes: Vec<PeerNode> = ls
        .into_iter()
        .zip(1..)
        .map(|(l, id)| {
            let mut c = config(id, &addrs, secrets());
            c.tls = Some(tls.clone());
            PeerNode::start(c, l, echo(id)).unwrap()
        })
        .collect();
    for from in &nodes {
        for to in nodes.iter().filter(|n| n.node_id() != from.node_id()) {
            let got = from.call(to.node_id(), 8, 2, Bytes::from_static(b"tls")).await.unwrap();
            assert_eq!(got, expected(to.node_id(), from.node_id(), 8, 2, "tls"));
        }
    }
    for n in &nodes {
        n.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_node_cannot_dial_a_tls_node() {
    let (ls, addrs) = listeners(2).await;
    let mut ls = ls.into_iter();
    let n1 = PeerNode::start(config(1, &addrs, secrets()), ls.next().unwrap(), echo(1)).unwrap();
    let mut c2 = config(2, &addrs, secrets());
    c2.tls = Some(cluster_tls());
    let n2 = PeerNode::start(c2, ls.next().unwrap(), echo(2)).unwrap();
    let r = n1.call_timeout(2, 1, 1, Bytes::new(), Duration::from_millis(500)).await;
    assert!(matches!(r, Err(PeerError::Unavailable(2))), "{r:?}");
    assert_eq!(n2.stats().snapshot().handshakes_ok, 0);
    // A TLS failure is not an authentication failure of the HMAC layer.
    assert_eq!(n1.stats().snapshot().handshake_auth_failures, 0);
    assert_eq!(n2.stats().snapshot().handshake_auth_failures, 0);
    n1.shutdown().await;
    n2.shutdown().await;
}
