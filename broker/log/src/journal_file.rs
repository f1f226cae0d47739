//! The journal's files on disk: their names, the record format, reading them back,
//! and creating or recycling them.
//!
//! A file is `<seq, 20 digits>.journal`. It starts with a 16-byte header,
//! [`FILE_MAGIC`] then the file's *salt* (u64 LE, random, never 0), and holds
//! records: `[body length u32][crc32c of body u32][salt u64][body]`, the body being
//! `[kind u8][name length u16][partition name][offset u64][leader epoch i32][batch]`.
//!
//! Files are recycled: once a checkpoint no longer needs a file, it gets a new salt
//! and becomes the spare ([`SPARE_FILE`]), which the next rotation renames into
//! place instead of preallocating a new file. Overwriting blocks that were written
//! before makes each journal `fdatasync` a pure data flush, where a fresh
//! preallocated file makes the filesystem log the conversion of its unwritten
//! extents at every sync. A recycled file still holds its previous use's records
//! past the new ones: they carry the old salt, so a reader stops there, as it stops
//! at the zeros of a fresh file. The salt is random so that no record can be
//! mistaken for one of this use, not even one crafted inside a producer's batch.
//!
//! Files written before recycling (no header, 8-byte record headers without a
//! salt) are still read, so a journal left by a crash of an older build replays.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use es_core::{LeaderEpoch, limits};

use crate::error::{IoContext, LogError, Result};
use crate::files;

/// What a journal file's name ends with, after its 20-digit sequence number.
const JOURNAL_SUFFIX: &str = ".journal";
/// The recycled file waiting to become the next journal file. Not a journal file:
/// replay and [`pending_files`] never read it.
pub(crate) const SPARE_FILE: &str = "spare.journal-recycle";
/// The first bytes of a journal file. As a record length of the older format it
/// would be over any record's limit, so the two formats cannot be confused.
const FILE_MAGIC: [u8; 8] = [0xFF, 0xFF, 0xFF, 0xFF, b'e', b's', b'J', b'2'];
/// Magic and salt.
pub(crate) const FILE_HEADER_LEN: u64 = 16;
/// Length, CRC and salt in front of every record body.
pub(crate) const HEADER_LEN: usize = 16;
/// Length and CRC: the record header of files written before recycling.
const V1_HEADER_LEN: usize = 8;
/// Kind, name length, offset and epoch: the body bytes besides name and batch.
const BODY_FIXED_LEN: usize = 1 + 2 + 8 + 4;
const KIND_BATCH: u8 = 1;
const KIND_TRUNCATE: u8 = 2;

/// One journal record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A batch appended to `partition`, as stored (base offset and epoch stamped).
    Batch { partition: String, base_offset: u64, epoch: LeaderEpoch, bytes: Vec<u8> },
    /// Every record of `partition` at or after `offset` was discarded. Also written
    /// (at offset 0) when a partition directory is created, so that a replay never
    /// applies records of an earlier partition of the same name.
    Truncate { partition: String, offset: u64 },
    /// Every Raft entry of `partition` from Raft index `index` on (the batch at
    /// `offset`) was discarded; entries before it at the same offset (control
    /// batches take none) stay. A truncate record with the index as its payload.
    TruncateEntries { partition: String, offset: u64, index: u64 },
}

/// Appends a batch record; the base offset and epoch are read from the stamped
/// batch (Kafka v2: base offset at byte 0, partition leader epoch at byte 12). The
/// salt is left 0: [`stamp`] sets it when the records go to a file.
pub(crate) fn encode_batch(out: &mut Vec<u8>, partition: &str, batch: &[u8]) {
    let base = u64::from_be_bytes(batch[0..8].try_into().expect("8 bytes"));
    let epoch = i32::from_be_bytes(batch[12..16].try_into().expect("4 bytes"));
    encode(out, KIND_BATCH, partition, base, epoch, batch);
}

pub(crate) fn encode_truncate(out: &mut Vec<u8>, partition: &str, offset: u64) {
    encode(out, KIND_TRUNCATE, partition, offset, 0, &[]);
}

