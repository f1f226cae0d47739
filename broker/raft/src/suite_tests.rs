//! openraft's storage test suite against the es-log store, and the snapshot trap.

use std::sync::Arc;
use std::time::Duration;

use es_core::batch;
use es_core::{ProducerInfo, Record};
use es_log::{LogConfig, LogManager, ManagerOptions, PartitionLog};
use openraft::entry::RaftEntry;
use openraft::storage::{RaftLogReader, RaftLogStorage, RaftSnapshotBuilder, RaftStateMachine};
use openraft::testing::log::{StoreBuilder, Suite};
use openraft::type_config::TypeConfigExt;
use openraft::{Membership, StorageError};

use crate::types::{BatchData, CommittedLeaderId, LogId, Term, TypeConfig};
use crate::{DataStateMachine, LogStore};

/// Keeps the directory and the manager alive for one test.
type Guard = (tempfile::TempDir, LogManager);

struct Builder;

fn open_partition() -> (Guard, Arc<PartitionLog>) {
    let dir = tempfile::tempdir().unwrap();
    let opts = ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
    let m = LogManager::new(dir.path(), opts).unwrap();
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    ((dir, m), p)
}

impl StoreBuilder<TypeConfig, LogStore, DataStateMachine, Guard> for Builder {
    async fn build(&self) -> Result<(Guard, LogStore, DataStateMachine), StorageError<TypeConfig>> {
        let (guard, p) = open_partition();
        // The Suite applies entries it never committed: an open gate.
        let sm = DataStateMachine::open(p.clone(), crate::CommitGate::open()).unwrap();
        Ok((guard, LogStore::open(p).unwrap(), sm))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openraft_storage_suite_passes() {
    let run = Suite::test_all(Builder);
    tokio::time::timeout(Duration::from_secs(120), run).await.expect("the suite finishes").unwrap();
}

fn log_id(term: u64, index: u64) -> LogId {
    LogId::new(CommittedLeaderId::new(Term::from(term)), index)
}

fn data(value: &str) -> BatchData {
    let b = batch::encode(&[Record::from_value(value.to_owned())], 1_000, ProducerInfo::NONE).unwrap();
    BatchData(b.into())
}

fn values(p: &PartitionLog) -> Vec<String> {
    let mut out = Vec::new();
    let mut at = p.info().log_start_offset;
    while at < p.high_watermark() {
        let read = p.read(at, 1 << 20).unwrap();
        for b in read.batches() {
            for r in b.records() {
                out.push(String::from_utf8(r.unwrap().value.unwrap().to_vec()).unwrap());
            }
            at = b.header.next_offset();
        }
    }
    out
}

/// Waits (bounded) until readers see `offset` as the high watermark: the state
/// machine's publisher moves it once the committed id is on disk.
async fn published(p: &PartitionLog, offset: u64) {
    let mut rx = p.subscribe();
    let reached =
        tokio::time::timeout(Duration::from_secs(10), rx.wait_for(|_| p.high_watermark() >= offset));
    assert!(matches!(reached.await, Ok(Ok(_))), "the high watermark stayed at {}", p.high_watermark());
}

async fn append(store: &mut LogStore, entries: Vec<crate::entry::EsEntry>) {
    let (tx, rx) = TypeConfig::oneshot();
    store.append(entries, openraft::storage::IOFlushed::signal(tx)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), rx).await.unwrap().unwrap().unwrap();
}

/// The snapshot trap (DESIGN §4): a metadata-only snapshot taken at the applied
/// index would, installed on a follower, purge records that are still retained.
/// The es snapshot sits at the retention boundary, and installing it and purging
/// up to it leaves every retained record readable on the follower.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installing_a_snapshot_never_drops_retained_records() {
    use crate::entry::EsEntry;
    let membership = Membership::new_with_defaults(vec![[1u64].into()], []);
    let entries = || {
        vec![
            EsEntry::new_membership(log_id(1, 0), membership.clone()),
            EsEntry::new_blank(log_id(1, 1)),
            EsEntry::new_normal(log_id(1, 2), data("a")),
            EsEntry::new_normal(log_id(1, 3), data("b")),
        ]
    };
    // The leader: four entries applied, both records retained.
    let (_g, leader_log) = open_partition();
    let mut leader = LogStore::open(leader_log.clone()).unwrap();
    let mut leader_sm = DataStateMachine::open(leader_log.clone(), leader.commit_gate()).unwrap();
    append(&mut leader, entries()).await;
    let stored = leader.get_log_reader().await.try_get_log_entries(0..4).await.unwrap();
    leader.save_committed(Some(log_id(1, 3))).await.unwrap();
    let apply = futures_util::stream::iter(stored.clone().into_iter().map(|e| Ok((e, None))));
    leader_sm.apply(apply).await.unwrap();
    assert_eq!(leader_sm.applied().high_watermark, 2);
    let snap = leader_sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    assert_eq!(snap.meta.last_log_id, Some(log_id(1, 1)), "below the first retained data entry, not at 3");
    assert_eq!(snap.meta.last_membership.log_id(), &Some(log_id(1, 0)));

