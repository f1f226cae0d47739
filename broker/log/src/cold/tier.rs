//! One partition's view of the cold tier: upload of an expired segment (objects
//! first, then the manifest; the local copy goes only after both are confirmed),
//! fetches into the bounded cache with every object checked against the manifest,
//! cold retention, and deletion. A failing store puts uploads on an exponential
//! backoff; the segments stay local and keep being served meanwhile.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;

use super::cache::ColdCache;
use super::manifest::{Entry, Manifest, ObjectSum};
use super::store::{ColdStore, Expect, sha256_file};
use crate::error::{IoContext, LogError, Result};
use crate::files::{self, INDEX_EXT, LOG_EXT, TIME_INDEX_EXT};
use crate::open_files::OpenFiles;
use crate::raft_index::RAFT_EXT;
use crate::segment::Segment;

/// The partition subdirectory holding fetched cold segments and their indexes.
pub(crate) const CACHE_DIR: &str = "cold-cache";
/// The partition's local copy of its cold manifest.
pub(crate) const MANIFEST_FILE: &str = "cold-manifest";
/// The objects of a segment besides its `.log`, in upload order.
const INDEX_EXTS: [&str; 3] = [INDEX_EXT, TIME_INDEX_EXT, RAFT_EXT];

/// How a manager's cold tier is set up.
#[derive(Debug, Clone)]
pub struct ColdOptions {
    pub store: Arc<dyn ColdStore>,
    /// Bytes of fetched `.log` files kept locally across all partitions.
    pub cache_bytes: u64,
    /// Cold data older than this (newest record) is deleted; -1 = forever.
    pub retention_ms: i64,
    /// Each partition's cold data is kept below this; -1 = unbounded.
    pub retention_bytes: i64,
    /// The longest wait between upload attempts to a failing store.
    pub backoff_max: Duration,
}

impl ColdOptions {
    pub fn new(store: Arc<dyn ColdStore>) -> ColdOptions {
        ColdOptions {
            store,
            cache_bytes: es_core::limits::COLD_CACHE_BYTES_DEFAULT,
            retention_ms: -1,
            retention_bytes: -1,
            backoff_max: Duration::from_secs(300),
        }
    }
}

/// Counters of a manager's cold tier (metrics and doctor).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ColdStatus {
    pub uploads: u64,
    pub upload_failures: u64,
    pub fetches: u64,
    /// Objects refused because their size or sha256 did not match the manifest.
    pub refused: u64,
    pub cached_bytes: u64,
    /// The last store error, cleared by the next successful upload.
    pub last_error: Option<String>,
}

pub(crate) struct ColdShared {
    pub options: ColdOptions,
    pub cache: Arc<ColdCache>,
    pub status: Mutex<ColdStatus>,
}

impl ColdShared {
    pub fn new(options: ColdOptions) -> Arc<ColdShared> {
        let cache = ColdCache::new(options.cache_bytes);
        Arc::new(ColdShared { options, cache, status: Mutex::new(ColdStatus::default()) })
    }

    pub fn status(&self) -> ColdStatus {
        let mut s = self.status.lock().expect("cold status lock").clone();
        s.cached_bytes = self.cache.bytes();
        s
    }

    fn note(&self, f: impl FnOnce(&mut ColdStatus)) {
        f(&mut self.status.lock().expect("cold status lock"));
    }
}

struct State {
    manifest: Manifest,
    /// The store's version of the published manifest; `None` until learned.
    version: Option<String>,
    /// No upload is tried before this time (ms) after a failure.
    retry_at_ms: i64,
    backoff: Duration,
}

pub(crate) struct ColdPartition {
    shared: Arc<ColdShared>,
    name: String,
    cache_dir: PathBuf,
    manifest_path: PathBuf,
    state: Mutex<State>,
    /// One fetch at a time per partition, so two readers never download the same object.
    fetch: Mutex<()>,
}

impl ColdPartition {
    /// Reads the partition's local manifest (none yet: an empty tier). The store is
    /// not contacted, so a broker starts while its store is down.
    pub fn open(shared: Arc<ColdShared>, name: &str, dir: &Path) -> Result<ColdPartition> {
        let cache_dir = dir.join(CACHE_DIR);
        std::fs::create_dir_all(&cache_dir).ctx(|| format!("creating {}", cache_dir.display()))?;
        let manifest_path = dir.join(MANIFEST_FILE);
        let manifest = match std::fs::read_to_string(&manifest_path) {
            Ok(text) => Manifest::decode(&text)?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Manifest::default(),
            Err(e) => return Err(LogError::io(format!("reading {}", manifest_path.display()), e)),
        };
        let state = State { manifest, version: None, retry_at_ms: 0, backoff: Duration::from_secs(1) };
        Ok(ColdPartition {
            shared,
            name: name.to_owned(),
            cache_dir,
            manifest_path,
            state: Mutex::new(state),
            fetch: Mutex::new(()),
        })
    }

