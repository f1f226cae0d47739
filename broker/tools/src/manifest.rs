//! The manifest, a dump's first entry: what the archive holds, so that a restore
//! can refuse anything else before it writes a byte, and check every file after.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::error::{Result, ToolsError};
use crate::limits::{FILES_MAX, PATH_BYTES_MAX};

/// The manifest's name, the first entry of every dump.
pub const MANIFEST_NAME: &str = "es-dump-manifest.json";
/// What kind of archive this is.
pub const FORMAT: &str = "es-dump";
/// Bumped when a restore written for an older manifest could misread a newer one.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: String,
    pub format_version: u32,
    /// The es-tools version that wrote the dump (the workspace's version).
    pub es_version: String,
    /// When the dump was made, RFC 3339 UTC.
    pub created: String,
    /// `--topics PREFIX`, when the dump holds only some user topics.
    #[serde(default)]
    pub topics_prefix: Option<String>,
    pub topics: Vec<TopicEntry>,
    /// Directories to create even if no file lands in them.
    pub dirs: Vec<String>,
    pub files: Vec<FileEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TopicEntry {
    pub name: String,
    pub partitions: Vec<PartitionEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionEntry {
    pub partition: u32,
    /// The partition's directory, relative to the data directory.
    pub dir: String,
    /// The first offset held (the oldest segment's first batch).
    pub log_start: u64,
    /// The offset after the last batch held.
    pub log_end: u64,
    pub segments: u32,
    pub bytes: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Relative to the data directory, `/`-separated.
    pub path: String,
    pub size: u64,
    /// Lowercase hex.
    pub sha256: String,
    /// Permission bits (the auth pepper is 0600).
    pub mode: u32,
}

impl Manifest {
    /// Checks everything a restore relies on and indexes the files by path.
    pub fn validate(&self) -> Result<HashMap<&str, &FileEntry>> {
        let bad = |reason: String| Err(ToolsError::BadManifest { reason });
        if self.format != FORMAT {
            return bad(format!("its format is {:?}, not {FORMAT:?}", self.format));
        }
        if self.format_version != FORMAT_VERSION {
            return bad(format!(
                "it has format version {}, this es-tools reads version {FORMAT_VERSION}: use the es-tools that wrote it",
                self.format_version
            ));
        }
        if self.files.len() > FILES_MAX {
            return bad(format!("it names {} files, more than the limit of {FILES_MAX}", self.files.len()));
        }
        for dir in &self.dirs {
            check_path(dir)?;
        }
        let mut files = HashMap::with_capacity(self.files.len());
        for file in &self.files {
            check_path(&file.path)?;
            if !is_sha256_hex(&file.sha256) {
                return bad(format!("{}: {:?} is not a sha256 in lowercase hex", file.path, file.sha256));
            }
            if file.mode & !0o777 != 0 {
                return bad(format!("{}: mode {:o} has more than permission bits", file.path, file.mode));
            }
            if files.insert(file.path.as_str(), file).is_some() {
                return bad(format!("it names {} twice", file.path));
            }
        }
        let dirs: HashSet<&str> = self.dirs.iter().map(String::as_str).collect();
        if let Some(clash) = self.files.iter().find(|f| dirs.contains(f.path.as_str())) {
            return bad(format!("{} is named as both a file and a directory", clash.path));
        }
        Ok(files)
    }

    pub fn total_bytes(&self) -> u64 {
        self.files.iter().map(|f| f.size).sum()
    }

    pub fn partition_count(&self) -> usize {
        self.topics.iter().map(|t| t.partitions.len()).sum()
    }
}

/// Refuses any path that could land outside the directory it is joined to, or that
/// names something no dump writes: absolute, `..`, `.`, empty parts, NUL, backslash.
pub fn check_path(path: &str) -> Result<()> {
    let refuse = |reason| Err(ToolsError::UnsafePath { path: path.to_owned(), reason });
    if path.is_empty() {
        return refuse("an empty path");
    }
    if path.len() > PATH_BYTES_MAX {
        return refuse("a path longer than any data directory holds");
    }
    if path.starts_with('/') {
        return refuse("an absolute path");
    }
    if path.contains(['\0', '\\']) {
        return refuse("a path with a NUL or a backslash");
    }
    for part in path.split('/') {
        match part {
            "" => return refuse("a path with an empty component"),
            "." => return refuse("a path with a '.' component"),
            ".." => return refuse("a path with a '..' component, which would leave the directory"),
            _ => {}
        }
    }
    if path == MANIFEST_NAME {
        return refuse("a second manifest");
    }
    Ok(())
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(files: Vec<FileEntry>) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            es_version: "0.1.0".into(),
            created: "2026-12-01T13:11:23Z".into(),
            topics_prefix: None,
            topics: vec![],
            dirs: vec!["topics".into()],
            files,
        }
    }

    fn file(path: &str) -> FileEntry {
        FileEntry { path: path.into(), size: 1, sha256: "a".repeat(64), mode: 0o644 }
    }

    #[test]
    fn unsafe_paths_are_refused_with_the_reason() {
        for (path, reason) in [
            ("/etc/passwd", "absolute"),
            ("../x", "'..'"),
            ("a/../../x", "'..'"),
            ("a//b", "empty component"),
            ("./a", "'.'"),
            ("", "empty path"),
            ("a\\b", "backslash"),
            (MANIFEST_NAME, "second manifest"),
        ] {
            let err = check_path(path).unwrap_err();
            assert!(matches!(err, ToolsError::UnsafePath { .. }), "{path}: {err}");
            assert!(err.to_string().contains(reason), "{path}: {err}");
        }
        check_path("partitions/orders-0/00000000000000000000.log").unwrap();
    }

    #[test]
    fn a_valid_manifest_indexes_its_files() {
        let m = manifest(vec![file("topics/a.json"), file("producer-ids")]);
        assert_eq!(m.validate().unwrap().len(), 2);
    }

    #[test]
    fn bad_manifests_are_refused() {
        let dup = manifest(vec![file("topics/a.json"), file("topics/a.json")]);
        assert!(dup.validate().unwrap_err().to_string().contains("twice"));
        let mut hash = manifest(vec![file("x")]);
        hash.files[0].sha256 = "XYZ".into();
        assert!(hash.validate().unwrap_err().to_string().contains("sha256"));
        let mut newer = manifest(vec![]);
        newer.format_version = FORMAT_VERSION + 1;
        assert!(newer.validate().unwrap_err().to_string().contains("format version"));
        let unsafe_file = manifest(vec![file("../x")]);
        assert!(matches!(unsafe_file.validate().unwrap_err(), ToolsError::UnsafePath { .. }));
        let clash = manifest(vec![file("topics")]);
        assert!(clash.validate().unwrap_err().to_string().contains("both"));
    }
}
