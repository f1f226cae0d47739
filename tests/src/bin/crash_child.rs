//! The process the crash test kills: opens the crash log in the directory given on
//! its command line and appends deterministic batches from several threads until it
//! is killed, printing `ack <base_offset> <last_offset> <thread> <seq>` for every
//! append once it is durable.
//!
//! Usage: `es-log-crash-child <data dir> <generation> [threads] [max seconds] [partitions]`.
//! It prints `ready <high watermark of partition 0>` once the log is open. It exits
//! by itself after `max seconds` (default 60) so an abandoned child cannot run
//! forever. With `partitions` (default 1), writer `t` appends to partition
//! `crash-<t mod partitions>`.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use es_log::{LogManager, ManagerOptions};
use es_tests::crashload::{self, Ack, BatchId};

fn main() {
    if let Err(e) = run() {
        eprintln!("es-log-crash-child: {e:#}");
        std::process::exit(2);
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 || args.len() > 6 {
        bail!(
            "usage: es-log-crash-child <data dir> <generation> [threads] [max seconds] [partitions] [journal file bytes]"
        );
    }
    let dir = &args[0];
    let generation: u32 = args[1].parse().context("generation")?;
    let threads: u32 = args.get(2).map_or(Ok(4), |s| s.parse()).context("threads")?;
    let max_secs: u64 = args.get(3).map_or(Ok(60), |s| s.parse()).context("max seconds")?;
    let partitions: u32 = args.get(4).map_or(Ok(1), |s| s.parse()).context("partitions")?;
    // Small journal files make rotations, checkpoints and recycled files happen
    // within a run, so a kill lands among them too.
    let journal_file_bytes: u64 = args
        .get(5)
        .map_or(Ok(es_core::limits::JOURNAL_FILE_BYTES), |s| s.parse())
        .context("journal file bytes")?;

    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(max_secs));
        eprintln!("es-log-crash-child: not killed within {max_secs} s; exiting");
        std::process::exit(3);
    });

    let manager = LogManager::new(
        dir,
        ManagerOptions { housekeeping_interval: None, journal_file_bytes, ..ManagerOptions::default() },
    )
    .context("creating the log manager")?;
    let logs = (0..partitions.max(1))
        .map(|p| {
            let name = crashload::partition_of(p, partitions);
            manager.open_partition(&name, crashload::config()).with_context(|| format!("opening {name}"))
        })
        .map(|r| r.map(|(log, _)| log))
        .collect::<Result<Vec<_>>>()?;
    let log = &logs[0];

    let out = Mutex::new(std::io::stdout());
    let say = |line: &str| {
        let out = out.lock().expect("stdout lock");
        let mut out = out.lock();
        // A closed pipe means the parent is gone: stop quietly.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            std::process::exit(4);
        }
    };
    say(&format!("ready {}", log.high_watermark()));

    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|thread| {
                let log = &logs[(thread % partitions.max(1)) as usize];
                let say = &say;
                s.spawn(move || -> Result<()> {
                    for seq in 0.. {
                        let id = BatchId { generation, thread, seq };
                        let appended = log
                            .append_records(&crashload::records(id), crashload::EPOCH)
                            .with_context(|| format!("appending {id:?}"))?
                            .wait()
                            .with_context(|| format!("waiting for {id:?}"))?;
                        say(&Ack {
                            base_offset: appended.base_offset,
                            last_offset: appended.last_offset,
                            thread,
                            seq,
                        }
                        .line());
                    }
                    Ok(())
                })
            })
            .collect();
        for h in handles {
            h.join().expect("writer thread panicked")?;
        }
        Ok(())
    })
}
