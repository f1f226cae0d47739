//! `es-tools restore`: an archive into a data directory, replacing nothing until
//! everything checked out. The archive is read entry by entry (never unpacked
//! blindly): the manifest first, then only regular files it names, at safe
//! relative paths, once each, of the declared size. Every file streams into a new
//! directory beside the target (same filesystem, so the swap is a rename) while
//! its sha256 and, for a segment, every batch CRC are checked; files and
//! directories are fsynced, and only then is the new directory swapped in.

use std::collections::{HashMap, HashSet};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::dump::{parent_of, sync_dir};
use crate::error::{IoContext, Result, ToolsError};
use crate::limits::{COPY_BUFFER_BYTES, MANIFEST_BYTES_MAX};
use crate::lock;
use crate::manifest::{FileEntry, MANIFEST_NAME, Manifest};
use crate::progress::Progress;
use crate::stamp::Stamp;
use crate::verify::{BatchChecker, Hasher, SegmentSpan};

#[derive(Debug, Clone)]
pub struct RestoreOptions {
    pub archive: PathBuf,
    pub data_dir: PathBuf,
    /// Check the archive and write nothing.
    pub verify_only: bool,
    /// Keep the replaced directory as `<data_dir>.bak-<time>`.
    pub keep_old: bool,
    pub progress: bool,
}

#[derive(Debug, Clone)]
pub struct RestoreReport {
    pub manifest: Manifest,
    /// Where the replaced data directory was kept, if there was one and it was kept.
    pub kept: Option<PathBuf>,
}

/// Restores `options.archive` into `options.data_dir` (or only checks it).
pub fn restore(options: &RestoreOptions) -> Result<RestoreReport> {
    let archive = File::open(&options.archive).ctx(|| format!("opening {}", options.archive.display()))?;
    let size = archive.metadata().ctx(|| format!("reading {}", options.archive.display()))?.len();
    let progress = if options.progress { Progress::bytes("restoring", size) } else { Progress::hidden() };
    let reader =
        Counted { inner: io::BufReader::with_capacity(COPY_BUFFER_BYTES, archive), progress: &progress };
    if options.verify_only {
        let manifest = extract(reader, None)?;
        progress.finish();
        return Ok(RestoreReport { manifest, kept: None });
    }
    let target = Target::check(&options.data_dir)?;
    // Held until the swap: no broker may start on the directory being replaced.
    let _lock = target.exists.then(|| lock::lock(&target.dir)).transpose()?;
    let stamp = Stamp::now().compact();
    let staging = target.sibling(&format!(".restore-{stamp}-{}", std::process::id()));
    fs::create_dir(&staging).ctx(|| format!("creating {}", staging.display()))?;
    let extracted = extract(reader, Some(&staging)).and_then(|m| sync_tree(&staging, &m).map(|()| m));
    progress.finish();
    let manifest = match extracted {
        Ok(m) => m,
        Err(e) => {
            let _ = fs::remove_dir_all(&staging);
            return Err(e);
        }
    };
    let kept = target.swap_in(&staging, &stamp, options.keep_old)?;
    Ok(RestoreReport { manifest, kept })
}

/// The data directory to replace.
struct Target {
    dir: PathBuf,
    exists: bool,
}

impl Target {
    fn check(dir: &Path) -> Result<Target> {
        let bad = |reason: &str| ToolsError::BadTarget { dir: dir.to_owned(), reason: reason.to_owned() };
        if dir.file_name().is_none() {
            return Err(bad("name the data directory itself, not a root or '..'"));
        }
        if !parent_of(dir).is_dir() {
            return Err(bad("its parent directory does not exist"));
        }
        match fs::symlink_metadata(dir) {
            Ok(m) if m.is_dir() => {
                let parent =
                    fs::metadata(parent_of(dir)).ctx(|| format!("reading {}", parent_of(dir).display()))?;
                if parent.dev() != m.dev() {
                    // The new directory is made beside the target; a mount point cannot
                    // be swapped by a rename.
                    return Err(bad(
                        "it is a mount point; restore into a directory inside it, and point the broker's --data-dir there",
                    ));
                }
                Ok(Target { dir: dir.to_owned(), exists: true })
            }
            Ok(_) => Err(bad("it exists and is not a directory")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                Ok(Target { dir: dir.to_owned(), exists: false })
            }
            Err(e) => Err(ToolsError::io(format!("reading {}", dir.display()), e)),
        }
    }

