//! Online snapshots for `es-tools dump --online` (docs/operations.md, "Online
//! dump"): under the admin lock (no topic is created, deleted or altered meanwhile),
//! the broker-wide metadata is copied and every partition is cut at its log end and
//! hard-linked (es-log's `snapshot.rs`) into `<data>/snapshots/<id>/`, a directory
//! laid out like a data directory, which es-tools archives as it would a stopped
//! broker's. A snapshot lives until it is released or its lease runs out; a reaper
//! thread removes expired ones, and a start removes what an earlier run left.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use es_log::{PartitionLog, PartitionSnapshot};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::{Registry, Topic, io};
use crate::limits::{SNAPSHOT_LEASE_MS_MAX, SNAPSHOT_LEASE_MS_MIN, SNAPSHOTS_MAX};
use crate::service::error::{BrokerError, Result};

/// Where snapshots live, relative to the data directory.
pub const SNAPSHOTS_DIR: &str = "snapshots";
/// The longest a snapshot may take before the reaper may remove it anyway.
const TAKING_MAX: Duration = Duration::from_secs(3600);
/// Data-directory entries a snapshot does not copy: the lock, the partitions (cut
/// and linked instead), other snapshots, and the compiled-plugin cache.
const NOT_COPIED: [&str; 4] = ["LOCK", "partitions", SNAPSHOTS_DIR, "plugins/cache"];

/// One taken snapshot, as `POST /snapshots` answers it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SnapshotView {
    /// Names the snapshot in the lease and release calls.
    pub id: String,
    /// The snapshot's directory relative to the data directory; laid out like one.
    pub dir: String,
    /// The lease: the snapshot is removed this long after it was taken or last renewed.
    pub lease_ms: u64,
    /// How long taking it took, in milliseconds.
    pub took_ms: u64,
    /// The metadata files copied (topics, producer ids, keys, plugins), relative to `dir`.
    pub metadata_files: Vec<String>,
    /// Every partition, cut at its log end.
    pub partitions: Vec<SnapshotPartition>,
}

/// One partition of a snapshot: every record below `log_end` that was acknowledged
/// before the snapshot is in its sealed, synced segments.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SnapshotPartition {
    pub topic: String,
    pub partition: u32,
    /// The partition's directory relative to the snapshot's.
    pub dir: String,
    pub log_start: u64,
    /// The cut: the offset after the last batch in the snapshot.
    pub log_end: u64,
    /// Base offsets of the segments held.
    pub segments: Vec<u64>,
    /// Its files, relative to its directory.
    pub files: Vec<String>,
}

/// The leases of the snapshots taken, and the thread that removes expired ones.
pub(crate) struct Leases {
    root: PathBuf,
    shared: Arc<(Mutex<Held>, Condvar)>,
    reaper: Mutex<Option<JoinHandle<()>>>,
}

#[derive(Default)]
struct Held {
    /// Snapshot id -> when its lease ends.
    expiry: BTreeMap<String, Instant>,
    stop: bool,
}

impl Leases {
    /// Removes what an earlier run left (its leases ended with it) and starts the reaper.
    pub fn open(data_dir: &Path, repairs: &mut Vec<String>) -> Result<Leases> {
        let root = data_dir.join(SNAPSHOTS_DIR);
        if root.exists() {
            std::fs::remove_dir_all(&root).map_err(|e| io(format!("removing {}", root.display()), e))?;
            repairs.push(format!(
                "removed {SNAPSHOTS_DIR}/: snapshots of an earlier run, whose leases ended with it"
            ));
        }
        let shared = Arc::new((Mutex::new(Held::default()), Condvar::new()));
        let (state, dir) = (shared.clone(), root.clone());
        let reaper = std::thread::Builder::new()
            .name("es-snapshot-leases".into())
            .spawn(move || reap(&state, &dir))
            .map_err(|e| io("starting the snapshot lease thread".into(), e))?;
        Ok(Leases { root, shared, reaper: Mutex::new(Some(reaper)) })
    }

