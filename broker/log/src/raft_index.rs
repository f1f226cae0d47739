//! The Raft index of every stored batch (docs/storage.md, "Raft index"). Each batch,
//! data or control, is one Raft entry; a segment's entries have consecutive Raft
//! indexes from the segment's first index. A per-segment sidecar `<base>.raftidx`
//! holds that first index and the byte position of each batch, so an entry is found
//! without a second copy of its bytes. Only the first index cannot be derived from the
//! `.log` file: the positions are rebuilt by a header walk whenever the sidecar is
//! missing, torn or stale (the active segment is always walked on open).
//!
//! ```text
//! sidecar: magic "esraft01" (8 bytes), first index u64 BE, then one u32 BE byte
//!          position per batch, in file order
//! ```

use std::fs::File;
use std::path::Path;

use es_core::batch::BatchHeader;

use crate::error::{IoContext, Result};
use crate::files;

/// The sidecar's file extension.
pub(crate) const RAFT_EXT: &str = "raftidx";
const MAGIC: &[u8; 8] = b"esraft01";
const HEADER_LEN: usize = 16;

/// The Raft entries of one segment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RaftPositions {
    /// The Raft index of the segment's first batch; `None` when no sidecar said
    /// (a segment written before es stored Raft indexes): the partition derives it
    /// from the segment below.
    pub first: Option<u64>,
    /// Byte position of each batch, in order.
    pub positions: Vec<u32>,
}

impl RaftPositions {
    pub fn new(first: u64) -> Self {
        RaftPositions { first: Some(first), positions: Vec::new() }
    }

    pub fn first(&self) -> u64 {
        self.first.unwrap_or(0)
    }

    /// The Raft index after the segment's last batch.
    pub fn end(&self) -> u64 {
        self.first() + self.positions.len() as u64
    }

    /// The byte position of the batch with Raft index `index`, if this segment has it.
    pub fn position(&self, index: u64) -> Option<u64> {
        let ordinal = index.checked_sub(self.first())?;
        self.positions.get(usize::try_from(ordinal).ok()?).map(|p| u64::from(*p))
    }

    fn encode(&self, with_positions: bool) -> Vec<u8> {
        let n = if with_positions { self.positions.len() } else { 0 };
        let mut out = Vec::with_capacity(HEADER_LEN + 4 * n);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.first().to_be_bytes());
        for p in &self.positions[..n] {
            out.extend_from_slice(&p.to_be_bytes());
        }
        out
    }

    /// Writes the sidecar durably: the first index, and the positions when
    /// `with_positions` (sealed segments; an active segment is walked on open anyway).
    pub fn write(&self, dir: &Path, base: u64, with_positions: bool) -> Result<()> {
        let path = files::segment_path(dir, base, RAFT_EXT);
        files::write_atomic(&path, &self.encode(with_positions)).ctx(|| format!("writing {}", path.display()))
    }

    /// Loads a sidecar verified by other means (a cold segment's, checked against
    /// its manifest) without the `.log` file; `None` when it does not decode.
    pub fn load_trusted(dir: &Path, base: u64) -> Option<Self> {
        let bytes = std::fs::read(files::segment_path(dir, base, RAFT_EXT)).ok()?;
        decode(&bytes).map(|(first, positions)| RaftPositions { first: Some(first), positions })
    }

    /// Loads a segment's sidecar and checks it against the `.log` file of `size`
    /// bytes; rebuilds the positions by a header walk when they do not land exactly
    /// on the file end. `trust_positions` is false for the active segment.
    pub fn load(dir: &Path, base: u64, file: &File, size: u64, max: usize, trust_positions: bool) -> Self {
        let path = files::segment_path(dir, base, RAFT_EXT);
        let stored = std::fs::read(&path).ok().and_then(|b| decode(&b));
        let first = stored.as_ref().map(|s| s.0);
        if trust_positions
            && let Some((_, positions)) = &stored
            && ends_at(file, positions, size, max)
        {
            return RaftPositions { first, positions: positions.clone() };
        }
        RaftPositions { first, positions: walk(file, size, max) }
    }
}

fn decode(bytes: &[u8]) -> Option<(u64, Vec<u32>)> {
    if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC || !(bytes.len() - HEADER_LEN).is_multiple_of(4) {
        return None;
    }
    let first = u64::from_be_bytes(bytes[8..16].try_into().ok()?);
    let positions = bytes[HEADER_LEN..]
        .chunks_exact(4)
        .map(|c| u32::from_be_bytes(c.try_into().expect("4 bytes")))
        .collect();
    Some((first, positions))
}

/// Whether `positions` are increasing and the last batch ends exactly at `size`.
fn ends_at(file: &File, positions: &[u32], size: u64, max: usize) -> bool {
    if !positions.windows(2).all(|w| w[0] < w[1]) {
        return false;
    }
    let Some(last) = positions.last() else {
        return size == 0;
    };
    header_at(file, u64::from(*last), max).is_some_and(|h| u64::from(*last) + h.total_len() as u64 == size)
}

/// The position of every batch, by walking headers from the start; stops at the
/// first header that does not parse (the segment's own recovery deals with that).
fn walk(file: &File, size: u64, max: usize) -> Vec<u32> {
    let mut positions = Vec::new();
    let mut pos = 0u64;
    while pos + BatchHeader::LEN as u64 <= size {
        let Some(h) = header_at(file, pos, max) else {
            break;
        };
        if pos + h.total_len() as u64 > size {
            break;
        }
        positions.push(pos as u32);
        pos += h.total_len() as u64;
    }
    positions
}

fn header_at(file: &File, pos: u64, max: usize) -> Option<BatchHeader> {
    BatchHeader::parse(&files::read_at(file, pos, BatchHeader::LEN).ok()?, max).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sidecar_round_trips_and_a_header_only_one_has_no_positions() {
        let r = RaftPositions { first: Some(7), positions: vec![0, 80, 200] };
        assert_eq!(decode(&r.encode(true)), Some((7, vec![0, 80, 200])));
        assert_eq!(decode(&r.encode(false)), Some((7, vec![])));
        assert_eq!(decode(b"esraft01short"), None);
        assert_eq!((r.end(), r.position(8), r.position(10)), (10, Some(80), None));
    }
}