pub(crate) fn encode_truncate_entries(out: &mut Vec<u8>, partition: &str, offset: u64, index: u64) {
    encode(out, KIND_TRUNCATE, partition, offset, 0, &index.to_le_bytes());
}

fn encode(out: &mut Vec<u8>, kind: u8, partition: &str, offset: u64, epoch: i32, payload: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&[0; HEADER_LEN]);
    out.push(kind);
    out.extend_from_slice(&(partition.len() as u16).to_le_bytes());
    out.extend_from_slice(partition.as_bytes());
    out.extend_from_slice(&offset.to_le_bytes());
    out.extend_from_slice(&epoch.to_le_bytes());
    out.extend_from_slice(payload);
    let body = &out[start + HEADER_LEN..];
    let (len, crc) = (body.len() as u32, crc32c::crc32c(body));
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

/// Sets the salt of every record in `records` (encoded back to back) to the salt of
/// the file they are about to be written to. The salt is not under the CRC: a reader
/// compares it with the file's, and any other value ends the file there.
pub(crate) fn stamp(records: &mut [u8], salt: u64) {
    let mut at = 0;
    while at < records.len() {
        let len = u32::from_le_bytes(records[at..at + 4].try_into().expect("4 bytes")) as usize;
        records[at + 8..at + 16].copy_from_slice(&salt.to_le_bytes());
        at += HEADER_LEN + len;
    }
    debug_assert_eq!(at, records.len(), "records end on a record boundary");
}

/// Parses a CRC-checked body.
fn decode_body(body: &[u8]) -> std::result::Result<Entry, &'static str> {
    if body.len() < BODY_FIXED_LEN {
        return Err("record body too short");
    }
    let kind = body[0];
    let name_len = usize::from(u16::from_le_bytes([body[1], body[2]]));
    if name_len > limits::JOURNAL_NAME_BYTES_MAX || body.len() < BODY_FIXED_LEN + name_len {
        return Err("partition name runs past the record");
    }
    let name = std::str::from_utf8(&body[3..3 + name_len]).map_err(|_| "partition name is not UTF-8")?;
    let at = 3 + name_len;
    let offset = u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
    let epoch = i32::from_le_bytes(body[at + 8..at + 12].try_into().expect("4 bytes"));
    let payload = &body[at + 12..];
    let partition = name.to_owned();
    match kind {
        KIND_BATCH if payload.len() >= 16 => Ok(Entry::Batch {
            partition,
            base_offset: offset,
            epoch: LeaderEpoch(epoch),
            bytes: payload.to_vec(),
        }),
        KIND_TRUNCATE if payload.is_empty() => Ok(Entry::Truncate { partition, offset }),
        KIND_TRUNCATE if payload.len() == 8 => Ok(Entry::TruncateEntries {
            partition,
            offset,
            index: u64::from_le_bytes(payload.try_into().expect("8 bytes")),
        }),
        _ => Err("unknown record kind or malformed payload"),
    }
}

/// What reading the next record found.
#[derive(Debug)]
pub(crate) enum Next {
    Entry(Entry),
    /// The written part of the file ends here: end of file, preallocated zeros, or a
    /// record of the file's previous use (another salt).
    End,
    /// A record of this file that is cut off or fails its CRC: the torn tail of a
    /// crashed round.
    Torn(String),
}

/// Reads the records of one journal file in order.
pub(crate) struct RecordReader {
    file: BufReader<File>,
    /// The file position of the next record.
    pub position: u64,
    len: u64,
    /// The file's salt; `None` for a file of the older format.
    salt: Option<u64>,
}

impl RecordReader {
    pub fn open(path: &Path) -> Result<RecordReader> {
        let mut file = File::open(path).ctx(|| format!("opening {}", path.display()))?;
        let len = file.metadata().ctx(|| format!("reading size of {}", path.display()))?.len();
        let salt = read_salt(&file).ctx(|| format!("reading {}", path.display()))?;
        let position = if salt.is_some() { FILE_HEADER_LEN } else { 0 };
        file.seek(SeekFrom::Start(position)).ctx(|| format!("reading {}", path.display()))?;
        Ok(RecordReader { file: BufReader::with_capacity(1 << 20, file), position, len, salt })
    }

