//! `es-bench`: the es load generator. One subcommand per benchmark: the storage
//! benchmark (`es-bench log`) and the broker suite (`es-bench suite`).

mod latency;
mod log_bench;
mod machine;
mod report;
mod suite;
mod timed;
mod workload;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(name = "es-bench", version, about = "es load generator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Partition log throughput and latency with fsync, against raw write + fdatasync.
    Log(log_bench::LogArgs),
    /// The broker over loopback with fsync on: raw-disk baseline, binary and HTTP
    /// produce, binary consume and pipelined small writes, in one run.
    Suite(suite::SuiteArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Log(args) => log_bench::run(&args),
        Command::Suite(args) => suite::run(&args),
    }
}
