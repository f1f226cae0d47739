//! Groups follow the cluster's members (`RaftHost::set_members`): each node brings
//! the voters of the groups it leads to the members, one step per round. The step
//! is decided by a pure function of what the leader sees (`membership_step`).

use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::Duration;

use openraft::RaftMetrics;
use openraft::async_runtime::watch::WatchReceiver;
use openraft::errors::ClientWriteError;

use super::{Group, HostInner};
use crate::error::ProposeError;
use crate::limits;
use crate::types::TypeConfig;

/// Brings the voters of every group this node leads to the members
/// (`RaftHost::set_members`): every `MEMBERSHIP_CHECK_MS`, and at once when the
/// members change, a step for each group that differs, a few groups at a time,
/// each step bounded. Ends with the host.
pub(super) async fn reconcile_membership(host: std::sync::Weak<HostInner>) {
    use futures_util::StreamExt;
    let (mut members, poke) = match host.upgrade() {
        Some(h) => (h.members.subscribe(), h.reconcile.clone()),
        None => return,
    };
    let every = Duration::from_millis(limits::MEMBERSHIP_CHECK_MS);
    loop {
        let _ = tokio::time::timeout(every, async {
            tokio::select! {
                _ = members.changed() => {}
                () = poke.notified() => {}
            }
        })
        .await;
        let Some(h) = host.upgrade() else { return };
        if h.stopped.load(Ordering::Acquire) {
            return;
        }
        let all = members.borrow_and_update().clone();
        let led: Vec<Group> =
            h.groups.read().expect("groups lock").values().filter(|g| g.is_leader()).cloned().collect();
        let connected = |n: u64| h.peer.is_connected(n);
        let step = Duration::from_millis(limits::MEMBERSHIP_STEP_MS);
        futures_util::stream::iter(led)
            .map(|g| {
                let connected = &connected;
                let desired = g.target().unwrap_or_else(|| all.clone());
                async move {
                    if desired.is_empty() {
                        return;
                    }
                    if let Ok(Err(e)) = tokio::time::timeout(step, g.reconcile(&desired, connected)).await {
                        tracing::info!(group = g.inner.id, error = %e, "a membership step failed; retrying");
                    }
                }
            })
            .buffer_unordered(limits::MEMBERSHIP_CHANGES_AT_ONCE)
            .collect::<Vec<()>>()
            .await;
    }
}

/// The next membership step of a group toward `desired` voters, as its leader.
#[derive(Debug, PartialEq, Eq)]
enum MembershipStep {
    /// Voters are the members, no learner is left.
    Settled,
    /// This node is no member: hand leadership to this one, which goes on.
    HandOver(u64),
    /// Add these as learners (replication to them starts).
    AddLearners(BTreeSet<u64>),
    /// Learners still catching up; nothing to do this round.
    CatchingUp,
    /// Make the members the voters (openraft passes through a joint config when
    /// voters both come and go) and drop the voters that are no member.
    ReplaceVoters,
    /// Drop learners that are no member (added, then removed before promotion).
    DropLearners(BTreeSet<u64>),
    /// This node is no member and no member is reachable to take over.
    Stuck,
}

/// Decides a group's next membership step from what its leader sees: `voters` and
/// `learners` of its effective membership (`joint`: two voter sets), and each
/// node's matched index against the commit. Pure: unit-tested below.
#[allow(clippy::too_many_arguments)]
fn membership_step(
    me: u64,
    desired: &BTreeSet<u64>,
    voters: &BTreeSet<u64>,
    learners: &BTreeSet<u64>,
    joint: bool,
    matched: &dyn Fn(u64) -> Option<u64>,
    committed: Option<u64>,
    connected: &dyn Fn(u64) -> bool,
) -> MembershipStep {
    if !joint && voters == desired && learners.is_empty() {
        return MembershipStep::Settled;
    }
    // A leader that is no member hands over to a voter that stays; when none of
    // the voters stays (a partition moved to other nodes altogether), it makes the
    // change itself and steps down once it is committed.
    // The successor is a connected one with every committed entry if there is
    // one (the lowest), else the one furthest along: a transfer needs its log.
    let staying: Vec<u64> = voters.iter().copied().filter(|v| desired.contains(v)).collect();
    let caught_up = |n: &u64| match (matched(*n), committed) {
        (_, None) => true,
        (Some(m), Some(c)) => m >= c,
        (None, Some(_)) => false,
    };
    if !desired.contains(&me) && !staying.is_empty() {
        let successor = staying
            .into_iter()
            .filter(|v| connected(*v))
            .max_by_key(|v| (caught_up(v), matched(*v), std::cmp::Reverse(*v)));
        return match successor {
            Some(to) => MembershipStep::HandOver(to),
            None => MembershipStep::Stuck,
        };
    }
    let stray: BTreeSet<u64> = learners.difference(desired).copied().collect();
    if !stray.is_empty() {
        return MembershipStep::DropLearners(stray);
    }
    let missing: BTreeSet<u64> =
        desired.difference(voters).filter(|n| !learners.contains(n)).copied().collect();
    if !missing.is_empty() {
        return MembershipStep::AddLearners(missing);
    }
    if desired.difference(voters).all(caught_up) {
        MembershipStep::ReplaceVoters
    } else {
        MembershipStep::CatchingUp
    }
}