    // A follower with the same entries (byte-identical, stamped by the leader).
    let (_g2, follower_log) = open_partition();
    let mut follower = LogStore::open(follower_log.clone()).unwrap();
    let mut follower_sm = DataStateMachine::open(follower_log.clone(), follower.commit_gate()).unwrap();
    append(&mut follower, stored.clone()).await;
    assert_eq!(follower.get_log_reader().await.try_get_log_entries(0..4).await.unwrap(), stored);
    follower_sm.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
    follower.purge(snap.meta.last_log_id.unwrap()).await.unwrap();
    assert!(values(&follower_log).is_empty(), "not served before the follower applies them");
    let left = follower.get_log_reader().await.try_get_log_entries(0..10).await.unwrap();
    assert_eq!(left.iter().map(|e| e.index()).collect::<Vec<_>>(), [2, 3]);
    follower.save_committed(Some(log_id(1, 3))).await.unwrap();
    let apply = futures_util::stream::iter(left.into_iter().map(|e| Ok((e, None))));
    follower_sm.apply(apply).await.unwrap();
    published(&follower_log, 2).await;
    assert_eq!(values(&follower_log), ["a", "b"], "every retained record is still served");
    // Even a purge at the applied index (what a naive snapshot would do) deletes
    // no record: purge moves the Raft log start, retention deletes segments.
    follower.purge(log_id(1, 3)).await.unwrap();
    assert_eq!(values(&follower_log), ["a", "b"]);
}

/// Commits and applies what the store holds in `[0, to)`, as openraft does.
async fn apply_stored(store: &mut LogStore, sm: &mut DataStateMachine, to: u64) {
    let stored = store.get_log_reader().await.try_get_log_entries(0..to).await.unwrap();
    store.save_committed(stored.last().map(|e| e.log_id())).await.unwrap();
    sm.apply(futures_util::stream::iter(stored.into_iter().map(|e| Ok((e, None))))).await.unwrap();
}

/// A leader: membership at 0, "a" (offset 0) at 1, "b" (offset 1) at 2 in the first
/// segment; "c" (offset 2) at 3 in the next; all applied.
async fn two_segment_leader() -> (Guard, Arc<PartitionLog>, LogStore, DataStateMachine) {
    use crate::entry::EsEntry;
    let (g, log) = open_partition();
    let mut store = LogStore::open(log.clone()).unwrap();
    let mut sm = DataStateMachine::open(log.clone(), store.commit_gate()).unwrap();
    let membership = Membership::new_with_defaults(vec![[1u64].into()], []);
    append(
        &mut store,
        vec![
            EsEntry::new_membership(log_id(1, 0), membership),
            EsEntry::new_normal(log_id(1, 1), data("a")),
            EsEntry::new_normal(log_id(2, 2), data("b")),
        ],
    )
    .await;
    log.force_roll().unwrap();
    append(&mut store, vec![EsEntry::new_normal(log_id(2, 3), data("c"))]).await;
    apply_stored(&mut store, &mut sm, 4).await;
    (g, log, store, sm)
}

