//! Durable metadata: one JSON file per item (topics in `<data>/topics/`, plugin
//! manifests in `<data>/plugins/manifests/`), written as temp file, fsync, rename,
//! fsync of the directory, so a crash at any point leaves either the old file or the
//! new one, never a torn one.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::config::TopicConfig;
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
        };
        store.save(&meta).unwrap();
        fs::write(dir.path().join("topics/half.json.tmp"), b"{").unwrap();
        let store = MetaStore::<TopicMeta>::open(dir.path().join("topics")).unwrap();
        assert_eq!(store.load_all().unwrap(), vec![meta]);
        assert!(!dir.path().join("topics/half.json.tmp").exists());
        store.remove("orders").unwrap();
        assert!(store.load_all().unwrap().is_empty());
    }
}