    /// The salt records of this file carry (`None`: the older format).
    #[cfg(test)]
    pub fn salt(&self) -> Option<u64> {
        self.salt
    }

    pub fn next_record(&mut self) -> io::Result<Next> {
        if self.position == self.len {
            return Ok(Next::End);
        }
        let header_len = if self.salt.is_some() { HEADER_LEN } else { V1_HEADER_LEN };
        if self.position + header_len as u64 > self.len {
            // No record header fits: a file filled to within a header of its end
            // (replay goes on to the next file). In a recycled file that space may
            // hold anything, and a record of this use never starts there: rounds
            // are written and synced whole, so a crash that tears one leaves the
            // file no longer than the write made it. In the older format it holds
            // preallocated zeros, and anything else is a torn header.
            if self.salt.is_some() {
                return Ok(Next::End);
            }
            let mut rest = Vec::new();
            self.file.read_to_end(&mut rest)?;
            if rest.iter().all(|b| *b == 0) {
                return Ok(Next::End);
            }
            return Ok(Next::Torn("record header cut off".into()));
        }
        let mut header = [0u8; HEADER_LEN];
        self.file.read_exact(&mut header[..header_len])?;
        let body_len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as u64;
        let crc = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
        if body_len == 0 && crc == 0 {
            return Ok(Next::End);
        }
        if let Some(salt) = self.salt
            && u64::from_le_bytes(header[8..16].try_into().expect("8 bytes")) != salt
        {
            return Ok(Next::End);
        }
        let max = (limits::BATCH_BYTES_MAX_HARD + limits::JOURNAL_NAME_BYTES_MAX + BODY_FIXED_LEN) as u64;
        if body_len > max || self.position + header_len as u64 + body_len > self.len {
            return Ok(Next::Torn(format!("record of {body_len} bytes runs past the end of the file")));
        }
        let mut body = vec![0u8; body_len as usize];
        self.file.read_exact(&mut body)?;
        if crc32c::crc32c(&body) != crc {
            return Ok(Next::Torn("record fails its CRC".into()));
        }
        let entry = match decode_body(&body) {
            Ok(e) => e,
            Err(reason) => return Ok(Next::Torn(reason.into())),
        };
        self.position += header_len as u64 + body_len;
        Ok(Next::Entry(entry))
    }
}

