//! The async edge of Kafka's classic groups. The es-groups [`ClassicCoordinator`]
//! is pure: a JoinGroup held at the barrier, or a follower's SyncGroup waiting for
//! the leader's, comes back as "parked", and its answer later as a completion. Here
//! each parked call waits on a oneshot channel; whoever changes the state (any call,
//! or a parked call's own timer) hands the completions to their channels.
//!
//! The timer: a parked call sleeps until the coordinator's next deadline (barrier,
//! session, sync timeout), at most `CLASSIC_WAIT_TICK_MS_MAX`, runs `tick`, and goes
//! back to waiting; in all it waits at most `CLASSIC_WAIT_MS_MAX`. Nothing runs
//! while no call is parked, and state is still right then, since every call ticks
//! first.
//!
//! Group records: what the coordinator asks to make durable (a generation's
//! assignment before anyone gets it, an emptied or deleted group) goes, in order,
//! to one writer task that writes whatever is queued as one batch to
//! `__es_offsets` and reports the outcome back; a leader's SyncGroup is answered
//! only then. The writer is the one task here; it ends when the groups are dropped.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use es_core::Clock;
use es_groups::classic::{
    ClassicConfig, ClassicCoordinator, ClassicDescription, ClassicState, Completion, JoinGroup, JoinResult,
    MemberRef, Outcome, StoreRequest, StoredGroup, SyncGroup, Synced,
};
use es_groups::{GroupError, LeaderHint, Result};
use tokio::sync::{mpsc, oneshot};

use crate::limits;

type Key = (String, String);
type Waiters<T> = BTreeMap<Key, oneshot::Sender<Result<T>>>;

/// Makes group records durable, in one batch, in order (None: a deleted group).
pub type GroupWriter = Arc<
    dyn Fn(Vec<(String, Option<StoredGroup>)>) -> Pin<Box<dyn Future<Output = Result<()>> + Send>>
        + Send
        + Sync,
>;

/// A store the coordinator of `epoch` asked for.
#[derive(Debug)]
struct Job {
    epoch: u64,
    request: StoreRequest,
    /// A caller outside the coordinator waiting for it (a deleted group's tombstone).
    done: Option<oneshot::Sender<WriteOutcome>>,
}

/// A write's outcome: `Err` names where the coordinator is, if known.
type WriteOutcome = std::result::Result<(), Option<LeaderHint>>;

#[derive(Debug)]
struct Inner {
    coordinator: ClassicCoordinator,
    joins: Waiters<JoinResult>,
    syncs: Waiters<Synced>,
    /// Moves with each reset: the writer drops jobs and outcomes of an older one.
    epoch: u64,
    jobs: mpsc::UnboundedSender<Job>,
}

impl Inner {
    /// Hands every completion to its parked call (one whose caller went away is
    /// dropped) and queues the stores asked for.
    fn dispatch(&mut self) {
        for request in self.coordinator.take_stores() {
            let _closed = self.jobs.send(Job { epoch: self.epoch, request, done: None });
        }
        for c in self.coordinator.take_completions() {
            match c {
                Completion::Join { group, member_id, result } => {
                    if let Some(tx) = self.joins.remove(&(group, member_id)) {
                        let _gone = tx.send(result);
                    }
                }
                Completion::Sync { group, member_id, result } => {
                    if let Some(tx) = self.syncs.remove(&(group, member_id)) {
                        let _gone = tx.send(result);
                    }
                }
            }
        }
    }
}

