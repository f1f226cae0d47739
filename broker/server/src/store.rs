//! Durable topic metadata: one JSON file per topic in `<data>/topics/`, written as
//! temp file, fsync, rename, fsync of the directory, so a crash at any point leaves
//! either the old file or the new one, never a torn one.

use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use crate::config::TopicConfig;
use crate::error::{Result, ServerError};

const META_EXT: &str = "json";
const TMP_SUFFIX: &str = ".tmp";

/// What the broker remembers about a topic.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicMeta {
    pub name: String,
    pub partitions: u32,
    pub config: TopicConfig,
    pub created_ms: i64,
}

/// The metadata directory.
#[derive(Debug)]
pub struct MetaStore {
    dir: PathBuf,
}

fn io(context: String, e: std::io::Error) -> ServerError {
    ServerError::Internal(format!("{context}: {e}"))
}

impl MetaStore {
    /// Opens `dir`, creating it, and removes temp files a crash left behind.
    pub fn open(dir: PathBuf) -> Result<Self> {
        fs::create_dir_all(&dir).map_err(|e| io(format!("creating {}", dir.display()), e))?;
        let store = MetaStore { dir };
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

    /// Every stored topic.
    pub fn load_all(&self) -> Result<Vec<TopicMeta>> {
        let mut topics = Vec::new();
        for path in self.entries()? {
            if path.extension().and_then(|e| e.to_str()) != Some(META_EXT) {
                continue;
            }
            let text = fs::read(&path).map_err(|e| io(format!("reading {}", path.display()), e))?;
            let meta: TopicMeta = serde_json::from_slice(&text).map_err(|e| {
                ServerError::Internal(format!("topic metadata {} is corrupt: {e}", path.display()))
            })?;
            topics.push(meta);
        }
        topics.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(topics)
    }

    /// Writes (or replaces) a topic's metadata atomically and durably.
    pub fn save(&self, meta: &TopicMeta) -> Result<()> {
        let path = self.path(&meta.name);
        // A short temp name: `<249-char topic>.json.tmp` would pass the 255-byte
        // file name limit.
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, Ordering::Relaxed);
        let tmp = self.dir.join(format!("save-{}-{seq}{TMP_SUFFIX}", std::process::id()));
        let bytes = serde_json::to_vec_pretty(meta)
            .map_err(|e| ServerError::Internal(format!("encoding topic metadata: {e}")))?;
        let write = || -> std::io::Result<()> {
            let mut f = File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
            fsync_dir(&self.dir)
        };
        write().map_err(|e| io(format!("writing {}", path.display()), e))
    }

    /// Removes a topic's metadata durably: once this returns, the topic is gone even
    /// if the broker crashes before its data is deleted.
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
        let store = MetaStore::open(dir.path().join("topics")).unwrap();
        let meta =
            TopicMeta { name: "orders".into(), partitions: 3, config: TopicConfig::default(), created_ms: 7 };
        store.save(&meta).unwrap();
        fs::write(dir.path().join("topics/half.json.tmp"), b"{").unwrap();
        let store = MetaStore::open(dir.path().join("topics")).unwrap();
        assert_eq!(store.load_all().unwrap(), vec![meta]);
        assert!(!dir.path().join("topics/half.json.tmp").exists());
        store.remove("orders").unwrap();
        assert!(store.load_all().unwrap().is_empty());
    }
}
