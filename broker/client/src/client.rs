//! A pool of pipelined connections with typed calls, retries and backoff. In a
//! cluster, a produce follows the partition's leader: a `NotLeader` answer names
//! it (` leader=HOST:PORT`), the client remembers it for the partition and, for an
//! idempotent batch, resends there at once. Fetches and offset lookups follow it
//! too (a node that does not replicate a partition refuses them).

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use es_protocol::{
    ErrorCode, FetchPartition, FetchResult, ListedTopic, OffsetSpec, ProduceFinding, Request, Response,
    TopicDescription,
};
use tokio::sync::Mutex;

use crate::connection::Connection;
use crate::error::{ClientError, Result};

/// The broker's answer to one produced batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Produced {
    /// `base_offset..=last_offset` hold the records kept on the partition, in batch
    /// order (empty, `last_offset = base_offset - 1`, when all were dead-lettered).
    pub base_offset: u64,
    pub last_offset: u64,
    /// An idempotent retry the broker recognised: nothing new was written.
    pub duplicate: bool,
    /// Validator warnings, and the records dead-lettered instead of written.
    pub findings: Vec<ProduceFinding>,
}

impl Produced {
    fn from_response(r: Response) -> Result<Produced> {
        match r {
            Response::Produce { base_offset, last_offset, duplicate, findings } => {
                Ok(Produced { base_offset, last_offset, duplicate, findings })
            }
            _ => Err(ClientError::UnexpectedResponse("Produce")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// Connections in the pool; requests for one partition always use the same one,
    /// so their order is kept.
    pub connections: usize,
    /// Attempts after the first for retriable failures (connection loss, full
    /// window); 0 turns retrying off altogether.
    pub retries: u32,
    /// How long a call keeps retrying failures that a leader change explains
    /// (`ClientError::is_failover`: not the leader, an open connection lost, a
    /// commit timeout) after `retries` is used up,
    /// counted from the call's start; like Kafka's `delivery.timeout.ms`, it lets
    /// a call ride out an election however many attempts that takes. 0: by the
    /// count alone.
    pub failover_timeout_ms: u64,
    /// First pause between attempts; doubles each time, capped at 2 s.
    pub backoff_ms: u64,
    /// Bound on every call, including retries.
    pub request_timeout_ms: u64,
    /// The API key every connection logs in with after `Hello` (a broker with
    /// auth on refuses everything else without one).
    pub api_key: Option<String>,
    /// TLS to the broker (its CA, and a client certificate for mTLS); `None` is
    /// plaintext.
    pub tls: Option<crate::ClientTls>,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            connections: 1,
            retries: 5,
            failover_timeout_ms: 15_000,
            backoff_ms: 50,
            request_timeout_ms: 30_000,
            api_key: None,
            tls: None,
        }
    }
}

#[derive(Debug)]
pub struct Client {
    addr: String,
    options: ClientOptions,
    pool: Vec<Mutex<Option<Arc<Connection>>>>,
    next: AtomicUsize,
    /// Partitions another broker leads, learnt from `NotLeader` answers: its address.
    leaders: Arc<Leaders>,
    /// One connection per other broker a partition was routed to.
    others: Mutex<HashMap<String, Arc<Connection>>>,
}

type Leaders = std::sync::Mutex<HashMap<(String, u32), String>>;

/// What one attempt of a call came to.
enum Attempt {
    Answered(Result<Response>),
    /// A `NotLeader` named the leader: try there at once.
    Redirected,
}

/// The routing key of the group coordinator: group calls are routed like a
/// partition's produces, under the one topic name no topic can have.
pub(crate) const COORDINATOR: &str = "";

/// Most `NotLeader` redirects one call follows before it answers the error (a
/// leader moving twice within one call is an election; the backoff retries cover it).
const REDIRECTS_MAX: u32 = 3;

/// The longest pause between two attempts after a failover error: short enough to
/// find a new leader soon after it is elected.
const FAILOVER_BACKOFF_MAX: Duration = Duration::from_millis(500);

/// Records that `leader` (`None`: the bootstrap broker `bootstrap`) leads the partition.
fn route(leaders: &Leaders, bootstrap: &str, topic: &str, partition: u32, leader: Option<&str>) {
    let mut leaders = leaders.lock().expect("leaders lock");
    let key = (topic.to_owned(), partition);
    match leader {
        Some(addr) if addr != bootstrap => leaders.insert(key, addr.to_owned()),
        _ => leaders.remove(&key),
    };
}

/// The leader's address a `NotLeader` message ends with (` leader=HOST:PORT`).
fn leader_in(message: &str) -> Option<&str> {
    let last = message.rsplit(' ').next()?;
    last.strip_prefix("leader=").filter(|a| !a.is_empty())
}

impl Client {
    /// Connects the whole pool (so a wrong address fails here, not later).
    pub async fn connect(addr: &str, options: ClientOptions) -> Result<Client> {
        let n = options.connections.max(1);
        let mut pool = Vec::with_capacity(n);
        for _ in 0..n {
            let conn =
                Connection::connect_with(addr, options.api_key.as_deref(), options.tls.as_ref()).await?;
            pool.push(Mutex::new(Some(Arc::new(conn))));
        }
        Ok(Client {
            addr: addr.to_owned(),
            options,
            pool,
            next: AtomicUsize::new(0),
            leaders: Default::default(),
            others: Default::default(),
        })
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The pooled connection for `slot`, reconnecting if it failed.
    async fn connection(&self, slot: usize) -> Result<Arc<Connection>> {
        let mut guard = self.pool[slot % self.pool.len()].lock().await;
        if let Some(c) = guard.as_ref().filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let c = Arc::new(
            Connection::connect_with(&self.addr, self.options.api_key.as_deref(), self.options.tls.as_ref())
                .await?,
        );
        *guard = Some(c.clone());
        Ok(c)
    }

    /// The broker `topic`'s `partition` was last seen led by, when not the bootstrap one.
    fn leader_of(&self, topic: &str, partition: u32) -> Option<String> {
        self.leaders.lock().expect("leaders lock").get(&(topic.to_owned(), partition)).cloned()
    }

    /// The connection a partition's requests go to: its leader's when another broker
    /// leads it, else the pooled one for `slot`.
    async fn connection_for(&self, topic: &str, partition: u32, slot: usize) -> Result<Arc<Connection>> {
        let Some(addr) = self.leader_of(topic, partition) else { return self.connection(slot).await };
        let mut others = self.others.lock().await;
        if let Some(c) = others.get(&addr).filter(|c| !c.is_closed()) {
            return Ok(c.clone());
        }
        let connected =
            Connection::connect_with(&addr, self.options.api_key.as_deref(), self.options.tls.as_ref()).await;
        match connected {
            Ok(c) => {
                let c = Arc::new(c);
                others.insert(addr, c.clone());
                Ok(c)
            }
            Err(e) => {
                // The leader it named is gone: ask the bootstrap broker again next time.
                others.remove(&addr);
                drop(others);
                route(&self.leaders, &self.addr, topic, partition, None);
                Err(e)
            }
        }
    }

    /// Sends a request for one partition to its leader. A `NotLeader` answer moves
    /// the partition to the broker it names; the request is resent there only when
    /// `retry` (an idempotent batch: one the old leader may have appended cannot be
    /// written twice), as other retriable failures are, with backoff.
    async fn call_partition(
        &self,
        topic: &str,
        partition: u32,
        req: Request,
        retry: bool,
    ) -> Result<Response> {
        self.call_routed(topic, partition, req, retry, retry).await
    }

    /// [`Client::call_partition`] with redirects decided apart from retries: a group
    /// call is always resent to the coordinator a `NotLeader` names (a node that
    /// does not coordinate did nothing with it, and a commit is an overwrite).
    pub(crate) async fn call_routed(
        &self,
        topic: &str,
        partition: u32,
        req: Request,
        retry: bool,
        redirect: bool,
    ) -> Result<Response> {
        let redirects = std::sync::atomic::AtomicU32::new(0);
        self.attempts(retry, || async {
            let routed = self.leader_of(topic, partition).is_some();
            let result = match self.connection_for(topic, partition, partition as usize).await {
                Ok(conn) => conn.request(req.clone()).await,
                Err(e) => Err(e),
            };
            if let Err(ClientError::Broker { code: ErrorCode::NotLeader, message }) = &result {
                let leader = leader_in(message);
                route(&self.leaders, &self.addr, topic, partition, leader);
                if redirect && leader.is_some() && redirects.fetch_add(1, Ordering::Relaxed) < REDIRECTS_MAX {
                    tracing::debug!(topic, partition, leader, "following the partition's leader");
                    return Attempt::Redirected;
                }
            } else if routed
                && matches!(result, Err(ClientError::Connect { .. } | ClientError::Disconnected(_)))
            {
                // The leader went away: the bootstrap broker names the next one.
                route(&self.leaders, &self.addr, topic, partition, None);
            }
            Attempt::Answered(result)
        })
        .await
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.options.request_timeout_ms)
    }