impl Group {
    /// Asks openraft to hand leadership to `to`; returns once the transfer is
    /// triggered (watch [`Group::watch_leader`] for the outcome). Only the leader.
    ///
    /// First `to` must answer an append sent now. openraft's target accepts a
    /// transfer only once its flushed log reaches the leader's last entry, and a
    /// restarted node counts nothing as flushed until its leader's next append
    /// reaches it; a leader that is transferring sends no heartbeat, and a quiet
    /// group none at all, so a transfer to a node restarted since the last write
    /// would stall until an election replaced the leader.
    pub async fn transfer_leader(&self, to: u64) -> Result<(), ProposeError> {
        if !self.is_leader() {
            return Err(ProposeError::NotLeader { leader: self.leader() });
        }
        self.wake();
        self.answered_since_now(to).await?;
        self.caught_up_to_now(to).await?;
        if !self.is_leader() {
            return Err(ProposeError::NotLeader { leader: self.leader() });
        }
        self.inner.raft.trigger().transfer_leader(to).await.map_err(super::fatal)
    }

    /// Waits, up to twice the longest election timeout, until `to` holds every
    /// entry this leader's log held when it was asked: openraft's leader refuses
    /// proposals from the moment it starts a transfer until the target has its whole
    /// log (or an election), so a target far behind would stall the partition.
    async fn caught_up_to_now(&self, to: u64) -> Result<(), ProposeError> {
        let last = self.inner.raft.metrics().borrow_watched().last_log_index;
        let matched = |m: &RaftMetrics<TypeConfig>| {
            m.replication.as_ref().and_then(|r| r.get(&to)).and_then(Option::as_ref).map(|l| l.index)
        };
        let wait = Duration::from_millis(self.inner.raft.config().election_timeout_max.saturating_mul(2));
        let me = self.inner.node;
        // A leader that loses its office meanwhile stops waiting (no replication
        // state then) and says who leads.
        let caught_up =
            self.metrics_until(wait, |m| m.current_leader != Some(me) || matched(m) >= last).await;
        if !self.is_leader() {
            return Err(ProposeError::NotLeader { leader: self.leader() });
        }
        match caught_up {
            Some(true) => Ok(()),
            Some(false) => Err(ProposeError::Shutdown),
            None => {
                let at = matched(&self.inner.raft.metrics().borrow_watched());
                Err(ProposeError::Behind { node: to, matched: at, last: last.unwrap_or(0) })
            }
        }
    }

    /// Sends a heartbeat and waits, up to the shortest election timeout, until
    /// `to` acknowledged an append (heartbeat or replication) sent from now on.
    async fn answered_since_now(&self, to: u64) -> Result<(), ProposeError> {
        let since = <openraft::type_config::alias::InstantOf<TypeConfig> as openraft::Instant>::now();
        self.inner.raft.trigger().heartbeat().await.map_err(super::fatal)?;
        let answered = |m: &RaftMetrics<TypeConfig>| {
            m.heartbeat
                .as_ref()
                .and_then(|h| h.get(&to))
                .and_then(Option::as_ref)
                .is_some_and(|at| **at >= since)
        };
        let wait = Duration::from_millis(self.inner.raft.config().election_timeout_min);
        match self.metrics_until(wait, answered).await {
            Some(true) => Ok(()),
            Some(false) => Err(ProposeError::Shutdown),
            None => Err(ProposeError::Unanswered { node: to }),
        }
    }