    /// `<dir><suffix>` beside the data directory (so on the same filesystem).
    fn sibling(&self, suffix: &str) -> PathBuf {
        let mut name = self.dir.file_name().expect("checked").to_os_string();
        name.push(suffix);
        self.dir.with_file_name(name)
    }

    /// Puts `staging` in place of the data directory; returns where the old one went.
    /// A failure before the target changed removes the new copy; a failure after it
    /// keeps both and says where they are.
    fn swap_in(&self, staging: &Path, stamp: &str, keep_old: bool) -> Result<Option<PathBuf>> {
        if !self.exists {
            return match fs::rename(staging, &self.dir) {
                Ok(()) => sync_dir(parent_of(&self.dir)).map(|()| None),
                Err(e) => Err(discard(staging, self.moving(staging, e))),
            };
        }
        let mut old = self.sibling(&format!(".bak-{stamp}"));
        // One atomic exchange where the filesystem has it: the data directory is
        // never missing, not even for an instant.
        let exchanged = rustix::fs::renameat_with(
            rustix::fs::CWD,
            staging,
            rustix::fs::CWD,
            &self.dir,
            rustix::fs::RenameFlags::EXCHANGE,
        );
        if exchanged.is_ok() {
            // The old data now sits at the staging path; if it cannot be renamed, it
            // is kept there instead.
            if fs::rename(staging, &old).is_err() {
                old = staging.to_owned();
            }
        } else {
            self.two_renames(staging, &old)?;
        }
        sync_dir(parent_of(&self.dir))?;
        if keep_old {
            return Ok(Some(old));
        }
        fs::remove_dir_all(&old).ctx(|| format!("removing the old data in {}", old.display()))?;
        Ok(None)
    }

    /// The swap without an atomic exchange: old away, new in, or back as it was.
    fn two_renames(&self, staging: &Path, old: &Path) -> Result<()> {
        if let Err(e) = fs::rename(&self.dir, old) {
            let e = ToolsError::io(format!("moving the old data to {}", old.display()), e);
            return Err(discard(staging, e));
        }
        let Err(e) = fs::rename(staging, &self.dir) else {
            return Ok(());
        };
        let e = self.moving(staging, e);
        match fs::rename(old, &self.dir) {
            Ok(()) => Err(discard(staging, e)),
            Err(_) => Err(ToolsError::SwapIncomplete {
                dir: self.dir.clone(),
                old: old.to_owned(),
                restored: staging.to_owned(),
                reason: e.to_string(),
            }),
        }
    }

    fn moving(&self, staging: &Path, e: io::Error) -> ToolsError {
        ToolsError::io(format!("moving {} into place at {}", staging.display(), self.dir.display()), e)
    }
}

/// Removes the checked copy after a swap that never changed the target.
fn discard(staging: &Path, e: ToolsError) -> ToolsError {
    let _ = fs::remove_dir_all(staging);
    e
}

/// Reads and checks a whole archive; with `staging`, writes its files there.
pub fn extract(reader: impl Read, staging: Option<&Path>) -> Result<Manifest> {
    let mut archive = tar::Archive::new(reader);
    let mut entries = archive.entries().map_err(|e| damaged("the start of the archive", &e))?;
    let manifest = read_manifest(&mut entries)?;
    let declared = manifest.validate()?;
    if let Some(root) = staging {
        for dir in &manifest.dirs {
            fs::create_dir_all(root.join(dir)).ctx(|| format!("creating {dir} in {}", root.display()))?;
        }
    }
    let mut seen: HashSet<String> = HashSet::with_capacity(declared.len());
    let mut spans = Spans::new();
    let mut last = MANIFEST_NAME.to_owned();
    for entry in entries {
        let mut entry = entry.map_err(|e| damaged(&last, &e))?;
        let file = admit(&entry, &declared, &seen)?;
        if let Some(span) = copy_entry(&mut entry, file, staging)? {
            spans.add(&file.path, span);
        }
        seen.insert(file.path.clone());
        last.clone_from(&file.path);
    }
    let missing: Vec<&FileEntry> = manifest.files.iter().filter(|f| !seen.contains(&f.path)).collect();
    if let Some(first) = missing.first() {
        return Err(ToolsError::Missing { first: first.path.clone(), count: missing.len() });
    }
    spans.check(&manifest)?;
    Ok(manifest)
}

