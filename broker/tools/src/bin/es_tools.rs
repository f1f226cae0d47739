//! The `es-tools` binary: offline dump and restore of a broker's data directory
//! (docs/operations.md, "Backup and restore").

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use es_tools::ToolsError;
use es_tools::dump::{DumpOptions, dump};
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
    /// Dump a stopped broker's data directory into a tar archive (manifest first).
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
        #[arg(long)]
        replay_journal: bool,
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
        Command::Dump { data_dir, out, topics, journal_dir, replay_journal } => run_dump(&DumpOptions {
            data_dir,
            out,
            topics_prefix: topics,
            journal_dir,
            replay_journal,
            progress,
        }),
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