/// Kafka's classic groups of one broker.
pub struct ClassicGroups {
    inner: Arc<Mutex<Inner>>,
    clock: Arc<dyn Clock>,
    config: ClassicConfig,
    /// The writer's queue and function until its task starts (inside a runtime).
    writer: Mutex<Option<(mpsc::UnboundedReceiver<Job>, GroupWriter)>>,
    /// Set once the writer task runs: calls then skip the `writer` lock.
    writer_started: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for ClassicGroups {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClassicGroups").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl ClassicGroups {
    pub fn new(clock: Arc<dyn Clock>, config: ClassicConfig, write: GroupWriter) -> ClassicGroups {
        let coordinator = ClassicCoordinator::new(clock.clone(), config);
        let (jobs, queue) = mpsc::unbounded_channel();
        let inner = Inner { coordinator, joins: BTreeMap::new(), syncs: BTreeMap::new(), epoch: 0, jobs };
        let writer = Mutex::new(Some((queue, write)));
        ClassicGroups {
            inner: Arc::new(Mutex::new(inner)),
            clock,
            config,
            writer,
            writer_started: Default::default(),
        }
    }

    /// Replaces every group with the records the log holds (a node starting, or
    /// one that takes over as coordinator): members keep their generation and
    /// assignment and go on heartbeating, with no rebalance.
    pub fn load(&self, stored: Vec<(String, StoredGroup)>) {
        let count = stored.len();
        // Calls parked meanwhile belong to the coordinator being replaced; one lock
        // for both, so no call parks in between.
        let mut inner = self.lock();
        self.replace_coordinator(&mut inner, None);
        inner.coordinator.load(stored);
        inner.dispatch();
        drop(inner);
        if count > 0 {
            tracing::info!(
                groups = count,
                "loaded Kafka groups' membership from {}",
                crate::groups::OFFSETS_TOPIC
            );
        }
    }

    /// Forgets every group and member (a cluster node that stopped coordinating):
    /// parked joins and syncs are answered NOT_COORDINATOR, so their clients look
    /// up the new coordinator and rejoin there.
    pub fn reset(&self, hint: Option<LeaderHint>) {
        let mut inner = self.lock();
        self.replace_coordinator(&mut inner, hint);
    }

    /// A fresh coordinator; the old one's parked calls answer NOT_COORDINATOR and
    /// its queued records are dropped (a new epoch).
    fn replace_coordinator(&self, inner: &mut Inner, hint: Option<LeaderHint>) {
        inner.coordinator = ClassicCoordinator::new(self.clock.clone(), self.config);
        inner.epoch += 1;
        let gone = || GroupError::NotCoordinator { hint: hint.clone() };
        for (_, tx) in std::mem::take(&mut inner.joins) {
            let _gone = tx.send(Err(gone()));
        }
        for (_, tx) in std::mem::take(&mut inner.syncs) {
            let _gone = tx.send(Err(gone()));
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.start_writer();
        self.inner.lock().expect("classic groups lock")
    }

    /// Starts the writer task at the first call made inside a runtime.
    fn start_writer(&self) {
        use std::sync::atomic::Ordering;
        if self.writer_started.load(Ordering::Acquire) {
            return;
        }
        let mut writer = self.writer.lock().expect("classic writer lock");
        if let Ok(runtime) = tokio::runtime::Handle::try_current()
            && let Some((queue, write)) = writer.take()
        {
            runtime.spawn(write_records(Arc::downgrade(&self.inner), queue, write));
            self.writer_started.store(true, Ordering::Release);
        }
    }

    /// Runs a call on the coordinator and dispatches what it completed.
    fn with<T>(&self, f: impl FnOnce(&mut ClassicCoordinator) -> T) -> T {
        let mut inner = self.lock();
        let out = f(&mut inner.coordinator);
        inner.dispatch();
        out
    }

    pub async fn join(&self, req: JoinGroup) -> Result<JoinResult> {
        // A retried join replaces the old one, whose caller then hears
        // REBALANCE_IN_PROGRESS (its sender is dropped).
        let group = req.group.clone();
        self.park(group, |c| c.join(req), |inner| &mut inner.joins).await
    }

    pub async fn sync(&self, req: SyncGroup) -> Result<Synced> {
        let group = req.group.clone();
        self.park(group, |c| c.sync(req), |inner| &mut inner.syncs).await
    }

    /// Runs a call that may park: a parked call's channel goes into `waiters` before
    /// the lock is released (so its completion cannot be missed), then it waits.
    async fn park<T>(
        &self,
        group: String,
        call: impl FnOnce(&mut ClassicCoordinator) -> Outcome<T>,
        waiters: impl FnOnce(&mut Inner) -> &mut Waiters<T>,
    ) -> Result<T> {
        let rx = {
            let mut inner = self.lock();
            let rx = match call(&mut inner.coordinator) {
                Outcome::Done(r) => Err(r),
                Outcome::Parked { member_id } => {
                    let (tx, rx) = oneshot::channel();
                    waiters(&mut inner).insert((group.clone(), member_id), tx);
                    Ok(rx)
                }
            };
            inner.dispatch();
            rx
        };
        match rx {
            Err(done) => done,
            Ok(rx) => self.wait(rx, &group).await,
        }
    }

    /// Waits for a parked call's answer, ticking the coordinator at its deadlines.
    async fn wait<T>(&self, mut rx: oneshot::Receiver<Result<T>>, group: &str) -> Result<T> {
        let started = Instant::now();
        let give_up = Duration::from_millis(limits::CLASSIC_WAIT_MS_MAX);
        loop {
            let sleep_ms = {
                let mut inner = self.lock();
                inner.coordinator.tick();
                inner.dispatch();
                let now = self.clock.now_ms();
                let next = inner.coordinator.next_deadline_ms().map_or(i64::MAX, |d| d.saturating_sub(now));
                next.clamp(1, limits::CLASSIC_WAIT_TICK_MS_MAX as i64) as u64
            };
            tokio::select! {
                answer = &mut rx => {
                    return answer.unwrap_or_else(|_| Err(GroupError::RebalanceInProgress(group.to_owned())));
                }
                () = tokio::time::sleep(Duration::from_millis(sleep_ms)) => {}
            }
            if started.elapsed() > give_up {
                return Err(GroupError::RebalanceInProgress(group.to_owned()));
            }
        }
    }

    pub fn heartbeat(
        &self,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<()> {
        self.with(|c| c.heartbeat(group, member, instance, generation))
    }

    pub fn leave(&self, group: &str, members: &[MemberRef]) -> Vec<Result<()>> {
        self.with(|c| c.leave(group, members))
    }

    pub fn check_commit(
        &self,
        group: &str,
        member: &str,
        instance: Option<&str>,
        generation: i32,
    ) -> Result<()> {
        self.with(|c| c.check_commit(group, member, instance, generation))
    }

    pub fn knows(&self, group: &str) -> bool {
        self.lock().coordinator.knows(group)
    }

    pub fn describe(&self, group: &str) -> Option<ClassicDescription> {
        self.with(|c| c.describe(group))
    }

    pub fn list(&self) -> Vec<(String, ClassicState, String)> {
        self.with(|c| c.list())
    }

    /// Forgets an empty group and writes its tombstone; returns once it is durable.
    pub async fn delete(&self, group: &str) -> Result<()> {
        let (tx, rx) = oneshot::channel();
        {
            let mut inner = self.lock();
            let deleted = inner.coordinator.delete(group);
            inner.dispatch();
            deleted?;
            let request = StoreRequest {
                group: group.to_owned(),
                seq: 0,
                generation: -1,
                snapshot: None,
                awaited: false,
            };
            let _closed = inner.jobs.send(Job { epoch: inner.epoch, request, done: Some(tx) });
        }
        // The group is gone from memory here and its tombstone may have been
        // appended: a failure is not a promise that nothing was done.
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(hint)) => Err(GroupError::CoordinatorLost { hint }),
            Err(_) => Err(GroupError::CoordinatorLost { hint: None }),
        }
    }
}

/// Most records written in one batch.
const RECORDS_PER_WRITE_MAX: usize = 256;
/// Records per write, in bytes (JSON): half the default batch limit.
const BYTES_PER_WRITE_MAX: usize = es_core::limits::BATCH_BYTES_MAX_DEFAULT / 2;

/// The writer: what is queued, in order, a batch at a time; then each awaited
/// store's outcome goes back to the coordinator, and what that completes to its
/// parked calls. Before each write it checks the coordinator was not reset: jobs of
/// an older one are dropped (their calls were answered by the reset), so nothing it
/// asked for lands after a newer coordinator loaded the log.
async fn write_records(
    inner: Weak<Mutex<Inner>>,
    mut queue: mpsc::UnboundedReceiver<Job>,
    write: GroupWriter,
) {
    let mut received = Vec::new();
    while queue.recv_many(&mut received, RECORDS_PER_WRITE_MAX).await > 0 {
        let mut pending: std::collections::VecDeque<Job> = received.drain(..).collect();
        while !pending.is_empty() {
            let Some(shared) = inner.upgrade() else { return };
            let epoch = shared.lock().expect("classic groups lock").epoch;
            drop(shared);
            let (mut chunk, mut bytes) = (Vec::new(), 0);
            while let Some(job) = pending.pop_front() {
                if job.epoch != epoch {
                    if let Some(done) = job.done {
                        let _gone = done.send(Err(None));
                    }
                    continue;
                }
                let size =
                    job.request.snapshot.as_ref().map_or(0, |s| serde_json::to_vec(s).map_or(0, |v| v.len()));
                if !chunk.is_empty() && bytes + size > BYTES_PER_WRITE_MAX {
                    pending.push_front(job);
                    break;
                }
                bytes += size;
                chunk.push(job);
            }
            if chunk.is_empty() {
                continue;
            }
            let records =
                chunk.iter().map(|j| (j.request.group.clone(), j.request.snapshot.clone())).collect();
            let outcome: WriteOutcome = match write(records).await {
                Ok(()) => Ok(()),
                Err(GroupError::NotCoordinator { hint } | GroupError::CoordinatorLost { hint }) => Err(hint),
                Err(e) => {
                    tracing::warn!(error = %e, "writing Kafka groups' records failed; their members rejoin");
                    Err(None)
                }
            };
            let Some(shared) = inner.upgrade() else { return };
            let mut now = shared.lock().expect("classic groups lock");
            for job in chunk {
                if let Some(done) = job.done {
                    let _gone = done.send(outcome.clone());
                } else if job.request.awaited && now.epoch == epoch {
                    now.coordinator.stored(&job.request.group, job.request.seq, outcome.clone());
                }
            }
            now.dispatch();
        }
    }
}

#[cfg(test)]
mod tests {
    use es_core::SystemClock;
    use es_groups::classic::Protocol;

