//! Sparse indexes of one segment: offset -> file position and timestamp -> offset.
//! Entries are added every `index.interval.bytes`; both live in memory and are
//! written to `.index` / `.timeindex` when a segment is sealed or the log is closed.
//! They are hints: a missing or invalid file is rebuilt from the segment.

/// One offset-index entry: the batch starting at `base + relative_offset` begins at
/// byte `position`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OffsetEntry {
    pub relative_offset: u32,
    pub position: u32,
}

/// One time-index entry: every record before the batch at `base + relative_offset`,
/// and that batch itself, has a timestamp <= `max_timestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TimeEntry {
    pub max_timestamp: i64,
    pub relative_offset: u32,
}

#[derive(Debug, Default, Clone)]
pub(crate) struct SegmentIndex {
    pub offsets: Vec<OffsetEntry>,
    pub times: Vec<TimeEntry>,
    /// Bytes appended since the last entry.
    bytes_since_entry: u64,
    /// Largest timestamp seen in the segment so far.
    max_timestamp: Option<i64>,
}

const OFFSET_ENTRY_LEN: usize = 8;
const TIME_ENTRY_LEN: usize = 12;

impl SegmentIndex {
    /// Records a batch appended at `position`; adds entries every `interval` bytes.
    pub fn on_batch(
        &mut self,
        relative_offset: u32,
        position: u32,
        len: u32,
        max_timestamp: i64,
        interval: u32,
    ) {
        let new_max = self.max_timestamp.map_or(max_timestamp, |m| m.max(max_timestamp));
        let ts_grew = self.max_timestamp.is_none_or(|m| max_timestamp > m);
        self.max_timestamp = Some(new_max);
        if self.offsets.is_empty() || self.bytes_since_entry >= u64::from(interval) {
            self.offsets.push(OffsetEntry { relative_offset, position });
            self.bytes_since_entry = 0;
            if ts_grew || self.times.is_empty() {
                self.times.push(TimeEntry { max_timestamp: new_max, relative_offset });
            }
        }
        self.bytes_since_entry += u64::from(len);
    }

    /// Accounts a batch that is already indexed (reloading a segment).
    pub fn note_timestamp(&mut self, max_timestamp: i64) {
        self.max_timestamp = Some(self.max_timestamp.map_or(max_timestamp, |m| m.max(max_timestamp)));
    }

    pub fn max_timestamp(&self) -> Option<i64> {
        self.max_timestamp
    }

    /// The entry with the largest offset <= `relative_offset`.
    pub fn lookup(&self, relative_offset: u32) -> Option<OffsetEntry> {
        let i = self.offsets.partition_point(|e| e.relative_offset <= relative_offset);
        i.checked_sub(1).map(|i| self.offsets[i])
    }

    /// The last time entry whose max timestamp is below `timestamp`: no record before
    /// its batch can have a timestamp >= `timestamp`.
    pub fn lookup_time(&self, timestamp: i64) -> Option<TimeEntry> {
        let i = self.times.partition_point(|e| e.max_timestamp < timestamp);
        i.checked_sub(1).map(|i| self.times[i])
    }

    /// Drops entries at or past `position` (truncation).
    pub fn truncate_to_position(&mut self, position: u64, base: u64, next_offset: u64) {
        self.offsets.retain(|e| u64::from(e.position) < position);
        let limit = next_offset.saturating_sub(base);
        self.times.retain(|e| u64::from(e.relative_offset) < limit);
        self.bytes_since_entry = u64::MAX / 2;
        self.max_timestamp = self.times.last().map(|e| e.max_timestamp);
    }

    pub fn encode_offsets(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.offsets.len() * OFFSET_ENTRY_LEN);
        for e in &self.offsets {
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
            out.extend_from_slice(&e.position.to_be_bytes());
        }
        out
    }

    pub fn encode_times(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.times.len() * TIME_ENTRY_LEN);
        for e in &self.times {
            out.extend_from_slice(&e.max_timestamp.to_be_bytes());
            out.extend_from_slice(&e.relative_offset.to_be_bytes());
        }
        out
    }

    /// Decodes both files; `None` when either is malformed (wrong size, entries out of
    /// order, positions past `file_len`). The caller still checks that the last entry
    /// points at a real batch, which needs the segment file.
    pub fn decode(offsets: &[u8], times: &[u8], file_len: u64) -> Option<SegmentIndex> {
        if !offsets.len().is_multiple_of(OFFSET_ENTRY_LEN) || !times.len().is_multiple_of(TIME_ENTRY_LEN) {
            return None;
        }
        let offsets: Vec<OffsetEntry> = offsets
            .chunks_exact(OFFSET_ENTRY_LEN)
            .map(|c| OffsetEntry {
                relative_offset: u32::from_be_bytes(c[0..4].try_into().expect("4")),
                position: u32::from_be_bytes(c[4..8].try_into().expect("4")),
            })
            .collect();
        let times: Vec<TimeEntry> = times
            .chunks_exact(TIME_ENTRY_LEN)
            .map(|c| TimeEntry {
                max_timestamp: i64::from_be_bytes(c[0..8].try_into().expect("8")),
                relative_offset: u32::from_be_bytes(c[8..12].try_into().expect("4")),
            })
            .collect();
        let ordered = offsets
            .windows(2)
            .all(|w| w[0].relative_offset < w[1].relative_offset && w[0].position < w[1].position)
            && times.windows(2).all(|w| {
                w[0].max_timestamp <= w[1].max_timestamp && w[0].relative_offset < w[1].relative_offset
            })
            && offsets.iter().all(|e| u64::from(e.position) < file_len.max(1))
            && offsets.first().is_none_or(|e| e.position == 0);
        if !ordered || (file_len > 0 && offsets.is_empty()) {
            return None;
        }
        let max_timestamp = times.last().map(|e| e.max_timestamp);
        // Appends after a reload start a fresh interval; the gap only makes the index sparser.
        Some(SegmentIndex { offsets, times, bytes_since_entry: u64::MAX / 2, max_timestamp })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_every_interval_and_lookup() {
        let mut idx = SegmentIndex::default();
        for i in 0..10u32 {
            idx.on_batch(i * 10, i * 100, 100, i64::from(i) * 5, 250);
        }
        // First batch, then every third batch (after 300 bytes >= 250).
        let offs: Vec<u32> = idx.offsets.iter().map(|e| e.relative_offset).collect();
        assert_eq!(offs, vec![0, 30, 60, 90]);
        assert_eq!(idx.lookup(45).unwrap().relative_offset, 30);
        assert_eq!(idx.lookup(0).unwrap().position, 0);
        assert_eq!(idx.lookup_time(16).unwrap().relative_offset, 30);
        assert!(idx.lookup_time(0).is_none());
        let back = SegmentIndex::decode(&idx.encode_offsets(), &idx.encode_times(), 1000).unwrap();
        assert_eq!(back.offsets, idx.offsets);
        assert_eq!(back.times, idx.times);
    }

    #[test]
    fn malformed_files_are_rejected() {
        assert!(SegmentIndex::decode(&[0; 7], &[], 10).is_none());
        let mut idx = SegmentIndex::default();
        idx.on_batch(0, 0, 10, 1, 1);
        idx.on_batch(1, 10, 10, 2, 1);
        let mut bytes = idx.encode_offsets();
        bytes.swap(0, 8);
        bytes.swap(3, 11);
        assert!(SegmentIndex::decode(&bytes, &idx.encode_times(), 20).is_none());
        // Position past the end of the file.
        assert!(SegmentIndex::decode(&idx.encode_offsets(), &idx.encode_times(), 5).is_none());
    }
}