/// Retention by size on `log` until it asks for a purge: the flusher seals the
/// rolled segment on its own thread (bounded wait). Nothing is deleted before.
async fn retention_waits_for_a_purge(log: &PartitionLog) -> u64 {
    log.set_config(LogConfig { retention_bytes: 1, ..LogConfig::default() }).unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let report = log.housekeeping().unwrap();
        assert!(report.deleted_segments.is_empty(), "retention deleted entries Raft had not purged");
        if let Some(wants) = log.retention_wants() {
            return wants;
        }
        assert!(std::time::Instant::now() < deadline, "retention never asked for a purge");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retention_waits_for_the_snapshot_and_purge_at_its_boundary() {
    let (_g, log, mut store, mut sm) = two_segment_leader().await;
    let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    assert_eq!(snap.meta.last_log_id, Some(log_id(1, 0)), "data from index 1 is retained");
    assert_eq!(retention_waits_for_a_purge(&log).await, 3, "the first segment holds indexes 0-2");
    let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    assert_eq!(snap.meta.last_log_id, Some(log_id(2, 2)), "the snapshot moves to retention's boundary");
    store.purge(log_id(2, 2)).await.unwrap();
    assert_eq!(log.housekeeping().unwrap().deleted_segments, [0]);
    assert_eq!(log.retention_wants(), None);
    assert_eq!(values(&log), ["c"]);
    let left = store.get_log_reader().await.try_get_log_entries(3..10).await.unwrap();
    assert_eq!(left.iter().map(|e| e.index()).collect::<Vec<_>>(), [3]);
}

/// A follower that has only index 0-1 when the leader's retention removed 0-2
/// installs the snapshot and starts its log over at the leader's log start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_behind_retention_starts_over_at_the_leaders_log_start() {
    let (_g, leader_log, mut leader, mut leader_sm) = two_segment_leader().await;
    retention_waits_for_a_purge(&leader_log).await;
    let snap = leader_sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    leader.purge(snap.meta.last_log_id.unwrap()).await.unwrap();
    assert_eq!(leader_log.housekeeping().unwrap().deleted_segments, [0]);

    let (_g2, follower_log) = open_partition();
    let mut follower = LogStore::open(follower_log.clone()).unwrap();
    let mut follower_sm = DataStateMachine::open(follower_log.clone(), follower.commit_gate()).unwrap();
    // It got indexes 0 and 1 before it went down (the leader's bytes).
    append(&mut follower, first_term_entries(&[]).await).await;

    // What openraft does for a follower behind the leader's purge point.
    follower_sm.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
    follower.purge(snap.meta.last_log_id.unwrap()).await.unwrap();
    let rest = leader.get_log_reader().await.try_get_log_entries(3..4).await.unwrap();
    append(&mut follower, rest.clone()).await;
    assert_eq!(follower.get_log_reader().await.try_get_log_entries(3..10).await.unwrap(), rest);
    let state = follower.get_log_state().await.unwrap();
    assert_eq!(state.last_log_id, Some(log_id(2, 3)));
    assert_eq!(follower_log.info().log_start_offset, 2, "the leader's log start");
    follower.save_committed(Some(log_id(2, 3))).await.unwrap();
    let apply = futures_util::stream::iter(rest.into_iter().map(|e| Ok((e, None))));
    follower_sm.apply(apply).await.unwrap();
    published(&follower_log, 3).await;
    assert_eq!(values(&follower_log), ["c"]);
    assert_eq!(follower_log.info().log_end_offset, leader_log.info().log_end_offset);
}