    use super::*;

    fn join(member: &str, rebalance_timeout_ms: u64) -> JoinGroup {
        JoinGroup {
            group: "g".into(),
            member_id: member.into(),
            instance_id: None,
            client_id: "c".into(),
            client_host: String::new(),
            session_timeout_ms: 30_000,
            rebalance_timeout_ms,
            protocol_type: "consumer".into(),
            protocols: vec![Protocol { name: "range".into(), metadata: Vec::new() }],
            require_known_member_id: false,
        }
    }

    /// Records every write; fails none.
    fn writer() -> (GroupWriter, Arc<Mutex<Vec<String>>>) {
        let written = Arc::new(Mutex::new(Vec::new()));
        let seen = written.clone();
        let write: GroupWriter = Arc::new(move |records| {
            let seen = seen.clone();
            Box::pin(async move {
                seen.lock().unwrap().extend(records.into_iter().map(|(g, _)| g));
                Ok(())
            })
        });
        (write, written)
    }

    fn sync(member: &str, generation: i32) -> SyncGroup {
        SyncGroup {
            group: "g".into(),
            member_id: member.into(),
            instance_id: None,
            generation,
            protocol_type: None,
            protocol_name: None,
            assignments: Vec::new(),
        }
    }

    /// With no other call to drive it, a parked join is answered when the barrier
    /// times out: the parked call's own timer ticks the coordinator.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_parked_join_completes_at_the_rebalance_timeout_on_its_own() {
        let config =
            ClassicConfig { initial_rebalance_delay_ms: 50, min_session_timeout_ms: 1, ..Default::default() };
        let groups = ClassicGroups::new(Arc::new(SystemClock), config, writer().0);
        let first = groups.join(join("", 300)).await.unwrap();
        assert_eq!((first.generation, first.leader.as_str()), (1, first.member_id.as_str()));
        groups.sync(sync(&first.member_id, 1)).await.unwrap();
        // A second member joins: the first never rejoins, so the barrier closes at the
        // first's rebalance timeout (300 ms) and drops it.
        let started = Instant::now();
        let second =
            tokio::time::timeout(Duration::from_secs(10), groups.join(join("", 300))).await.unwrap().unwrap();
        assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
        assert_eq!((second.generation, second.members.len()), (2, 1));
        assert_eq!(second.leader, second.member_id);
        let e = groups.heartbeat("g", &first.member_id, None, 1).unwrap_err();
        assert!(matches!(e, GroupError::UnknownMember { .. }), "{e:?}");
        assert!(groups.lock().joins.is_empty(), "no waiter is left behind");
    }