    /// Waits up to `wait` until `holds` is true of openraft's metrics: `Some(true)`;
    /// `Some(false)` if the group stopped first; `None` when the time ran out.
    async fn metrics_until(
        &self,
        wait: Duration,
        holds: impl Fn(&RaftMetrics<TypeConfig>) -> bool,
    ) -> Option<bool> {
        let mut metrics = self.inner.raft.metrics();
        let waited = tokio::time::timeout(wait, async {
            while !holds(&metrics.borrow_watched()) {
                if metrics.changed().await.is_err() {
                    return false;
                }
            }
            true
        });
        waited.await.ok()
    }

    /// The voters this group is brought to while this node leads it: `Some`, its
    /// own replicas (a partition placed on some of the nodes, or moved); `None`,
    /// the cluster's members. The reconciler takes the next step at once.
    pub fn set_target(&self, voters: Option<BTreeSet<u64>>) {
        let changed = {
            let mut target = self.inner.target.lock().expect("target lock");
            let changed = *target != voters;
            *target = voters;
            changed
        };
        if changed {
            self.inner.reconcile.notify_one();
        }
    }

    /// The voters set with [`Group::set_target`], if any.
    pub fn target(&self) -> Option<BTreeSet<u64>> {
        self.inner.target.lock().expect("target lock").clone()
    }

    /// Every node in this group's membership as this node's log has it (voters,
    /// both sides of a joint change, and learners): a replica moved away may let
    /// go of the group once it is none of them.
    pub fn membership_nodes(&self) -> BTreeSet<u64> {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow_watched();
        let membership = m.membership_config.membership();
        membership.voter_ids().chain(membership.learner_ids()).collect()
    }

    /// As the leader, the group's nodes (voters and learners) once its membership
    /// is uniform and committed; `None` otherwise. What a node a partition moved
    /// away from asks to know it may let go: the leader never sends a node the
    /// entry that removes it.
    pub fn committed_membership(&self) -> Option<BTreeSet<u64>> {
        if !self.is_leader() {
            return None;
        }
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow_watched();
        let membership = m.membership_config.membership();
        if membership.get_joint_config().len() > 1 {
            return None;
        }
        let at = m.membership_config.log_id().as_ref().map(|l| l.index);
        let committed = m.local_committed.as_ref().map(|c| c.index);
        if at > committed {
            return None;
        }
        Some(membership.voter_ids().chain(membership.learner_ids()).collect())
    }