    /// Completes moves a crash interrupted after the manifest named the segment:
    /// its upload is confirmed, so the local copy goes (its `.log` into the cache
    /// unless one is there). Runs before the local segments are listed.
    pub fn finish_moves(&self, dir: &Path) -> Result<()> {
        let bases: Vec<u64> =
            self.state.lock().expect("cold state lock").manifest.entries.iter().map(|e| e.base).collect();
        let mut moved = false;
        for base in bases {
            let local = files::segment_path(dir, base, LOG_EXT);
            if !local.exists() {
                continue;
            }
            let cached = files::segment_path(&self.cache_dir, base, LOG_EXT);
            if cached.exists() {
                files::remove_if_exists(&local).ctx(|| format!("removing {}", local.display()))?;
            } else {
                std::fs::rename(&local, &cached)
                    .ctx(|| format!("moving {} into the cold cache", local.display()))?;
            }
            for ext in files::SEGMENT_EXTS {
                let p = files::segment_path(dir, base, ext);
                files::remove_if_exists(&p).ctx(|| format!("removing {}", p.display()))?;
            }
            tracing::info!(
                partition = self.name,
                base,
                "finished a move to the cold tier a crash interrupted"
            );
            moved = true;
        }
        if moved {
            files::fsync_dir(dir).ctx(|| format!("syncing {}", dir.display()))?;
        }
        Ok(())
    }

    /// The cold segments of the manifest, opened from their (verified) index files
    /// without their `.log`, which is fetched on first read. Cold entries at or
    /// above `local_start` are dropped: a crash came between the manifest and the
    /// local delete, and the local segment is authoritative.
    pub fn segments(
        &self,
        local_start: u64,
        open_files: &Arc<OpenFiles>,
        max: usize,
    ) -> Result<BTreeMap<u64, Arc<Segment>>> {
        let stale: Vec<u64> = {
            let st = self.state.lock().expect("cold state lock");
            st.manifest.entries.iter().filter(|e| e.base >= local_start).map(|e| e.base).collect()
        };
        if !stale.is_empty() {
            self.forget_entries(&stale)?;
        }
        let entries = self.state.lock().expect("cold state lock").manifest.entries.clone();
        let mut out = BTreeMap::new();
        for e in entries {
            for ext in INDEX_EXTS {
                self.ensure_object(&e, ext)?;
            }
            let seg = Segment::open_cold(&self.cache_dir, &e, open_files.clone(), max)?;
            if let Some(len) = std::fs::metadata(&seg.log_path).ok().map(|m| m.len()) {
                self.shared.cache.insert(&seg.log_path, len, &seg);
            }
            out.insert(e.base, seg);
        }
        Ok(out)
    }

    /// Whether an upload may be tried now (not within a failure's backoff).
    pub fn may_upload(&self, now_ms: i64) -> bool {
        now_ms >= self.state.lock().expect("cold state lock").retry_at_ms
    }

    /// Uploads a sealed segment's objects and publishes the manifest; then moves its
    /// `.log` from `local_dir` into the cache and returns it opened from there. The
    /// caller deletes the remaining local files. On a store error nothing local is
    /// touched and uploads wait out a backoff.
    pub fn upload(
        &self,
        seg: &Arc<Segment>,
        local_dir: &Path,
        now_ms: i64,
        max: usize,
    ) -> Result<Arc<Segment>> {
        match self.try_upload(seg, local_dir, now_ms) {
            Ok(entry) => {
                self.shared.note(|s| {
                    s.uploads += 1;
                    s.last_error = None;
                });
                self.state.lock().expect("cold state lock").backoff = Duration::from_secs(1);
                self.adopt_local(seg, local_dir, &entry, max)
            }
            Err(e) => {
                let mut st = self.state.lock().expect("cold state lock");
                st.retry_at_ms = now_ms.saturating_add(st.backoff.as_millis() as i64);
                st.backoff = (st.backoff * 2).min(self.shared.options.backoff_max);
                drop(st);
                self.shared.note(|s| {
                    s.upload_failures += 1;
                    s.last_error = Some(e.to_string());
                });
                Err(e)
            }
        }
    }

