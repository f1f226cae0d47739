//! A group's view of its leader: the watch that follows openraft's server
//! metrics into (leader, term), and the task that stops a group whose committed
//! id can no longer be written.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use es_core::LeaderEpoch;
use openraft::async_runtime::watch::WatchReceiver;
use tokio::sync::watch;

use super::{GroupFigures, GroupInner, LeaderView};
use crate::network::Raft;
use crate::types::Term;

pub(super) fn leader_view(raft: &Raft) -> LeaderView {
    let m = raft.server_metrics();
    let s = m.borrow_watched();
    view(s.current_leader, &s.vote)
}

/// Term 0 has no elected leader: `initialize` makes the node leader of term 0 for
/// the moment it takes to write the membership entry, then it runs an election.
fn view(leader: Option<u64>, vote: &crate::types::Vote) -> LeaderView {
    let term = term_of(vote);
    (if term == LeaderEpoch(0) { None } else { leader }, term)
}

fn term_of(vote: &crate::types::Vote) -> LeaderEpoch {
    let term: Term = vote.leader_id.term;
    term.epoch()
}

/// Stops the group once its committed id can no longer be written (the write, or
/// an append before it, failed). The next apply would stop it too, but an idle
/// group applies nothing, and would keep leading with a high watermark frozen
/// below what it acknowledged. Ends when the group closes.
pub(super) async fn stop_on_commit_failure(
    group: std::sync::Weak<GroupInner>,
    mut gate: crate::store::CommitGate,
) {
    while gate.changed().await {
        if let Err(e) = gate.check() {
            let Some(inner) = group.upgrade() else { return };
            tracing::error!(group = inner.id, error = %e, "the Raft group stops");
            inner.stopped.store(true, Ordering::Release);
            let _ = inner.raft.shutdown().await;
            return;
        }
    }
}

/// Follows openraft's server metrics (leader, vote, membership: they change on
/// elections, not on every append) into the group's leader watch.
pub(super) async fn watch_leader(raft: Raft, tx: watch::Sender<LeaderView>, figures: Arc<GroupFigures>) {
    let mut m = raft.server_metrics();
    // The last (leader, term) counted: a leader known again in the same term is no change.
    let mut counted = None;
    loop {
        let now = {
            let s = m.borrow_and_update();
            view(s.current_leader, &s.vote)
        };
        if now.0.is_some() && counted != Some(now) {
            counted = Some(now);
            figures.leader_changes.fetch_add(1, Ordering::Relaxed);
        }
        let changed = tx.send_if_modified(|seen| {
            let changed = *seen != now;
            *seen = now;
            changed
        });
        if changed {
            // A quiet group ticks again at once when its leader or term changes; the
            // quiescence round then wakes it fully (`quiesce.rs`).
            raft.runtime_config().tick(true);
        }
        if m.changed().await.is_err() {
            return;
        }
    }
}