/// The offsets each partition's restored segments hold: (first, next).
struct Spans(HashMap<String, (u64, u64)>);

impl Spans {
    fn new() -> Spans {
        Spans(HashMap::new())
    }

    fn add(&mut self, segment: &str, span: SegmentSpan) {
        let (Some(first), Some(next)) = (span.first_offset, span.next_offset) else {
            return;
        };
        let dir = segment.rsplit_once('/').map_or(segment, |(dir, _)| dir).to_owned();
        let range = self.0.entry(dir).or_insert((first, next));
        *range = (range.0.min(first), range.1.max(next));
    }

    /// The manifest's offset ranges must be what the segments hold.
    fn check(&self, manifest: &Manifest) -> Result<()> {
        for partition in manifest.topics.iter().flat_map(|t| &t.partitions) {
            let Some(&(first, next)) = self.0.get(&partition.dir) else {
                continue;
            };
            if (first, next) != (partition.log_start, partition.log_end) {
                return Err(ToolsError::BadManifest {
                    reason: format!(
                        "{} holds offsets [{first}, {next}), the manifest says [{}, {})",
                        partition.dir, partition.log_start, partition.log_end
                    ),
                });
            }
        }
        Ok(())
    }
}

fn damaged(after: &str, e: &io::Error) -> ToolsError {
    ToolsError::ArchiveDamaged { after: after.to_owned(), reason: e.to_string() }
}

fn read_manifest<R: Read>(entries: &mut tar::Entries<'_, R>) -> Result<Manifest> {
    let no_manifest = |found: String| ToolsError::NoManifest { found, expected: MANIFEST_NAME };
    let Some(first) = entries.next() else {
        return Err(no_manifest("nothing: the archive is empty".into()));
    };
    let mut first = first.map_err(|e| damaged("the start of the archive", &e))?;
    let name = String::from_utf8_lossy(&first.path_bytes()).into_owned();
    if name != MANIFEST_NAME || !is_regular(first.header().entry_type()) {
        return Err(no_manifest(name));
    }
    let size = first.header().size().map_err(|e| damaged("the manifest's header", &e))?;
    if size > MANIFEST_BYTES_MAX {
        return Err(ToolsError::BadManifest {
            reason: format!("it claims {size} bytes, over {MANIFEST_BYTES_MAX}"),
        });
    }
    let mut text = Vec::with_capacity(size as usize);
    first.read_to_end(&mut text).map_err(|e| damaged(MANIFEST_NAME, &e))?;
    if text.len() as u64 != size {
        return Err(ToolsError::Truncated {
            path: MANIFEST_NAME.into(),
            read: text.len() as u64,
            declared: size,
        });
    }
    serde_json::from_slice(&text)
        .map_err(|e| ToolsError::BadManifest { reason: format!("it is not valid: {e}") })
}

fn is_regular(kind: tar::EntryType) -> bool {
    matches!(kind, tar::EntryType::Regular | tar::EntryType::Continuous)
}

fn kind_name(kind: tar::EntryType) -> String {
    match kind {
        tar::EntryType::Symlink => "symbolic link".into(),
        tar::EntryType::Link => "hard link".into(),
        tar::EntryType::Char => "character device".into(),
        tar::EntryType::Block => "block device".into(),
        tar::EntryType::Fifo => "fifo".into(),
        tar::EntryType::Directory => "directory".into(),
        other => format!("{other:?}"),
    }
}

