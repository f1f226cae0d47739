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
//! first. No task outlives the calls, so shutdown has nothing to stop.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use es_core::Clock;
use es_groups::classic::{
    ClassicConfig, ClassicCoordinator, ClassicDescription, ClassicState, Completion, JoinGroup, JoinResult,
    MemberRef, Outcome, SyncGroup, Synced,
};
use es_groups::{GroupError, Result};
use tokio::sync::oneshot;

use crate::limits;

type Key = (String, String);
type Waiters<T> = BTreeMap<Key, oneshot::Sender<Result<T>>>;

#[derive(Debug)]
struct Inner {
    coordinator: ClassicCoordinator,
    joins: Waiters<JoinResult>,
    syncs: Waiters<Synced>,
}

impl Inner {
    /// Hands every completion to its parked call; one whose caller went away is dropped.
    fn dispatch(&mut self) {
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
#[derive(Debug)]
pub struct ClassicGroups {
    inner: Mutex<Inner>,
    clock: Arc<dyn Clock>,
}

impl ClassicGroups {
    pub fn new(clock: Arc<dyn Clock>, config: ClassicConfig) -> ClassicGroups {
        let coordinator = ClassicCoordinator::new(clock.clone(), config);
        let inner = Inner { coordinator, joins: BTreeMap::new(), syncs: BTreeMap::new() };
        ClassicGroups { inner: Mutex::new(inner), clock }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().expect("classic groups lock")
    }

    /// Runs a call on the coordinator and dispatches what it completed.
    fn with<T>(&self, f: impl FnOnce(&mut ClassicCoordinator) -> T) -> T {
        let mut inner = self.lock();
        let out = f(&mut inner.coordinator);
        inner.dispatch();
        out
    }

    pub async fn join(&self, req: JoinGroup) -> Result<JoinResult> {
        let group = req.group.clone();
        let rx = {
            let mut inner = self.lock();
            let outcome = inner.coordinator.join(req);
            let rx = match outcome {
                Outcome::Done(r) => Err(r),
                Outcome::Parked { member_id } => {
                    let (tx, rx) = oneshot::channel();
                    // A retried join replaces the old one, whose caller then hears
                    // REBALANCE_IN_PROGRESS (its sender is dropped).
                    inner.joins.insert((group.clone(), member_id), tx);
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

    pub async fn sync(&self, req: SyncGroup) -> Result<Synced> {
        let group = req.group.clone();
        let rx = {
            let mut inner = self.lock();
            let rx = match inner.coordinator.sync(req) {
                Outcome::Done(r) => Err(r),
                Outcome::Parked { member_id } => {
                    let (tx, rx) = oneshot::channel();
                    inner.syncs.insert((group.clone(), member_id), tx);
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

    pub fn delete(&self, group: &str) -> Result<()> {
        self.with(|c| c.delete(group))
    }
}