    fn try_upload(&self, seg: &Arc<Segment>, local_dir: &Path, now_ms: i64) -> Result<Entry> {
        let base = seg.base_offset;
        seg.write_indexes(&self.cache_dir)?;
        let stem = format!("{base:020}-{:016x}", nonce());
        let mut objects = Vec::new();
        let log = files::segment_path(local_dir, base, LOG_EXT);
        for (dir, ext) in
            [(local_dir, LOG_EXT)].into_iter().chain(INDEX_EXTS.map(|x| (self.cache_dir.as_path(), x)))
        {
            let path = files::segment_path(dir, base, ext);
            let (sha256, size) = sha256_file(&path).ctx(|| format!("hashing {}", path.display()))?;
            self.shared.options.store.put_file(&self.key(&stem, ext), &path)?;
            objects.push(ObjectSum { ext: ext.to_owned(), size, sha256 });
        }
        debug_assert!(log.exists());
        let (compacted, max_timestamp, next_offset) = {
            let st = seg.state.read().expect("segment state lock");
            (st.compacted, st.index.max_timestamp(), st.next_offset)
        };
        let entry = Entry { base, next_offset, max_timestamp, compacted, stem, uploaded_ms: now_ms, objects };
        let mut manifest = self.state.lock().expect("cold state lock").manifest.clone();
        manifest.entries.push(entry.clone());
        self.publish(manifest)?;
        Ok(entry)
    }

    /// Moves the uploaded `.log` into the cache (a rename: same filesystem) and
    /// opens the cold segment from there.
    fn adopt_local(
        &self,
        seg: &Arc<Segment>,
        local_dir: &Path,
        entry: &Entry,
        max: usize,
    ) -> Result<Arc<Segment>> {
        let base = seg.base_offset;
        let from = files::segment_path(local_dir, base, LOG_EXT);
        let to = files::segment_path(&self.cache_dir, base, LOG_EXT);
        std::fs::rename(&from, &to).ctx(|| format!("moving {} into the cold cache", from.display()))?;
        let cold = Segment::open_cold(&self.cache_dir, entry, seg.open_files().clone(), max)?;
        self.shared.cache.insert(&to, entry.log_size(), &cold);
        Ok(cold)
    }

    /// Makes `seg`'s `.log` present in the cache, fetching and verifying it.
    pub fn ensure_local(&self, seg: &Arc<Segment>) -> Result<()> {
        if seg.log_path.exists() && self.shared.cache.touch(&seg.log_path) {
            return Ok(());
        }
        let _one = self.fetch.lock().expect("cold fetch lock");
        if seg.log_path.exists() && self.shared.cache.touch(&seg.log_path) {
            return Ok(());
        }
        let entry = self.entry(seg.base_offset)?;
        self.fetch_object(&entry, LOG_EXT)?;
        self.shared.cache.insert(&seg.log_path, entry.log_size(), seg);
        Ok(())
    }

    /// Fetches an index object unless it is already in the cache directory.
    fn ensure_object(&self, entry: &Entry, ext: &str) -> Result<()> {
        if files::segment_path(&self.cache_dir, entry.base, ext).exists() {
            return Ok(());
        }
        self.fetch_object(entry, ext)
    }

