//! File-system helpers with the durability rules spelled out once: atomic replace
//! (temp, fsync, rename, fsync dir), vectored writes, positional reads, and the
//! file names of a segment.

use std::fs::{self, File, OpenOptions};
use std::io::{self, IoSlice, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// `<dir>/<base offset, 20 digits>.<ext>`, so names sort by offset.
pub(crate) fn segment_path(dir: &Path, base_offset: u64, ext: &str) -> PathBuf {
    dir.join(format!("{base_offset:020}.{ext}"))
}

pub(crate) const LOG_EXT: &str = "log";
pub(crate) const INDEX_EXT: &str = "index";
pub(crate) const TIME_INDEX_EXT: &str = "timeindex";
/// Marker: the segment was rewritten by compaction, so its offsets may have gaps.
pub(crate) const COMPACTED_EXT: &str = "compacted";
/// Every file that belongs to one segment.
pub(crate) const SEGMENT_EXTS: [&str; 5] =
    [LOG_EXT, INDEX_EXT, TIME_INDEX_EXT, COMPACTED_EXT, crate::raft_index::RAFT_EXT];
/// Files ending in this are half-written replacements; recovery deletes them.
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// Parses `<20 digits>.log` into its base offset.
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".log")?;
    if stem.len() != 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// Fsyncs a directory so that creates, renames and deletes in it are durable.
pub(crate) fn fsync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

/// Replaces `path` with `bytes` atomically and durably: a crash leaves either the
/// old content or the new, never a mix.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    {
        let mut f = OpenOptions::new().write(true).create(true).truncate(true).open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, path)?;
    fsync_dir(path.parent().unwrap_or(Path::new(".")))
}

/// Writes every chunk with as few `writev` calls as the kernel allows.
pub(crate) fn write_all_vectored(file: &mut File, chunks: &[Vec<u8>]) -> io::Result<()> {
    // Linux takes at most IOV_MAX (1024) slices per call.
    for group in chunks.chunks(1024) {
        let mut slices: Vec<IoSlice<'_>> = group.iter().map(|c| IoSlice::new(c)).collect();
        let mut slices = &mut slices[..];
        IoSlice::advance_slices(&mut slices, 0);
        while !slices.is_empty() {
            let n = file.write_vectored(slices)?;
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::WriteZero, "writev wrote nothing"));
            }
            IoSlice::advance_slices(&mut slices, n);
        }
    }
    Ok(())
}

/// Reads up to `len` bytes at `position`; shorter only at end of file.
pub(crate) fn read_at(file: &File, position: u64, len: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let mut filled = 0;
    while filled < len {
        match file.read_at(&mut buf[filled..], position + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(buf)
}

/// Removes a file, treating "already gone" as success.
pub(crate) fn remove_if_exists(path: &Path) -> io::Result<()> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
