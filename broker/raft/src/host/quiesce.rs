//! Quiescence: a group with nothing to do stops ticking, so it costs no timer
//! wake-up, no heartbeat and no election check; a per-node-pair ping stands in for
//! its heartbeats (docs/cluster.md, "Idle groups"). CockroachDB's quiesced ranges
//! and TiKV's hibernate regions do the same.
//!
//! - **Liveness.** Every heartbeat interval each node pings every peer (one small
//!   RPC per node pair, whatever the number of groups). A peer that answered within
//!   the shortest election timeout is alive.
//! - **Quiescing.** Every `QUIESCE_CHECK_MS` the leader of each group checks that it
//!   is settled: not fenced, a uniform membership with no learner, everything in its
//!   log committed and applied, every live follower matched to its last entry, a
//!   majority alive, and nothing appended for `quiesce_after_ms`. It asks each live
//!   follower (one request per peer naming all such groups) to quiesce at (term,
//!   last index); a follower agrees when it follows that leader in that term with
//!   that entry committed and applied here, and stops ticking. Groups every asked
//!   follower agreed to stop ticking on the leader too.
//! - **Waking.** A group ticks again (and a leader heartbeats at once) when: its
//!   leader is asked to do anything (a proposal, a leader transfer, a membership
//!   step, a retention purge); its leader or term changes (a vote arrived); a
//!   follower's log moved (its leader woke); its leader (on a follower) or one of
//!   its voters (on the leader) is lost or comes back (a ping stops or starts
//!   answering, or its link goes down). A follower never wakes for anything else:
//!   woken while its leader stays quiet, its election timer long expired, it would
//!   stand for election. A woken follower also holds its own election back for an
//!   election timeout.
//! - **A silent leader.** When a quiet group's leader stops answering pings for the
//!   window, its followers hand the group to one successor as for a dead leader
//!   (`replace_leader`): a paused or cut-off quiet leader is replaced in about that
//!   window. Busy groups keep their election timers (pings share the link with
//!   replication and may lag it). A node whose own ping round came a window late
//!   (it was paused or starved) judges no peer that round.
//! - **Leadership while quiet.** A quiesced leader's quorum acknowledgements age;
//!   its fencing (`Group::fenced`) then rests on the pings instead (a majority of its
//!   voters alive), and a woken leader counts its wake-up as a fresh lease while
//!   its first heartbeat is answered.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use es_peer::{PeerError, RpcError};
use openraft::async_runtime::watch::WatchReceiver;

use super::{Group, HostInner};
use crate::limits;
use crate::network::CODE_BAD_REQUEST;

/// The node-level RPC kinds (group 0), below the broker's and beside Raft's.
pub(crate) const KIND_PING: u8 = 5;
pub(crate) const KIND_QUIESCE: u8 = 6;

/// Where a quiesced group stopped: its leader, term and last log index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Quiesced {
    pub leader: u64,
    pub term: u64,
    pub index: u64,
}

/// When each peer last answered a ping; alive means within `window`.
pub(super) struct Liveness {
    me: u64,
    window: Duration,
    answered: Mutex<HashMap<u64, Instant>>,
    /// Peers whose link went down since the ping loop last looked: it must see
    /// them come back as a change even if a ping answered in between.
    dropped: Mutex<BTreeSet<u64>>,
    /// Peers whose link went down and that have not answered since.
    unreachable: Mutex<BTreeSet<u64>>,
}

impl Liveness {
    pub(super) fn new(me: u64, window: Duration) -> Liveness {
        Liveness {
            me,
            window,
            answered: Mutex::default(),
            dropped: Mutex::default(),
            unreachable: Mutex::default(),
        }
    }

    /// Whether `node` answered a ping within the window (this node always is).
    pub(super) fn alive(&self, node: u64) -> bool {
        node == self.me
            || self
                .answered
                .lock()
                .expect("liveness lock")
                .get(&node)
                .is_some_and(|t| t.elapsed() < self.window)
    }

    /// Whether a majority of `voters` is alive.
    pub(super) fn majority_alive(&self, voters: impl Iterator<Item = u64>) -> bool {
        !self.at_least_half(voters, |v| !self.alive(v))
    }

    /// Whether the links to at least half of `voters` are down (and stayed down
    /// for the link-loss grace): a sure sign, where ping silence may only be lag.
    pub(super) fn majority_unreachable(&self, voters: impl Iterator<Item = u64>) -> bool {
        let down = self.unreachable.lock().expect("liveness lock");
        self.at_least_half(voters, |v| down.contains(&v))
    }