    /// Downloads one object in bounded ranges into a temporary file, refuses it
    /// unless its size and sha256 are the manifest's, and renames it into the cache.
    fn fetch_object(&self, entry: &Entry, ext: &str) -> Result<()> {
        let key = self.key(&entry.stem, ext);
        let sum = entry
            .object(ext)
            .ok_or_else(|| LogError::ColdManifest(format!("{key} is not in the manifest")))?;
        let dst = files::segment_path(&self.cache_dir, entry.base, ext);
        let mut tmp = dst.as_os_str().to_owned();
        tmp.push(files::TMP_SUFFIX);
        let tmp = PathBuf::from(tmp);
        let fetched = self.download(&key, sum.size, &tmp);
        self.shared.note(|s| s.fetches += 1);
        let (size, sha) = match fetched {
            Ok(got) => got,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(e);
            }
        };
        // Only `sum.size` bytes are read: a longer object shows as a sha256 mismatch.
        if size != sum.size || sha != sum.sha256 {
            let _ = std::fs::remove_file(&tmp);
            self.shared.note(|s| s.refused += 1);
            let reason = format!(
                "{size} bytes with sha256 {sha}; the manifest says {} bytes with sha256 {}",
                sum.size, sum.sha256
            );
            tracing::error!(key, reason, "cold object refused");
            return Err(LogError::ColdCorrupt { key, reason });
        }
        std::fs::rename(&tmp, &dst).ctx(|| format!("renaming {}", tmp.display()))
    }

    /// Copies up to `size` bytes of `key` into `path`, a bounded range at a time, so
    /// a fetch never holds a whole segment in memory; returns the bytes and sha256.
    fn download(&self, key: &str, size: u64, path: &Path) -> Result<(u64, String)> {
        use sha2::Digest;
        use std::io::Write;
        let mut file = std::fs::File::create(path).ctx(|| format!("creating {}", path.display()))?;
        let (mut hasher, mut got) = (sha2::Sha256::new(), 0u64);
        while got < size {
            let end = size.min(got + es_core::limits::COLD_FETCH_CHUNK_BYTES);
            let chunk = self.shared.options.store.get_range(key, got..end)?;
            if chunk.is_empty() {
                break;
            }
            hasher.update(&chunk);
            file.write_all(&chunk).ctx(|| format!("writing {}", path.display()))?;
            got += chunk.len() as u64;
        }
        Ok((got, super::store::hex(&hasher.finalize())))
    }

    fn entry(&self, base: u64) -> Result<Entry> {
        let st = self.state.lock().expect("cold state lock");
        st.manifest.entries.iter().find(|e| e.base == base).cloned().ok_or_else(|| {
            LogError::ColdManifest(format!("segment {base} of {} is not in the cold manifest", self.name))
        })
    }

    /// The bases cold retention expires now, oldest first: by age of the newest
    /// record, and while the partition's cold bytes exceed the bound.
    pub fn expired(&self, now_ms: i64) -> Vec<u64> {
        let (ms, bytes) = (self.shared.options.retention_ms, self.shared.options.retention_bytes);
        let st = self.state.lock().expect("cold state lock");
        let mut total: u64 = st.manifest.entries.iter().map(Entry::log_size).sum();
        let mut out = Vec::new();
        for e in &st.manifest.entries {
            let by_age = ms >= 0 && e.max_timestamp.is_none_or(|t| now_ms.saturating_sub(t) > ms);
            let by_size = bytes >= 0 && total > bytes as u64;
            if !(by_age || by_size) {
                break;
            }
            total -= e.log_size();
            out.push(e.base);
        }
        out
    }

    /// Removes segments from the tier: the manifest first (so nothing refers to a
    /// deleted object), then the objects and cached files. An object whose delete
    /// fails is left behind (an orphan no manifest names) and logged.
    pub fn remove(&self, bases: &[u64]) -> Result<()> {
        let gone = self.forget_entries(bases)?;
        for e in gone {
            for o in &e.objects {
                let key = self.key(&e.stem, &o.ext);
                if let Err(err) = self.shared.options.store.delete(&key) {
                    tracing::warn!(key, error = %err, "deleting a cold object failed; it is left as an orphan");
                }
            }
        }
        Ok(())
    }

    /// Drops entries from the manifest (published, then local) and their cached files.
    fn forget_entries(&self, bases: &[u64]) -> Result<Vec<Entry>> {
        let mut manifest = self.state.lock().expect("cold state lock").manifest.clone();
        let (gone, kept): (Vec<Entry>, Vec<Entry>) =
            manifest.entries.drain(..).partition(|e| bases.contains(&e.base));
        manifest.entries = kept;
        self.publish(manifest)?;
        for e in &gone {
            for ext in files::SEGMENT_EXTS {
                let p = files::segment_path(&self.cache_dir, e.base, ext);
                self.shared.cache.forget(&p);
                files::remove_if_exists(&p).ctx(|| format!("removing {}", p.display()))?;
            }
        }
        Ok(gone)
    }

    /// Deletes every object of this partition in the store (topic deletion).
    pub fn delete_all(&self) -> Result<()> {
        let store = &self.shared.options.store;
        for obj in store.list(&format!("{}/", self.name))? {
            store.delete(&obj.key)?;
        }
        let mut st = self.state.lock().expect("cold state lock");
        st.manifest = Manifest::default();
        st.version = None;
        Ok(())
    }

    /// Publishes `manifest` to the store with a conditional write, then durably
    /// locally, then adopts it. A conflict whose stored manifest is already this
    /// one (a retry after a lost answer) counts as success.
    fn publish(&self, manifest: Manifest) -> Result<()> {
        let store = &self.shared.options.store;
        let key = format!("{}/manifest", self.name);
        let text = manifest.encode();
        let mut st = self.state.lock().expect("cold state lock");
        let expect = match &st.version {
            Some(v) => Expect::Version(v.clone()),
            None => match store.get(&key)? {
                Some((_, v)) => Expect::Version(v),
                None => Expect::Absent,
            },
        };
        let version = match store.put_if(&key, Bytes::from(text.clone()), &expect) {
            Ok(v) => v,
            Err(LogError::ColdConflict { .. }) => match store.get(&key)? {
                Some((b, v)) if b == text.as_bytes() => v,
                _ => {
                    st.version = None;
                    return Err(LogError::ColdConflict { key });
                }
            },
            Err(e) => return Err(e),
        };
        files::write_atomic(&self.manifest_path, text.as_bytes())
            .ctx(|| format!("writing {}", self.manifest_path.display()))?;
        st.manifest = manifest;
        st.version = Some(version);
        Ok(())
    }

    fn key(&self, stem: &str, ext: &str) -> String {
        format!("{}/{stem}.{ext}", self.name)
    }
}

/// A value unique to this upload: the clock's nanoseconds mixed with the pid, so a
/// retried upload never reuses a key a half-finished one may have written.
fn nonce() -> u64 {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    nanos ^ (u64::from(std::process::id()) << 40)
}
