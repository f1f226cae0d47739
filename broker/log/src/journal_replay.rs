//! Journal replay at start, before any partition is served. The journal files are
//! read oldest first and every record is applied to its partition in order: a batch
//! the segments already hold (write-behind that reached the disk) is skipped, the
//! next one is appended, a truncation is applied. So replay is idempotent: a second
//! replay of the same files, or of files a crashed checkpoint failed to delete,
//! changes nothing. Reading stops at the first torn or CRC-failing record (the tail
//! of the round the crash interrupted, never acknowledged). Every touched segment
//! is synced before the journal files are removed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use es_core::batch::BatchHeader;
use es_core::limits;

use crate::config::LogConfig;
use crate::error::{IoContext, LogError, Result};
use crate::files;
use crate::flusher::{FlushStats, Flusher};
use crate::journal::{self, Entry, Next, RecordReader};
use crate::manager::{ManagerOptions, Shared};
use crate::open_files::OpenFiles;
use crate::partition::PartitionLog;

/// What a start-up replay of the journal did.
#[derive(Debug, Clone, Default)]
pub struct JournalReplay {
    /// Journal files found (all removed once replayed).
    pub files: usize,
    /// Valid records read.
    pub records: u64,
    /// Journal bytes holding them.
    pub bytes: u64,
    /// Batches the segments lacked and got from the journal.
    pub appended: u64,
    pub truncations: u64,
    pub partitions: usize,
    /// Where reading stopped early: file, position, reason (a torn tail).
    pub torn: Option<(PathBuf, u64, String)>,
    pub elapsed: Duration,
    /// The sequence number the next journal file gets.
    pub(crate) next_seq: u64,
}

/// Replays `journal_dir` into the partitions under `root`, then removes its files.
pub(crate) fn replay(root: &Path, journal_dir: &Path, options: &ManagerOptions) -> Result<JournalReplay> {
    let started = Instant::now();
    let found = journal::list_files(journal_dir)?;
    let mut report =
        JournalReplay { next_seq: found.last().map_or(1, |(seq, _)| seq + 1), ..JournalReplay::default() };
    if found.is_empty() {
        return Ok(report);
    }
    let stats = Arc::new(FlushStats::default());
    let shared = Arc::new(Shared {
        flusher: Flusher::start(None, stats.clone()),
        open_files: OpenFiles::new(options.open_segment_files_max),
        clock: options.clock.clone(),
    });
    let mut replayer = Replayer { root, shared: shared.clone(), parts: HashMap::new(), gaps: HashMap::new() };
    let result = replayer.run(&found, &mut report).and_then(|()| replayer.finish(&stats));
    report.partitions = replayer.parts.values().flatten().count();
    drop(replayer);
    shared.flusher.shutdown();
    result?;
    for (_, path) in &found {
        files::remove_if_exists(path).ctx(|| format!("removing {}", path.display()))?;
    }
    files::fsync_dir(journal_dir).ctx(|| format!("syncing {}", journal_dir.display()))?;
    report.elapsed = started.elapsed();
    tracing::info!(
        files = report.files,
        records = report.records,
        appended = report.appended,
        ms = report.elapsed.as_millis() as u64,
        "replayed the journal"
    );
    Ok(report)
}

struct Replayer<'a> {
    root: &'a Path,
    shared: Arc<Shared>,
    /// Partitions touched so far; `None` for a name with no directory (deleted).
    parts: HashMap<String, Option<Arc<PartitionLog>>>,
    /// Partitions whose segments end before a journal batch: (log end, batch base).
    /// Legal only if a later truncation cuts below the log end.
    gaps: HashMap<String, (u64, u64)>,
}

