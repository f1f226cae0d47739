//! The `es-tools` binary: dump (offline, or online with --online) and restore of a
//! broker's data directory (docs/operations.md, "Backup and restore").

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use es_tools::ToolsError;
use es_tools::dump::{DumpOptions, dump};
use es_tools::online::{OnlineOptions, dump_online};
use es_tools::restore::{RestoreOptions, restore};

#[derive(Debug, Parser)]
#[command(name = "es-tools", version, about = "Operator tools for es: dump and restore a data directory")]
struct Cli {
    /// No progress bars, even on a terminal.
    #[arg(long, global = true)]
    quiet: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Dump a broker's data directory into a tar archive (manifest first): a stopped
    /// broker's, or with --online a running one's, from a snapshot it takes.
    Dump {
        /// The broker's data directory (its --data-dir).
        #[arg(long)]
        data_dir: PathBuf,
        /// The archive to write.
        #[arg(long)]
        out: PathBuf,
        /// Only user topics whose name starts with PREFIX (internal topics, keys,
        /// plugins and producer ids are always included).
        #[arg(long, value_name = "PREFIX")]
        topics: Option<String>,
        /// The broker's --journal-dir, if it is not <data-dir>/partitions/journal.
        #[arg(long)]
        journal_dir: Option<PathBuf>,
        /// Replay a journal left by a crash (as a broker start would) before dumping.
        #[arg(long, conflicts_with = "online")]
        replay_journal: bool,
        /// Dump a running broker: it takes a snapshot (sealed segments and a copy of
        /// its metadata) that this reads from --data-dir, then releases.
        #[arg(long, requires = "url", conflicts_with = "journal_dir")]
        online: bool,
        /// The running broker's HTTP address (with --online), e.g. http://127.0.0.1:9000.
        #[arg(long, requires = "online")]
        url: Option<String>,
        /// A file holding an API key with a cluster admin grant (with --online, auth on).
        #[arg(long, requires = "online")]
        key_file: Option<PathBuf>,
        /// How long the broker holds the snapshot if es-tools stops renewing it
        /// (it renews every third of this while it runs).
        #[arg(long, default_value_t = 60_000, requires = "online", value_parser = clap::value_parser!(u64).range(3_000..=86_400_000))]
        lease_ms: u64,
    },
    /// Check an archive and restore it in place of a data directory.
    Restore {
        /// The archive es-tools dump wrote.
        #[arg(long)]
        archive: PathBuf,
        /// The data directory to create or replace (the broker must be stopped).
        #[arg(long)]
        data_dir: PathBuf,
        /// Check every file, hash and batch; write nothing.
        #[arg(long)]
        verify_only: bool,
        /// Delete the replaced data directory instead of keeping it as <data-dir>.bak-<time>.
        #[arg(long)]
        no_keep: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let progress = !cli.quiet && std::io::stderr().is_terminal();
    let result = match cli.command {
        Command::Dump {
            data_dir,
            out,
            topics,
            journal_dir,
            replay_journal,
            online,
            url,
            key_file,
            lease_ms,
        } => {
            let dump =
                DumpOptions { data_dir, out, topics_prefix: topics, journal_dir, replay_journal, progress };
            match (online, url) {
                (true, Some(url)) => read_key(key_file.as_deref())
                    .and_then(|key| run_online(&OnlineOptions { dump, url, key, lease_ms })),
                _ => run_dump(&dump),
            }
        }
        Command::Restore { archive, data_dir, verify_only, no_keep } => {
            run_restore(&RestoreOptions { archive, data_dir, verify_only, keep_old: !no_keep, progress })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("es-tools: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run_dump(options: &DumpOptions) -> Result<(), String> {
    let report = dump(options).map_err(|e| e.to_string())?;
    if let Some(r) = &report.replayed {
        println!(
            "replayed the journal first: {} file(s), {} record(s), {} batch(es) appended",
            r.files, r.records, r.appended
        );
    }
    for orphan in &report.orphans {
        println!("left out {orphan}: no topic owns it (the broker deletes it at start)");
    }
    let m = &report.manifest;
    println!(
        "dumped {} topic(s), {} partition(s), {} file(s), {} bytes to {}",
        m.topics.len(),
        m.partition_count(),
        m.files.len(),
        m.total_bytes(),
        options.out.display()
    );
    Ok(())
}

/// The API key in `path` (its first line, trimmed): a file, so the key never shows
/// in the process list.
fn read_key(path: Option<&std::path::Path>) -> Result<Option<String>, String> {
    let Some(path) = path else { return Ok(None) };
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading --key-file {}: {e}", path.display()))?;
    let key = text.lines().next().unwrap_or("").trim();
    if key.is_empty() {
        return Err(format!("--key-file {} is empty; it should hold one API key", path.display()));
    }
    Ok(Some(key.to_owned()))
}

fn run_online(options: &OnlineOptions) -> Result<(), String> {
    let report = dump_online(options).map_err(|e| e.to_string())?;
    let m = &report.manifest;
    println!(
        "dumped {} topic(s), {} partition(s), {} file(s), {} bytes to {} from snapshot {} (taken in {} ms, now released)",
        m.topics.len(),
        m.partition_count(),
        m.files.len(),
        m.total_bytes(),
        options.dump.out.display(),
        report.snapshot,
        report.took_ms
    );
    Ok(())
}

fn run_restore(options: &RestoreOptions) -> Result<(), String> {
    let report = restore(options).map_err(|e| match (&e, options.verify_only) {
        (ToolsError::SwapIncomplete { .. }, _) | (_, true) => e.to_string(),
        (_, false) => format!("{e}; nothing was replaced"),
    })?;
    let m = &report.manifest;
    let summary = format!(
        "{} topic(s), {} partition(s), {} file(s), {} bytes: every sha256 and batch CRC checked",
        m.topics.len(),
        m.partition_count(),
        m.files.len(),
        m.total_bytes()
    );
    if options.verify_only {
        println!("verified {}: {summary}", options.archive.display());
        return Ok(());
    }
    println!("restored {} into {}: {summary}", options.archive.display(), options.data_dir.display());
    if let Some(kept) = &report.kept {
        println!(
            "the previous data directory is kept in {} (delete it when no longer needed)",
            kept.display()
        );
    }
    Ok(())
}