/// The checks made on an entry's header, before any of its bytes are read.
fn admit<'m, R: Read>(
    entry: &tar::Entry<'_, R>,
    declared: &HashMap<&str, &'m FileEntry>,
    seen: &HashSet<String>,
) -> Result<&'m FileEntry> {
    let raw = entry.path_bytes();
    let path = std::str::from_utf8(&raw).map_err(|_| ToolsError::UnsafePath {
        path: String::from_utf8_lossy(&raw).into_owned(),
        reason: "a path that is not UTF-8",
    })?;
    crate::manifest::check_path(path)?;
    let kind = entry.header().entry_type();
    if !is_regular(kind) {
        return Err(ToolsError::NotRegularFile { path: path.to_owned(), kind: kind_name(kind) });
    }
    let Some(file) = declared.get(path) else {
        return Err(ToolsError::Undeclared { path: path.to_owned() });
    };
    if seen.contains(path) {
        return Err(ToolsError::Duplicate { path: path.to_owned() });
    }
    let size = entry.header().size().map_err(|e| damaged(path, &e))?;
    if size != file.size {
        return Err(ToolsError::SizeMismatch { path: path.to_owned(), declared: file.size, found: size });
    }
    Ok(file)
}

/// Streams one entry through its checks (and into `staging`); a segment's span.
fn copy_entry(
    entry: &mut impl Read,
    file: &FileEntry,
    staging: Option<&Path>,
) -> Result<Option<SegmentSpan>> {
    let mut out = match staging {
        Some(root) => Some(create(root, file)?),
        None => None,
    };
    let mut hasher = Hasher::default();
    let mut checker = is_segment(&file.path).then(BatchChecker::default);
    let mut buf = vec![0u8; COPY_BUFFER_BYTES];
    let mut read = 0u64;
    loop {
        let n = entry.read(&mut buf).map_err(|e| damaged(&file.path, &e))?;
        if n == 0 {
            break;
        }
        let chunk = &buf[..n];
        hasher.update(chunk);
        if let Some(c) = checker.as_mut() {
            c.push(chunk).map_err(|f| bad_batch(file, f))?;
        }
        if let Some((f, path)) = out.as_mut() {
            f.write_all(chunk).ctx(|| format!("writing {}", path.display()))?;
        }
        read += n as u64;
    }
    if read != file.size {
        return Err(ToolsError::Truncated { path: file.path.clone(), read, declared: file.size });
    }
    let actual = hasher.finish();
    if actual != file.sha256 {
        return Err(ToolsError::HashMismatch {
            path: file.path.clone(),
            expected: file.sha256.clone(),
            actual,
        });
    }
    let span = checker.map(BatchChecker::finish).transpose().map_err(|f| bad_batch(file, f))?;
    if let Some((f, path)) = out {
        f.sync_all().ctx(|| format!("syncing {}", path.display()))?;
    }
    Ok(span)
}

fn bad_batch(file: &FileEntry, fault: crate::verify::BatchFault) -> ToolsError {
    ToolsError::BadBatch { path: file.path.clone(), position: fault.position, reason: fault.reason }
}

/// Segment logs are checked batch by batch as well as hashed.
fn is_segment(path: &str) -> bool {
    path.strip_prefix("partitions/")
        .and_then(|rest| rest.split_once('/'))
        .is_some_and(|(_, name)| name.ends_with(".log") && !name.contains('/'))
}

fn create(root: &Path, file: &FileEntry) -> Result<(File, PathBuf)> {
    let path = root.join(&file.path);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).ctx(|| format!("creating {}", parent.display()))?;
    }
    // create_new: nothing in the staging directory is ever written twice.
    let f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(file.mode)
        .open(&path)
        .ctx(|| format!("creating {}", path.display()))?;
    f.set_permissions(fs::Permissions::from_mode(file.mode))
        .ctx(|| format!("setting the mode of {}", path.display()))?;
    Ok((f, path))
}

/// Fsyncs every directory of the restored tree, deepest first, then the root, so
/// that every file's name is durable before the swap.
fn sync_tree(root: &Path, manifest: &Manifest) -> Result<()> {
    let mut dirs: HashSet<PathBuf> = manifest.dirs.iter().map(|d| root.join(d)).collect();
    for file in &manifest.files {
        let mut at = root.join(&file.path);
        while at.pop() && at.starts_with(root) && at != root {
            dirs.insert(at.clone());
        }
    }
    let mut dirs: Vec<PathBuf> = dirs.into_iter().collect();
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for dir in &dirs {
        sync_dir(dir)?;
    }
    sync_dir(root)
}

/// Counts the archive bytes read, for the progress bar.
struct Counted<'a, R> {
    inner: R,
    progress: &'a Progress,
}