    fn at_least_half(&self, voters: impl Iterator<Item = u64>, out: impl Fn(u64) -> bool) -> bool {
        let (mut gone, mut all) = (0, 0);
        for v in voters {
            all += 1;
            gone += usize::from(v != self.me && out(v));
        }
        gone * 2 >= all && all > 1
    }

    fn answered(&self, node: u64) {
        self.answered.lock().expect("liveness lock").insert(node, Instant::now());
        self.unreachable.lock().expect("liveness lock").remove(&node);
    }

    /// `node`'s link went down: the ping loop sees it come back as a change.
    pub(super) fn link_dropped(&self, node: u64) {
        self.dropped.lock().expect("liveness lock").insert(node);
    }

    /// `node`'s link stayed down: it is not alive until it answers again.
    pub(super) fn lost(&self, node: u64) {
        self.answered.lock().expect("liveness lock").remove(&node);
        self.link_dropped(node);
        self.unreachable.lock().expect("liveness lock").insert(node);
    }
}

/// Pings every peer each heartbeat interval; wakes the groups a peer is in when
/// it stops or starts answering. Ends with the host.
pub(super) async fn watch_liveness(host: Weak<HostInner>, every: Duration) {
    let mut alive_before: BTreeSet<u64> = BTreeSet::new();
    let mut last_round = Instant::now();
    loop {
        tokio::time::sleep(every).await;
        let Some(h) = host.upgrade() else { return };
        if h.stopped.load(Ordering::Acquire) {
            return;
        }
        let me = h.peer.node_id();
        // A ping may take half the window: one slow answer is no silence.
        let wait = every.max(h.liveness.window / 2);
        let peers: Vec<u64> = h.peer.peers().into_keys().filter(|p| *p != me).collect();
        let pings = peers.iter().map(|&p| {
            let peer = h.peer.clone();
            async move { (p, peer.call_timeout(p, 0, KIND_PING, Bytes::new(), wait).await) }
        });
        for (p, answer) in futures_util::future::join_all(pings).await {
            // An error the peer sent back is an answer too.
            if matches!(answer, Ok(_) | Err(PeerError::Remote(_))) {
                h.liveness.answered(p);
            }
        }
        for p in std::mem::take(&mut *h.liveness.dropped.lock().expect("liveness lock")) {
            alive_before.remove(&p);
        }
        let alive_now: BTreeSet<u64> = peers.iter().copied().filter(|p| h.liveness.alive(*p)).collect();
        // This node itself stalled (paused, starved) for a window: every peer looks
        // silent from here, and handing their groups over would only elect against
        // healthy leaders. Look again next round.
        let stalled = last_round.elapsed() > h.liveness.window;
        last_round = Instant::now();
        if stalled {
            tracing::info!(node = me, "the ping round was late: this node stalled; not judging its peers");
            alive_before = alive_now;
            continue;
        }
        for &p in alive_before.difference(&alive_now) {
            // Silent for an election timeout, as a leader whose heartbeats stop: its
            // quiet groups are handed over. Busy ones are left to their election
            // timers (pings share the link with replication and may lag it).
            let h = h.clone();
            tokio::spawn(async move {
                super::replace_leader(&h, p, super::Replace::QuietOnly, "peer stopped answering pings").await
            });
        }
        for &p in alive_now.difference(&alive_before) {
            let woken = wake_involving(&h, p);
            if woken > 0 {
                tracing::info!(
                    node = me,
                    peer = p,
                    groups = woken,
                    "peer answers again: waking its quiet groups"
                );
            }
        }
        alive_before = alive_now;
    }
}

/// Wakes every quiet group a change in `node`'s reachability concerns
/// (`Group::involves`); how many.
pub(super) fn wake_involving(h: &HostInner, node: u64) -> usize {
    let groups: Vec<Group> = h.groups.read().expect("groups lock").values().cloned().collect();
    groups.iter().filter(|g| g.involves(node)).filter(|g| g.wake()).count()
}

/// A settled group's fingerprint and the live followers to ask.
struct Settled {
    term: u64,
    index: u64,
    followers: Vec<u64>,
}

