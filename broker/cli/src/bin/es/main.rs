//! es: the command-line client for an es broker's HTTP API. Tables for people by
//! default, `--json` for scripts; errors in plain words with what to do next; a
//! non-zero exit code on any failure.

mod binary;
mod client;
mod cluster;
mod consume;
mod group;
mod key;
mod output;
mod plugin;
mod produce;
mod schema;
mod target;
mod tls;
mod topic;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use client::Client;

#[derive(Debug, Parser)]
#[command(name = "es", version, about = "Command-line client for the es broker")]
struct Cli {
    /// The broker's HTTP address (`http://` may be left out) [default: http://127.0.0.1:9000].
    // No clap default: clap would list a defaulted global flag in every usage line
    // as if it were required.
    #[arg(long, global = true, env = "ES_BROKER", value_name = "URL")]
    broker: Option<String>,
    /// Print the broker's JSON instead of tables.
    #[arg(long, global = true)]
    json: bool,
    /// The API key to call the broker with (HTTP and binary), when it has auth on.
    /// Prefer the environment variable: a flag shows in the process list.
    #[arg(long, global = true, env = "ES_API_KEY", value_name = "KEY", hide_env_values = true)]
    api_key: Option<String>,
    #[command(flatten)]
    tls: tls::TlsArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create, list, describe, delete and configure topics.
    #[command(subcommand)]
    Topic(topic::TopicCommand),
    /// Write records, from flags or one per stdin line.
    Produce(produce::ProduceArgs),
    /// Read records from one partition or all of them.
    Consume(consume::ConsumeArgs),
    /// Show each partition's earliest and latest offsets.
    Offsets(topic::OffsetsArgs),
    /// List, describe, reset and delete consumer groups.
    #[command(subcommand)]
    Group(group::GroupCommand),
    /// Upload, list, describe and remove Wasm plugins.
    #[command(subcommand)]
    Plugin(plugin::PluginCommand),
    /// Register, read, test and delete schemas in the broker's schema registry.
    #[command(subcommand)]
    Schema(schema::SchemaCommand),
    /// Create, list, describe, revoke and rotate API keys and set their quotas (cluster admins).
    #[command(subcommand)]
    Key(key::KeyCommand),
    /// Show the cluster: nodes, controller, and each partition's leader and replicas.
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let base = cli.broker.as_deref().unwrap_or("http://127.0.0.1:9000");
    let client = match Client::new(base, cli.api_key.clone(), &cli.tls) {
        Ok(client) => client,
        Err(e) => {
            eprintln!("es: error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let result = match cli.command {
        Command::Topic(cmd) => topic::run(&client, cmd, cli.json),
        Command::Produce(args) => produce::run(&client, &args, cli.json),
        Command::Consume(args) => consume::run(&client, &args, cli.json),
        Command::Offsets(args) => topic::offsets(&client, &args, cli.json),
        Command::Group(cmd) => group::run(&client, cmd, cli.json),
        Command::Plugin(cmd) => plugin::run(&client, cmd, cli.json),
        Command::Key(cmd) => key::run(&client, cmd, cli.json),
        Command::Cluster(cmd) => cluster::run(&client, cmd, cli.json),
        Command::Schema(cmd) => match schema::run(&client, cmd, cli.json) {
            // An incompatible `es schema check` printed its findings: exit 1 without an error line.
            Ok(false) => return ExitCode::FAILURE,
            other => other.map(|_| ()),
        },
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Under --json a broker refusal is also printed as the broker's JSON, for scripts.
            if let Some(api) = e.downcast_ref::<client::ApiError>()
                && cli.json
                && !api.body.is_null()
            {
                println!("{}", api.body);
            }
            if let Some(signal) = e.downcast_ref::<group::Interrupted>() {
                return ExitCode::from(signal.exit_code());
            }
            eprintln!("es: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// "1 record", "2 records".
pub fn plural(n: impl Into<u64>, word: &str) -> String {
    let n = n.into();
    if n == 1 { format!("1 {word}") } else { format!("{n} {word}s") }
}

/// Whether progress and "nothing found" notes go to stderr (people, not pipes).
pub fn stderr_is_tty() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
}

/// Percent-encodes a path segment (topic names are plain ASCII, but a user may
/// type anything and should get the broker's typed error, not a broken URL).
pub fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}
