//! `es-tools dump`: a stopped broker's data directory into a tar archive, the
//! manifest first. Two passes: the first hashes every file and checks every
//! segment's batches (so the manifest, which leads the archive, is complete), the
//! second streams the files into the archive and checks each hash again, so that a
//! file changed in between is caught rather than archived under a stale hash.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::error::{IoContext, Result, ToolsError};
use crate::layout::{self, Layout, PARTITIONS_DIR};
use crate::limits::COPY_BUFFER_BYTES;
use crate::manifest::{
    FORMAT, FORMAT_VERSION, FileEntry, MANIFEST_NAME, Manifest, PartitionEntry, TopicEntry,
};
use crate::progress::Progress;
use crate::stamp::Stamp;
use crate::verify::{BatchChecker, Hasher, SegmentSpan};
use crate::{lock, verify};

#[derive(Debug, Clone)]
pub struct DumpOptions {
    pub data_dir: PathBuf,
    pub out: PathBuf,
    /// Only user topics whose name starts with this.
    pub topics_prefix: Option<String>,
    /// The broker's `--journal-dir`, when it is not `<data>/partitions/journal`.
    pub journal_dir: Option<PathBuf>,
    /// Replay a journal a crash left behind instead of refusing.
    pub replay_journal: bool,
    pub progress: bool,
}

#[derive(Debug, Clone)]
pub struct DumpReport {
    pub manifest: Manifest,
    /// What the journal replay did, when one ran.
    pub replayed: Option<es_log::JournalReplay>,
    /// Partition directories no topic owns, left out.
    pub orphans: Vec<String>,
}

/// Dumps `options.data_dir` into `options.out` (written as `<out>.partial`, then
/// renamed, so a failed dump never leaves a file that looks complete).
pub fn dump(options: &DumpOptions) -> Result<DumpReport> {
    layout::check_data_dir(&options.data_dir)?;
    check_output(options)?;
    let _lock = lock::lock(&options.data_dir).map_err(|e| match e {
        ToolsError::DataDirInUse { dir } => ToolsError::DumpWhileRunning { dir },
        e => e,
    })?;
    let replayed = settle_journal(options)?;
    let layout = layout::scan(&options.data_dir, options.topics_prefix.as_deref())?;
    let manifest = archive(options, &layout)?;
    Ok(DumpReport { manifest, replayed, orphans: layout.orphans })
}

/// Checks and archives the files of `layout`, read from `options.data_dir` (a
/// stopped broker's data directory, or an online snapshot laid out like one).
pub(crate) fn archive(options: &DumpOptions, layout: &Layout) -> Result<Manifest> {
    let manifest = survey(options, layout)?;
    let partial = partial_path(&options.out);
    let written = write_archive(options, &manifest, &partial);
    if let Err(e) = written {
        let _ = fs::remove_file(&partial);
        return Err(e);
    }
    fs::rename(&partial, &options.out).ctx(|| format!("renaming {} into place", partial.display()))?;
    sync_parent(&options.out)?;
    Ok(manifest)
}

/// Refuses to overwrite a file (an earlier backup, say) and an archive path inside
/// the data directory, which the dump would read itself.
pub(crate) fn check_output(options: &DumpOptions) -> Result<()> {
    if fs::symlink_metadata(&options.out).is_ok() {
        return Err(ToolsError::OutputExists { path: options.out.clone() });
    }
    let data = fs::canonicalize(&options.data_dir).map_err(|_| ToolsError::NotADataDir {
        dir: options.data_dir.clone(),
        reason: "no such directory".into(),
    })?;
    let parent = parent_of(&options.out);
    let out_dir = fs::canonicalize(parent).ctx(|| format!("finding the directory {}", parent.display()))?;
    if out_dir.starts_with(&data) {
        return Err(ToolsError::BadTarget {
            dir: options.out.clone(),
            reason: "the archive would be inside the data directory it dumps; write it elsewhere".into(),
        });
    }
    Ok(())
}

/// A journal a crash left holds acknowledged batches the segments may lack.
fn settle_journal(options: &DumpOptions) -> Result<Option<es_log::JournalReplay>> {
    let partitions = options.data_dir.join(PARTITIONS_DIR);
    let journal_dir = options.journal_dir.clone().unwrap_or_else(|| partitions.join(es_log::JOURNAL_DIR));
    let pending = es_log::pending_journal_files(&journal_dir)?;
    if pending.is_empty() {
        return Ok(None);
    }
    if !options.replay_journal {
        return Err(ToolsError::JournalNotReplayed { dir: journal_dir, files: pending.len() });
    }
    // Opening a manager replays the journal exactly as a broker start does, then
    // removes its files; with the journal off and no housekeeping, nothing else runs.
    let manager = es_log::LogManager::new(
        &partitions,
        es_log::ManagerOptions {
            journal: false,
            journal_dir: Some(journal_dir),
            housekeeping_interval: None,
            ..es_log::ManagerOptions::default()
        },
    )?;
    let report = manager.journal_replay().clone();
    manager.shutdown()?;
    Ok(Some(report))
}