/// Every `QUIESCE_CHECK_MS`: wakes quiesced groups that must tick again and
/// quiesces led groups that sat settled for `after`. Ends with the host.
pub(super) async fn quiesce_idle_groups(host: Weak<HostInner>, after: Duration, rpc_timeout: Duration) {
    // Per led group: (term, last index) and since when it has not changed.
    let mut seen: HashMap<u64, ((u64, u64), Instant)> = HashMap::new();
    loop {
        tokio::time::sleep(Duration::from_millis(limits::QUIESCE_CHECK_MS)).await;
        let Some(h) = host.upgrade() else { return };
        if h.stopped.load(Ordering::Acquire) {
            return;
        }
        let groups: Vec<Group> = h.groups.read().expect("groups lock").values().cloned().collect();
        let mut ready: Vec<(Group, Settled)> = Vec::new();
        let mut open = BTreeSet::new();
        for g in groups {
            open.insert(g.id());
            if g.quiesced().is_some() {
                // Woken later, it sits settled a whole `after` again first.
                seen.remove(&g.id());
                if g.must_wake() {
                    g.wake();
                }
                continue;
            }
            let Some(s) = g.settled() else {
                seen.remove(&g.id());
                continue;
            };
            let fingerprint = (s.term, s.index);
            let entry = seen.entry(g.id()).or_insert((fingerprint, Instant::now()));
            if entry.0 != fingerprint {
                *entry = (fingerprint, Instant::now());
            }
            if entry.1.elapsed() >= after {
                ready.push((g, s));
            }
        }
        seen.retain(|id, _| open.contains(id));
        if !ready.is_empty() {
            quiesce(&h, ready, rpc_timeout).await;
        }
    }
}

/// Asks each follower to quiesce the groups it is in, then quiesces here the
/// groups every asked follower agreed to.
async fn quiesce(h: &HostInner, ready: Vec<(Group, Settled)>, rpc_timeout: Duration) {
    let mut asks: BTreeMap<u64, Vec<(u64, u64, u64)>> = BTreeMap::new();
    for (g, s) in &ready {
        for f in &s.followers {
            asks.entry(*f).or_default().push((g.id(), s.term, s.index));
        }
    }
    let calls = asks.into_iter().flat_map(|(peer, asked)| {
        asked.chunks(limits::QUIESCE_BATCH).map(|chunk| (peer, encode_asks(chunk))).collect::<Vec<_>>()
    });
    let calls = calls.map(|(peer, payload)| {
        let node = h.peer.clone();
        async move {
            let answer = node.call_timeout(peer, 0, KIND_QUIESCE, payload, rpc_timeout).await;
            (peer, answer.ok().and_then(|b| decode_ids(b).ok()).unwrap_or_default())
        }
    });
    let mut agreed: HashMap<u64, BTreeSet<u64>> = HashMap::new();
    for (peer, ids) in futures_util::future::join_all(calls).await {
        agreed.entry(peer).or_default().extend(ids);
    }
    let me = h.peer.node_id();
    for (g, s) in ready {
        let all = s.followers.iter().all(|f| agreed.get(f).is_some_and(|ids| ids.contains(&g.id())));
        // Still the same settled state: nothing was proposed while the peers answered.
        if all && g.settled().is_some_and(|now| (now.term, now.index) == (s.term, s.index)) {
            g.quiesce(Quiesced { leader: me, term: s.term, index: s.index });
        }
    }
}

/// The follower's side: quiesces each named group it follows `from` in at that
/// (term, index); answers the ids it quiesced.
pub(super) fn serve_quiesce(
    groups: &std::sync::RwLock<HashMap<u64, Group>>,
    from: u64,
    payload: Bytes,
) -> Result<Bytes, RpcError> {
    let asks = decode_asks(payload).map_err(|e| RpcError::new(CODE_BAD_REQUEST, e.to_string()))?;
    let mut agreed = Vec::new();
    for (id, term, index) in asks {
        let g = groups.read().expect("groups lock").get(&id).cloned();
        if g.is_some_and(|g| g.accept_quiesce(Quiesced { leader: from, term, index })) {
            agreed.push(id);
        }
    }
    let mut out = BytesMut::with_capacity(8 * agreed.len());
    for id in agreed {
        out.put_u64(id);
    }
    Ok(out.freeze())
}

/// A term as the quiesce messages carry it.
fn term_number(t: crate::types::Term) -> u64 {
    u64::from(t.epoch().0.unsigned_abs())
}

fn encode_asks(asks: &[(u64, u64, u64)]) -> Bytes {
    let mut out = BytesMut::with_capacity(24 * asks.len());
    for &(id, term, index) in asks {
        out.put_u64(id);
        out.put_u64(term);
        out.put_u64(index);
    }
    out.freeze()
}

#[derive(Debug, thiserror::Error)]
#[error("a quiesce message of {0} bytes is not a whole number of entries")]
struct Ragged(usize);