/// A leader of term 2 whose retention removed indexes 0-3: membership and "a" (term
/// 1, offset 0), "b" (term 2, offset 1) and a blank in the first segment, "c"
/// (offset 2) at index 4 in the next. Its snapshot ends at index 3, offset 2.
async fn leader_past_a_term_change() -> (Guard, Arc<PartitionLog>, LogStore, Snap) {
    use crate::entry::EsEntry;
    let (g, log) = open_partition();
    let mut store = LogStore::open(log.clone()).unwrap();
    let mut sm = DataStateMachine::open(log.clone(), store.commit_gate()).unwrap();
    let membership = Membership::new_with_defaults(vec![[1u64].into()], []);
    let first = vec![
        EsEntry::new_membership(log_id(1, 0), membership),
        EsEntry::new_normal(log_id(1, 1), data("a")),
        EsEntry::new_normal(log_id(2, 2), data("b")),
        EsEntry::new_blank(log_id(2, 3)),
    ];
    append(&mut store, first).await;
    log.force_roll().unwrap();
    append(&mut store, vec![EsEntry::new_normal(log_id(2, 4), data("c"))]).await;
    apply_stored(&mut store, &mut sm, 5).await;
    assert_eq!(retention_waits_for_a_purge(&log).await, 4);
    let snap = sm.get_snapshot_builder().await.build_snapshot().await.unwrap();
    assert_eq!(snap.meta.last_log_id, Some(log_id(2, 3)));
    store.purge(log_id(2, 3)).await.unwrap();
    assert_eq!(log.housekeeping().unwrap().deleted_segments, [0]);
    assert_eq!(log.info().log_start_offset, 2);
    (g, log, store, snap)
}

type Snap =
    openraft::storage::Snapshot<CommittedLeaderId, u64, openraft::impls::BasicNode, std::io::Cursor<Vec<u8>>>;

/// The membership and "a" of term 1 at indexes 0 and 1, then `more`, as a leader
/// stamps them: the bytes a follower that got them holds.
async fn first_term_entries(more: &[crate::entry::EsEntry]) -> Vec<crate::entry::EsEntry> {
    use crate::entry::EsEntry;
    let (_g, log) = open_partition();
    let mut store = LogStore::open(log).unwrap();
    let membership = Membership::new_with_defaults(vec![[1u64].into()], []);
    let mut entries =
        vec![EsEntry::new_membership(log_id(1, 0), membership), EsEntry::new_normal(log_id(1, 1), data("a"))];
    entries.extend_from_slice(more);
    let n = entries.len() as u64;
    append(&mut store, entries).await;
    store.get_log_reader().await.try_get_log_entries(0..n).await.unwrap()
}

/// Drops a group's store and state machine and waits (bounded) until no task of
/// theirs writes to the log: what a closing group does before its log is reopened.
async fn close(store: LogStore, sm: DataStateMachine) {
    let mut writing = store.committed_writer();
    drop((store, sm));
    let ended = tokio::time::timeout(Duration::from_secs(10), writing.wait_for(|n| *n == 0)).await.is_ok();
    assert!(ended, "{} tasks still write", *writing.borrow());
}

/// A follower that led term 1: it holds the leader's membership and "a"
/// (committed), then "x" at index 2, offset 1, which never committed (the leader of
/// term 2 has "b" there).
async fn follower_with_an_uncommitted_tail(log: &Arc<PartitionLog>) -> (LogStore, DataStateMachine) {
    use crate::entry::EsEntry;
    let mut store = LogStore::open(log.clone()).unwrap();
    let mut sm = DataStateMachine::open(log.clone(), store.commit_gate()).unwrap();
    append(&mut store, first_term_entries(&[]).await).await;
    apply_stored(&mut store, &mut sm, 2).await;
    published(log, 1).await;
    append(&mut store, vec![EsEntry::new_normal(log_id(1, 2), data("x"))]).await;
    assert_eq!(values(log), ["a"]);
    (store, sm)
}

/// openraft installs a snapshot past a follower's log end without comparing the
/// entries the follower holds (it truncates only on a conflict at the snapshot's
/// index). Those after the follower's committed id may be an old leader's that
/// never committed: here "x" sits at offset 1, where the leader has "b", and the
/// log would continue at offset 2 over it. The install drops them before the
/// snapshot's offset is readable; the follower then starts over at the leader's
/// log start and holds only what the leader holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_past_the_log_end_drops_the_uncommitted_tail() {
    let (_g, leader_log, mut leader, snap) = leader_past_a_term_change().await;
    let (_g2, follower_log) = open_partition();
    let (mut follower, mut follower_sm) = follower_with_an_uncommitted_tail(&follower_log).await;

    follower_sm.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
    assert_eq!(values(&follower_log), ["a"], "the uncommitted \"x\" is never served");
    assert_eq!(follower_log.entry_range().next, 2);
    follower.purge(snap.meta.last_log_id.unwrap()).await.unwrap();
    let rest = leader.get_log_reader().await.try_get_log_entries(4..5).await.unwrap();
    append(&mut follower, rest.clone()).await;
    follower.save_committed(Some(log_id(2, 4))).await.unwrap();
    follower_sm.apply(futures_util::stream::iter(rest.into_iter().map(|e| Ok((e, None))))).await.unwrap();
    published(&follower_log, 3).await;
    assert_eq!(values(&follower_log), ["c"]);
    assert_eq!(follower_log.info().log_start_offset, leader_log.info().log_start_offset);
    let read = |p: &PartitionLog| p.read(2, 1 << 20).unwrap().data.to_vec();
    assert_eq!(read(&follower_log), read(&leader_log), "byte-identical to the leader's");
}