impl<R: Read> Read for Counted<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add(n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dump::{DumpOptions, dump};
    use crate::manifest::{FORMAT, FORMAT_VERSION};
    use crate::verify::tests::batch;

    /// A small data directory: one topic with a two-batch segment, a pepper.
    fn data_dir(root: &Path) -> PathBuf {
        let d = root.join("data");
        fs::create_dir_all(d.join("topics")).unwrap();
        fs::create_dir_all(d.join("partitions/a-0")).unwrap();
        let meta = r#"{"name":"a","partitions":1,"config":{},"created_ms":0}"#;
        fs::write(d.join("topics/a.json"), meta).unwrap();
        fs::write(d.join("partitions/FORMAT"), b"es-log 2\n").unwrap();
        let segment = [batch(0, 3), batch(3, 2)].concat();
        fs::write(d.join("partitions/a-0/00000000000000000000.log"), segment).unwrap();
        fs::write(d.join("auth-pepper"), b"pepper-secret-bytes").unwrap();
        fs::set_permissions(d.join("auth-pepper"), fs::Permissions::from_mode(0o600)).unwrap();
        d
    }

    fn dumped(root: &Path) -> (PathBuf, Vec<u8>) {
        let d = data_dir(root);
        let out = root.join("backup.tar");
        let options = DumpOptions {
            data_dir: d.clone(),
            out: out.clone(),
            topics_prefix: None,
            journal_dir: None,
            replay_journal: false,
            progress: false,
        };
        let report = dump(&options).unwrap();
        assert_eq!(report.manifest.topics[0].partitions[0].log_end, 5);
        (d, fs::read(out).unwrap())
    }

    fn sha(data: &[u8]) -> String {
        let mut h = Hasher::default();
        h.update(data);
        h.finish()
    }

    /// A manifest declaring `files` (path, content).
    fn manifest_of(files: &[(&str, &[u8])]) -> Manifest {
        Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            es_version: "test".into(),
            created: "2026-12-01T13:11:23Z".into(),
            topics_prefix: None,
            topics: vec![],
            dirs: vec![],
            files: files
                .iter()
                .map(|(p, d)| FileEntry {
                    path: (*p).into(),
                    size: d.len() as u64,
                    sha256: sha(d),
                    mode: 0o644,
                })
                .collect(),
        }
    }

    /// A header whose name bytes are written raw, as a hostile archive would.
    fn raw_header(name: &[u8], size: u64, kind: tar::EntryType) -> tar::Header {
        let mut h = tar::Header::new_old();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_size(size);
        h.set_mode(0o644);
        h.set_entry_type(kind);
        h.set_cksum();
        h
    }

    /// An archive of the manifest, then `entries` (name, kind, declared size, data).
    fn archive(manifest: &Manifest, entries: &[(&[u8], tar::EntryType, u64, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        let json = serde_json::to_vec(manifest).unwrap();
        b.append(
            &raw_header(MANIFEST_NAME.as_bytes(), json.len() as u64, tar::EntryType::Regular),
            json.as_slice(),
        )
        .unwrap();
        for (name, kind, size, data) in entries {
            b.append(&raw_header(name, *size, *kind), *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    fn refused(bytes: &[u8]) -> ToolsError {
        let dir = tempfile::tempdir().unwrap();
        let err = extract(bytes, Some(dir.path())).unwrap_err();
        let err2 = extract(bytes, None).unwrap_err();
        assert_eq!(err.to_string(), err2.to_string(), "verify-only and restore refuse alike");
        err
    }

    const REG: tar::EntryType = tar::EntryType::Regular;

    #[test]
    fn a_symlink_entry_is_refused() {
        let m = manifest_of(&[("x", b"")]);
        let err = refused(&archive(&m, &[(b"x", tar::EntryType::Symlink, 0, b"")]));
        assert!(matches!(&err, ToolsError::NotRegularFile { kind, .. } if kind == "symbolic link"), "{err}");
        let err = refused(&archive(&m, &[(b"x", tar::EntryType::Link, 0, b"")]));
        assert!(matches!(&err, ToolsError::NotRegularFile { kind, .. } if kind == "hard link"), "{err}");
        let err = refused(&archive(&m, &[(b"x", tar::EntryType::Char, 0, b"")]));
        assert!(matches!(&err, ToolsError::NotRegularFile { .. }), "{err}");
    }

    #[test]
    fn dot_dot_and_absolute_paths_are_refused() {
        let m = manifest_of(&[("x", b"1")]);
        for name in [&b"../x"[..], b"a/../../x", b"/etc/x"] {
            let err = refused(&archive(&m, &[(name, REG, 1, b"1")]));
            assert!(matches!(err, ToolsError::UnsafePath { .. }), "{err}");
        }
        let mut m = manifest_of(&[("x", b"1")]);
        m.files[0].path = "../x".into();
        let err = refused(&archive(&m, &[(b"x", REG, 1, b"1")]));
        assert!(matches!(err, ToolsError::UnsafePath { .. }), "a manifest naming ../x: {err}");
    }

    #[test]
    fn a_duplicate_entry_is_refused() {
        let m = manifest_of(&[("x", b"1")]);
        let err = refused(&archive(&m, &[(b"x", REG, 1, b"1"), (b"x", REG, 1, b"1")]));
        assert!(matches!(err, ToolsError::Duplicate { .. }), "{err}");
    }

    #[test]
    fn an_undeclared_file_is_refused() {
        let m = manifest_of(&[("x", b"1")]);
        let err = refused(&archive(&m, &[(b"x", REG, 1, b"1"), (b"y", REG, 1, b"2")]));
        assert!(matches!(&err, ToolsError::Undeclared { path } if path == "y"), "{err}");
    }

    #[test]
    fn a_size_mismatch_is_refused_before_reading() {
        let m = manifest_of(&[("x", b"1234")]);
        let err = refused(&archive(&m, &[(b"x", REG, 3, b"123")]));
        assert!(matches!(err, ToolsError::SizeMismatch { declared: 4, found: 3, .. }), "{err}");
    }

    #[test]
    fn a_hash_mismatch_is_refused() {
        let m = manifest_of(&[("x", b"1234")]);
        let err = refused(&archive(&m, &[(b"x", REG, 4, b"1235")]));
        assert!(matches!(&err, ToolsError::HashMismatch { path, .. } if path == "x"), "{err}");
    }

    #[test]
    fn a_bad_batch_crc_is_refused_even_when_the_hash_matches() {
        let mut segment = [batch(0, 3), batch(3, 2)].concat();
        let last = segment.len() - 1;
        segment[last] ^= 0x10;
        let path = "partitions/a-0/00000000000000000000.log";
        let m = manifest_of(&[(path, &segment)]);
        let err = refused(&archive(&m, &[(path.as_bytes(), REG, segment.len() as u64, &segment)]));
        assert!(matches!(&err, ToolsError::BadBatch { reason, .. } if reason.contains("crc")), "{err}");
    }

    #[test]
    fn offset_ranges_that_disagree_with_the_segments_are_refused() {
        let segment = [batch(0, 3), batch(3, 2)].concat();
        let path = "partitions/a-0/00000000000000000000.log";
        let mut m = manifest_of(&[(path, &segment)]);
        let partition = crate::manifest::PartitionEntry {
            partition: 0,
            dir: "partitions/a-0".into(),
            log_start: 0,
            log_end: 5,
            segments: 1,
            bytes: segment.len() as u64,
        };
        m.topics = vec![crate::manifest::TopicEntry { name: "a".into(), partitions: vec![partition] }];
        let entries = [(path.as_bytes(), REG, segment.len() as u64, segment.as_slice())];
        extract(archive(&m, &entries).as_slice(), None).unwrap();
        m.topics[0].partitions[0].log_end = 9;
        let err = refused(&archive(&m, &entries));
        assert!(err.to_string().contains("holds offsets [0, 5), the manifest says [0, 9)"), "{err}");
    }

    #[test]
    fn no_manifest_first_is_refused() {
        let mut b = tar::Builder::new(Vec::new());
        b.append(&raw_header(b"topics/a.json", 1, REG), &b"1"[..]).unwrap();
        let err = refused(&b.into_inner().unwrap());
        assert!(matches!(err, ToolsError::NoManifest { .. }), "{err}");
        let err = refused(&[]);
        assert!(matches!(err, ToolsError::NoManifest { .. }), "{err}");
    }

    #[test]
    fn a_truncated_archive_is_refused_wherever_it_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let (_, bytes) = dumped(dir.path());
        // Every 512-byte block boundary and a few cuts inside blocks, short of the
        // end-of-archive blocks (a cut there loses nothing).
        let end = bytes.len() - 1024;
        let mut cuts: Vec<usize> = (0..end).step_by(512).collect();
        cuts.extend([100, 700, 1500, end - 3]);
        for cut in cuts {
            let err = extract(&bytes[..cut], None).expect_err(&format!("a cut at {cut} was accepted"));
            assert!(
                matches!(
                    err,
                    ToolsError::Truncated { .. }
                        | ToolsError::Missing { .. }
                        | ToolsError::ArchiveDamaged { .. }
                        | ToolsError::NoManifest { .. }
                        | ToolsError::BadManifest { .. }
                ),
                "cut at {cut}: {err}"
            );
        }
    }

    fn restore_into(archive: &Path, target: &Path, keep_old: bool) -> Result<RestoreReport> {
        restore(&RestoreOptions {
            archive: archive.to_owned(),
            data_dir: target.to_owned(),
            verify_only: false,
            keep_old,
            progress: false,
        })
    }

    fn listing(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> =
            fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        names.sort();
        names
    }

    #[test]
    fn a_dump_restores_byte_for_byte_and_keeps_the_old_directory() {
        let dir = tempfile::tempdir().unwrap();
        let (source, _) = dumped(dir.path());
        let target = dir.path().join("restored");
        let report = restore_into(&dir.path().join("backup.tar"), &target, true).unwrap();
        assert!(report.kept.is_none(), "nothing was there to keep");
        for rel in
            ["topics/a.json", "partitions/FORMAT", "partitions/a-0/00000000000000000000.log", "auth-pepper"]
        {
            assert_eq!(fs::read(source.join(rel)).unwrap(), fs::read(target.join(rel)).unwrap(), "{rel}");
        }
        let mode = fs::metadata(target.join("auth-pepper")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the pepper keeps its mode");
        fs::write(target.join("marker"), b"old").unwrap();
        let report = restore_into(&dir.path().join("backup.tar"), &target, true).unwrap();
        let kept = report.kept.expect("the old directory is kept");
        assert_eq!(fs::read(kept.join("marker")).unwrap(), b"old");
        assert!(!target.join("marker").exists(), "the target is the archive's content only");
        fs::remove_dir_all(&kept).unwrap();
        fs::write(target.join("marker"), b"old").unwrap();
        assert!(restore_into(&dir.path().join("backup.tar"), &target, false).unwrap().kept.is_none());
        assert!(!target.join("marker").exists());
        assert_eq!(
            listing(dir.path()),
            ["backup.tar", "data", "restored"],
            "--no-keep leaves nothing beside"
        );
    }

    #[test]
    fn a_refused_archive_replaces_nothing_and_leaves_no_staging() {
        let dir = tempfile::tempdir().unwrap();
        let (_, mut bytes) = dumped(dir.path());
        let at = bytes.windows(13).position(|w| w == b"pepper-secret").expect("the pepper's bytes");
        bytes[at] ^= 1;
        let tampered = dir.path().join("tampered.tar");
        fs::write(&tampered, &bytes).unwrap();
        let target = dir.path().join("live");
        fs::create_dir_all(&target).unwrap();
        fs::write(target.join("marker"), b"live").unwrap();
        let err = restore_into(&tampered, &target, true).unwrap_err();
        assert!(matches!(&err, ToolsError::HashMismatch { path, .. } if path == "auth-pepper"), "{err}");
        assert_eq!(fs::read(target.join("marker")).unwrap(), b"live");
        assert_eq!(listing(dir.path()), ["backup.tar", "data", "live", "tampered.tar"]);
    }

    #[test]
    fn a_directory_in_use_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let (source, _) = dumped(dir.path());
        let held = lock::lock(&source).unwrap();
        let err = restore_into(&dir.path().join("backup.tar"), &source, true).unwrap_err();
        assert!(matches!(err, ToolsError::DataDirInUse { .. }), "{err}");
        drop(held);
    }
}
