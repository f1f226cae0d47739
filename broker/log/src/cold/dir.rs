//! The directory backend of the cold tier: objects are files under a root, written
//! to a temporary name, fsynced and renamed, so a crash leaves either nothing or
//! the whole object. A manifest's version is the sha256 of its bytes.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use bytes::Bytes;

use super::store::{ColdStore, Expect, Listed, sha256_hex};
use crate::error::{IoContext, LogError, Result};
use crate::files;

#[derive(Debug)]
pub struct DirStore {
    root: PathBuf,
    /// Serialises conditional writes (check then rename) within this process; the
    /// data-directory lock keeps other processes out.
    cas: Mutex<()>,
}

impl DirStore {
    pub fn new(root: impl Into<PathBuf>) -> Result<DirStore> {
        let root = root.into();
        std::fs::create_dir_all(&root).ctx(|| format!("creating {}", root.display()))?;
        Ok(DirStore { root, cas: Mutex::new(()) })
    }

    fn path(&self, key: &str) -> Result<PathBuf> {
        let bad = key.is_empty() || key.starts_with('/') || key.split('/').any(|p| p.is_empty() || p == "..");
        if bad {
            return Err(LogError::ColdStore {
                op: "key",
                key: key.into(),
                reason: "not a relative key".into(),
            });
        }
        Ok(self.root.join(key))
    }

    /// Writes through a temporary file, fsyncs it and its directory.
    fn write_durably(&self, dst: &Path, write: impl FnOnce(&Path) -> std::io::Result<()>) -> Result<()> {
        let parent = dst.parent().expect("keys are under the root");
        std::fs::create_dir_all(parent).ctx(|| format!("creating {}", parent.display()))?;
        let mut tmp = dst.as_os_str().to_owned();
        tmp.push(files::TMP_SUFFIX);
        let tmp = PathBuf::from(tmp);
        write(&tmp).ctx(|| format!("writing {}", tmp.display()))?;
        std::fs::File::open(&tmp).and_then(|f| f.sync_all()).ctx(|| format!("syncing {}", tmp.display()))?;
        std::fs::rename(&tmp, dst).ctx(|| format!("renaming {}", tmp.display()))?;
        files::fsync_dir(parent).ctx(|| format!("syncing {}", parent.display()))
    }
}

impl ColdStore for DirStore {
    fn put_file(&self, key: &str, path: &Path) -> Result<()> {
        let dst = self.path(key)?;
        self.write_durably(&dst, |tmp| std::fs::copy(path, tmp).map(drop))
    }

    fn put_if(&self, key: &str, data: Bytes, expect: &Expect) -> Result<String> {
        let dst = self.path(key)?;
        let _cas = self.cas.lock().expect("cas lock");
        let current = match std::fs::read(&dst) {
            Ok(b) => Some(sha256_hex(&b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(LogError::io(format!("reading {}", dst.display()), e)),
        };
        let holds = match expect {
            Expect::Absent => current.is_none(),
            Expect::Version(v) => current.as_ref() == Some(v),
        };
        if !holds {
            return Err(LogError::ColdConflict { key: key.into() });
        }
        self.write_durably(&dst, |tmp| std::fs::write(tmp, &data))?;
        Ok(sha256_hex(&data))
    }

    fn get(&self, key: &str) -> Result<Option<(Bytes, String)>> {
        let p = self.path(key)?;
        match std::fs::read(&p) {
            Ok(b) => {
                let v = sha256_hex(&b);
                Ok(Some((Bytes::from(b), v)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LogError::io(format!("reading {}", p.display()), e)),
        }
    }

    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes> {
        let p = self.path(key)?;
        let file = std::fs::File::open(&p).ctx(|| format!("opening {}", p.display()))?;
        let len = usize::try_from(range.end.saturating_sub(range.start)).unwrap_or(usize::MAX);
        let bytes = files::read_at(&file, range.start, len).ctx(|| format!("reading {}", p.display()))?;
        Ok(Bytes::from(bytes))
    }

    fn list(&self, prefix: &str) -> Result<Vec<Listed>> {
        let dir = self.path(prefix.trim_end_matches('/'))?;
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(LogError::io(format!("listing {}", dir.display()), e)),
        };
        let mut out = Vec::new();
        for entry in entries {
            let entry = entry.ctx(|| format!("listing {}", dir.display()))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let meta = entry.metadata().ctx(|| format!("reading {}", entry.path().display()))?;
            if meta.is_file() && !name.ends_with(files::TMP_SUFFIX) {
                out.push(Listed {
                    key: format!("{}/{name}", prefix.trim_end_matches('/')),
                    size: meta.len(),
                });
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let p = self.path(key)?;
        files::remove_if_exists(&p).ctx(|| format!("removing {}", p.display()))
    }

    fn describe(&self) -> String {
        format!("directory {}", self.root.display())
    }
}