    pub(crate) fn backoff(&self) -> Duration {
        Duration::from_millis(self.options.backoff_ms)
    }

    /// Sends `req` on the connection for `slot`; retries retriable failures with
    /// backoff when `retry` is true (callers pass false where a retry could write twice).
    pub async fn call_on(&self, slot: usize, req: Request, retry: bool) -> Result<Response> {
        self.attempts(retry, || async {
            Attempt::Answered(match self.connection(slot).await {
                Ok(conn) => conn.request(req.clone()).await,
                Err(e) => Err(e),
            })
        })
        .await
    }

    /// Runs `attempt` until it answers: again at once after a redirect, again after
    /// a backoff (doubling, capped at 2 s; at `FAILOVER_BACKOFF_MAX` for a
    /// failover) for a retriable failure when `retry`, at most `retries` times, and
    /// for a failover beyond that until `failover_timeout_ms` from the start; the
    /// whole within the request timeout.
    async fn attempts<F, Fut>(&self, retry: bool, mut attempt: F) -> Result<Response>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Attempt>,
    {
        let timeout = Duration::from_millis(self.options.request_timeout_ms);
        let started = tokio::time::Instant::now();
        let failover_window = Duration::from_millis(self.options.failover_timeout_ms);
        let attempts = async {
            let mut backoff = Duration::from_millis(self.options.backoff_ms);
            let mut tries = 0;
            loop {
                let result = match attempt().await {
                    Attempt::Redirected => continue,
                    Attempt::Answered(result) => result,
                };
                let again = |e: &ClientError| {
                    retry
                        && self.options.retries > 0
                        && e.is_retriable()
                        && (tries < self.options.retries
                            || (e.is_failover() && started.elapsed() < failover_window))
                };
                match result {
                    Err(e) if again(&e) => {
                        tracing::debug!(error = %e, attempt = tries, "retrying");
                        tries += 1;
                        let cap = if e.is_failover() { FAILOVER_BACKOFF_MAX } else { Duration::from_secs(2) };
                        tokio::time::sleep(backoff.min(cap)).await;
                        backoff = (backoff * 2).min(cap);
                    }
                    other => return other,
                }
            }
        };
        tokio::time::timeout(timeout, attempts)
            .await
            .map_err(|_| ClientError::Timeout(self.options.request_timeout_ms))?
    }

