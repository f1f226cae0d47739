//! `es-bench`: the es load generator. One subcommand per benchmark: the storage
//! benchmark (`es-bench log`), the broker suite (`es-bench suite`), the cost of
//! record validators (`es-bench validators`) and the Kafka listener against Apache
//! Kafka (`es-bench kafka`).

mod auth_handshake;
mod cluster;
mod kafka;
mod latency;
mod log_bench;
mod machine;
mod report;
mod suite;
mod timed;
mod tls_bench;
mod validators;
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
    /// Start-up time after a crash left a large journal to replay.
    LogRecovery(log_bench::recovery::RecoveryArgs),
    /// The broker over loopback with fsync on: raw-disk baseline, binary and HTTP
    /// produce, binary consume and pipelined small writes, in one run.
    Suite(suite::SuiteArgs),
    /// Produce throughput with and without record validators (rules, json-schema,
    /// uploaded examples), rows interleaved in rounds; PASS/MISS against issue 4.
    Validators(validators::ValidatorsArgs),
    /// Kafka-protocol produce and consume on es's Kafka listener, against es's binary
    /// protocol and Apache Kafka 4.4 (flush.messages=1 and defaults), rows alternated
    /// in rounds; PASS/MISS against issue 14.
    Kafka(kafka::KafkaArgs),
    /// SASL handshake cost on the Kafka listener: PLAIN, SCRAM-SHA-512 and an
    /// authenticator plugin (OAUTHBEARER through the JWT example), interleaved.
    AuthHandshake(auth_handshake::AuthHandshakeArgs),
    /// Produce and consume throughput with TLS off and on (Kafka listener and binary
    /// protocol), two brokers alternated in rounds, medians and the ratio.
    Tls(tls_bench::TlsArgs),
    /// Replicated produce on a three-node cluster against a single node, rows
    /// alternated in rounds, and failover time; PASS/MISS against issue 17.
    Cluster(cluster::ClusterArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Log(args) => log_bench::run(&args),
        Command::LogRecovery(args) => log_bench::recovery::run(&args),
        Command::Suite(args) => suite::run(&args),
        Command::Validators(args) => validators::run(&args),
        Command::Kafka(args) => kafka::run(&args),
        Command::AuthHandshake(args) => auth_handshake::run(&args),
        Command::Cluster(args) => cluster::run(&args),
        Command::Tls(args) => tls_bench::run(&args),
    }
}
