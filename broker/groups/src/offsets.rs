//! Committed offsets, stored durably in an internal compacted log (like Kafka's
//! `__consumer_offsets`): one record per commit, keyed by (group, topic, partition),
//! so compaction keeps the newest. A delete writes tombstones. The in-memory table is
//! rebuilt from the log on start, and a commit is visible only once it is fsynced.
//! In a cluster the broker sets an [`Appender`] that proposes the records to the
//! partition's Raft group instead (visible once committed by a majority), and
//! [`OffsetStore::reload`] rebuilds the table when this node becomes coordinator.
//!
//! The same log holds each Kafka group's record ([`StoredGroup`], key
//! `{"group_metadata": <group>}`), as Kafka's `__consumer_offsets` does: the newest
//! one of each group is what a coordinator loads.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};

use es_core::{LeaderEpoch, Record};
use es_log::{PartitionLog, ReplayError};
use serde::{Deserialize, Serialize};

use crate::classic::StoredGroup;
use crate::error::{GroupError, Result};
use crate::{GroupKind, TopicPartition};

/// The leader epoch of every append until the partition handle supplies it.
const EPOCH: LeaderEpoch = LeaderEpoch::INITIAL;

/// Group records per append, in bytes (a batch closes once past it): half the
/// default batch limit, so a batch of them fits.
const GROUP_BATCH_BYTES: usize = es_core::limits::BATCH_BYTES_MAX_DEFAULT / 2;

/// One committed position: the next offset to read, plus the client's metadata.
/// `kind` and `leader_epoch` extend the original record: absent in old records (an
/// es-native group, no epoch) and omitted when they have those values, so es-native
/// commits are written exactly as before.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    pub offset: u64,
    #[serde(default)]
    pub metadata: String,
    /// The kind of group that committed it.
    #[serde(default, skip_serializing_if = "is_es")]
    pub kind: GroupKind,
    /// The leader epoch a Kafka client committed with (`committed_leader_epoch`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_epoch: Option<i32>,
}

impl Committed {
    /// An es-native commit.
    pub fn new(offset: u64, metadata: String) -> Committed {
        Committed { offset, metadata, kind: GroupKind::Es, leader_epoch: None }
    }
}

fn is_es(kind: &GroupKind) -> bool {
    *kind == GroupKind::Es
}

type Key = (String, TopicPartition);

#[derive(Debug, Serialize, Deserialize)]
struct WireKey {
    group: String,
    topic: String,
    partition: u32,
}

/// The key of a group's record.
#[derive(Debug, Serialize, Deserialize)]
struct GroupKey {
    group_metadata: String,
}

/// What a record of the log is.
enum Entry {
    Offset(Key, Option<Committed>),
    Group(String, Option<StoredGroup>),
}

#[derive(Debug, Default)]
struct Table {
    /// The value and the log offset it was written at (newer writes win).
    entries: BTreeMap<Key, (Committed, u64)>,
    /// Each Kafka group's newest record, with its log offset.
    groups: BTreeMap<String, (StoredGroup, u64)>,
}

impl Table {
    fn apply(&mut self, key: Key, value: Option<Committed>, at: u64) {
        if self.entries.get(&key).is_some_and(|(_, seen)| *seen > at) {
            return;
        }
        match value {
            Some(v) => self.entries.insert(key, (v, at)),
            None => self.entries.remove(&key),
        };
    }

    fn apply_group(&mut self, group: String, value: Option<StoredGroup>, at: u64) {
        if self.groups.get(&group).is_some_and(|(_, seen)| *seen > at) {
            return;
        }
        match value {
            Some(v) => self.groups.insert(group, (v, at)),
            None => self.groups.remove(&group),
        };
    }

    fn apply_entry(&mut self, entry: Entry, at: u64) {
        match entry {
            Entry::Offset(key, value) => self.apply(key, value, at),
            Entry::Group(group, value) => self.apply_group(group, value, at),
        }
    }
}

/// Where a write's records go instead of the local log (a replicated partition):
/// resolves with the base offset once the records are durable where it says.
pub type Appender =
    Arc<dyn Fn(Vec<Record>) -> Pin<Box<dyn Future<Output = Result<u64>> + Send>> + Send + Sync>;

/// The durable committed-offset store of every group.
pub struct OffsetStore {
    log: Arc<PartitionLog>,
    table: Mutex<Table>,
    /// Serialises appends so log order is commit order.
    append_lock: Mutex<()>,
    /// Set in a cluster: writes are proposed through it rather than appended here.
    appender: OnceLock<Appender>,
}

impl std::fmt::Debug for OffsetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetStore").field("log", &self.log.name()).finish_non_exhaustive()
    }
}