    /// A follower's parked sync is answered by the leader's from another task.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_parked_sync_is_answered_by_the_leaders() {
        let config =
            ClassicConfig { initial_rebalance_delay_ms: 50, min_session_timeout_ms: 1, ..Default::default() };
        let (write, written) = writer();
        let groups = Arc::new(ClassicGroups::new(Arc::new(SystemClock), config, write));
        let (a, b) = tokio::join!(groups.join(join("", 5_000)), groups.join(join("", 5_000)));
        let (a, b) = (a.unwrap(), b.unwrap());
        let (leader, follower) = if a.leader == a.member_id { (a, b) } else { (b, a) };
        let waiting = {
            let groups = groups.clone();
            let id = follower.member_id.clone();
            tokio::spawn(async move { groups.sync(sync(&id, 1)).await })
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while groups.lock().syncs.is_empty() {
            assert!(Instant::now() < deadline, "the follower's sync never parked");
            tokio::task::yield_now().await;
        }
        let plan = vec![(follower.member_id.clone(), b"F".to_vec())];
        groups.sync(SyncGroup { assignments: plan, ..sync(&leader.member_id, 1) }).await.unwrap();
        let got = tokio::time::timeout(Duration::from_secs(10), waiting).await.unwrap().unwrap().unwrap();
        assert_eq!(got.assignment, b"F");
        assert_eq!(*written.lock().unwrap(), vec!["g".to_owned()], "the record was written first");
    }

    /// A group record that cannot be written answers the leader's and the
    /// followers' syncs NOT_COORDINATOR (their clients look the coordinator up and
    /// rejoin) and the group rebalances.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_record_that_cannot_be_written_answers_the_syncs_not_coordinator() {
        let config =
            ClassicConfig { initial_rebalance_delay_ms: 0, min_session_timeout_ms: 1, ..Default::default() };
        let failing: GroupWriter = Arc::new(|_| {
            Box::pin(async { Err(GroupError::Storage(es_log::LogError::Failed("disk full".into()))) })
        });
        let groups = ClassicGroups::new(Arc::new(SystemClock), config, failing);
        let first = groups.join(join("", 5_000)).await.unwrap();
        let answer =
            tokio::time::timeout(Duration::from_secs(10), groups.sync(sync(&first.member_id, 1))).await;
        let e = answer.unwrap().unwrap_err();
        assert!(matches!(e, GroupError::NotCoordinator { hint: None }), "{e:?}");
        assert_eq!(groups.describe("g").unwrap().state, ClassicState::PreparingRebalance);
    }
}
