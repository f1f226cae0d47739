//! Durable metadata: one JSON file per item (topics in `<data>/topics/`, plugin
//! manifests in `<data>/plugins/manifests/`), written as temp file, fsync, rename,
//! fsync of the directory, so a crash at any point leaves either the old file or the
//! new one, never a torn one. `MetadataStore` is the seam the registry's commands go
//! through: these files today, a replicated log once the cluster has one.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::TopicConfig;
use crate::registry::metadata::{Command, Metadata};
use crate::service::error::{BrokerError, Result};

const META_EXT: &str = "json";
const TMP_SUFFIX: &str = ".tmp";

/// What the broker remembers about a topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    pub partitions: u32,
    pub config: TopicConfig,
    pub created_ms: i64,
    /// Record validators run on every produce, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub validators: Vec<crate::plugins::binding::ValidatorBinding>,
    /// The topic's UUID (hyphenated), as Kafka clients name topics from Fetch v13 and
    /// DeleteTopics v6 on. A topic stored before ids existed gets one on its first load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// In a cluster, each partition's replicas, its preferred leader first
    /// (docs/cluster.md, "Placement"). `None`: every member of the cluster (a
    /// single node, or a topic created before placement).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Vec<Vec<u64>>>,
    /// Partitions whose replicas were ever changed (`es cluster move`, a node
    /// removed): a replica that finds such a partition's log fresh joins the group
    /// its first replicas formed and never initializes one of its own.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub moved: std::collections::BTreeSet<u32>,
}

impl TopicMeta {
    /// The replicas of `partition` as placed; `None`: every member.
    pub fn replicas_of(&self, partition: u32) -> Option<&[u64]> {
        self.replicas.as_ref()?.get(partition as usize).map(Vec::as_slice)
    }
}

/// A fresh random (version 4) topic id, never the nil UUID Kafka reads as "none".
pub fn new_topic_id() -> String {
    uuid::Builder::from_random_bytes(rand::random()).into_uuid().hyphenated().to_string()
}

/// An item stored as one JSON file named after it.
pub trait Stored: Serialize + DeserializeOwned {
    /// What the item is, for error messages (`topic metadata`).
    const WHAT: &'static str;
    /// The item's name, which is also its file name.
    fn name(&self) -> &str;
}

impl Stored for TopicMeta {
    const WHAT: &'static str = "topic metadata";
    fn name(&self) -> &str {
        &self.name
    }
}

/// A metadata directory of `T`s.
#[derive(Debug)]
pub struct MetaStore<T = TopicMeta> {
    dir: PathBuf,
    _items: std::marker::PhantomData<fn() -> T>,
}

fn io(context: String, e: std::io::Error) -> BrokerError {
    BrokerError::Internal(format!("{context}: {e}"))
}

impl<T: Stored> MetaStore<T> {
    /// Opens `dir`, creating it, and removes temp files a crash left behind.
    pub fn open(dir: PathBuf) -> Result<Self> {
        fs::create_dir_all(&dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
        let store = MetaStore { dir, _items: std::marker::PhantomData };
        for entry in store.entries()? {
            if entry.to_string_lossy().ends_with(TMP_SUFFIX) {
                fs::remove_file(&entry).map_err(|e| io(format!("removing {}", entry.display()), e))?;
            }
        }
        Ok(store)
    }

    fn entries(&self) -> Result<Vec<PathBuf>> {
        let list = fs::read_dir(&self.dir).map_err(|e| io(format!("listing {}", self.dir.display()), e))?;
        let mut out = Vec::new();
        for entry in list {
            out.push(entry.map_err(|e| io(format!("listing {}", self.dir.display()), e))?.path());
        }
        Ok(out)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.{META_EXT}"))
    }

    /// Every stored item, by name.
    pub fn load_all(&self) -> Result<Vec<T>> {
        let mut items = Vec::new();
        for path in self.entries()? {
            if path.extension().and_then(|e| e.to_str()) != Some(META_EXT) {
                continue;
            }
            let text = fs::read(&path).map_err(|e| io(format!("reading {}", path.display()), e))?;
            let item: T = serde_json::from_slice(&text).map_err(|e| {
                BrokerError::Internal(format!("{} {} is corrupt: {e}", T::WHAT, path.display()))
            })?;
            items.push(item);
        }
        items.sort_by(|a, b| a.name().cmp(b.name()));
        Ok(items)
    }

    /// Writes (or replaces) an item atomically and durably.
    pub fn save(&self, meta: &T) -> Result<()> {
        let path = self.path(meta.name());
        // A short temp name: `<249-char topic>.json.tmp` would pass the 255-byte
        // file name limit.
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!("save-{}-{seq}{TMP_SUFFIX}", std::process::id()));
        let bytes = serde_json::to_vec_pretty(meta)
            .map_err(|e| BrokerError::Internal(format!("encoding {}: {e}", T::WHAT)))?;
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            fsync_dir(&self.dir)
        };
        write().map_err(|e| io(format!("writing {}", path.display()), e))
    }

    /// Removes an item durably: once this returns, it is gone even if the broker
    /// crashes right after (e.g. before a topic's data is deleted).
    pub fn remove(&self, name: &str) -> Result<()> {
        let path = self.path(name);
        let remove = || -> std::io::Result<()> {
            match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
            fsync_dir(&self.dir)
        };
        remove().map_err(|e| io(format!("removing {}", path.display()), e))
    }
}

/// Where the registry's metadata commands are made durable before they are applied.
/// A replicated implementation appends the command to the metadata log and returns
/// once a majority has it; this crate's implementation writes the files it changes.
pub trait MetadataStore: Send + Sync {
    /// The state as stored.
    fn load(&self) -> Result<Metadata>;
    /// Makes `command` durable; `after` is the state once it is applied.
    fn persist(&self, command: &Command, after: &Metadata) -> Result<()>;
}