impl OffsetStore {
    /// Opens the store over `log` and rebuilds the table from it.
    pub fn open(log: Arc<PartitionLog>) -> Result<OffsetStore> {
        let table = read_table(&log)?;
        Ok(OffsetStore {
            log,
            table: Mutex::new(table),
            append_lock: Mutex::new(()),
            appender: OnceLock::new(),
        })
    }

    /// Sends every later write through `appender` (set once; a second call is
    /// ignored and answers false).
    pub fn set_appender(&self, appender: Appender) -> bool {
        self.appender.set(appender).is_ok()
    }

    /// Rebuilds the table from the log, up to its high watermark (blocking reads):
    /// what a node that just became coordinator knows once the log is committed.
    pub fn reload(&self) -> Result<()> {
        let table = read_table(&self.log)?;
        *self.table.lock().expect("offsets table") = table;
        Ok(())
    }

    /// Writes `entries` (None = delete) and returns once they are fsynced and visible.
    pub async fn write(&self, group: &str, entries: Vec<(TopicPartition, Option<Committed>)>) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let records: Vec<Record> = entries.iter().map(|(tp, v)| encode(group, tp, v.as_ref())).collect();
        let base_offset = self.append(records).await?;
        // Newer offsets win in `apply`, so writes that finish out of order still
        // leave the table as the log has it.
        let mut table = self.table.lock().expect("offsets table");
        for (i, (tp, v)) in entries.into_iter().enumerate() {
            table.apply((group.to_owned(), tp), v, base_offset + i as u64);
        }
        Ok(())
    }

    /// Writes Kafka groups' records (None = the group was deleted) in one batch, in
    /// order, and returns once they are durable (committed, in a cluster).
    pub async fn write_groups(&self, groups: Vec<(String, Option<StoredGroup>)>) -> Result<()> {
        if groups.is_empty() {
            return Ok(());
        }
        let mut groups = groups.into_iter().peekable();
        // A batch at most half the log's batch limit: many large groups at once
        // take several appends, in order.
        while groups.peek().is_some() {
            let (mut chunk, mut records, mut bytes) = (Vec::new(), Vec::new(), 0);
            while let Some((group, value)) = groups.peek() {
                let record = encode_group(group, value.as_ref());
                let size =
                    record.key.as_ref().map_or(0, |k| k.len()) + record.value.as_ref().map_or(0, |v| v.len());
                if !records.is_empty() && bytes + size > GROUP_BATCH_BYTES {
                    break;
                }
                bytes += size;
                records.push(record);
                chunk.push(groups.next().expect("peeked"));
            }
            let base_offset = self.append(records).await?;
            let mut table = self.table.lock().expect("offsets table");
            for (i, (group, v)) in chunk.into_iter().enumerate() {
                table.apply_group(group, v, base_offset + i as u64);
            }
        }
        Ok(())
    }

    /// Every Kafka group's newest record, as the log holds it.
    pub fn stored_groups(&self) -> Vec<(String, StoredGroup)> {
        let table = self.table.lock().expect("offsets table");
        table.groups.iter().map(|(g, (v, _))| (g.clone(), v.clone())).collect()
    }

    /// Appends records (through the appender in a cluster) and returns the base
    /// offset once they are durable.
    async fn append(&self, records: Vec<Record>) -> Result<u64> {
        match self.appender.get() {
            Some(append) => append(records).await,
            None => {
                let pending = {
                    let _order = self.append_lock.lock().expect("append lock");
                    self.log.append_records(&records, EPOCH)?
                };
                Ok(pending.durable().await?.base_offset)
            }
        }
    }

    /// The committed offsets of `group`.
    pub fn fetch(&self, group: &str) -> BTreeMap<TopicPartition, Committed> {
        let table = self.table.lock().expect("offsets table");
        table
            .entries
            .iter()
            .filter(|((g, _), _)| g == group)
            .map(|((_, tp), (c, _))| (tp.clone(), c.clone()))
            .collect()
    }

    /// The kind of group whose offsets `group` holds, if it holds any.
    pub fn kind(&self, group: &str) -> Option<GroupKind> {
        let table = self.table.lock().expect("offsets table");
        let from = (group.to_owned(), TopicPartition::new("", 0));
        let mut entries = table.entries.range(from..).take_while(|((g, _), _)| g == group);
        entries.next().map(|(_, (c, _))| c.kind)
    }

    /// Every group with at least one committed offset.
    pub fn groups(&self) -> Vec<String> {
        let table = self.table.lock().expect("offsets table");
        let mut out: Vec<String> = table.entries.keys().map(|(g, _)| g.clone()).collect();
        out.dedup();
        out
    }
}

