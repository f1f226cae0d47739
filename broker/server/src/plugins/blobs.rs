//! The plugin store's part in a cluster: blobs staged by an upload before its
//! replicated command is applied, manifests applied before their blob is here
//! (missing blobs), and blobs served to and fetched from peers in chunks, each
//! verified against the sha256 the manifest names before it is stored.

use std::fs;
use std::io::{Read, Seek, SeekFrom};

use super::{Manifest, Plugins, blob_path, hex_sha256, io, write_durably};
use crate::limits;
use crate::service::error::{BrokerError, Result};

/// The most bytes of a blob one peer answer carries (a peer frame is capped well
/// above this, and plugins may be larger than a frame).
pub const BLOB_CHUNK_BYTES: usize = 4 * 1024 * 1024;

/// One chunk of a blob a peer served: the blob's total size and the bytes from
/// the offset asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobChunk {
    pub total_bytes: u64,
    pub bytes: Vec<u8>,
}

impl BlobChunk {
    /// `total_bytes` (u64 BE) then the bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + self.bytes.len());
        out.extend_from_slice(&self.total_bytes.to_be_bytes());
        out.extend_from_slice(&self.bytes);
        out
    }

    pub fn decode(bytes: &[u8]) -> Result<BlobChunk> {
        let Some((total, rest)) = bytes.split_first_chunk::<8>() else {
            return Err(BrokerError::Internal("a blob chunk shorter than its header".into()));
        };
        Ok(BlobChunk { total_bytes: u64::from_be_bytes(*total), bytes: rest.to_vec() })
    }
}

impl Plugins {
    /// Whether a manifest names blob `sha256` that is not on this node yet.
    pub fn is_missing(&self, sha256: &str) -> bool {
        self.missing.read().expect("missing lock").contains(sha256)
    }

    /// The blobs this node lacks, by sha256.
    pub fn missing_blobs(&self) -> Vec<String> {
        self.missing.read().expect("missing lock").iter().cloned().collect()
    }

    /// The manifests that name blob `sha256`.
    pub fn naming(&self, sha256: &str) -> Vec<Manifest> {
        let all = self.by_name.read().expect("plugins lock");
        all.values().filter(|m| !m.builtin && m.sha256 == sha256).cloned().collect()
    }

    /// Writes an upload's blob durably before its command is proposed, and keeps
    /// it from the unnamed-blob sweep until `unstage` (its manifest names it then).
    pub fn stage(&self, manifest: &Manifest, wasm: &[u8]) -> Result<()> {
        assert_eq!(hex_sha256(wasm), manifest.sha256, "a staged blob is the manifest's");
        self.staged.lock().expect("staged lock").insert(manifest.sha256.clone());
        let path = blob_path(&self.blobs, &manifest.sha256);
        if !path.exists() {
            write_durably(&path, wasm)?;
        }
        Ok(())
    }

    /// Ends a staging; the blob goes unless a manifest names it now.
    pub fn unstage(&self, sha256: &str) -> Result<()> {
        self.staged.lock().expect("staged lock").remove(sha256);
        self.remove_unnamed_blobs(&mut Vec::new())
    }

    /// Stores a manifest a replicated upload carries, replacing any of the same
    /// name; answers whether its blob is here (else it is missing until fetched).
    pub fn put_manifest(&self, manifest: &Manifest) -> Result<bool> {
        let present = blob_path(&self.blobs, &manifest.sha256).exists();
        self.manifests.save(manifest)?;
        self.by_name.write().expect("plugins lock").insert(manifest.name.clone(), manifest.clone());
        if !present {
            self.missing.write().expect("missing lock").insert(manifest.sha256.clone());
        }
        self.forget_unnamed_missing();
        self.remove_unnamed_blobs(&mut Vec::new())?;
        Ok(present)
    }

