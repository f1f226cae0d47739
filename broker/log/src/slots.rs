//! A small value rewritten often and durably in place: two sector-sized slots,
//! written in turn, each with a sequence number and a CRC-32C. A write is one
//! `pwrite` and one `fdatasync` into blocks the file already has (no temp file,
//! rename or directory fsync, which cost a journal commit each), and a torn write
//! spoils only the slot it was writing: the other one still holds the value before.
//! The Raft committed id is kept this way (docs/storage.md, "The Raft log").

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::files;

/// One slot: a 512-byte sector, which storage writes whole or not at all in
/// practice; the CRC catches the rest.
pub(crate) const SLOT_BYTES: usize = 512;
const MAGIC: [u8; 4] = *b"ESs1";
/// Magic, sequence number, value length.
const HEADER_BYTES: usize = 4 + 8 + 4;
const CRC_BYTES: usize = 4;
/// The largest value a slot holds.
pub(crate) const VALUE_BYTES_MAX: usize = SLOT_BYTES - HEADER_BYTES - CRC_BYTES;

/// An open slot file and the sequence number of its newest value.
#[derive(Debug)]
pub(crate) struct SlotFile {
    file: File,
    seq: u64,
}

impl SlotFile {
    /// Opens the slot file at `path`, creating it durably (both slots empty, the
    /// directory entry synced) when it is missing.
    pub(crate) fn open(path: &Path) -> io::Result<SlotFile> {
        if !path.exists() {
            files::write_atomic(path, &[0u8; 2 * SLOT_BYTES])?;
        }
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let seq = newest(&file)?.map_or(0, |(seq, _)| seq);
        Ok(SlotFile { file, seq })
    }

    /// Writes `value` durably over the older slot.
    pub(crate) fn write(&mut self, value: &[u8]) -> io::Result<()> {
        if value.len() > VALUE_BYTES_MAX {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a slot holds at most {VALUE_BYTES_MAX} bytes, not {}", value.len()),
            ));
        }
        let seq = self.seq + 1;
        self.file.write_all_at(&encode(seq, value), (seq % 2) * SLOT_BYTES as u64)?;
        self.file.sync_data()?;
        self.seq = seq;
        Ok(())
    }
}

/// The newest valid value of the slot file at `path`: `None` when the file is
/// missing or neither slot holds one.
pub(crate) fn read(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match File::open(path) {
        Ok(file) => Ok(newest(&file)?.map(|(_, value)| value)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

fn newest(file: &File) -> io::Result<Option<(u64, Vec<u8>)>> {
    let mut buf = [0u8; 2 * SLOT_BYTES];
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], filled as u64)? {
            0 => break,
            n => filled += n,
        }
    }
    let slots = buf[..filled].chunks_exact(SLOT_BYTES).filter_map(decode);
    Ok(slots.max_by_key(|(seq, _)| *seq))
}

fn encode(seq: u64, value: &[u8]) -> [u8; SLOT_BYTES] {
    let mut slot = [0u8; SLOT_BYTES];
    slot[..4].copy_from_slice(&MAGIC);
    slot[4..12].copy_from_slice(&seq.to_le_bytes());
    slot[12..16].copy_from_slice(&(value.len() as u32).to_le_bytes());
    let end = HEADER_BYTES + value.len();
    slot[HEADER_BYTES..end].copy_from_slice(value);
    let crc = crc32c::crc32c(&slot[..end]);
    slot[end..end + CRC_BYTES].copy_from_slice(&crc.to_le_bytes());
    slot
}

/// A slot's (sequence number, value), `None` when it holds no valid value (never
/// written, or torn).
fn decode(slot: &[u8]) -> Option<(u64, Vec<u8>)> {
    if slot[..4] != MAGIC {
        return None;
    }
    let seq = u64::from_le_bytes(slot[4..12].try_into().ok()?);
    let len = u32::from_le_bytes(slot[12..16].try_into().ok()?) as usize;
    if len > VALUE_BYTES_MAX {
        return None;
    }
    let end = HEADER_BYTES + len;
    let crc = u32::from_le_bytes(slot[end..end + CRC_BYTES].try_into().ok()?);
    (crc32c::crc32c(&slot[..end]) == crc).then(|| (seq, slot[HEADER_BYTES..end].to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_value_survives_reopening_and_a_torn_write_leaves_the_one_before() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("value.slots");
        assert_eq!(read(&path).unwrap(), None, "no file");
        let mut f = SlotFile::open(&path).unwrap();
        assert_eq!(read(&path).unwrap(), None, "both slots empty");
        for v in ["one", "two", "three"] {
            f.write(v.as_bytes()).unwrap();
            assert_eq!(read(&path).unwrap().as_deref(), Some(v.as_bytes()));
        }
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 2 * SLOT_BYTES as u64, "written in place");
        // Reopened, it goes on from the newest sequence number.
        let mut f = SlotFile::open(&path).unwrap();
        f.write(b"four").unwrap();
        assert_eq!(read(&path).unwrap().as_deref(), Some(&b"four"[..]));
        // "four" (sequence 4) is in slot 0; tear it: "three" in slot 1 is read.
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(b"xx", 17).unwrap();
        assert_eq!(read(&path).unwrap().as_deref(), Some(&b"three"[..]));
        // Reopened, the next write takes the torn slot (sequence 4 again) and wins.
        let mut f = SlotFile::open(&path).unwrap();
        f.write(b"five").unwrap();
        assert_eq!(read(&path).unwrap().as_deref(), Some(&b"five"[..]));
    }

    #[test]
    fn a_value_too_large_for_a_slot_is_refused_and_garbage_reads_as_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("value.slots");
        let mut f = SlotFile::open(&path).unwrap();
        let err = f.write(&[b'a'; VALUE_BYTES_MAX + 1]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        f.write(&[b'a'; VALUE_BYTES_MAX]).unwrap();
        assert_eq!(read(&path).unwrap().map(|v| v.len()), Some(VALUE_BYTES_MAX));
        std::fs::write(&path, b"{\"not\":\"slots\"}").unwrap();
        assert_eq!(read(&path).unwrap(), None);
    }
}