impl Replayer<'_> {
    fn run(&mut self, found: &[(u64, PathBuf)], report: &mut JournalReplay) -> Result<()> {
        for (i, (_, path)) in found.iter().enumerate() {
            report.files += 1;
            let mut reader = RecordReader::open(path)?;
            loop {
                match reader.next_record().ctx(|| format!("reading {}", path.display()))? {
                    Next::End => break,
                    Next::Torn(reason) => {
                        let later = found.len() - i - 1;
                        tracing::warn!(file = %path.display(), position = reader.position, reason, later_files = later, "journal replay stops at a torn record");
                        report.bytes += reader.position;
                        report.torn = Some((path.clone(), reader.position, reason));
                        return Ok(());
                    }
                    Next::Entry(entry) => {
                        report.records += 1;
                        self.apply(entry, report)?;
                    }
                }
            }
            report.bytes += reader.position;
        }
        Ok(())
    }

    fn apply(&mut self, entry: Entry, report: &mut JournalReplay) -> Result<()> {
        match entry {
            Entry::Batch { partition, base_offset, bytes, .. } => {
                let Some(log) = self.partition(&partition)? else {
                    return Ok(());
                };
                let end = log.log_end();
                let next = BatchHeader::parse(&bytes, usize::MAX)?.next_offset();
                if next <= end {
                    return Ok(());
                }
                if base_offset == end {
                    // The durability wait is the final flush of `finish`.
                    drop(log.append_replica(bytes)?);
                    report.appended += 1;
                    return Ok(());
                }
                if base_offset > end {
                    self.gaps.entry(partition).or_insert((end, base_offset));
                    return Ok(());
                }
                Err(LogError::Corrupt {
                    file: log.dir().to_owned(),
                    position: 0,
                    reason: format!("journal batch [{base_offset}, {next}) straddles the log end {end}"),
                })
            }
            Entry::Truncate { partition, offset } => {
                let Some(log) = self.partition(&partition)? else {
                    return Ok(());
                };
                report.truncations += 1;
                if self.gaps.get(&partition).is_some_and(|(end, _)| offset <= *end) {
                    self.gaps.remove(&partition);
                }
                if offset >= log.log_end() {
                    return Ok(());
                }
                match log.truncate_from(offset) {
                    Ok(()) => Ok(()),
                    // Retention removed the segments below the cut since: nothing to cut.
                    Err(LogError::OffsetOutOfRange { .. }) => {
                        tracing::warn!(
                            partition,
                            offset,
                            "journal truncation below the local log start; skipped"
                        );
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            }
        }
    }

    fn partition(&mut self, name: &str) -> Result<Option<Arc<PartitionLog>>> {
        if let Some(p) = self.parts.get(name) {
            return Ok(p.clone());
        }
        let valid = !name.is_empty() && !name.contains(['/', '\\']) && name != "." && name != "..";
        let dir = self.root.join(name);
        let log = if valid && dir.is_dir() {
            let config = LogConfig {
                batch_bytes_max: limits::BATCH_BYTES_MAX_HARD,
                record_bytes_max: limits::BATCH_BYTES_MAX_HARD,
                ..LogConfig::default()
            };
            Some(PartitionLog::open(name.to_owned(), dir, None, config, self.shared.clone())?.0)
        } else {
            None
        };
        self.parts.insert(name.to_owned(), log.clone());
        Ok(log)
    }

    /// Waits for the replayed appends, then syncs every segment of every touched
    /// partition: bytes skipped because the segment held them may have been written
    /// behind and never synced, and the journal is about to go.
    fn finish(&mut self, stats: &FlushStats) -> Result<()> {
        if let Some((name, (end, base))) = self.gaps.iter().next() {
            return Err(LogError::Corrupt {
                file: self.root.join(name),
                position: *end,
                reason: format!(
                    "the segments end at offset {end} but the journal continues at {base}: offsets in between are in neither"
                ),
            });
        }
        let mut segments = Vec::new();
        for log in self.parts.values().flatten() {
            log.flush()?;
            for entry in std::fs::read_dir(log.dir()).ctx(|| format!("listing {}", log.dir().display()))? {
                let path = entry.ctx(|| format!("listing {}", log.dir().display()))?.path();
                if path.extension().is_some_and(|e| e == files::LOG_EXT) {
                    segments.push(path);
                }
            }
        }
        journal::sync_files(&segments, stats)
    }
}
