//! `es consume`: read one partition or all of them, from an offset, a time or the
//! beginning, or follow new records like `tail -f`. Partitions are polled at once,
//! one thread each, so a new record shows within one long-poll wake-up.

use std::io::Write;
use std::sync::mpsc::{self, Receiver, SyncSender};

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::client::Client;
use crate::produce::write_out;
use crate::segment;
use crate::target::TopicArg;
use crate::topic::array;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// One JSON object per record and line.
    Json,
    /// The value's bytes, one record per line.
    Raw,
    /// Key, separator, value.
    Kv,
    /// The value in base64, one record per line (any bytes, one line each; what
    /// `es produce --encoding base64` reads).
    Base64,
}

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    pub topic: TopicArg,
    /// Read only this partition (default: all).
    #[arg(long)]
    partition: Option<u32>,
    /// Start at earliest, latest or an offset number (default: earliest, or latest with --follow).
    #[arg(long, conflicts_with = "timestamp")]
    offset: Option<String>,
    /// Start at the first record with a timestamp at or after MS (ms since the epoch).
    #[arg(long, value_name = "MS", conflicts_with = "from_beginning")]
    timestamp: Option<i64>,
    /// Start at the earliest offset (also with --follow).
    #[arg(long, conflicts_with = "offset")]
    from_beginning: bool,
    /// Keep waiting for new records until interrupted.
    #[arg(long)]
    follow: bool,
    /// Output format (the global --json means --format json).
    #[arg(long, value_enum, default_value = "kv")]
    pub format: Format,
    /// Stop after this many records.
    #[arg(long, value_name = "N")]
    pub max_records: Option<usize>,
    /// What --format kv puts between headers, key and value.
    #[arg(long, default_value = "\t", value_name = "SEP")]
    pub key_separator: String,
    /// With --format kv, print the headers (k=v,k2=v2) before the key.
    #[arg(long)]
    pub print_headers: bool,
    /// Consume as a member of this group: all assigned partitions, committed offsets.
    #[arg(long, conflicts_with_all = ["partition", "offset", "from_beginning", "timestamp"])]
    group: Option<String>,
    /// With --group: how long the broker waits without a poll before it drops this
    /// member (default 10000).
    #[arg(long, value_name = "MS", requires = "group")]
    session_timeout_ms: Option<u64>,
    #[command(flatten)]
    transport: crate::binary::Transport,
}

/// How records are printed, shared by every consume path.
#[derive(Debug, Clone)]
pub struct Printer {
    pub format: Format,
    pub sep: String,
    pub headers: bool,
}

pub fn run(client: &Client, args: &ConsumeArgs, json_out: bool) -> anyhow::Result<()> {
    let format = if json_out { Format::Json } else { args.format };
    let printer = Printer { format, sep: args.key_separator.clone(), headers: args.print_headers };
    let topic = args.topic.name();
    if let Some(group) = &args.group {
        let session = crate::group::Session {
            group,
            topic,
            max_records: args.max_records,
            follow: args.follow,
            session_timeout_ms: args.session_timeout_ms,
        };
        return crate::group::consume(client, &session, &printer);
    }
    if args.transport.is_binary() {
        return consume_binary(args, client.api_key(), client.binary_tls(), &printer);
    }
    let partitions: Vec<u32> = match args.partition {
        Some(p) => vec![p],
        None => {
            let d = client.get(&format!("/topics/{}", segment(topic)))?;
            (0..d["partition_count"].as_u64().unwrap_or(0) as u32).collect()
        }
    };
    let start = match (&args.offset, args.timestamp, args.from_beginning, args.follow) {
        (Some(o), ..) => format!("offset={o}"),
        (None, Some(ts), ..) => format!("timestamp={ts}"),
        (None, None, false, true) => "offset=latest".into(),
        _ => "offset=earliest".into(),
    };
    let (tx, rx) = mpsc::sync_channel(16);
    for partition in partitions {
        let poll = Poll {
            client: client.clone(),
            path: format!("/topics/{}/partitions/{partition}/records", segment(topic)),
            start: start.clone(),
            follow: args.follow,
            max: args.max_records.unwrap_or(usize::MAX).min(10_000),
        };
        let tx = tx.clone();
        std::thread::spawn(move || poll.run(partition, &tx));
    }
    drop(tx);
    print_all(rx, topic, &printer, args.max_records)
}

/// One partition's polling thread.
struct Poll {
    client: Client,
    path: String,
    start: String,
    follow: bool,
    max: usize,
}

/// What a polling thread sends: a partition's records, or the error that ended it.
type Batch = anyhow::Result<(u32, Vec<Value>)>;