fn decode_asks(b: Bytes) -> Result<Vec<(u64, u64, u64)>, Ragged> {
    let len = b.len();
    let words = decode_ids(b)?;
    if !words.len().is_multiple_of(3) {
        return Err(Ragged(len));
    }
    Ok(words.chunks_exact(3).map(|w| (w[0], w[1], w[2])).collect())
}

/// Big-endian u64s, as both messages are made of.
fn decode_ids(mut b: Bytes) -> Result<Vec<u64>, Ragged> {
    if !b.len().is_multiple_of(8) {
        return Err(Ragged(b.len()));
    }
    let mut out = Vec::with_capacity(b.len() / 8);
    while b.has_remaining() {
        out.push(b.get_u64());
    }
    Ok(out)
}

impl Group {
    /// Where this group quiesced, if it is quiet.
    pub(super) fn quiesced(&self) -> Option<Quiesced> {
        *self.inner.quiet.lock().expect("quiet lock")
    }

    /// Whether a change in `node`'s reachability concerns this quiet group here:
    /// it is the leader the group quiesced under (this node follows it), or this
    /// node leads and `node` is a voter. A follower never wakes for another
    /// follower: woken while its leader stays quiet, it would elect.
    fn involves(&self, node: u64) -> bool {
        let Some(q) = self.quiesced() else { return false };
        if q.leader == node {
            return true;
        }
        if q.leader != self.inner.node {
            return false;
        }
        let m = self.inner.raft.metrics();
        let m = m.borrow_watched();
        m.membership_config.membership().voter_ids().any(|v| v == node)
    }

    /// As the leader: the group is settled (see the module docs), with the live
    /// followers to ask. `None`: not the leader, or something is under way.
    fn settled(&self) -> Option<Settled> {
        if self.inner.stopped.load(Ordering::Acquire) || self.inner.purging.load(Ordering::Acquire) {
            return None;
        }
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow_watched();
        let me = self.inner.node;
        if m.state != openraft::ServerState::Leader || m.current_leader != Some(me) || self.fenced_by(&m) {
            return None;
        }
        let membership = m.membership_config.membership();
        if membership.get_joint_config().len() > 1
            || membership.learner_ids().next().is_some()
            || m.committed_membership_config.log_id() != m.membership_config.log_id()
        {
            return None;
        }
        let index = m.last_log_index?;
        let committed = m.local_committed.as_ref().map(|c| c.index);
        let applied = m.last_applied.as_ref().map(|a| a.index);
        if committed != Some(index) || applied != Some(index) {
            return None;
        }
        let voters: Vec<u64> = membership.voter_ids().collect();
        let liveness = &self.inner.liveness;
        if !liveness.majority_alive(voters.iter().copied()) {
            return None;
        }
        let repl = m.replication.as_ref()?;
        let followers: Vec<u64> = voters.iter().copied().filter(|v| *v != me && liveness.alive(*v)).collect();
        let matched = |f: &u64| repl.get(f).is_some_and(|l| l.as_ref().is_some_and(|l| l.index == index));
        if !followers.iter().all(matched) {
            return None;
        }
        Some(Settled { term: term_number(m.current_term), index, followers })
    }

    /// As a follower: quiesces at `q` if this node follows `q.leader` in `q.term`
    /// with `q.index` its last entry, committed and applied. Whether it did.
    fn accept_quiesce(&self, q: Quiesced) -> bool {
        if self.inner.stopped.load(Ordering::Acquire) {
            return false;
        }
        {
            let metrics = self.inner.raft.metrics();
            let m = metrics.borrow_watched();
            let term = term_number(m.current_term);
            let settled = m.state == openraft::ServerState::Follower
                && m.current_leader == Some(q.leader)
                && term == q.term
                && m.last_log_index == Some(q.index)
                && m.local_committed.as_ref().map(|c| c.index) == Some(q.index)
                && m.last_applied.as_ref().map(|a| a.index) == Some(q.index);
            if !settled {
                return false;
            }
        }
        self.quiesce(q);
        true
    }

    /// Stops the group's ticks: no heartbeat, no election check until `wake`.
    fn quiesce(&self, q: Quiesced) {
        let mut quiet = self.inner.quiet.lock().expect("quiet lock");
        if quiet.is_none() {
            self.inner.raft.runtime_config().tick(false);
        }
        *quiet = Some(q);
    }