/// Entries the state machine applied are committed, whether or not the committed
/// id on disk covers them yet: a snapshot past the log's end keeps them (an earlier
/// snapshot may have made them readable already).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_past_the_log_end_keeps_the_applied_entries() {
    use crate::entry::EsEntry;
    let (_g, _leader_log, _leader, snap) = leader_past_a_term_change().await;
    let (_g2, follower_log) = open_partition();
    let mut follower = LogStore::open(follower_log.clone()).unwrap();
    let mut follower_sm = DataStateMachine::open(follower_log.clone(), follower.commit_gate()).unwrap();
    // The leader's first entries, stamped as it stamped them.
    let stored = first_term_entries(&[EsEntry::new_normal(log_id(2, 2), data("b"))]).await;
    append(&mut follower, stored.clone()).await;
    // Applied, with no committed id on disk yet.
    follower_sm.apply(futures_util::stream::iter(stored.into_iter().map(|e| Ok((e, None))))).await.unwrap();

    follower_sm.install_snapshot(&snap.meta, snap.snapshot).await.unwrap();
    assert_eq!(follower_log.entry_range().next, 3, "nothing applied is dropped");
    assert_eq!(values(&follower_log), ["a", "b"]);

    // Nor by a restart, which runs the drop again (for a crash before it ran) with
    // what was applied before the install, kept with the snapshot.
    close(follower, follower_sm).await;
    let store = LogStore::open(follower_log.clone()).unwrap();
    let sm = DataStateMachine::open(follower_log.clone(), store.commit_gate()).unwrap();
    assert_eq!(follower_log.entry_range().next, 3);
    assert_eq!(values(&follower_log), ["a", "b"]);
    drop((store, sm));
}