/// The first pass: hashes, sizes, segment checks, offset ranges.
fn survey(options: &DumpOptions, layout: &Layout) -> Result<Manifest> {
    let root = &options.data_dir;
    let total = layout.files.iter().map(|f| fs::metadata(root.join(f)).map_or(0, |m| m.len())).sum();
    let progress = if options.progress { Progress::bytes("checking", total) } else { Progress::hidden() };
    let mut files = Vec::with_capacity(layout.files.len());
    let mut spans: BTreeMap<String, Vec<(String, u64, SegmentSpan)>> = BTreeMap::new();
    for rel in &layout.files {
        let segment = segment_of(rel);
        let (entry, span) = survey_file(root, rel, segment.is_some(), &progress)?;
        if let (Some((dir, name)), Some(span)) = (segment, span) {
            spans.entry(dir.to_owned()).or_default().push((name.to_owned(), entry.size, span));
        }
        files.push(entry);
    }
    progress.finish();
    Ok(Manifest {
        format: FORMAT.into(),
        format_version: FORMAT_VERSION,
        es_version: env!("CARGO_PKG_VERSION").into(),
        created: Stamp::now().rfc3339(),
        topics_prefix: options.topics_prefix.clone(),
        topics: topic_entries(layout, &spans),
        dirs: layout.dirs.clone(),
        files,
    })
}

/// `(partition dir, file name)` when `rel` is a segment log file.
fn segment_of(rel: &str) -> Option<(&str, &str)> {
    let rest = rel.strip_prefix("partitions/")?;
    let (dir, name) = rest.split_once('/')?;
    (name.ends_with(".log") && !name.contains('/')).then_some((dir, name))
}

fn survey_file(
    root: &Path,
    rel: &str,
    segment: bool,
    progress: &Progress,
) -> Result<(FileEntry, Option<SegmentSpan>)> {
    let path = root.join(rel);
    let mut file = File::open(&path).ctx(|| format!("opening {}", path.display()))?;
    let mode = file.metadata().ctx(|| format!("reading {}", path.display()))?.permissions().mode() & 0o777;
    let mut hasher = Hasher::default();
    let mut checker = segment.then(BatchChecker::default);
    let mut buf = vec![0u8; COPY_BUFFER_BYTES];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).ctx(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        if let Some(c) = checker.as_mut() {
            c.push(&buf[..n]).map_err(|f| corrupt(rel, f))?;
        }
        size += n as u64;
        progress.add(n as u64);
    }
    let span = checker.map(BatchChecker::finish).transpose().map_err(|f| corrupt(rel, f))?;
    Ok((FileEntry { path: rel.to_owned(), size, sha256: hasher.finish(), mode }, span))
}

fn corrupt(rel: &str, fault: verify::BatchFault) -> ToolsError {
    ToolsError::CorruptSegment { path: rel.to_owned(), position: fault.position, reason: fault.reason }
}

fn topic_entries(
    layout: &Layout,
    spans: &BTreeMap<String, Vec<(String, u64, SegmentSpan)>>,
) -> Vec<TopicEntry> {
    let mut topics: BTreeMap<&str, Vec<PartitionEntry>> =
        layout.topics.keys().map(|name| (name.as_str(), Vec::new())).collect();
    for (dir, segments) in spans {
        let Some((name, partition)) = layout::owner(dir, &layout.topics) else {
            continue;
        };
        let base_of = |file: &str| file.trim_end_matches(".log").parse::<u64>().unwrap_or(0);
        let log_start = segments.iter().find_map(|(_, _, s)| s.first_offset);
        let log_end = segments.iter().filter_map(|(_, _, s)| s.next_offset).max();
        let first_base = segments.iter().map(|(f, _, _)| base_of(f)).min().unwrap_or(0);
        let last_base = segments.iter().map(|(f, _, _)| base_of(f)).max().unwrap_or(0);
        let entry = PartitionEntry {
            partition,
            dir: format!("partitions/{dir}"),
            log_start: log_start.unwrap_or(first_base),
            log_end: log_end.unwrap_or(last_base),
            segments: segments.len() as u32,
            bytes: segments.iter().map(|(_, size, _)| size).sum(),
        };
        topics.entry(name).or_default().push(entry);
    }
    topics
        .into_iter()
        .map(|(name, mut partitions)| {
            partitions.sort_by_key(|p| p.partition);
            TopicEntry { name: name.to_owned(), partitions }
        })
        .collect()
}