/// The salt in `file`'s header, or `None` when it has none (the older format, or a
/// fresh file whose header a crash kept from reaching the disk: its zeros read as
/// an empty file of the older format).
fn read_salt(file: &File) -> io::Result<Option<u64>> {
    let mut header = [0u8; FILE_HEADER_LEN as usize];
    match file.read_exact_at(&mut header, 0) {
        Ok(()) if header[..8] == FILE_MAGIC => {
            Ok(Some(u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"))))
        }
        Ok(()) => Ok(None),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes a file header with a new random salt, so that none of the file's records
/// reads as one of the next use.
fn write_header(file: &File) -> io::Result<u64> {
    let salt = loop {
        let mut bytes = [0u8; 8];
        rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty())?;
        let salt = u64::from_le_bytes(bytes);
        if salt != 0 {
            break salt;
        }
    };
    let mut header = [0u8; FILE_HEADER_LEN as usize];
    header[..8].copy_from_slice(&FILE_MAGIC);
    header[8..].copy_from_slice(&salt.to_le_bytes());
    file.write_all_at(&header, 0)?;
    Ok(salt)
}

/// `<dir>/<seq, 20 digits>.journal`.
pub(crate) fn file_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(format!("{seq:020}{JOURNAL_SUFFIX}"))
}

/// The journal files in `dir`, oldest first.
pub(crate) fn list_files(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(LogError::io(format!("listing {}", dir.display()), e)),
    };
    for entry in entries {
        let entry = entry.ctx(|| format!("listing {}", dir.display()))?;
        let name = entry.file_name();
        let Some(stem) = name.to_str().and_then(|n| n.strip_suffix(JOURNAL_SUFFIX)) else {
            continue;
        };
        if stem.len() == 20
            && let Ok(seq) = stem.parse::<u64>()
        {
            out.push((seq, entry.path()));
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The journal files in `dir`, oldest first: a journal left by a crash, which the
/// next [`crate::LogManager::new`] replays. A clean shutdown leaves none (at most the
/// spare, which holds nothing to replay), so tools that read a stopped broker's data
/// directory (es-tools dump) check this first.
pub fn pending_files(dir: &Path) -> Result<Vec<PathBuf>> {
    Ok(list_files(dir)?.into_iter().map(|(_, path)| path).collect())
}

/// A journal file ready for records: where they start and the salt they carry.
pub(crate) struct Opened {
    pub file: File,
    pub salt: u64,
}

/// Creates and preallocates journal file `seq`, writes its header and makes both
/// and its name durable. `enospc` stands in for a disk without the space (tests).
pub(crate) fn create_file(dir: &Path, seq: u64, bytes: u64, enospc: bool) -> Result<Opened> {
    let path = file_path(dir, seq);
    let file = OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .ctx(|| format!("creating {}", path.display()))?;
    let allocated = if enospc {
        Err(rustix::io::Errno::NOSPC)
    } else {
        rustix::fs::fallocate(&file, rustix::fs::FallocateFlags::empty(), 0, bytes)
    };
    match allocated {
        Ok(()) => {}
        // Filesystems without fallocate still work; writes may then hit ENOSPC.
        Err(rustix::io::Errno::OPNOTSUPP) => {}
        Err(e) => {
            drop(file);
            let _ = files::remove_if_exists(&path);
            return Err(LogError::io(format!("preallocating {}", path.display()), e.into()));
        }
    }
    let salt = write_header(&file).ctx(|| format!("writing {}", path.display()))?;
    file.sync_all().ctx(|| format!("syncing {}", path.display()))?;
    files::fsync_dir(dir).ctx(|| format!("syncing {}", dir.display()))?;
    Ok(Opened { file, salt })
}

/// Makes the spare, if there is one, journal file `seq`. Its header was rewritten
/// (new salt) and synced before it became the spare, so nothing in it reads as a
/// record. A spare without a valid header is removed and `None` returned.
pub(crate) fn take_spare(dir: &Path, seq: u64) -> Result<Option<Opened>> {
    let spare = dir.join(SPARE_FILE);
    let file = match OpenOptions::new().read(true).write(true).open(&spare) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(LogError::io(format!("opening {}", spare.display()), e)),
    };
    let Some(salt) = read_salt(&file).ctx(|| format!("reading {}", spare.display()))? else {
        tracing::warn!(file = %spare.display(), "the spare journal file has no valid header; removing it");
        files::remove_if_exists(&spare).ctx(|| format!("removing {}", spare.display()))?;
        return Ok(None);
    };
    let path = file_path(dir, seq);
    std::fs::rename(&spare, &path).ctx(|| format!("renaming {} to {}", spare.display(), path.display()))?;
    files::fsync_dir(dir).ctx(|| format!("syncing {}", dir.display()))?;
    Ok(Some(Opened { file, salt }))
}

/// Turns journal file `path`, which no replay needs any more, into the spare: a new
/// salt first, synced, so that once renamed (or if a crash comes before) none of
/// its records reads as a record. The caller syncs the directory.
pub(crate) fn recycle(path: &Path, dir: &Path) -> Result<()> {
    let file = OpenOptions::new().write(true).open(path).ctx(|| format!("opening {}", path.display()))?;
    write_header(&file).ctx(|| format!("writing {}", path.display()))?;
    file.sync_data().ctx(|| format!("syncing {}", path.display()))?;
    let spare = dir.join(SPARE_FILE);
    std::fs::rename(path, &spare).ctx(|| format!("renaming {} to {}", path.display(), spare.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: u64, epoch: i32, len: usize) -> Vec<u8> {
        let mut b = vec![7u8; len];
        b[0..8].copy_from_slice(&base.to_be_bytes());
        b[12..16].copy_from_slice(&epoch.to_be_bytes());
        b
    }

    fn read_all(path: &Path) -> (Vec<Entry>, Next) {
        let mut r = RecordReader::open(path).unwrap();
        let mut out = Vec::new();
        loop {
            match r.next_record().unwrap() {
                Next::Entry(e) => out.push(e),
                other => return (out, other),
            }
        }
    }

    /// A file with a header of `salt` and then `records`, stamped with `salt`.
    fn file_bytes(salt: u64, records: &[u8]) -> Vec<u8> {
        let mut out = FILE_MAGIC.to_vec();
        out.extend_from_slice(&salt.to_le_bytes());
        let mut records = records.to_vec();
        stamp(&mut records, salt);
        out.extend_from_slice(&records);
        out
    }

    #[test]
    fn pending_files_lists_only_journal_files_oldest_first() {
        let dir = tempfile::tempdir().unwrap();
        assert!(pending_files(&dir.path().join("absent")).unwrap().is_empty());
        for name in [
            "00000000000000000002.journal",
            "00000000000000000001.journal",
            "notes.journal",
            "x.tmp",
            SPARE_FILE,
        ] {
            std::fs::write(dir.path().join(name), b"").unwrap();
        }
        let found = pending_files(dir.path()).unwrap();
        let names: Vec<_> = found.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["00000000000000000001.journal", "00000000000000000002.journal"]);
    }

    #[test]
    fn records_round_trip_and_a_flipped_bit_ends_the_journal_there() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = Vec::new();
        encode_batch(&mut buf, "t-0", &batch(5, 3, 80));
        let first_len = buf.len();
        encode_truncate(&mut buf, "t-1", 9);
        encode_batch(&mut buf, "t-0", &batch(6, 3, 40));
        let buf = file_bytes(0x5eed, &buf);
        let first_end = FILE_HEADER_LEN as usize + first_len;
        let path = dir.path().join("a.journal");
        std::fs::write(&path, &buf).unwrap();
        let (entries, end) = read_all(&path);
        assert!(matches!(end, Next::End));
        assert_eq!(entries.len(), 3);
        assert_eq!(
            entries[0],
            Entry::Batch {
                partition: "t-0".into(),
                base_offset: 5,
                epoch: LeaderEpoch(3),
                bytes: batch(5, 3, 80)
            }
        );
        assert_eq!(entries[1], Entry::Truncate { partition: "t-1".into(), offset: 9 });
        // Flips in the second record (34 bytes): length, CRC, kind, name, offset, epoch.
        for at in [0, 5, 17, 20, 28, 33].map(|d| first_end + d) {
            let mut bad = buf.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            let (entries, end) = read_all(&path);
            assert_eq!(entries.len(), 1, "flip at {at}: only the record before the flip survives");
            assert!(matches!(end, Next::Torn(_)), "flip at {at}: {end:?}");
        }
        // A flip in its salt makes it no record of this file: the file ends there.
        let mut bad = buf.clone();
        bad[first_end + 12] ^= 0x10;
        std::fs::write(&path, &bad).unwrap();
        let (entries, end) = read_all(&path);
        assert_eq!(entries.len(), 1);
        assert!(matches!(end, Next::End), "{end:?}");
    }

    #[test]
    fn every_cut_of_the_last_record_reads_as_a_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        let mut buf = Vec::new();
        encode_batch(&mut buf, "p", &batch(0, 1, 30));
        let whole = FILE_HEADER_LEN as usize + buf.len();
        encode_batch(&mut buf, "p", &batch(1, 1, 30));
        let buf = file_bytes(9, &buf);
        let path = dir.path().join("a.journal");
        // Cut inside the body: torn. Inside the header, no record of this file starts.
        for cut in whole + 1..buf.len() {
            std::fs::write(&path, &buf[..cut]).unwrap();
            let (entries, end) = read_all(&path);
            assert_eq!(entries.len(), 1, "cut at {cut}");
            match cut - whole {
                ..HEADER_LEN => assert!(matches!(end, Next::End), "cut at {cut}: {end:?}"),
                _ => assert!(matches!(end, Next::Torn(_)), "cut at {cut}: {end:?}"),
            }
        }
        // Preallocated zeros after the last record read as the end, not as damage.
        let mut padded = buf.clone();
        padded.extend_from_slice(&[0u8; 64]);
        std::fs::write(&path, &padded).unwrap();
        let (entries, end) = read_all(&path);
        assert_eq!(entries.len(), 2);
        assert!(matches!(end, Next::End));
    }

    /// A recycled file: the new use's records, then whole records of the previous
    /// use (its salt), or any bytes at all where no header fits.
    #[test]
    fn a_recycled_file_ends_where_its_previous_use_shows() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.journal");
        let mut old = Vec::new();
        for i in 0..6 {
            encode_truncate(&mut old, "gone", i);
            encode_batch(&mut old, "p", &batch(i, 1, 50));
        }
        std::fs::write(&path, file_bytes(1, &old)).unwrap();
        assert_eq!(read_all(&path).0.len(), 12);
        // Recycled: a new header, then two new records over the old ones.
        let f = OpenOptions::new().write(true).open(&path).unwrap();
        let salt = write_header(&f).unwrap();
        assert_eq!(read_all(&path).0.len(), 0, "a new salt: none of the old records is read");
        let mut new = Vec::new();
        encode_batch(&mut new, "q", &batch(100, 2, 70));
        encode_batch(&mut new, "q", &batch(101, 2, 20));
        stamp(&mut new, salt);
        f.write_all_at(&new, FILE_HEADER_LEN).unwrap();
        let (entries, end) = read_all(&path);
        assert!(matches!(end, Next::End), "{end:?}");
        let offsets: Vec<_> = entries
            .iter()
            .map(|e| match e {
                Entry::Batch { partition, base_offset, .. } => (partition.as_str(), *base_offset),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(offsets, [("q", 100), ("q", 101)]);
        // The older format still reads (no header, 8-byte record headers).
        let mut v1 = Vec::new();
        for (name, offset) in [("a", 4u64), ("b", 7)] {
            let mut rec = Vec::new();
            encode_truncate(&mut rec, name, offset);
            v1.extend_from_slice(&rec[..8]);
            v1.extend_from_slice(&rec[HEADER_LEN..]);
        }
        v1.extend_from_slice(&[0; 40]);
        std::fs::write(&path, &v1).unwrap();
        let (entries, end) = read_all(&path);
        assert!(matches!(end, Next::End), "{end:?}");
        assert_eq!(entries[1], Entry::Truncate { partition: "b".into(), offset: 7 });
    }

    #[test]
    fn the_spare_is_taken_with_the_salt_it_was_given() {
        let dir = tempfile::tempdir().unwrap();
        assert!(take_spare(dir.path(), 3).unwrap().is_none(), "no spare yet");
        let Opened { file, salt } = create_file(dir.path(), 1, 4096, false).unwrap();
        let mut rec = Vec::new();
        encode_truncate(&mut rec, "p", 0);
        stamp(&mut rec, salt);
        file.write_all_at(&rec, FILE_HEADER_LEN).unwrap();
        assert_eq!(read_all(&file_path(dir.path(), 1)).0.len(), 1);
        recycle(&file_path(dir.path(), 1), dir.path()).unwrap();
        assert!(list_files(dir.path()).unwrap().is_empty());
        let taken = take_spare(dir.path(), 2).unwrap().expect("the spare");
        assert_ne!(taken.salt, salt, "a recycled file gets a new salt");
        assert!(!dir.path().join(SPARE_FILE).exists());
        assert_eq!(
            read_all(&file_path(dir.path(), 2)).0.len(),
            0,
            "its old record is not read in its next use"
        );
        assert!(take_spare(dir.path(), 3).unwrap().is_none(), "one spare, taken once");
        // A spare with no header (a stray file) is dropped, not used.
        std::fs::write(dir.path().join(SPARE_FILE), [1u8; 64]).unwrap();
        assert!(take_spare(dir.path(), 3).unwrap().is_none());
        assert!(!dir.path().join(SPARE_FILE).exists());
    }
}