/// A crash after the snapshot is kept and before the unmatched tail is dropped:
/// reopening the group drops it, before anything is readable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_drops_the_tail_a_kept_snapshot_left_unmatched() {
    let (_g, _leader_log, _leader, snap) = leader_past_a_term_change().await;
    let (_g2, follower_log) = open_partition();
    let (follower, follower_sm) = follower_with_an_uncommitted_tail(&follower_log).await;
    close(follower, follower_sm).await;
    // What `install_snapshot` keeps on disk first: the snapshot as the leader sent it.
    follower_log.write_raft_file(es_log::RaftFile::Snapshot, snap.snapshot.get_ref()).unwrap();

    let store = LogStore::open(follower_log.clone()).unwrap();
    let sm = DataStateMachine::open(follower_log.clone(), store.commit_gate()).unwrap();
    assert_eq!(follower_log.entry_range().next, 2, "\"x\" is gone");
    assert_eq!(values(&follower_log), ["a"]);
    drop((store, sm));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raft_log_survives_a_restart() {
    use crate::entry::EsEntry;
    let dir = tempfile::tempdir().unwrap();
    let opts = || ManagerOptions { housekeeping_interval: None, ..ManagerOptions::default() };
    let vote = crate::types::Vote::new(Term::from(3), 1);
    let before = {
        let m = LogManager::new(dir.path(), opts()).unwrap();
        let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
        let mut store = LogStore::open(p.clone()).unwrap();
        append(
            &mut store,
            vec![EsEntry::new_blank(log_id(1, 0)), EsEntry::new_normal(log_id(1, 1), data("a"))],
        )
        .await;
        append(&mut store, vec![EsEntry::new_blank(log_id(3, 2))]).await;
        store.save_vote(&vote).await.unwrap();
        store.purge(log_id(1, 0)).await.unwrap();
        store.save_committed(Some(log_id(3, 2))).await.unwrap();
        // Written by the store's writer task: on disk once the gate opens for it.
        let mut gate = store.commit_gate();
        let covered = async {
            while !gate.covers(2) {
                assert!(gate.changed().await, "the writer stopped");
            }
        };
        tokio::time::timeout(Duration::from_secs(10), covered).await.unwrap();
        let state = store.get_log_state().await.unwrap();
        (store.get_log_reader().await.try_get_log_entries(0..).await.unwrap(), state)
        // Dropped without a clean close: the journal replays what the segments lack.
    };
    let m = LogManager::new(dir.path(), opts()).unwrap();
    let (p, _) = m.open_partition("t-0", LogConfig::default()).unwrap();
    let mut store = LogStore::open(p.clone()).unwrap();
    // Readers see what was committed before the restart at once: data "a" at
    // index 1, committed up to the blank at index 2.
    assert_eq!((p.high_watermark(), p.committed_offset()), (1, Some(1)));
    assert_eq!(values(&p), ["a"]);
    assert_eq!(store.read_vote().await.unwrap(), Some(vote));
    assert_eq!(store.read_committed().await.unwrap(), Some(log_id(3, 2)));
    assert_eq!(store.get_log_state().await.unwrap(), before.1);
    assert_eq!(store.get_log_reader().await.try_get_log_entries(0..).await.unwrap(), before.0);
    assert_eq!(before.0.iter().map(|e| e.log_id()).collect::<Vec<_>>(), [log_id(1, 1), log_id(3, 2)]);
}

/// Readers see an applied entry only once the committed id covering it is on
/// disk: `save_committed` returns at once, since openraft's core awaits it on
/// every commit; the apply (which answers the proposer) does not wait either; the
/// high watermark waits for the store's writer task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_entry_is_seen_only_once_its_commit_is_on_disk() {
    use crate::entry::EsEntry;
    let (_g, p) = open_partition();
    let mut store = LogStore::open(p.clone()).unwrap();
    let sm = DataStateMachine::open(p.clone(), store.commit_gate()).unwrap();
    let membership = Membership::new_with_defaults(vec![[1u64].into()], []);
    let entries = vec![
        EsEntry::new_membership(log_id(1, 0), membership),
        EsEntry::new_normal(log_id(1, 1), data("a")),
        EsEntry::new_normal(log_id(1, 2), data("b")),
    ];
    append(&mut store, entries).await;
    let stored = store.get_log_reader().await.try_get_log_entries(0..3).await.unwrap();
    let mut applier = sm.clone();
    let apply = applier.apply(futures_util::stream::iter(stored.into_iter().map(|e| Ok((e, None)))));
    tokio::time::timeout(Duration::from_secs(10), apply).await.unwrap().unwrap();
    assert_eq!(sm.applied().high_watermark, 2, "applied at once");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(p.high_watermark(), 0, "readers see nothing before a committed id is on disk");
    store.save_committed(Some(log_id(1, 2))).await.unwrap();
    published(&p, 2).await;
    assert_eq!(values(&p), ["a", "b"]);
    // A closing group waits for all that writes to the log: the committed-id writer,
    // the state machine and its publisher; all end once the store and state
    // machine are gone.
    let mut writing = store.committed_writer();
    assert_eq!(*writing.borrow(), 3, "the writer, the state machine and the publisher");
    drop((store, sm, applier));
    let ended = tokio::time::timeout(Duration::from_secs(10), writing.wait_for(|n| *n == 0)).await.is_ok();
    assert!(ended, "{} tasks still write", *writing.borrow());
    // The id is on disk: a store opened over the log again reads it back.
    let mut reopened = LogStore::open(p.clone()).unwrap();
    assert_eq!(reopened.read_committed().await.unwrap(), Some(log_id(1, 2)));
}

