//! Committed offsets, stored durably in an internal compacted log (like Kafka's
//! `__consumer_offsets`): one record per commit, keyed by (group, topic, partition),
//! so compaction keeps the newest. A delete writes tombstones. The in-memory table is
//! rebuilt from the log on start, and a commit is visible only once it is fsynced.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use es_core::{LeaderEpoch, Record};
use es_log::{PartitionLog, ReplayError};
use serde::{Deserialize, Serialize};

use crate::TopicPartition;
use crate::error::{GroupError, Result};

/// The leader epoch of every append until the partition handle supplies it.
const EPOCH: LeaderEpoch = LeaderEpoch::INITIAL;

/// One committed position: the next offset to read, plus the client's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Committed {
    pub offset: u64,
    #[serde(default)]
    pub metadata: String,
}

type Key = (String, TopicPartition);

#[derive(Debug, Serialize, Deserialize)]
struct WireKey {
    group: String,
    topic: String,
    partition: u32,
}

#[derive(Debug, Default)]
struct Table {
    /// The value and the log offset it was written at (newer writes win).
    entries: BTreeMap<Key, (Committed, u64)>,
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
}

/// The durable committed-offset store of every group.
pub struct OffsetStore {
    log: Arc<PartitionLog>,
    table: Mutex<Table>,
    /// Serialises appends so log order is commit order.
    append_lock: Mutex<()>,
}

impl std::fmt::Debug for OffsetStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OffsetStore").field("log", &self.log.name()).finish_non_exhaustive()
    }
}

impl OffsetStore {
    /// Opens the store over `log` and rebuilds the table from it.
    pub fn open(log: Arc<PartitionLog>) -> Result<OffsetStore> {
        let mut table = Table::default();
        log.replay(|r| {
            let (key, value) = decode(r.key, r.value, r.offset)?;
            table.apply(key, value, r.offset);
            Ok(())
        })
        .map_err(|e| match e {
            ReplayError::Log(e) => e.into(),
            ReplayError::Corrupt { offset, reason } => GroupError::Corrupt { offset, reason },
            ReplayError::Apply(e) => e,
        })?;
        Ok(OffsetStore { log, table: Mutex::new(table), append_lock: Mutex::new(()) })
    }

    /// Writes `entries` (None = delete) and returns once they are fsynced and visible.
    pub async fn write(&self, group: &str, entries: Vec<(TopicPartition, Option<Committed>)>) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let records: Vec<Record> = entries.iter().map(|(tp, v)| encode(group, tp, v.as_ref())).collect();
        let pending = {
            let _order = self.append_lock.lock().expect("append lock");
            self.log.append_records(&records, EPOCH)?
        };
        let appended = pending.durable().await?;
        let mut table = self.table.lock().expect("offsets table");
        for (i, (tp, v)) in entries.into_iter().enumerate() {
            table.apply((group.to_owned(), tp), v, appended.base_offset + i as u64);
        }
        Ok(())
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

    /// Every group with at least one committed offset.
    pub fn groups(&self) -> Vec<String> {
        let table = self.table.lock().expect("offsets table");
        let mut out: Vec<String> = table.entries.keys().map(|(g, _)| g.clone()).collect();
        out.dedup();
        out
    }
}

fn encode(group: &str, tp: &TopicPartition, value: Option<&Committed>) -> Record {
    let key = WireKey { group: group.to_owned(), topic: tp.topic.clone(), partition: tp.partition };
    Record {
        key: Some(serde_json::to_vec(&key).expect("plain struct").into()),
        value: value.map(|v| serde_json::to_vec(v).expect("plain struct").into()),
        ..Record::default()
    }
}

fn decode(key: Option<&[u8]>, value: Option<&[u8]>, offset: u64) -> Result<(Key, Option<Committed>)> {
    let corrupt = |reason: String| GroupError::Corrupt { offset, reason };
    let key = key.ok_or_else(|| corrupt("a record without a key".into()))?;
    let k: WireKey = serde_json::from_slice(key).map_err(|e| corrupt(e.to_string()))?;
    let v = value.map(serde_json::from_slice::<Committed>).transpose().map_err(|e| corrupt(e.to_string()))?;
    Ok(((k.group, TopicPartition::new(k.topic, k.partition)), v))
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
        let c = |o: u64| Some(Committed { offset: o, metadata: format!("m{o}") });
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
        assert_eq!(g[&tp(0)], Committed { offset: 9, metadata: "m9".into() });
        assert_eq!(g[&tp(1)].offset, 7);
        assert!(store.fetch("h").is_empty());
        assert_eq!(store.groups(), vec!["g".to_owned()]);
    }
}
