//! `es consume`: read one partition or all of them, from an offset, from the
//! beginning, or follow new records like `tail -f`.

use std::io::Write;

use anyhow::Context;
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::client::Client;
use crate::produce::write_out;
use crate::segment;
use crate::topic::array;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON object per record and line.
    Json,
    /// The value's bytes, one record per line.
    Raw,
    /// Key, separator, value.
    Kv,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[arg(long)]
    topic: String,
    /// Read only this partition (default: all).
    #[arg(long)]
    partition: Option<u32>,
    /// Start at earliest, latest or an offset number (default: earliest, or latest with --follow).
    #[arg(long)]
    offset: Option<String>,
    /// Start at the earliest offset (also with --follow).
    #[arg(long, conflicts_with = "offset")]
    from_beginning: bool,
    /// Keep waiting for new records until interrupted.
    #[arg(long)]
    follow: bool,
    /// Output format (the global --json means --format json).
    #[arg(long, value_enum, default_value = "kv")]
    format: Format,
    /// Stop after this many records.
    #[arg(long)]
    max_records: Option<usize>,
    /// What --format kv puts between key and value.
    #[arg(long, default_value = "\t")]
    key_separator: String,
    /// Consume as a member of this group: all assigned partitions, committed offsets.
    #[arg(long, conflicts_with_all = ["partition", "offset", "from_beginning"])]
    group: Option<String>,
    #[command(flatten)]
    transport: crate::binary::Transport,
}

struct Cursor {
    partition: u32,
    offset: String,
    done: bool,
}

pub fn run(client: &Client, args: &ConsumeArgs, json_out: bool) -> anyhow::Result<()> {
    if let Some(group) = &args.group {
        let json = json_out || args.format == Format::Json;
        return crate::group::consume(client, group, &args.topic, args.max_records, args.follow, json);
    }
    let format = if json_out { Format::Json } else { args.format };
    if args.transport.is_binary() {
        let start = crate::binary::start(args.offset.as_deref(), args.from_beginning, args.follow)?;
        let mut out = std::io::stdout().lock();
        let sep = args.key_separator.clone();
        return crate::binary::consume(
            &args.transport,
            &args.topic,
            args.partition,
            start,
            args.follow,
            args.max_records,
            |partition, r| {
                let more = print(&mut out, format, &sep, &args.topic, partition, r)?;
                out.flush().ok();
                Ok(more)
            },
        );
    }
    let topic = segment(&args.topic);
    let partitions: Vec<u32> = match args.partition {
        Some(p) => vec![p],
        None => {
            let d = client.get(&format!("/topics/{topic}"))?;
            (0..d["partition_count"].as_u64().unwrap_or(0) as u32).collect()
        }
    };
    let start = match (&args.offset, args.from_beginning, args.follow) {
        (Some(o), _, _) => o.clone(),
        (None, false, true) => "latest".into(),
        _ => "earliest".into(),
    };
    let mut cursors: Vec<Cursor> = partitions
        .into_iter()
        .map(|partition| Cursor { partition, offset: start.clone(), done: false })
        .collect();
    let mut left = args.max_records.unwrap_or(usize::MAX);
    let mut out = std::io::stdout().lock();
    let mut idle = false;
    while left > 0 && cursors.iter().any(|c| !c.done) {
        let mut got = 0;
        // Long-poll only when the last round found nothing, sharing about a second
        // between the partitions so none is starved.
        let wait_ms = if args.follow && idle { (1000 / cursors.len()).max(50) } else { 0 };
        for c in cursors.iter_mut().filter(|c| !c.done) {
            let max = left.min(10_000);
            let path = format!(
                "/topics/{topic}/partitions/{}/records?offset={}&max_records={max}&wait_ms={wait_ms}",
                c.partition, c.offset
            );
            let v = client.get(&path).with_context(|| format!("reading partition {}", c.partition))?;
            let records = array(&v["records"]);
            for r in &records {
                if !print(&mut out, format, &args.key_separator, &args.topic, c.partition, r)? {
                    return Ok(());
                }
            }
            got += records.len();
            left -= records.len().min(left);
            c.offset = v["next_offset"].to_string();
            c.done = !args.follow && records.is_empty() && v["next_offset"] == v["high_watermark"];
            if left == 0 {
                break;
            }
        }
        idle = got == 0;
        out.flush().ok();
    }
    Ok(())
}

fn bytes(r: &Value, field: &Value) -> Option<Vec<u8>> {
    let s = field.as_str()?;
    if r["encoding"] == "base64" { B64.decode(s).ok() } else { Some(s.as_bytes().to_vec()) }
}

/// Prints one record; false when stdout is closed.
fn print(
    out: &mut impl Write,
    format: Format,
    sep: &str,
    topic: &str,
    partition: u32,
    r: &Value,
) -> anyhow::Result<bool> {
    let mut line = match format {
        Format::Json => {
            let mut obj = json!({"topic": topic, "partition": partition});
            for k in ["offset", "timestamp", "encoding", "key", "value", "headers"] {
                obj[k] = r[k].clone();
            }
            obj.to_string().into_bytes()
        }
        Format::Raw => bytes(r, &r["value"]).unwrap_or_default(),
        Format::Kv => {
            let mut l = bytes(r, &r["key"]).unwrap_or_default();
            l.extend_from_slice(sep.as_bytes());
            l.extend(bytes(r, &r["value"]).unwrap_or_default());
            l
        }
    };
    line.push(b'\n');
    write_out(out, &line)
}