    /// Reserves a place for a new snapshot, refusing past [`SNAPSHOTS_MAX`].
    fn reserve(&self, id: &str) -> Result<()> {
        let mut held = self.shared.0.lock().expect("leases lock");
        if held.expiry.len() >= SNAPSHOTS_MAX {
            return Err(BrokerError::InvalidRequest(format!(
                "{SNAPSHOTS_MAX} snapshots are held already; release one (DELETE /snapshots/ID) or let its lease run out"
            )));
        }
        // Not reaped while it is being taken: the lease starts once it is complete.
        held.expiry.insert(id.to_owned(), Instant::now() + TAKING_MAX);
        Ok(())
    }

    /// Extends a lease from now.
    pub fn renew(&self, id: &str, lease: Duration) -> Result<()> {
        let mut held = self.shared.0.lock().expect("leases lock");
        let expiry = held.expiry.get_mut(id).ok_or_else(|| BrokerError::SnapshotNotFound(id.to_owned()))?;
        *expiry = Instant::now() + lease;
        drop(held);
        // The reaper sleeps until the earliest end it knew of; this one may be sooner.
        self.shared.1.notify_all();
        Ok(())
    }

    /// Ends a lease and removes the snapshot.
    pub fn release(&self, id: &str) -> Result<()> {
        let found = self.shared.0.lock().expect("leases lock").expiry.remove(id).is_some();
        if !found {
            return Err(BrokerError::SnapshotNotFound(id.to_owned()));
        }
        remove_snapshot(&self.root, id)
    }

    /// Stops the reaper and removes every snapshot (a shutdown ends every lease).
    pub fn close(&self) {
        let ids: Vec<String> = {
            let mut held = self.shared.0.lock().expect("leases lock");
            held.stop = true;
            std::mem::take(&mut held.expiry).into_keys().collect()
        };
        self.shared.1.notify_all();
        if let Some(t) = self.reaper.lock().expect("reaper lock").take() {
            let _ = t.join();
        }
        for id in ids {
            if let Err(e) = remove_snapshot(&self.root, &id) {
                tracing::warn!(snapshot = id, error = %e, "could not remove a snapshot at shutdown; the next start removes it");
            }
        }
    }
}

impl Drop for Leases {
    fn drop(&mut self) {
        self.close();
    }
}

/// The reaper: removes each snapshot whose lease ended, sleeping until the next end.
fn reap(shared: &(Mutex<Held>, Condvar), root: &Path) {
    let mut held = shared.0.lock().expect("leases lock");
    while !held.stop {
        let now = Instant::now();
        let expired: Vec<String> =
            held.expiry.iter().filter(|(_, end)| **end <= now).map(|(id, _)| id.clone()).collect();
        if expired.is_empty() {
            let next = held
                .expiry
                .values()
                .min()
                .map_or(Duration::from_secs(60), |end| end.saturating_duration_since(now));
            held = shared.1.wait_timeout(held, next).expect("leases lock").0;
            continue;
        }
        for id in &expired {
            held.expiry.remove(id);
        }
        drop(held);
        for id in expired {
            tracing::info!(snapshot = id, "a snapshot's lease ran out; removed it");
            if let Err(e) = remove_snapshot(root, &id) {
                tracing::warn!(snapshot = id, error = %e, "could not remove an expired snapshot");
            }
        }
        held = shared.0.lock().expect("leases lock");
    }
}

fn remove_snapshot(root: &Path, id: &str) -> Result<()> {
    let dir = root.join(id);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(io(format!("removing {}", dir.display()), e))
        }
        _ => Ok(()),
    }
}

/// A lease length from a request, checked against the limits.
pub fn lease(lease_ms: Option<u64>) -> Result<Duration> {
    let ms = lease_ms.unwrap_or(crate::limits::SNAPSHOT_LEASE_MS_DEFAULT);
    if !(SNAPSHOT_LEASE_MS_MIN..=SNAPSHOT_LEASE_MS_MAX).contains(&ms) {
        return Err(BrokerError::InvalidRequest(format!(
            "lease_ms must be between {SNAPSHOT_LEASE_MS_MIN} and {SNAPSHOT_LEASE_MS_MAX}; got {ms}"
        )));
    }
    Ok(Duration::from_millis(ms))
}