    /// Any connection, round robin, with retries (for calls that are safe to repeat).
    pub async fn call(&self, req: Request) -> Result<Response> {
        let slot = self.next.fetch_add(1, Ordering::Relaxed);
        self.call_on(slot, req, true).await
    }

    /// Appends one encoded batch (see `es_core::batch::encode`) on the partition's
    /// leader. Retried, and resent to a new leader, only when the batch is idempotent
    /// (has a producer id), since then a retry cannot write twice.
    pub async fn produce(&self, topic: &str, partition: u32, batch: Bytes) -> Result<Produced> {
        let idempotent = es_core::BatchHeader::parse(&batch, usize::MAX)?.producer.producer_id >= 0;
        let req = Request::Produce { topic: topic.to_owned(), partition, batch };
        Produced::from_response(self.call_partition(topic, partition, req, idempotent).await?)
    }

    /// Queues a produce on the partition's connection (its leader's, once a
    /// `NotLeader` named it) and returns the future of its answer; calls made in
    /// order for one partition are sent in order. No retry.
    pub async fn produce_pipelined(
        &self,
        topic: &str,
        partition: u32,
        batch: Bytes,
    ) -> Result<impl std::future::Future<Output = Result<Produced>> + use<>> {
        let conn = self.connection_for(topic, partition, partition as usize).await?;
        let timeout_ms = self.options.request_timeout_ms;
        let enqueue = conn.enqueue(Request::Produce { topic: topic.to_owned(), partition, batch });
        let pending = tokio::time::timeout(Duration::from_millis(timeout_ms), enqueue)
            .await
            .map_err(|_| ClientError::Timeout(timeout_ms))??;
        let (leaders, bootstrap, topic) = (self.leaders.clone(), self.addr.clone(), topic.to_owned());
        Ok(async move {
            let answer = tokio::time::timeout(Duration::from_millis(timeout_ms), pending)
                .await
                .map_err(|_| ClientError::Timeout(timeout_ms))?;
            if let Err(ClientError::Broker { code: ErrorCode::NotLeader, message }) = &answer {
                route(&leaders, &bootstrap, &topic, partition, leader_in(message));
            }
            Produced::from_response(answer?)
        })
    }