/// The table the log holds, from its start to its high watermark.
fn read_table(log: &PartitionLog) -> Result<Table> {
    let mut table = Table::default();
    log.replay(|r| {
        table.apply_entry(decode(r.key, r.value, r.offset)?, r.offset);
        Ok(())
    })
    .map_err(|e| match e {
        ReplayError::Log(e) => e.into(),
        ReplayError::Corrupt { offset, reason } => GroupError::Corrupt { offset, reason },
        ReplayError::Apply(e) => e,
    })?;
    Ok(table)
}

fn encode(group: &str, tp: &TopicPartition, value: Option<&Committed>) -> Record {
    let key = WireKey { group: group.to_owned(), topic: tp.topic.clone(), partition: tp.partition };
    Record {
        key: Some(serde_json::to_vec(&key).expect("plain struct").into()),
        value: value.map(|v| serde_json::to_vec(v).expect("plain struct").into()),
        ..Record::default()
    }
}

fn encode_group(group: &str, value: Option<&StoredGroup>) -> Record {
    let key = GroupKey { group_metadata: group.to_owned() };
    Record {
        key: Some(serde_json::to_vec(&key).expect("plain struct").into()),
        value: value.map(|v| serde_json::to_vec(v).expect("plain struct").into()),
        ..Record::default()
    }
}

