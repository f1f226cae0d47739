//! The object store under the cold tier: one small synchronous trait, with a
//! directory backend (`dir.rs`) and an S3-compatible one (`s3.rs`). The log's
//! threads are plain threads, so the trait blocks; every call is bounded in time.

use std::fmt::Debug;
use std::ops::Range;
use std::path::Path;

use bytes::Bytes;

use crate::error::Result;

/// What a conditional manifest write expects to find.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// No object under the key yet (S3 `If-None-Match: *`).
    Absent,
    /// The object still has this version (S3 `If-Match: <etag>`).
    Version(String),
}

/// One listed object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub key: String,
    pub size: u64,
}

/// A cold-tier object store. Keys are `/`-separated and relative to the tier's
/// prefix. Segment objects are written once under unique keys; only manifests are
/// rewritten, and only conditionally, so two writers can never both win.
pub trait ColdStore: Send + Sync + Debug {
    /// Uploads the file at `path` under `key`; durable when this returns `Ok`.
    fn put_file(&self, key: &str, path: &Path) -> Result<()>;
    /// Writes `data` under `key` if `expect` holds; returns the new version.
    fn put_if(&self, key: &str, data: Bytes, expect: &Expect) -> Result<String>;
    /// The object and its version, or `None` when there is none.
    fn get(&self, key: &str) -> Result<Option<(Bytes, String)>>;
    /// Bytes `range` of the object.
    fn get_range(&self, key: &str, range: Range<u64>) -> Result<Bytes>;
    /// Every object whose key starts with `prefix` (a directory-like prefix ending in `/`).
    fn list(&self, prefix: &str) -> Result<Vec<Listed>>;
    /// Removes the object; removing one that is not there is not an error.
    fn delete(&self, key: &str) -> Result<()>;
    /// Where the store is, for messages (never holds a credential).
    fn describe(&self) -> String;
}

/// The hex sha256 of `bytes`.
pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
}

/// The hex sha256 and size of a file, read in chunks (segments are large).
pub(crate) fn sha256_file(path: &Path) -> std::io::Result<(String, u64)> {
    use sha2::Digest;
    use std::io::Read;
    let mut file = std::fs::File::open(path)?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            return Ok((hex(&hasher.finalize()), size));
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