impl Poll {
    /// Polls until caught up (or forever with --follow); stops when the printer is gone.
    fn run(self, partition: u32, tx: &SyncSender<Batch>) {
        let mut at = self.start.clone();
        loop {
            // A follower long-polls; a one-shot read only asks what is there.
            let wait_ms = if self.follow { 1000 } else { 0 };
            let url = format!("{}?{at}&max_records={}&wait_ms={wait_ms}", self.path, self.max);
            let v = match self.client.get(&url).with_context(|| format!("reading partition {partition}")) {
                Ok(v) => v,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let records = array(&v["records"]);
            let caught_up = records.is_empty() && v["next_offset"] == v["high_watermark"];
            at = format!("offset={}", v["next_offset"]);
            if !records.is_empty() && tx.send(Ok((partition, records))).is_err() {
                return;
            }
            if caught_up && !self.follow {
                return;
            }
        }
    }
}

/// Prints what the polling threads send until they are all done or `max` is reached.
fn print_all(rx: Receiver<Batch>, topic: &str, p: &Printer, max: Option<usize>) -> anyhow::Result<()> {
    let mut left = max.unwrap_or(usize::MAX);
    let mut printed = 0usize;
    let mut out = std::io::stdout().lock();
    while left > 0 {
        let Ok(batch) = rx.recv() else { break };
        let (partition, records) = batch?;
        for r in records.iter().take(left) {
            if !print(&mut out, p, topic, partition, r)? {
                return Ok(());
            }
        }
        let n = records.len().min(left);
        left -= n;
        printed += n;
        out.flush().ok();
    }
    if printed == 0 && crate::stderr_is_tty() {
        eprintln!("no records");
    }
    Ok(())
}

/// `--protocol binary`: the same output through es-client.
fn consume_binary(
    args: &ConsumeArgs,
    api_key: Option<&str>,
    tls: Option<&es_client::ClientTls>,
    p: &Printer,
) -> anyhow::Result<()> {
    if args.timestamp.is_some() {
        bail!("--timestamp works over HTTP only for now; leave out --protocol binary");
    }
    let start = crate::binary::start(args.offset.as_deref(), args.from_beginning, args.follow)?;
    let mut out = std::io::stdout().lock();
    let topic = args.topic.name();
    let mut printed = 0usize;
    crate::binary::consume(
        crate::binary::Endpoint { transport: &args.transport, api_key, tls },
        topic,
        args.partition,
        start,
        args.follow,
        args.max_records,
        |partition, r| {
            let more = print(&mut out, p, topic, partition, r)?;
            printed += 1;
            out.flush().ok();
            Ok(more)
        },
    )?;
    if printed == 0 && crate::stderr_is_tty() {
        eprintln!("no records");
    }
    Ok(())
}

fn bytes(r: &Value, field: &Value) -> Option<Vec<u8>> {
    let s = field.as_str()?;
    if r["encoding"] == "base64" { B64.decode(s).ok() } else { Some(s.as_bytes().to_vec()) }
}

/// `k=v,k2=v2` from a record's headers (a null value prints as the bare key).
fn header_text(r: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, h) in array(&r["headers"]).iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(h["key"].as_str().unwrap_or("").as_bytes());
        if let Some(v) = bytes(r, &h["value"]) {
            out.push(b'=');
            out.extend(v);
        }
    }
    out
}

/// Prints one record; false when stdout is closed.
pub fn print(
    out: &mut impl Write,
    p: &Printer,
    topic: &str,
    partition: u32,
    r: &Value,
) -> anyhow::Result<bool> {
    let mut line = match p.format {
        Format::Json => {
            let mut obj = json!({"topic": topic, "partition": partition});
            for k in ["offset", "timestamp", "encoding", "key", "value", "headers"] {
                obj[k] = r[k].clone();
            }
            obj.to_string().into_bytes()
        }
        Format::Raw => bytes(r, &r["value"]).unwrap_or_default(),
        Format::Base64 => B64.encode(bytes(r, &r["value"]).unwrap_or_default()).into_bytes(),
        Format::Kv => {
            let mut l = Vec::new();
            if p.headers {
                l.extend(header_text(r));
                l.extend_from_slice(p.sep.as_bytes());
            }
            l.extend(bytes(r, &r["key"]).unwrap_or_default());
            l.extend_from_slice(p.sep.as_bytes());
            l.extend(bytes(r, &r["value"]).unwrap_or_default());
            l
        }
    };
    line.push(b'\n');
    write_out(out, &line)
}