fn decode(key: Option<&[u8]>, value: Option<&[u8]>, offset: u64) -> Result<Entry> {
    let corrupt = |reason: String| GroupError::Corrupt { offset, reason };
    let key = key.ok_or_else(|| corrupt("a record without a key".into()))?;
    if let Ok(k) = serde_json::from_slice::<GroupKey>(key) {
        let v = value.map(serde_json::from_slice::<StoredGroup>).transpose();
        return Ok(Entry::Group(k.group_metadata, v.map_err(|e| corrupt(e.to_string()))?));
    }
    let k: WireKey = serde_json::from_slice(key).map_err(|e| corrupt(e.to_string()))?;
    let v = value.map(serde_json::from_slice::<Committed>).transpose().map_err(|e| corrupt(e.to_string()))?;
    Ok(Entry::Offset((k.group, TopicPartition::new(k.topic, k.partition)), v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_log::{LogConfig, LogManager, ManagerOptions};

    fn open(dir: &std::path::Path) -> (LogManager, OffsetStore) {
        let manager = LogManager::new(dir, ManagerOptions::default()).unwrap();
        let (log, _) = manager.open_partition("__es_offsets-0", LogConfig::default()).unwrap();
        (manager, OffsetStore::open(log).unwrap())
    }

    #[tokio::test]
    async fn commits_survive_reopen_and_deletes_stick() {
        let dir = tempfile::tempdir().unwrap();
        let tp = |p| TopicPartition::new("t", p);
        let c = |o: u64| Some(Committed::new(o, format!("m{o}")));
        {
            let (manager, store) = open(dir.path());
            store.write("g", vec![(tp(0), c(5)), (tp(1), c(7))]).await.unwrap();
            store.write("g", vec![(tp(0), c(9))]).await.unwrap();
            store.write("h", vec![(tp(0), c(1))]).await.unwrap();
            store.write("h", vec![(tp(0), None)]).await.unwrap();
            assert_eq!(store.fetch("g")[&tp(0)].offset, 9);
            manager.shutdown().unwrap();
        }
        let (_manager, store) = open(dir.path());
        let g = store.fetch("g");
        assert_eq!(g[&tp(0)], Committed::new(9, "m9".into()));
        assert_eq!(g[&tp(1)].offset, 7);
        assert!(store.fetch("h").is_empty());
        assert_eq!(store.groups(), vec!["g".to_owned()]);
        assert_eq!(store.kind("g"), Some(GroupKind::Es));
        assert_eq!(store.kind("h"), None);
    }

    #[tokio::test]
    async fn group_records_beside_commits_survive_reopen_newest_first_and_tombstones_stick() {
        let dir = tempfile::tempdir().unwrap();
        let record = |generation| StoredGroup {
            generation,
            protocol_type: "consumer".into(),
            protocol: None,
            leader: None,
            members: Vec::new(),
        };
        {
            let (manager, store) = open(dir.path());
            store
                .write_groups(vec![("k".into(), Some(record(1))), ("gone".into(), Some(record(4)))])
                .await
                .unwrap();
            store
                .write("k", vec![(TopicPartition::new("t", 0), Some(Committed::new(5, String::new())))])
                .await
                .unwrap();
            store.write_groups(vec![("k".into(), Some(record(2))), ("gone".into(), None)]).await.unwrap();
            assert_eq!(store.stored_groups(), vec![("k".to_owned(), record(2))]);
            manager.shutdown().unwrap();
        }
        let (_manager, store) = open(dir.path());
        assert_eq!(store.stored_groups(), vec![("k".to_owned(), record(2))]);
        assert_eq!(store.fetch("k")[&TopicPartition::new("t", 0)].offset, 5);
        assert_eq!(store.groups(), vec!["k".to_owned()], "a group record is not a commit");
        // Keys of the two kinds never read as each other.
        let group_key = encode_group("k", None);
        assert!(matches!(decode(group_key.key.as_deref(), None, 0), Ok(Entry::Group(g, None)) if g == "k"));
        let offset_key = encode("k", &TopicPartition::new("t", 1), None);
        assert!(matches!(decode(offset_key.key.as_deref(), None, 0), Ok(Entry::Offset(..))));
        assert!(matches!(decode(Some(b"{}"), None, 7), Err(GroupError::Corrupt { offset: 7, .. })));
    }

    #[tokio::test]
    async fn large_group_records_take_several_batches_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let big = |generation| StoredGroup {
            generation,
            protocol_type: "consumer".into(),
            protocol: Some("range".into()),
            leader: Some("m".into()),
            members: vec![crate::classic::StoredMember {
                member_id: "m".into(),
                instance_id: None,
                client_id: "c".into(),
                client_host: String::new(),
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
                metadata: vec![7; 200 * 1024],
                assignment: Vec::new(),
            }],
        };
        let (manager, store) = open(dir.path());
        let groups =
            (0..5).map(|i| (format!("g{i}"), Some(big(i)))).chain([("g0".to_owned(), None)]).collect();
        store.write_groups(groups).await.unwrap();
        // Base64 makes each record about 270 KiB: more than the batch limit in all,
        // which one append would have refused (BatchTooLarge).
        assert_eq!(store.log.info().log_end_offset, 6);
        manager.shutdown().unwrap();
        let (_manager, store) = open(dir.path());
        let names: Vec<String> =
            store.stored_groups().into_iter().map(|(g, s)| format!("{g}@{}", s.generation)).collect();
        assert_eq!(names, ["g1@1", "g2@2", "g3@3", "g4@4"]);
    }

    #[test]
    fn old_records_load_and_es_commits_keep_their_bytes() {
        let old = br#"{"offset":4,"metadata":"x"}"#;
        let c: Committed = serde_json::from_slice(old).unwrap();
        assert_eq!(c, Committed::new(4, "x".into()));
        assert_eq!(serde_json::to_vec(&c).unwrap(), old.to_vec());
        let k = Committed { kind: GroupKind::Kafka, leader_epoch: Some(3), ..c };
        let back: Committed = serde_json::from_slice(&serde_json::to_vec(&k).unwrap()).unwrap();
        assert_eq!(back, k);
    }

    #[tokio::test]
    async fn kafka_commits_are_marked_and_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let value =
            Committed { kind: GroupKind::Kafka, leader_epoch: Some(2), ..Committed::new(8, String::new()) };
        {
            let (manager, store) = open(dir.path());
            store.write("k", vec![(TopicPartition::new("t", 0), Some(value.clone()))]).await.unwrap();
            manager.shutdown().unwrap();
        }
        let (_manager, store) = open(dir.path());
        assert_eq!(store.kind("k"), Some(GroupKind::Kafka));
        assert_eq!(store.fetch("k")[&TopicPartition::new("t", 0)], value);
    }

    #[tokio::test]
    async fn an_appender_takes_the_writes_and_reload_reads_the_log_again() {
        let dir = tempfile::tempdir().unwrap();
        let (_manager, store) = open(dir.path());
        let log = store.log.clone();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (log2, seen2) = (log.clone(), seen.clone());
        // Stands in for a Raft group: appends to the same log, remembers the call.
        let appender: Appender = Arc::new(move |records: Vec<Record>| {
            let (log, seen) = (log2.clone(), seen2.clone());
            Box::pin(async move {
                seen.lock().unwrap().push(records.len());
                Ok(log.append_records(&records, EPOCH)?.durable().await?.base_offset)
            })
        });
        assert!(store.set_appender(appender.clone()));
        assert!(!store.set_appender(appender));
        let tp = TopicPartition::new("t", 0);
        store.write("g", vec![(tp.clone(), Some(Committed::new(3, String::new())))]).await.unwrap();
        assert_eq!(*seen.lock().unwrap(), vec![1]);
        assert_eq!(store.fetch("g")[&tp].offset, 3);
        // A record written behind the store's back shows only after a reload.
        let other = encode("g", &tp, Some(&Committed::new(11, String::new())));
        log.append_records(&[other], EPOCH).unwrap().durable().await.unwrap();
        assert_eq!(store.fetch("g")[&tp].offset, 3);
        store.reload().unwrap();
        assert_eq!(store.fetch("g")[&tp].offset, 11);
    }
}