/// The metadata in files: `<data>/topics/<name>.json` per topic and
/// `<data>/producer-ids` (the end of the reserved producer-id blocks).
#[derive(Debug)]
pub struct FileMetadataStore {
    topics: MetaStore<TopicMeta>,
    producer_ids: PathBuf,
}

const PRODUCER_IDS_FILE: &str = "producer-ids";

impl FileMetadataStore {
    pub fn open(data_dir: &Path) -> Result<FileMetadataStore> {
        Ok(FileMetadataStore {
            topics: MetaStore::open(data_dir.join("topics"))?,
            producer_ids: data_dir.join(PRODUCER_IDS_FILE),
        })
    }

    fn producer_ids_reserved(&self) -> Result<i64> {
        let path = &self.producer_ids;
        match fs::read_to_string(path) {
            Ok(text) => text.trim().parse::<i64>().map_err(|_| {
                BrokerError::Internal(format!("{} is corrupt: expected one number", path.display()))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(io(format!("reading {}", path.display()), e)),
        }
    }

    fn save_producer_ids(&self, reserved: i64) -> Result<()> {
        let path = &self.producer_ids;
        let tmp = path.with_extension("tmp");
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            writeln!(f, "{reserved}")?;
            f.sync_all()?;
            fs::rename(&tmp, path)?;
            fsync_dir(path.parent().unwrap_or(Path::new(".")))
        };
        write().map_err(|e| io(format!("reserving producer ids in {}", path.display()), e))
    }
}

impl MetadataStore for FileMetadataStore {
    fn load(&self) -> Result<Metadata> {
        Ok(Metadata::new(self.topics.load_all()?, self.producer_ids_reserved()?))
    }

    fn persist(&self, command: &Command, after: &Metadata) -> Result<()> {
        match command {
            Command::DeleteTopic { name } => self.topics.remove(name),
            Command::ReserveProducerIds { .. } => self.save_producer_ids(after.producer_ids_reserved()),
            // Stored by `Auth` in `<data>/auth`, the members by the cluster
            // (`<data>/cluster/members.json`) and plugins by the plugin store
            // (`<data>/plugins`), never in the topic metadata.
            Command::Auth { .. }
            | Command::AddNode { .. }
            | Command::RemoveNode { .. }
            | Command::PutPlugin { .. }
            | Command::RemovePlugin { .. } => Ok(()),
            Command::CreateTopic(_)
            | Command::SetPartitions { .. }
            | Command::SetReplicas { .. }
            | Command::SetConfig { .. }
            | Command::SetValidators { .. }
            | Command::SetTopicId { .. }
            | Command::MarkMoved { .. } => {
                let name = command.topic().expect("a topic command");
                match after.topic(name) {
                    Some(meta) => self.topics.save(meta),
                    // The topic is gone: the command changed nothing.
                    None => Ok(()),
                }
            }
        }
    }
}

/// Replaces `path` with `bytes` atomically and durably: a temporary file beside it
/// (`<path>.tmp`), fsync, rename over it, fsync of the directory. A crash leaves
/// the old file or the new one, never a mix.
pub fn write_durably(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().ok_or_else(|| std::io::Error::other("a file path without a directory"))?;
    let tmp = path.with_extension("tmp");
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    fs::rename(&tmp, path)?;
    fsync_dir(dir)
}

/// Makes a directory's entries (creates, renames, removes) durable.
pub fn fsync_dir(dir: &Path) -> std::io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_remove_and_tmp_cleanup() {
        let dir = tempfile::tempdir().unwrap();
        let store = MetaStore::<TopicMeta>::open(dir.path().join("topics")).unwrap();
        let meta = TopicMeta {
            name: "orders".into(),
            partitions: 3,
            config: TopicConfig::default(),
            created_ms: 7,
            validators: Vec::new(),
            topic_id: Some(new_topic_id()),
            replicas: Some(vec![vec![1, 2], vec![2, 3], vec![3, 1]]),
            moved: std::collections::BTreeSet::from([1]),
        };
        store.save(&meta).unwrap();
        fs::write(dir.path().join("topics/half.json.tmp"), b"{").unwrap();
        let store = MetaStore::<TopicMeta>::open(dir.path().join("topics")).unwrap();
        assert_eq!(store.load_all().unwrap(), vec![meta]);
        assert!(!dir.path().join("topics/half.json.tmp").exists());
        store.remove("orders").unwrap();
        assert!(store.load_all().unwrap().is_empty());
    }

    #[test]
    fn the_file_store_persists_each_command_and_loads_the_state() {
        use crate::registry::metadata::Origin;
        let dir = tempfile::tempdir().unwrap();
        let store = FileMetadataStore::open(dir.path()).unwrap();
        let mut state = store.load().unwrap();
        assert_eq!(state, Metadata::default());
        let create =
            state.create_topic(Origin::Client, "t", 2, &Default::default(), 5, new_topic_id()).unwrap();
        let reserve = state.reserve_producer_ids();
        for cmd in [create, reserve] {
            let mut after = state.clone();
            after.apply(&cmd);
            store.persist(&cmd, &after).unwrap();
            state = after;
        }
        let reopened = FileMetadataStore::open(dir.path()).unwrap();
        assert_eq!(reopened.load().unwrap(), state);
        let delete = state.delete_topic("t").unwrap();
        state.apply(&delete);
        reopened.persist(&delete, &state).unwrap();
        assert!(FileMetadataStore::open(dir.path()).unwrap().load().unwrap().topic("t").is_none());
        std::fs::write(dir.path().join(PRODUCER_IDS_FILE), "x").unwrap();
        assert!(reopened.load().unwrap_err().to_string().contains("corrupt"));
    }
}
