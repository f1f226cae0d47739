//! The record of leader-term transitions: (term, first offset written in that term),
//! as Kafka's leader-epoch checkpoint. Raft uses it to find where a follower's log
//! diverges. It is rewritten atomically whenever a new term starts or the log is
//! truncated, before the batch that starts the term is appended.

use std::path::{Path, PathBuf};

use crate::error::{IoContext, LogError, Result};
use crate::files;

pub(crate) const EPOCHS_FILE: &str = "leader-epochs";

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Epochs {
    path: PathBuf,
    pub entries: Vec<(u64, u64)>,
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
            let mut parts = line.split_whitespace().map(str::parse::<u64>);
            match (parts.next(), parts.next(), parts.next()) {
                (Some(Ok(term)), Some(Ok(offset)), None) => entries.push((term, offset)),
                _ => {
                    return Err(LogError::Corrupt {
                        file: path.clone(),
                        position: n as u64,
                        reason: format!("line {} is not `<term> <offset>`", n + 1),
                    });
                }
            }
        }
        Ok(Epochs { path, entries })
    }

    pub fn latest_term(&self) -> Option<u64> {
        self.entries.last().map(|e| e.0)
    }

    /// Records that `term` starts at `offset`, durably.
    pub fn begin(&mut self, term: u64, offset: u64) -> Result<()> {
        self.entries.push((term, offset));
        self.persist()
    }

    /// Forgets terms that start at or after `offset`.
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