    /// One step of bringing this group's voters to `desired`, as its leader
    /// (`reconcile_membership`). Not the leader: nothing.
    async fn reconcile(
        &self,
        desired: &BTreeSet<u64>,
        connected: &(dyn Fn(u64) -> bool + Sync),
    ) -> Result<(), String> {
        if !self.is_leader() {
            return Ok(());
        }
        // Decided from a borrow of the metrics, released before any await.
        let (step, voters) = {
            let metrics = self.inner.raft.metrics();
            let m = metrics.borrow_watched();
            let membership = m.membership_config.membership();
            let voters: BTreeSet<u64> = membership.voter_ids().collect();
            let learners: BTreeSet<u64> = membership.learner_ids().collect();
            let joint = membership.get_joint_config().len() > 1;
            let matched = |n: u64| m.replication.as_ref()?.get(&n)?.as_ref().map(|l| l.index);
            let committed = m.local_committed.as_ref().map(|c| c.index);
            let step = membership_step(
                self.inner.node,
                desired,
                &voters,
                &learners,
                joint,
                &matched,
                committed,
                connected,
            );
            (step, voters)
        };
        let raft = &self.inner.raft;
        let change = |r: Result<_, openraft::errors::RaftError<TypeConfig, ClientWriteError<TypeConfig>>>| {
            r.map(|_| ()).map_err(|e| e.to_string())
        };
        if !matches!(step, MembershipStep::Settled | MembershipStep::CatchingUp) {
            self.wake();
        }
        match step {
            MembershipStep::Settled | MembershipStep::CatchingUp => Ok(()),
            MembershipStep::Stuck => Err("no member is reachable to take this group over".into()),
            MembershipStep::HandOver(to) => {
                tracing::info!(group = self.inner.id, to, "no longer a member: handing leadership over");
                self.transfer_leader(to).await.map_err(|e| e.to_string())
            }
            MembershipStep::AddLearners(nodes) => {
                for n in nodes {
                    tracing::info!(group = self.inner.id, node = n, "adding a learner");
                    change(raft.add_learner(n, openraft::impls::BasicNode::default(), false).await)?;
                }
                Ok(())
            }
            MembershipStep::DropLearners(nodes) => {
                change(raft.change_membership(openraft::ChangeMembers::RemoveNodes(nodes), false).await)
            }
            MembershipStep::ReplaceVoters => {
                tracing::info!(group = self.inner.id, from = ?voters, to = ?desired, "changing voters");
                change(raft.change_membership(desired.clone(), false).await)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{MembershipStep as Step, membership_step};
    use std::collections::BTreeSet;

    fn set(ids: &[u64]) -> BTreeSet<u64> {
        ids.iter().copied().collect()
    }

    /// The step leader `me` takes; nodes in `behind` matched index 5, the others 10;
    /// the commit is at 10; every node is connected but `down`.
    fn step(
        me: u64,
        desired: &[u64],
        voters: &[u64],
        learners: &[u64],
        behind: &[u64],
        down: &[u64],
    ) -> Step {
        let matched = |n: u64| Some(if behind.contains(&n) { 5 } else { 10 });
        let connected = |n: u64| !down.contains(&n);
        membership_step(
            me,
            &set(desired),
            &set(voters),
            &set(learners),
            false,
            &matched,
            Some(10),
            &connected,
        )
    }

    #[test]
    fn a_new_member_is_a_learner_first_then_a_voter_once_caught_up() {
        assert_eq!(step(1, &[1, 2, 3, 4], &[1, 2, 3], &[], &[], &[]), Step::AddLearners(set(&[4])));
        assert_eq!(step(1, &[1, 2, 3, 4], &[1, 2, 3], &[4], &[4], &[]), Step::CatchingUp);
        assert_eq!(step(1, &[1, 2, 3, 4], &[1, 2, 3], &[4], &[], &[]), Step::ReplaceVoters);
        assert_eq!(step(1, &[1, 2, 3, 4], &[1, 2, 3, 4], &[], &[], &[]), Step::Settled);
    }

    #[test]
    fn replacing_a_node_waits_for_the_new_one_and_drops_the_old_in_one_change() {
        assert_eq!(step(1, &[1, 2, 4], &[1, 2, 3], &[], &[], &[3]), Step::AddLearners(set(&[4])));
        assert_eq!(step(1, &[1, 2, 4], &[1, 2, 3], &[4], &[4], &[3]), Step::CatchingUp);
        assert_eq!(step(1, &[1, 2, 4], &[1, 2, 3], &[4], &[], &[3]), Step::ReplaceVoters);
        // A removal alone needs no catching up.
        assert_eq!(step(1, &[1, 2], &[1, 2, 3], &[], &[2], &[3]), Step::ReplaceVoters);
    }

    #[test]
    fn a_leader_that_is_no_member_hands_over_to_a_reachable_member() {
        assert_eq!(step(3, &[1, 2, 4], &[1, 2, 3], &[], &[], &[1]), Step::HandOver(2));
        assert_eq!(step(3, &[1, 2], &[1, 2, 3], &[], &[], &[1, 2]), Step::Stuck);
        // One with every committed entry goes first: a transfer to one behind fails.
        assert_eq!(step(3, &[1, 2], &[1, 2, 3], &[], &[1], &[]), Step::HandOver(2));
        assert_eq!(step(3, &[1, 2], &[1, 2, 3], &[], &[], &[]), Step::HandOver(1));
        assert_eq!(step(3, &[1, 2], &[1, 2, 3], &[], &[1, 2], &[]), Step::HandOver(1));
    }

    #[test]
    fn a_partition_moved_to_other_nodes_altogether_is_moved_by_its_old_leader() {
        assert_eq!(step(1, &[3, 4], &[1, 2], &[], &[], &[]), Step::AddLearners(set(&[3, 4])));
        assert_eq!(step(1, &[3, 4], &[1, 2], &[3, 4], &[4], &[]), Step::CatchingUp);
        assert_eq!(step(1, &[3, 4], &[1, 2], &[3, 4], &[], &[]), Step::ReplaceVoters);
    }

    #[test]
    fn a_learner_removed_before_promotion_is_dropped_and_a_joint_config_finished() {
        assert_eq!(step(1, &[1, 2, 3], &[1, 2, 3], &[4], &[], &[]), Step::DropLearners(set(&[4])));
        let matched = |_: u64| Some(10);
        let connected = |_: u64| true;
        let joint =
            membership_step(1, &set(&[1, 2]), &set(&[1, 2]), &set(&[]), true, &matched, Some(10), &connected);
        assert_eq!(joint, Step::ReplaceVoters);
    }
}