    /// Fetches `partitions`, each from the broker its requests go to (the
    /// bootstrap one, or the leader a `NotLeader` named): one Fetch per broker, all
    /// at once, answers in the order asked. A partition a broker does not replicate
    /// answers `NotLeader` (a cluster placing it on other nodes); the client then
    /// learns its leader, so the next fetch goes there.
    pub async fn fetch(
        &self,
        max_wait_ms: u32,
        max_bytes: u32,
        partitions: Vec<FetchPartition>,
    ) -> Result<Vec<FetchResult>> {
        let mut by_broker: std::collections::BTreeMap<Option<String>, Vec<usize>> = Default::default();
        for (i, p) in partitions.iter().enumerate() {
            by_broker.entry(self.leader_of(&p.topic, p.partition)).or_default().push(i);
        }
        let calls = by_broker.into_values().map(|at| {
            let asked: Vec<FetchPartition> = at.iter().map(|&i| partitions[i].clone()).collect();
            async move {
                let first = &asked[0];
                let conn =
                    self.connection_for(&first.topic, first.partition, first.partition as usize).await?;
                let req = Request::Fetch { max_wait_ms, min_bytes: 1, max_bytes, partitions: asked };
                match conn.request(req).await? {
                    Response::Fetch { partitions } if partitions.len() == at.len() => Ok((at, partitions)),
                    _ => Err(ClientError::UnexpectedResponse("Fetch")),
                }
            }
        });
        let mut out: Vec<Option<FetchResult>> = vec![None; partitions.len()];
        for answer in futures_util::future::join_all(calls).await {
            let (at, results) = answer?;
            for (i, r) in at.into_iter().zip(results) {
                out[i] = Some(r);
            }
        }
        for (p, r) in partitions.iter().zip(&out) {
            if r.as_ref().is_some_and(|r| r.error == ErrorCode::NotLeader) {
                // The answer names the leader: the partition is routed there.
                let _ = self.list_offsets(&p.topic, p.partition, OffsetSpec::Latest).await;
            }
        }
        out.into_iter().map(|r| r.ok_or(ClientError::UnexpectedResponse("Fetch"))).collect()
    }

    /// A partition's offset by `spec`, asked of its leader (a `NotLeader` answer
    /// is followed to the broker it names).
    pub async fn list_offsets(&self, topic: &str, partition: u32, spec: OffsetSpec) -> Result<Option<u64>> {
        let req = Request::ListOffsets { topic: topic.to_owned(), partition, spec };
        match self.call_routed(topic, partition, req, true, true).await? {
            Response::ListOffsets { offset } => Ok(offset),
            _ => Err(ClientError::UnexpectedResponse("ListOffsets")),
        }
    }

    pub async fn create_topic(
        &self,
        name: &str,
        partitions: u32,
        configs: Vec<(String, String)>,
    ) -> Result<()> {
        let req = Request::CreateTopic { name: name.to_owned(), partitions, configs };
        match self.call_on(0, req, false).await? {
            Response::CreateTopic => Ok(()),
            _ => Err(ClientError::UnexpectedResponse("CreateTopic")),
        }
    }

    pub async fn list_topics(&self) -> Result<Vec<ListedTopic>> {
        match self.call(Request::ListTopics).await? {
            Response::ListTopics { topics } => Ok(topics),
            _ => Err(ClientError::UnexpectedResponse("ListTopics")),
        }
    }

    pub async fn describe_topic(&self, name: &str) -> Result<TopicDescription> {
        match self.call(Request::DescribeTopic { name: name.to_owned() }).await? {
            Response::DescribeTopic(d) => Ok(d),
            _ => Err(ClientError::UnexpectedResponse("DescribeTopic")),
        }
    }

    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        match self.call_on(0, Request::DeleteTopic { name: name.to_owned() }, false).await? {
            Response::DeleteTopic => Ok(()),
            _ => Err(ClientError::UnexpectedResponse("DeleteTopic")),
        }
    }

