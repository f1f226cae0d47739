//! A cluster of es-broker processes on loopback for the black-box tests: each node
//! its own data directory and ports, one shared secret, SIGKILL and restart.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::broker::Broker;

/// How long a cluster may take to elect, or to fail over.
pub const ELECTION_WAIT: Duration = Duration::from_secs(30);

/// A free port on 127.0.0.1 (bound and released: the peer list needs ports before
/// the nodes start), never one this test process handed out before: tests run in
/// parallel, and the kernel may offer a released port again before its node binds it.
pub fn free_port() -> u16 {
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let mut given = GIVEN.lock().expect("ports lock");
    for _ in 0..1_000 {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if given.insert(port) {
            return port;
        }
    }
    panic!("no unused port in 1,000 tries")
}

/// Retries `f` until it answers `Some`, within `wait`.
pub fn eventually<T>(wait: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + wait;
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(Instant::now() < deadline, "{what}: not within {wait:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub struct Cluster {
    pub nodes: BTreeMap<u64, Broker>,
    /// Nodes stopped with SIGSTOP: requests to them would hang until the timeout.
    pub paused: BTreeSet<u64>,
    pub peers: String,
    pub secret: std::path::PathBuf,
    pub root: tempfile::TempDir,
    /// Flags every node starts (and restarts) with, besides the cluster's own.
    pub extra: Vec<String>,
    /// Environment the next node started gets (a test may change it between nodes).
    pub env: Vec<(String, String)>,
}

impl Cluster {
    /// Starts nodes 1..=n.
    pub fn start(n: u64) -> Cluster {
        let mut c = Cluster::new(n, &[], &[]);
        for id in 1..=n {
            c.start_node(id);
        }
        c
    }

    /// A cluster of `n` nodes, none started yet, each to start with `extra` flags
    /// and `env`.
    pub fn new(n: u64, extra: &[&str], env: &[(&str, &str)]) -> Cluster {
        let root = tempfile::tempdir().unwrap();
        let secret = root.path().join("cluster.secret");
        std::fs::write(&secret, "a-test-secret-of-more-than-16-bytes\n").unwrap();
        let peers: Vec<String> = (1..=n).map(|id| format!("{id}=127.0.0.1:{}", free_port())).collect();
        Cluster {
            nodes: BTreeMap::new(),
            paused: BTreeSet::new(),
            peers: peers.join(","),
            secret,
            root,
            extra: extra.iter().map(|a| a.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        }
    }

    /// Starts (or restarts, on the same data directory) node `id`.
    pub fn start_node(&mut self, id: u64) {
        let dir = self.root.path().join(format!("node{id}"));
        let id = id.to_string();
        let mut args = vec![
            "--node-id",
            &id,
            "--cluster-peers",
            &self.peers,
            "--cluster-secret-file",
            self.secret.to_str().unwrap(),
        ];
        args.extend(self.extra.iter().map(String::as_str));
        let env: Vec<(&str, &str)> = self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let broker = Broker::start_env(&dir, &args, &env);
        self.nodes.insert(id.parse().expect("a node id"), broker);
    }

    pub fn node(&self, id: u64) -> &Broker {
        &self.nodes[&id]
    }

    /// Stops node `id` with SIGSTOP (a hung process: no answers, no exit).
    pub fn pause(&mut self, id: u64) {
        self.node(id).signal("STOP");
        self.paused.insert(id);
    }

    pub fn resume(&mut self, id: u64) {
        self.node(id).signal("CONT");
        self.paused.remove(&id);
    }

    /// The nodes that answer requests (not paused).
    pub fn live(&self) -> impl Iterator<Item = (&u64, &Broker)> {
        self.nodes.iter().filter(|(id, _)| !self.paused.contains(id))
    }

    pub fn kill9(&mut self, id: u64) {
        self.nodes.get_mut(&id).unwrap().kill9();
        self.nodes.remove(&id);
    }

    /// Every node's Kafka listener, comma-separated.
    pub fn bootstrap(&self) -> String {
        self.nodes.values().map(|b| b.kafka_addr.clone()).collect::<Vec<_>>().join(",")
    }
}