/// The second pass: the manifest, then every file, each hash checked again.
fn write_archive(options: &DumpOptions, manifest: &Manifest, partial: &Path) -> Result<()> {
    let out = File::create(partial).ctx(|| format!("creating {}", partial.display()))?;
    let mut tar = tar::Builder::new(BufWriter::with_capacity(COPY_BUFFER_BYTES, out));
    let mtime = Stamp::now().unix_secs;
    let json = serde_json::to_vec_pretty(manifest).expect("a manifest serializes");
    let what = || format!("writing {}", partial.display());
    tar.append_data(&mut header(json.len() as u64, 0o644, mtime), MANIFEST_NAME, json.as_slice())
        .ctx(what)?;
    let progress = if options.progress {
        Progress::bytes("writing", manifest.total_bytes())
    } else {
        Progress::hidden()
    };
    for entry in &manifest.files {
        let path = options.data_dir.join(&entry.path);
        let file = File::open(&path).ctx(|| format!("opening {}", path.display()))?;
        let mut reader =
            Exact { inner: file, left: entry.size, hasher: Hasher::default(), progress: &progress };
        tar.append_data(&mut header(entry.size, entry.mode, mtime), &entry.path, &mut reader).map_err(
            |e| match e.kind() {
                io::ErrorKind::UnexpectedEof => changed(&entry.path, "it shrank"),
                _ => ToolsError::io(what(), e),
            },
        )?;
        let mut probe = [0u8; 1];
        if reader.inner.read(&mut probe).ctx(|| format!("reading {}", path.display()))? != 0 {
            return Err(changed(&entry.path, "it grew"));
        }
        if reader.hasher.finish() != entry.sha256 {
            return Err(changed(&entry.path, "its sha256 differs from the first pass"));
        }
    }
    progress.finish();
    let mut out = tar.into_inner().ctx(what)?;
    out.flush().ctx(what)?;
    out.get_ref().sync_all().ctx(|| format!("syncing {}", partial.display()))
}

fn changed(path: &str, reason: &str) -> ToolsError {
    ToolsError::ChangedDuringDump { path: path.to_owned(), reason: reason.to_owned() }
}

fn header(size: u64, mode: u32, mtime: u64) -> tar::Header {
    let mut h = tar::Header::new_gnu();
    h.set_entry_type(tar::EntryType::Regular);
    h.set_size(size);
    h.set_mode(mode);
    h.set_mtime(mtime);
    h.set_uid(0);
    h.set_gid(0);
    h
}

/// Reads exactly `left` bytes of a file (an early end is an error, not a short
/// entry), hashing them on the way.
struct Exact<'a> {
    inner: File,
    left: u64,
    hasher: Hasher,
    progress: &'a Progress,
}

impl Read for Exact<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Ok(0);
        }
        let want = buf.len().min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "file shrank"));
        }
        self.hasher.update(&buf[..n]);
        self.left -= n as u64;
        self.progress.add(n as u64);
        Ok(n)
    }
}

fn partial_path(out: &Path) -> PathBuf {
    let mut name = out.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".partial");
    out.with_file_name(name)
}

pub(crate) fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Makes a rename durable.
pub(crate) fn sync_parent(path: &Path) -> Result<()> {
    sync_dir(parent_of(path))
}

pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).ctx(|| format!("syncing the directory {}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data_dir(root: &Path) -> PathBuf {
        let d = root.join("data");
        fs::create_dir_all(d.join("topics")).unwrap();
        fs::create_dir_all(d.join("partitions")).unwrap();
        fs::write(d.join("partitions/FORMAT"), b"es-log 2\n").unwrap();
        d
    }

    fn options(data_dir: PathBuf, out: PathBuf) -> DumpOptions {
        DumpOptions {
            data_dir,
            out,
            topics_prefix: None,
            journal_dir: None,
            replay_journal: false,
            progress: false,
        }
    }

    #[test]
    fn an_existing_archive_or_one_inside_the_data_dir_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let d = data_dir(dir.path());
        fs::write(dir.path().join("old.tar"), b"an earlier backup").unwrap();
        let err = dump(&options(d.clone(), dir.path().join("old.tar"))).unwrap_err();
        assert!(matches!(err, ToolsError::OutputExists { .. }), "{err}");
        assert_eq!(fs::read(dir.path().join("old.tar")).unwrap(), b"an earlier backup");
        let err = dump(&options(d.clone(), d.join("topics/backup.tar"))).unwrap_err();
        assert!(err.to_string().contains("inside the data directory"), "{err}");
    }

    #[test]
    fn a_crash_journal_is_refused_unless_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let d = data_dir(dir.path());
        let journal = d.join("partitions/journal");
        fs::create_dir_all(&journal).unwrap();
        // A preallocated file with no record yet: what a crash right after a rotation leaves.
        fs::write(journal.join("00000000000000000001.journal"), vec![0u8; 4096]).unwrap();
        let out = dir.path().join("backup.tar");
        let err = dump(&options(d.clone(), out.clone())).unwrap_err();
        assert!(matches!(err, ToolsError::JournalNotReplayed { files: 1, .. }), "{err}");
        assert!(!out.exists() && !partial_path(&out).exists());
        let report = dump(&DumpOptions { replay_journal: true, ..options(d.clone(), out.clone()) }).unwrap();
        assert_eq!(report.replayed.map(|r| r.files), Some(1));
        assert!(es_log::pending_journal_files(&journal).unwrap().is_empty());
        assert!(out.exists());
    }
}
