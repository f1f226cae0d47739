//! The record of leader-epoch transitions: (epoch, first offset, first Raft index)
//! of each epoch, as Kafka's leader-epoch checkpoint plus the Raft index of the
//! epoch's first entry (epoch = Raft term). It serves OffsetForLeaderEpoch (by
//! offset) and Raft's key log ids (by index). It is rewritten atomically whenever a
//! new epoch starts or the log is truncated, before the batch that starts the epoch
//! is appended. A line is `<epoch> <offset> <index>`; a two-column line (written
//! before es stored Raft indexes) has no index.

use std::path::{Path, PathBuf};

use es_core::LeaderEpoch;

use crate::error::{IoContext, LogError, Result};
use crate::files;

pub(crate) const EPOCHS_FILE: &str = "leader-epochs";

/// Where one leader epoch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochStart {
    pub epoch: LeaderEpoch,
    /// The Kafka offset of the epoch's first batch (a control batch shares it with
    /// the data batch after it).
    pub offset: u64,
    /// The Raft index of the epoch's first batch; `None` on a line from before Raft.
    pub index: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Epochs {
    path: PathBuf,
    pub entries: Vec<EpochStart>,
}

impl Epochs {
    pub fn load(dir: &Path) -> Result<Epochs> {
        let path = dir.join(EPOCHS_FILE);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(LogError::io(format!("reading {}", path.display()), e)),
        };
        let mut entries = Vec::new();
        for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let mut parts = line.split_whitespace();
            let epoch = parts.next().and_then(|p| p.parse::<i32>().ok()).filter(|e| *e >= 0);
            let offset = parts.next().and_then(|p| p.parse::<u64>().ok());
            let index = parts.next().map(|p| p.parse::<u64>().ok());
            match (epoch, offset, index, parts.next()) {
                (Some(epoch), Some(offset), None | Some(Some(_)), None) => {
                    entries.push(EpochStart { epoch: LeaderEpoch(epoch), offset, index: index.flatten() })
                }
                _ => {
                    return Err(LogError::Corrupt {
                        file: path.clone(),
                        position: n as u64,
                        reason: format!("line {} is not `<epoch> <offset> [<index>]`", n + 1),
                    });
                }
            }
        }
        Ok(Epochs { path, entries })
    }

    pub fn latest(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.epoch)
    }

    /// Records that `epoch` starts at `offset` and Raft index `index`, durably.
    pub fn begin(&mut self, epoch: LeaderEpoch, offset: u64, index: u64) -> Result<()> {
        self.entries.push(EpochStart { epoch, offset, index: Some(index) });
        self.persist()
    }

    /// Forgets epochs whose first batch is at or after the cut: Raft index `index`
    /// (whose batch is at `offset`), or `offset` for a line without an index.
    pub fn truncate_from(&mut self, offset: u64, index: u64) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.index.map_or(e.offset < offset, |i| i < index));
        if self.entries.len() != before { self.persist() } else { Ok(()) }
    }

    /// The file's text: one `<epoch> <offset> [<index>]` line per epoch.
    pub fn encode(&self) -> String {
        let line = |e: &EpochStart| match e.index {
            Some(i) => format!("{} {} {i}\n", e.epoch, e.offset),
            None => format!("{} {}\n", e.epoch, e.offset),
        };
        self.entries.iter().map(line).collect()
    }

    fn persist(&self) -> Result<()> {
        let text = self.encode();
        files::write_atomic(&self.path, text.as_bytes()).ctx(|| format!("writing {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs_keep_their_raft_index_and_read_old_two_column_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(EPOCHS_FILE), "0 0\n").unwrap();
        let mut e = Epochs::load(dir.path()).unwrap();
        assert_eq!(e.entries, vec![EpochStart { epoch: LeaderEpoch(0), offset: 0, index: None }]);
        e.begin(LeaderEpoch(2), 5, 9).unwrap();
        e.begin(LeaderEpoch(3), 5, 10).unwrap();
        // A cut at index 10 (offset 5) keeps epoch 2, which starts at the same offset.
        e.truncate_from(5, 10).unwrap();
        let again = Epochs::load(dir.path()).unwrap();
        assert_eq!(again.entries.len(), 2);
        assert_eq!(again.entries[1], EpochStart { epoch: LeaderEpoch(2), offset: 5, index: Some(9) });
    }
}