/// A failed fsync reaches openraft as a storage error through the append's
/// callback, and the group's later appends are refused: fatal for the group, not
/// for the process. (A failed journal fsync poisons the journal, so every partition
/// on that disk refuses writes until reopened: es-log's rule, docs/storage.md.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_fsync_is_a_storage_error_for_the_group() {
    use crate::entry::EsEntry;
    let ((dir, m), p) = open_partition();
    let mut store = LogStore::open(p.clone()).unwrap();
    append(&mut store, vec![EsEntry::new_blank(log_id(1, 0))]).await;
    m.fail_next_journal_sync();
    let (tx, rx) = TypeConfig::oneshot();
    store
        .append(vec![EsEntry::new_blank(log_id(1, 1))], openraft::storage::IOFlushed::signal(tx))
        .await
        .unwrap();
    let flushed = tokio::time::timeout(Duration::from_secs(10), rx).await.unwrap().unwrap();
    assert!(flushed.is_err(), "the append is reported failed, not durable");
    let (tx, _rx) = TypeConfig::oneshot();
    let again =
        store.append(vec![EsEntry::new_blank(log_id(1, 2))], openraft::storage::IOFlushed::signal(tx)).await;
    assert!(again.is_err(), "the group's log refuses further appends");
    drop((store, p, m, dir));
}

/// The leader-epoch checkpoint answers `get_key_log_ids`, and agrees with the
/// bisection over reads on every sub-range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_log_ids_come_from_the_epoch_checkpoint() {
    use crate::entry::EsEntry;
    let (_g, p) = open_partition();
    let mut store = LogStore::open(p.clone()).unwrap();
    let terms = [1u64, 1, 2, 2, 2, 5, 5, 6];
    let entries = terms.iter().enumerate().map(|(i, t)| EsEntry::new_blank(log_id(*t, i as u64))).collect();
    append(&mut store, entries).await;
    let ids: Vec<LogId> = terms.iter().enumerate().map(|(i, t)| log_id(*t, i as u64)).collect();
    for a in 0..ids.len() {
        for b in a..ids.len() {
            let range = ids[a]..=ids[b];
            let from_epochs =
                crate::store::key_log_ids(&p.entry_epochs(), &range).expect("the checkpoint answers");
            assert_eq!(from_epochs, store.key_log_ids_by_search(range.clone()).unwrap(), "{a}..={b}");
            assert_eq!(store.get_key_log_ids(range).await.unwrap(), from_epochs);
        }
    }
    let all = crate::store::key_log_ids(&p.entry_epochs(), &(ids[0]..=ids[7])).unwrap();
    assert_eq!(all, [log_id(1, 1), log_id(2, 4), log_id(5, 6), log_id(6, 7)]);
}

/// A committed id that cannot be written fails the gate: the next apply fails
/// (openraft then stops the group; an idle group is stopped by the host's
/// `stop_on_commit_failure`), and readers never see what it would have covered.
/// Here the slot file's path is a directory, so the write fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_committed_id_that_cannot_be_written_fails_the_gate() {
    use crate::entry::EsEntry;
    let (_g, p) = open_partition();
    let mut store = LogStore::open(p.clone()).unwrap();
    std::fs::create_dir(p.dir().join("raft-committed.slots")).unwrap();
    let mut sm = DataStateMachine::open(p.clone(), store.commit_gate()).unwrap();
    let membership = Membership::new_with_defaults(vec![[1u64].into()], []);
    let entries =
        vec![EsEntry::new_membership(log_id(1, 0), membership), EsEntry::new_normal(log_id(1, 1), data("a"))];
    append(&mut store, entries).await;
    store.save_committed(Some(log_id(1, 1))).await.unwrap();
    let mut gate = store.commit_gate();
    let failed = async {
        while gate.check().is_ok() {
            assert!(gate.changed().await, "the writer ended without failing");
        }
    };
    tokio::time::timeout(Duration::from_secs(10), failed).await.unwrap();
    assert!(!gate.covers(1));
    let stored = store.get_log_reader().await.try_get_log_entries(0..2).await.unwrap();
    let applied = sm.apply(futures_util::stream::iter(stored.into_iter().map(|e| Ok((e, None))))).await;
    assert!(applied.is_err(), "the apply goes on after the failure");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(p.high_watermark(), 0, "readers see nothing the failed id covers");
}
