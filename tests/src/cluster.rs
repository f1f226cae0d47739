//! A cluster of es-broker processes on loopback for the black-box tests: each node
//! its own data directory and ports, one shared secret, SIGKILL and restart.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::broker::Broker;
use crate::faults::{Fault, FaultProxy};

/// How long a cluster may take to elect, or to fail over.
pub const ELECTION_WAIT: Duration = Duration::from_secs(30);

/// A free port on 127.0.0.1 for a listener the test must name before it starts (a
/// peer list, a config file). It is taken from below the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`), so no `bind(0)` and no outgoing connection of
/// another test can take it between this check and the node's own bind, nor while
/// the node is down for a restart; and never one this test process handed out before.
pub fn free_port() -> u16 {
    use rand::Rng;
    static GIVEN: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    // Below the ephemeral range, above the well-known ports and the fixed ones the
    // reference Kafka and docs use (9000-9999, 19000-19999 are skipped).
    let (from, to) = (20_000u16.min(low.saturating_sub(1_000)), low);
    let mut given = GIVEN.lock().expect("ports lock");
    let mut rng = rand::rng();
    for _ in 0..1_000 {
        let port = rng.random_range(from..to);
        if given.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    panic!("no free port in {from}..{to} in 1,000 tries")
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
    /// A fault proxy on every peer link, by (dialer, listener) id pair: the lower id
    /// of a pair dials (es-peer), so its peer list names the proxy.
    pub proxies: BTreeMap<(u64, u64), FaultProxy>,
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

    /// Starts nodes 1..=n without the leader balancer, so leadership moves only
    /// when a test moves it (or a node fails).
    pub fn start_unbalanced(n: u64) -> Cluster {
        let mut c = Cluster::new(n, &["--cluster-leader-balance-ms", "0"], &[]);
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
            proxies: BTreeMap::new(),
        }
    }

    /// Like [`Cluster::new`], with a [`FaultProxy`] on every peer link.
    pub fn with_fault_proxies(n: u64, extra: &[&str], env: &[(&str, &str)]) -> Cluster {
        let mut c = Cluster::new(n, extra, env);
        let real = c.peer_addrs();
        for &a in real.keys() {
            for (&b, addr) in real.range(a + 1..) {
                c.proxies.insert((a, b), FaultProxy::start(addr.parse().expect("a peer address")));
            }
        }
        c
    }

    /// Starts nodes 1..=n, with a [`FaultProxy`] on every peer link.
    pub fn start_with_fault_proxies(n: u64) -> Cluster {
        let mut c = Cluster::with_fault_proxies(n, &[], &[]);
        for id in 1..=n {
            c.start_node(id);
        }
        c
    }

    /// Node `id`'s own peer listener.
    pub fn peer_addr(&self, id: u64) -> String {
        self.peer_addrs()[&id].clone()
    }

    /// Every node's own peer listener, from `peers`.
    fn peer_addrs(&self) -> BTreeMap<u64, String> {
        self.peers
            .split(',')
            .filter_map(|e| e.split_once('='))
            .map(|(id, addr)| (id.parse().expect("a node id"), addr.to_owned()))
            .collect()
    }

    /// The peer list node `id` starts with: its own listener, and the proxy of each
    /// link it dials.
    fn peers_of(&self, id: u64) -> String {
        let entries = self.peer_addrs().into_iter().map(|(k, addr)| match self.proxies.get(&(id, k)) {
            Some(p) => format!("{k}={}", p.addr()),
            None => format!("{k}={addr}"),
        });
        entries.collect::<Vec<_>>().join(",")
    }

    /// Applies `fault` to the link between `a` and `b` (the direction names are
    /// from the lower id's side, the dialer's).
    fn set_link(&self, a: u64, b: u64, fault: Fault) {
        let key = (a.min(b), a.max(b));
        self.proxies.get(&key).unwrap_or_else(|| panic!("no fault proxy between {a} and {b}")).set(fault);
    }

    /// Cuts every peer link of node `id`: it still answers clients, but hears no peer.
    pub fn isolate(&self, id: u64) {
        for &(a, b) in self.proxies.keys() {
            if a == id || b == id {
                self.set_link(a, b, Fault::Cut);
            }
        }
    }

    /// Stalls every byte sent towards node `id` on its peer links, while what it
    /// sends still arrives (a one-way partition).
    pub fn stall_towards(&self, id: u64) {
        for &(a, b) in self.proxies.keys() {
            if a == id {
                self.set_link(a, b, Fault::StallToDialer);
            } else if b == id {
                self.set_link(a, b, Fault::StallFromDialer);
            }
        }
    }

    /// Every peer link passes bytes again.
    pub fn heal(&self) {
        for p in self.proxies.values() {
            p.set(Fault::Pass);
        }
    }

    /// Starts (or restarts, on the same data directory) node `id`.
    pub fn start_node(&mut self, id: u64) {
        let peers = self.peers_of(id);
        self.start_node_as(id, &peers, &[]);
    }

    /// Starts node `id` with `--cluster-peers` naming only the nodes in `listed`
    /// (it included), and `more` flags: a cluster started smaller than `n`, or a
    /// node joining it.
    pub fn start_node_listing(&mut self, id: u64, listed: &[u64], more: &[&str]) {
        let peers = self.peers_of(id);
        let kept: Vec<&str> = peers
            .split(',')
            .filter(|e| {
                e.split_once('=').is_some_and(|(k, _)| k.parse().is_ok_and(|k: u64| listed.contains(&k)))
            })
            .collect();
        self.start_node_as(id, &kept.join(","), more);
    }

    fn start_node_as(&mut self, id: u64, peers: &str, more: &[&str]) {
        let dir = self.root.path().join(format!("node{id}"));
        let id = id.to_string();
        let mut args = vec![
            "--node-id",
            &id,
            "--cluster-peers",
            peers,
            "--cluster-secret-file",
            self.secret.to_str().unwrap(),
        ];
        args.extend(self.extra.iter().map(String::as_str));
        args.extend(more);
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

    /// Produces `values` to partition 0 of `topic` on whichever live node accepts
    /// them (the leader): the node and the acknowledged offsets.
    pub fn produce_anywhere(&self, topic: &str, values: &[String]) -> (u64, Vec<u64>) {
        let live: Vec<u64> = self.live().map(|(id, _)| *id).collect();
        self.produce_via(&live, topic, values)
    }

    /// Like [`Cluster::produce_anywhere`], asking only the nodes `ids`.
    pub fn produce_via(&self, ids: &[u64], topic: &str, values: &[String]) -> (u64, Vec<u64>) {
        let records: Vec<Value> = values.iter().map(|v| json!({"value": v, "partition": 0})).collect();
        let body = json!({ "records": records });
        eventually(ELECTION_WAIT, "a leader accepting the produce", || {
            for id in ids {
                let r = self.node(*id).post(&format!("/topics/{topic}/records"), &body);
                if r.status == 200 {
                    let offsets = r.body["offsets"].as_array().unwrap().iter();
                    return Some((*id, offsets.map(|o| o["offset"].as_u64().unwrap()).collect()));
                }
                // A follower says where the leader is; a leader that lost its
                // majority times out; anything else must be transient.
                assert!(
                    [421, 500, 503, 504].contains(&r.status),
                    "node {id} answered a produce with {}: {:?}",
                    r.status,
                    r.body
                );
            }
            None
        })
    }

    /// Produces `rounds` requests of ten records each to partition 0, adding what
    /// was acknowledged to `acked` (offset -> value); answers the node that took
    /// the last one.
    pub fn produce_rounds(
        &self,
        topic: &str,
        tag: &str,
        rounds: usize,
        acked: &mut BTreeMap<u64, String>,
    ) -> u64 {
        let mut leader = 0;
        for round in 0..rounds {
            let values: Vec<String> = (0..10).map(|i| format!("{tag}{round}-{i}")).collect();
            let (node, offsets) = self.produce_anywhere(topic, &values);
            leader = node;
            for (o, v) in offsets.into_iter().zip(values) {
                assert!(acked.insert(o, v).is_none(), "offset {o} acknowledged twice");
            }
        }
        leader
    }

    /// Creates a one-partition topic through any live node and waits until every
    /// live node has it (each applies the metadata log on its own).
    pub fn create_topic_anywhere(&self, topic: &str) {
        let live: Vec<u64> = self.live().map(|(id, _)| *id).collect();
        self.create_topic_via(&live, topic);
    }

    /// Like [`Cluster::create_topic_anywhere`], asking and waiting for only `ids`.
    pub fn create_topic_via(&self, ids: &[u64], topic: &str) {
        self.create_topic_configured(ids, topic, &json!({}));
    }

    /// Like [`Cluster::create_topic_via`], with topic `config` (`{"retention.bytes": ..}`).
    pub fn create_topic_configured(&self, ids: &[u64], topic: &str, config: &Value) {
        let body = json!({"name": topic, "partitions": 1, "config": config});
        eventually(ELECTION_WAIT, "creating the topic", || {
            for id in ids {
                let r = self.node(*id).post("/topics", &body);
                match r.status {
                    201 | 409 => return Some(()),
                    421 | 500 | 503 | 504 => {}
                    other => panic!("creating {topic} on node {id}: {other} {:?}", r.body),
                }
            }
            None
        });
        for id in ids {
            eventually(ELECTION_WAIT, &format!("{topic} on node {id}"), || {
                (self.node(*id).get(&format!("/topics/{topic}")).status == 200).then_some(())
            });
        }
    }

    /// Waits until every live node serves exactly `acked` on partition 0 of
    /// `topic` (no more, no less).
    pub fn converge(&self, topic: &str, acked: &BTreeMap<u64, String>) {
        for (id, b) in self.live() {
            let got =
                eventually(ELECTION_WAIT, &format!("node {id} serving every acknowledged record"), || {
                    let got = consume_all(b, topic);
                    (got.len() >= acked.len()).then_some(got)
                });
            assert_eq!(&got, acked, "node {id}");
        }
    }
}

/// Every record of partition 0 of `topic` that `b` serves, from its log start, by
/// offset.
pub fn consume_all(b: &Broker, topic: &str) -> BTreeMap<u64, String> {
    let mut out = BTreeMap::new();
    let mut next = log_start(b, topic).unwrap_or(0);
    loop {
        let r = b.get(&format!("/topics/{topic}/partitions/0/records?offset={next}&max_records=10000"));
        if r.status != 200 {
            return out;
        }
        let records = r.body["records"].as_array().cloned().unwrap_or_default();
        // A compacted log may answer batches with no records left: go past them.
        let after = r.body["next_offset"].as_u64().unwrap_or(next);
        if records.is_empty() && after <= next {
            return out;
        }
        for rec in records {
            let offset = rec["offset"].as_u64().unwrap();
            out.insert(offset, rec["value"].as_str().unwrap_or_default().to_owned());
            next = offset + 1;
        }
        next = next.max(after);
    }
}

/// The log start offset of partition 0 of `topic` on `b` (`None`: no answer).
pub fn log_start(b: &Broker, topic: &str) -> Option<u64> {
    let r = b.get(&format!("/topics/{topic}"));
    r.body["partitions"].as_array()?.first()?["log_start_offset"].as_u64()
}

/// An idempotent es-client producer writing to partition 0 of a topic from its own
/// thread: at least 100 records, and on until stopped.
pub struct IdempotentLoad {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Records acknowledged so far.
    acked: std::sync::Arc<std::sync::atomic::AtomicU64>,
    thread: std::thread::JoinHandle<BTreeMap<u64, String>>,
}

impl IdempotentLoad {
    pub fn start(bootstrap: String, topic: &'static str) -> IdempotentLoad {
        use es_client::{Client, ClientOptions, Producer, ProducerOptions};
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let acked_count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = acked_count.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let client =
                    std::sync::Arc::new(Client::connect(&bootstrap, ClientOptions::default()).await.unwrap());
                let producer = Producer::new(client, ProducerOptions::default()).await.unwrap();
                let mut acked = BTreeMap::new();
                let mut i = 0;
                while i < 100 || !stopped.load(std::sync::atomic::Ordering::Relaxed) {
                    let value = format!("load-{i}");
                    let meta = producer
                        .send(topic, Some(0), es_core::Record::from_value(value.clone()))
                        .await
                        .unwrap_or_else(|e| panic!("{value}: {e}"));
                    assert!(
                        acked.insert(meta.offset, value).is_none(),
                        "offset {} acknowledged twice",
                        meta.offset
                    );
                    counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    i += 1;
                    assert!(i < 200_000, "the load was never stopped");
                }
                acked
            })
        });
        IdempotentLoad { stop, acked: acked_count, thread }
    }

    /// How many records were acknowledged so far.
    pub fn acked(&self) -> u64 {
        self.acked.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until `more` records beyond what was acknowledged now are (the load
    /// flows again after a fault), within `wait`.
    pub fn flowing(&self, more: u64, wait: Duration) {
        let from = self.acked();
        eventually(wait, "the load's records acknowledged again", || {
            (self.acked() >= from + more).then_some(())
        });
    }

    /// Stops the producer; every record acknowledged, by offset.
    pub fn stop(self) -> BTreeMap<u64, String> {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().expect("the producer thread")
    }
}

/// Every live node serves exactly `acked` from partition 0 of `topic`, once caught up.
pub fn every_node_serves(c: &Cluster, topic: &str, acked: &BTreeMap<u64, String>, what: &str) {
    for (id, b) in c.live() {
        let got = eventually(ELECTION_WAIT, &format!("node {id} serving {what}"), || {
            let got = consume_all(b, topic);
            (got.len() >= acked.len()).then_some(got)
        });
        assert_eq!(&got, acked, "node {id}");
    }
}
