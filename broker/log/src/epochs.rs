//! The record of leader-epoch transitions: (epoch, first offset written in that
//! epoch), as Kafka's leader-epoch checkpoint. Raft uses it to find where a follower's log
//! diverges. It is rewritten atomically whenever a new epoch starts or the log is
//! truncated, before the batch that starts the epoch is appended.

use std::path::{Path, PathBuf};

use es_core::LeaderEpoch;

use crate::error::{IoContext, LogError, Result};
use crate::files;

pub(crate) const EPOCHS_FILE: &str = "leader-epochs";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Epochs {
    path: PathBuf,
    pub entries: Vec<(LeaderEpoch, u64)>,
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
            match (epoch, offset, parts.next()) {
                (Some(epoch), Some(offset), None) => entries.push((LeaderEpoch(epoch), offset)),
                _ => {
                    return Err(LogError::Corrupt {
                        file: path.clone(),
                        position: n as u64,
                        reason: format!("line {} is not `<epoch> <offset>`", n + 1),
                    });
                }
            }
        }
        Ok(Epochs { path, entries })
    }

    pub fn latest(&self) -> Option<LeaderEpoch> {
        self.entries.last().map(|e| e.0)
    }

    /// Records that `epoch` starts at `offset`, durably.
    pub fn begin(&mut self, epoch: LeaderEpoch, offset: u64) -> Result<()> {
        self.entries.push((epoch, offset));
        self.persist()
    }

    /// Forgets epochs that start at or after `offset`.
    pub fn truncate_from(&mut self, offset: u64) -> Result<()> {
        let before = self.entries.len();
        self.entries.retain(|e| e.1 < offset);
        if self.entries.len() != before { self.persist() } else { Ok(()) }
    }

    fn persist(&self) -> Result<()> {
        let text: String = self.entries.iter().map(|(t, o)| format!("{t} {o}\n")).collect();
        files::write_atomic(&self.path, text.as_bytes()).ctx(|| format!("writing {}", self.path.display()))
    }
}