    /// A fresh producer id and epoch for an idempotent producer.
    pub async fn init_producer_id(&self) -> Result<(i64, i16)> {
        match self.call(Request::InitProducerId).await? {
            Response::InitProducerId { producer_id, epoch } => Ok((producer_id, epoch)),
            _ => Err(ClientError::UnexpectedResponse("InitProducerId")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_leader_is_the_last_word_of_a_not_leader_message() {
        let m = "this broker does not lead partition 0 of topic \"t\"; the leader is http://127.0.0.1:1 \
                 leader=127.0.0.1:9094";
        assert_eq!(leader_in(m), Some("127.0.0.1:9094"));
        assert_eq!(leader_in("this broker does not lead partition 0 of topic \"t\""), None);
        assert_eq!(leader_in("... leader="), None);
    }

    fn offline(retries: u32) -> Client {
        let options = ClientOptions { retries, ..ClientOptions::default() };
        Client {
            addr: "a:1".to_owned(),
            options,
            pool: Vec::new(),
            next: AtomicUsize::new(0),
            leaders: Arc::default(),
            others: Mutex::new(HashMap::new()),
        }
    }

    /// How many attempts a call makes when every one fails with `error` (or
    /// succeeds from attempt `ok_at` on), and how long it took (paused time).
    async fn attempts_of(client: &Client, error: ClientError, ok_at: usize) -> (usize, Duration, bool) {
        let count = AtomicUsize::new(0);
        let started = tokio::time::Instant::now();
        let result = client
            .attempts(true, || {
                let n = count.fetch_add(1, Ordering::Relaxed) + 1;
                let e = error.clone();
                async move {
                    let hello = Response::Hello {
                        version: 1,
                        frame_bytes_max: 0,
                        in_flight_max: 0,
                        server: "t".into(),
                    };
                    Attempt::Answered(if n >= ok_at { Ok(hello) } else { Err(e) })
                }
            })
            .await;
        (count.load(Ordering::Relaxed), started.elapsed(), result.is_ok())
    }

    fn broker(code: ErrorCode) -> ClientError {
        ClientError::Broker { code, message: "x".to_owned() }
    }

    /// A leader change is ridden out for `failover_timeout_ms` however many attempts
    /// it takes; other retriable failures stop at the retry count, a refused
    /// connection included (a broker that is not running is said at once), and
    /// `retries: 0` retries nothing.
    #[tokio::test(start_paused = true)]
    async fn failover_errors_are_retried_for_the_failover_window_and_others_by_count() {
        let client = offline(5);
        let window = Duration::from_millis(client.options.failover_timeout_ms);
        for failover in
            [broker(ErrorCode::NotLeader), broker(ErrorCode::Timeout), ClientError::Disconnected("x".into())]
        {
            let (n, took, ok) = attempts_of(&client, failover.clone(), usize::MAX).await;
            assert!(!ok && n > 6 && took >= window, "{failover}: {n} attempts in {took:?}");
            assert!(took < window + FAILOVER_BACKOFF_MAX * 2, "{failover}: {took:?}");
            // An election that ends after 12 attempts: the call succeeds.
            assert!(attempts_of(&client, failover, 12).await.2);
        }
        let refused = ClientError::Connect { addr: "a:1".into(), reason: "refused".into() };
        for other in [broker(ErrorCode::TooManyInFlight), broker(ErrorCode::RebalanceInProgress), refused] {
            assert_eq!(attempts_of(&client, other.clone(), usize::MAX).await.0, 6, "{other}");
        }
        assert_eq!(attempts_of(&client, broker(ErrorCode::UnknownTopic), usize::MAX).await.0, 1);
        assert_eq!(attempts_of(&offline(0), broker(ErrorCode::NotLeader), usize::MAX).await.0, 1);
    }

    #[test]
    fn a_route_to_the_bootstrap_broker_is_no_route() {
        let leaders = Leaders::default();
        route(&leaders, "a:1", "t", 0, Some("b:2"));
        assert_eq!(leaders.lock().unwrap().get(&("t".to_owned(), 0)).map(String::as_str), Some("b:2"));
        route(&leaders, "a:1", "t", 0, Some("a:1"));
        assert!(leaders.lock().unwrap().is_empty());
        route(&leaders, "a:1", "t", 1, Some("b:2"));
        route(&leaders, "a:1", "t", 1, None);
        assert!(leaders.lock().unwrap().is_empty());
    }
}