    /// A cluster member takes the manifests whose blob was missing at open as
    /// missing blobs to fetch; answers their names.
    pub fn adopt_stranded(&self) -> Vec<String> {
        let stranded = std::mem::take(&mut *self.stranded.lock().expect("stranded lock"));
        let mut names = Vec::new();
        for manifest in stranded {
            let mut by_name = self.by_name.write().expect("plugins lock");
            if by_name.contains_key(&manifest.name) {
                continue;
            }
            self.missing.write().expect("missing lock").insert(manifest.sha256.clone());
            names.push(manifest.name.clone());
            by_name.insert(manifest.name.clone(), manifest);
        }
        names
    }

    /// Stores a blob fetched from a peer, refused unless its sha256 is `sha256`.
    /// Answers false when no manifest wants it any more (it is not stored then).
    pub fn store_fetched(&self, sha256: &str, bytes: &[u8]) -> Result<bool> {
        let got = hex_sha256(bytes);
        if got != sha256 {
            return Err(BrokerError::Internal(format!(
                "a peer sent a plugin component whose sha256 is {got}, not the {sha256} asked for; \
                 it was not stored (another peer is asked)"
            )));
        }
        if !self.is_missing(sha256) {
            return Ok(false);
        }
        write_durably(&blob_path(&self.blobs, sha256), bytes)?;
        self.missing.write().expect("missing lock").remove(sha256);
        Ok(true)
    }

    /// The part of blob `sha256` from `offset` (at most [`BLOB_CHUNK_BYTES`]) for a
    /// peer; `None` when this node does not hold that blob.
    pub fn blob_chunk(&self, sha256: &str, offset: u64) -> Result<Option<BlobChunk>> {
        let known = self.by_name.read().expect("plugins lock").values().any(|m| m.sha256 == sha256)
            || self.staged.lock().expect("staged lock").contains(sha256);
        if !known || self.is_missing(sha256) || !is_sha256(sha256) {
            return Ok(None);
        }
        let path = blob_path(&self.blobs, sha256);
        let mut file = match fs::File::open(&path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(format!("opening {}", path.display()), e)),
        };
        let read = |e| io(format!("reading {}", path.display()), e);
        let total_bytes = file.metadata().map_err(read)?.len();
        if offset > total_bytes {
            return Err(BrokerError::InvalidRequest(format!(
                "offset {offset} is past the end of blob {sha256} ({total_bytes} bytes)"
            )));
        }
        file.seek(SeekFrom::Start(offset)).map_err(read)?;
        let mut bytes = Vec::new();
        file.take(BLOB_CHUNK_BYTES as u64).read_to_end(&mut bytes).map_err(read)?;
        Ok(Some(BlobChunk { total_bytes, bytes }))
    }

    /// Keeps only the missing blobs some manifest still names.
    pub(super) fn forget_unnamed_missing(&self) {
        let named: std::collections::BTreeSet<String> =
            self.by_name.read().expect("plugins lock").values().map(|m| m.sha256.clone()).collect();
        self.missing.write().expect("missing lock").retain(|sha| named.contains(sha));
    }
}

/// A blob total size a peer may announce.
pub fn check_blob_size(total_bytes: u64) -> Result<()> {
    if total_bytes > limits::PLUGIN_BYTES_MAX as u64 {
        return Err(BrokerError::Internal(format!(
            "a peer announced a plugin component of {total_bytes} bytes, over the {} byte limit",
            limits::PLUGIN_BYTES_MAX
        )));
    }
    Ok(())
}

