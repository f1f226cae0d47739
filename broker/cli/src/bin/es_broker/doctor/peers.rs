//! The doctor's cluster check: every other node reachable on its peer address and
//! holding the same secret, by a probe handshake. A running node answers a probe
//! without touching its links, so doctor can run beside a live cluster, even with
//! this node's own configuration while this node runs.

use super::Finding;
use crate::resolve::Effective;

/// One finding per other node of `cluster.peers`; nothing when this is no cluster
/// member, and nothing when the cluster settings are wrong (the config check names them).
pub fn peers(cfg: &Effective) -> Vec<Finding> {
    let plan = match crate::cluster_plan(cfg) {
        Ok(Some(plan)) => plan,
        Ok(None) => return vec![Finding::ok("peers", "a single node: no cluster peers to check")],
        Err(_) => return Vec::new(),
    };
    let others: std::collections::BTreeMap<u64, String> =
        plan.peers.iter().filter(|(id, _)| **id != plan.node_id).map(|(id, a)| (*id, a.clone())).collect();
    let config = es_peer::PeerConfig {
        node_id: plan.node_id,
        peers: others.clone(),
        secrets: es_peer::Secrets::single(es_peer::Secret::new(1, plan.secret)),
        timeouts: es_peer::Timeouts::default(),
        tls: None,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => return vec![Finding::fail("peers", format!("cannot start a runtime: {e}"), "retry")],
    };
    others
        .iter()
        .map(|(id, addr)| match runtime.block_on(es_peer::probe(&config, *id)) {
            Ok(took) => Finding::ok(
                "peers",
                format!("node {id} at {addr} answered and proved the same cluster secret ({took:.1?})"),
            ),
            Err(e) => finding(plan.node_id, *id, addr, &e),
        })
        .collect()
}

/// What a failed probe of node `id` means, and what to do.
fn finding(own: u64, id: u64, addr: &str, e: &es_peer::PeerError) -> Finding {
    use std::io::ErrorKind;
    match e {
        es_peer::PeerError::Io(io)
            if io.kind() == ErrorKind::ConnectionRefused || io.kind() == ErrorKind::TimedOut =>
        {
            Finding::warn(
                "peers",
                format!("node {id} at {addr} is not reachable ({io})"),
                format!(
                    "start node {id}, or check cluster.peers and the network between the nodes; the cluster keeps \
                     serving while a majority of its nodes is up"
                ),
            )
        }
        es_peer::PeerError::Io(io)
            if io.kind() == ErrorKind::UnexpectedEof || io.kind() == ErrorKind::ConnectionReset =>
        {
            Finding::fail(
                "peers",
                format!("node {id} at {addr} refused the handshake"),
                format!(
                    "give every node the same cluster.secret_file, and list node {own} in node {id}'s cluster.peers; \
                     node {id}'s log names the reason (\"peer handshake refused\")"
                ),
            )
        }
        other => Finding::fail(
            "peers",
            format!("node {id} at {addr}: {other}"),
            format!("check that {addr} is node {id}'s peer address and that it runs the same es version"),
        ),
    }
}
