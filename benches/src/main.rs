//! `es-bench`: the es load generator. One subcommand per benchmark; today only the
//! storage benchmark (`es-bench log`), with HTTP and binary-protocol ones to follow.

mod latency;
mod log_bench;
mod machine;
mod report;
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
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Log(args) => log_bench::run(&args),
    }
}