/// 64 lower-case hex digits: a blob name no path trick can hide in.
fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::super::Upload;
    use super::*;

    fn store() -> (tempfile::TempDir, Plugins, Manifest, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let plugins = Plugins::open(dir.path(), None, &mut Vec::new()).unwrap();
        let wasm = es_plugin_host::builtin::RULES.to_vec();
        let upload = Upload { name: "my-rules".into(), wasm: wasm.clone(), ..Upload::default() };
        let manifest = plugins.inspect(&upload).unwrap();
        (dir, plugins, manifest, wasm)
    }

    #[test]
    fn a_manifest_without_its_blob_is_missing_until_a_verified_blob_arrives() {
        let (dir, plugins, manifest, wasm) = store();
        assert!(!plugins.put_manifest(&manifest).unwrap(), "no blob here yet");
        assert!(plugins.is_missing(&manifest.sha256));
        assert_eq!(plugins.missing_blobs(), vec![manifest.sha256.clone()]);
        let err = plugins.wasm(&manifest).unwrap_err();
        assert_eq!(err.code(), "plugin_unavailable", "{err}");
        assert_eq!(plugins.blob_chunk(&manifest.sha256, 0).unwrap(), None, "not served while missing");

        // A blob whose hash is not the one asked for is refused and not stored.
        let mut wrong = wasm.clone();
        wrong[100] ^= 1;
        let err = plugins.store_fetched(&manifest.sha256, &wrong).unwrap_err().to_string();
        assert!(err.contains("not the"), "{err}");
        assert!(plugins.is_missing(&manifest.sha256));
        assert_eq!(fs::read_dir(dir.path().join("blobs")).unwrap().count(), 0);

        assert!(plugins.store_fetched(&manifest.sha256, &wasm).unwrap());
        assert!(!plugins.is_missing(&manifest.sha256));
        assert_eq!(&*plugins.wasm(&manifest).unwrap(), &wasm[..]);
        assert!(!plugins.store_fetched(&manifest.sha256, &wasm).unwrap(), "wanted once");
    }

    #[test]
    fn blobs_are_served_in_chunks_and_staged_blobs_survive_the_sweep() {
        let (_dir, plugins, manifest, wasm) = store();
        plugins.stage(&manifest, &wasm).unwrap();
        // Another plugin's removal sweeps unnamed blobs; a staged one stays.
        plugins.remove_unnamed_blobs(&mut Vec::new()).unwrap();
        let first = plugins.blob_chunk(&manifest.sha256, 0).unwrap().expect("a staged blob is served");
        assert_eq!(first.total_bytes, wasm.len() as u64);
        assert_eq!(first.bytes, wasm[..first.bytes.len().min(BLOB_CHUNK_BYTES)]);
        let tail = plugins.blob_chunk(&manifest.sha256, wasm.len() as u64 - 3).unwrap().unwrap();
        assert_eq!(tail.bytes, wasm[wasm.len() - 3..]);
        assert_eq!(BlobChunk::decode(&tail.encode()).unwrap(), tail);
        assert!(plugins.put_manifest(&manifest).unwrap(), "the staged blob is here");
        plugins.unstage(&manifest.sha256).unwrap();
        assert!(plugins.blob_chunk(&manifest.sha256, 0).unwrap().is_some(), "named now");
        assert_eq!(plugins.blob_chunk("../../etc/passwd", 0).unwrap(), None);

        plugins.remove(&manifest.name).unwrap();
        assert_eq!(plugins.blob_chunk(&manifest.sha256, 0).unwrap(), None, "removed with its manifest");
    }

    #[test]
    fn a_stranded_manifest_is_adopted_as_missing_by_a_cluster_member() {
        let (dir, plugins, manifest, wasm) = store();
        plugins.store(&manifest, &wasm).unwrap();
        drop(plugins);
        fs::remove_file(dir.path().join(format!("blobs/{}.wasm", manifest.sha256))).unwrap();
        let mut repairs = Vec::new();
        let plugins = Plugins::open(dir.path(), None, &mut repairs).unwrap();
        assert!(
            matches!(plugins.get("my-rules"), Err(BrokerError::PluginNotFound(_))),
            "single node: as before"
        );
        assert_eq!(plugins.adopt_stranded(), vec!["my-rules".to_owned()]);
        assert!(plugins.is_missing(&manifest.sha256));
        assert_eq!(plugins.get("my-rules").unwrap(), manifest);
    }
}