impl Registry {
    /// Takes a snapshot held for `lease`. The internal offsets topic is cut first and
    /// the schemas topic last: a committed offset then never points past its data
    /// partition's cut, and a record never names a schema id the snapshot lacks.
    pub fn take_snapshot(&self, lease: Duration) -> Result<SnapshotView> {
        let started = Instant::now();
        let id = format!("{:016x}", rand::random::<u64>());
        self.snapshots.reserve(&id)?;
        let taken = self.snapshot_into(&id).and_then(|t| self.snapshots.renew(&id, lease).map(|()| t));
        if taken.is_err() {
            let _ = self.snapshots.release(&id);
        }
        let (metadata_files, partitions) = taken?;
        let took_ms = started.elapsed().as_millis() as u64;
        tracing::info!(snapshot = id, partitions = partitions.len(), took_ms, "took an online snapshot");
        Ok(SnapshotView {
            dir: format!("{SNAPSHOTS_DIR}/{id}"),
            id,
            lease_ms: lease.as_millis() as u64,
            took_ms,
            metadata_files,
            partitions,
        })
    }

    pub fn renew_snapshot(&self, id: &str, lease: Duration) -> Result<()> {
        self.snapshots.renew(id, lease)
    }

    pub fn release_snapshot(&self, id: &str) -> Result<()> {
        self.snapshots.release(id)
    }

    fn snapshot_into(&self, id: &str) -> Result<(Vec<String>, Vec<SnapshotPartition>)> {
        let dir = self.options.data_dir.join(SNAPSHOTS_DIR).join(id);
        let _admin = self.admin.lock().expect("admin lock");
        let mut metadata_files = Vec::new();
        copy_tree(&self.options.data_dir, "", &dir, &mut metadata_files)?;
        let partitions_dir = dir.join("partitions");
        std::fs::create_dir_all(&partitions_dir)
            .map_err(|e| io(format!("creating {}", partitions_dir.display()), e))?;
        let format = self.manager.root().join(es_log::FORMAT_FILE);
        std::fs::copy(&format, partitions_dir.join(es_log::FORMAT_FILE))
            .map_err(|e| io(format!("copying {}", format.display()), e))?;
        metadata_files.push(format!("partitions/{}", es_log::FORMAT_FILE));
        let logs = self.snapshot_order();
        // Every cut first (each a roll under its partition's lock), then the waits
        // for the seals, which one flush round serves for all of them. Each cut
        // holds its partition's housekeeping lock until it is linked.
        let mut cuts = Vec::with_capacity(logs.len());
        for (_, _, log) in &logs {
            cuts.push(log.cut_for_snapshot()?);
        }
        let mut partitions = Vec::with_capacity(logs.len());
        for ((topic, partition, log), cut) in logs.iter().zip(cuts) {
            let linked = log.link_snapshot(cut, &partitions_dir)?;
            partitions.push(view(topic.clone(), *partition, linked));
        }
        metadata_files.sort();
        Ok((metadata_files, partitions))
    }

    /// Every partition: `__es_offsets` first, data topics, `__es_schemas` last.
    fn snapshot_order(&self) -> Vec<(String, u32, Arc<PartitionLog>)> {
        let topics: Vec<(String, Arc<Topic>)> =
            self.topics.read().expect("topics lock").iter().map(|(n, t)| (n.clone(), t.clone())).collect();
        let rank = |name: &str| match name {
            crate::groups::OFFSETS_TOPIC => 0,
            crate::schemas::SCHEMAS_TOPIC => 2,
            _ => 1,
        };
        let mut logs: Vec<(String, u32, Arc<PartitionLog>)> = topics
            .iter()
            .flat_map(|(name, t)| {
                t.partitions.iter().enumerate().map(move |(p, l)| (name.clone(), p as u32, l.clone()))
            })
            .collect();
        logs.sort_by_key(|(name, p, _)| (rank(name), name.clone(), *p));
        logs
    }
}

fn view(topic: String, partition: u32, linked: PartitionSnapshot) -> SnapshotPartition {
    SnapshotPartition {
        topic,
        partition,
        dir: format!("partitions/{}", linked.name),
        log_start: linked.log_start,
        log_end: linked.log_end,
        segments: linked.segments,
        files: linked.files,
    }
}