    /// Whether a quiesced group must tick again: its leader, term or log moved, or
    /// (on the leader) a majority stopped answering pings.
    fn must_wake(&self) -> bool {
        let Some(q) = self.quiesced() else { return false };
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow_watched();
        let term = term_number(m.current_term);
        if m.current_leader != Some(q.leader) || term != q.term || m.last_log_index != Some(q.index) {
            return true;
        }
        if q.leader != self.inner.node {
            // A silent leader is the ping loop's to hand over (`replace_leader`):
            // woken here first, the group would slip past it and wait for timers.
            return false;
        }
        !self.inner.liveness.majority_alive(m.membership_config.membership().voter_ids())
    }

    /// Makes a quiesced group tick again; a leader heartbeats at once (its writes
    /// wait for a quorum's answer: openraft's lease) and counts the wake-up as a
    /// fresh lease when a majority answers pings. A follower holds its own
    /// election back for an election timeout, as if it had just heard from its
    /// leader: its timer ran out long ago, and every follower electing itself at
    /// once would split the vote the successor of a lost leader asks for
    /// (`Group::succeed`). Whether it was quiet.
    pub(super) fn wake(&self) -> bool {
        let Some(q) = self.inner.quiet.lock().expect("quiet lock").take() else { return false };
        let config = self.inner.raft.runtime_config();
        if q.leader != self.inner.node {
            let hold = Duration::from_millis(self.inner.raft.config().election_timeout_min);
            config.elect(false);
            *self.inner.elect_from.lock().expect("elect lock") = Some(Instant::now() + hold);
            let inner = std::sync::Arc::downgrade(&self.inner);
            tokio::spawn(async move {
                tokio::time::sleep(hold).await;
                let Some(inner) = inner.upgrade() else { return };
                let mut from = inner.elect_from.lock().expect("elect lock");
                // A later wake-up holds it back longer; its own task lets it go.
                if from.is_some_and(|t| t <= Instant::now()) {
                    *from = None;
                    inner.raft.runtime_config().elect(true);
                }
            });
        }
        config.tick(true);
        if q.leader == self.inner.node {
            let majority = {
                let m = self.inner.raft.metrics();
                let m = m.borrow_watched();
                self.inner.liveness.majority_alive(m.membership_config.membership().voter_ids())
            };
            if majority {
                *self.inner.woke_at.lock().expect("woke lock") = Some(Instant::now());
            }
            let raft = self.inner.raft.clone();
            tokio::spawn(async move {
                let _ = raft.trigger().heartbeat().await;
            });
        }
        true
    }

    /// Whether a wake-up within the last lease stands in for the quorum's answer.
    pub(super) fn woke_within(&self, lease: Duration) -> bool {
        self.inner.woke_at.lock().expect("woke lock").is_some_and(|w| w.elapsed() < lease)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asks_and_answers_round_trip_and_ragged_ones_are_refused() {
        let asks = vec![(1, 2, 3), (u64::MAX, 0, 7)];
        assert_eq!(decode_asks(encode_asks(&asks)).unwrap(), asks);
        assert!(decode_asks(Bytes::from_static(&[0; 23])).is_err());
        assert!(decode_ids(Bytes::from_static(&[0; 9])).is_err());
        assert_eq!(decode_ids(Bytes::from_static(&[0, 0, 0, 0, 0, 0, 0, 9])).unwrap(), vec![9]);
    }

    #[test]
    fn liveness_counts_this_node_and_forgets_a_lost_peer() {
        let l = Liveness::new(1, Duration::from_secs(60));
        assert!(l.alive(1) && !l.alive(2));
        assert!(!l.majority_alive([1, 2, 3].into_iter()));
        l.answered(2);
        assert!(l.majority_alive([1, 2, 3].into_iter()));
        l.lost(2);
        assert!(!l.alive(2));
        assert!(l.dropped.lock().unwrap().contains(&2));
        assert!(!l.majority_unreachable([1, 2, 3].into_iter()), "one of three links down");
        l.lost(3);
        assert!(l.majority_unreachable([1, 2, 3].into_iter()));
        l.answered(3);
        assert!(!l.majority_unreachable([1, 2, 3].into_iter()), "answered again: reachable");
        l.link_dropped(2);
        l.link_dropped(3);
        assert!(!l.majority_unreachable([1, 2, 3].into_iter()), "a drop within the grace is no loss yet");
        let expired = Liveness::new(1, Duration::ZERO);
        expired.answered(2);
        assert!(!expired.alive(2), "silent past the window: not alive");
        assert!(!expired.majority_unreachable([1, 2, 3].into_iter()), "but not unreachable: its link is up");
    }
}