/// Copies the data directory's metadata (everything but [`NOT_COPIED`] and temp
/// files) into `to`. Copies, not links: these files are small, and a copy does not
/// depend on every writer replacing rather than rewriting them.
fn copy_tree(root: &Path, rel: &str, to: &Path, copied: &mut Vec<String>) -> Result<()> {
    let from = root.join(rel);
    let entries = std::fs::read_dir(&from).map_err(|e| io(format!("listing {}", from.display()), e))?;
    std::fs::create_dir_all(to.join(rel))
        .map_err(|e| io(format!("creating {}", to.join(rel).display()), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| io(format!("listing {}", from.display()), e))?;
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else { continue };
        let child = if rel.is_empty() { name } else { format!("{rel}/{name}") };
        if NOT_COPIED.contains(&child.as_str()) || child.ends_with(".tmp") {
            continue;
        }
        let kind = entry.file_type().map_err(|e| io(format!("reading {}", entry.path().display()), e))?;
        if kind.is_dir() {
            copy_tree(root, &child, to, copied)?;
        } else if kind.is_file() {
            match std::fs::copy(entry.path(), to.join(&child)) {
                Ok(_) => copied.push(child),
                // Replaced or removed since the listing (an auth-state write, say).
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(format!("copying {}", entry.path().display()), e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use es_core::{LeaderEpoch, Record};

    use super::*;
    use crate::registry::BrokerOptions;

    fn open(dir: &Path) -> Arc<Registry> {
        Registry::open(BrokerOptions::new(dir)).unwrap().0
    }

    #[test]
    fn a_snapshot_copies_the_metadata_cuts_every_partition_and_goes_when_released() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        let t = r.create("orders", 2, &BTreeMap::new()).unwrap();
        let values: Vec<Record> = (0..3).map(|i| Record::from_value(format!("v{i}"))).collect();
        t.partitions[1].append_records(&values, LeaderEpoch(0)).unwrap().wait().unwrap();
        let view = r.take_snapshot(Duration::from_secs(60)).unwrap();
        let root = dir.path().join(&view.dir);
        assert!(view.metadata_files.contains(&"topics/orders.json".to_owned()), "{view:?}");
        assert!(root.join("topics/orders.json").is_file() && root.join("partitions/FORMAT").is_file());
        let cut = |name: &str, p: u32| {
            view.partitions.iter().find(|c| c.topic == name && c.partition == p).map(|c| c.log_end)
        };
        assert_eq!((cut("orders", 0), cut("orders", 1)), (Some(0), Some(3)));
        let order: Vec<&str> = view.partitions.iter().map(|p| p.topic.as_str()).collect();
        assert_eq!(order.first(), Some(&crate::groups::OFFSETS_TOPIC), "{order:?}");
        assert_eq!(order.last(), Some(&crate::schemas::SCHEMAS_TOPIC), "{order:?}");
        assert!(root.join("partitions/orders-1/00000000000000000000.log").is_file());
        r.release_snapshot(&view.id).unwrap();
        assert!(!root.exists());
        assert_eq!(r.release_snapshot(&view.id).err().unwrap().code(), "snapshot_not_found");
    }

    #[test]
    fn a_lease_that_runs_out_removes_the_snapshot_and_the_count_is_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let r = open(dir.path());
        let short = r.take_snapshot(Duration::from_millis(200)).unwrap();
        let held: Vec<SnapshotView> =
            (1..SNAPSHOTS_MAX).map(|_| r.take_snapshot(Duration::from_secs(60)).unwrap()).collect();
        assert_eq!(r.take_snapshot(Duration::from_secs(60)).err().unwrap().code(), "invalid_request");
        let deadline = Instant::now() + Duration::from_secs(10);
        while dir.path().join(&short.dir).exists() {
            assert!(Instant::now() < deadline, "the expired snapshot was not removed");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(
            r.renew_snapshot(&short.id, Duration::from_secs(1)).err().unwrap().code(),
            "snapshot_not_found"
        );
        r.shutdown().unwrap();
        assert!(held.iter().all(|v| !dir.path().join(&v.dir).exists()), "a shutdown ends every lease");
    }
}
