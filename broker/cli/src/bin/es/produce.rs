//! `es produce`: one record from flags, or one record per stdin line (optionally
//! split into key and value), sent in batches.

use std::io::{BufRead, Write};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use clap::Args;
use serde_json::{Value, json};

use crate::client::Client;
use crate::segment;

#[derive(Debug, Args)]
pub struct ProduceArgs {
    #[arg(long)]
    topic: String,
    /// The record key (for stdin input: the key of every line without --key-separator).
    #[arg(long)]
    key: Option<String>,
    /// The record value; without it, each stdin line is a record.
    #[arg(long)]
    value: Option<String>,
    /// Write to this partition instead of choosing by key.
    #[arg(long)]
    partition: Option<u32>,
    /// A header as key=value; repeatable.
    #[arg(long = "header", value_name = "KEY=VALUE")]
    headers: Vec<String>,
    /// Split each stdin line at the first SEP into key and value.
    #[arg(long, value_name = "SEP")]
    key_separator: Option<String>,
    /// Stdin records per request.
    #[arg(long, default_value_t = 500)]
    batch_size: usize,
    /// How long a partly filled stdin batch waits for more lines before it is sent.
    #[arg(long, default_value_t = 100)]
    linger_ms: u64,
    #[command(flatten)]
    transport: crate::binary::Transport,
}

pub fn run(client: &Client, args: &ProduceArgs, json_out: bool) -> anyhow::Result<()> {
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    if args.transport.is_binary() {
        return produce_binary(args, json_out);
    }
    let headers = headers(&args.headers)?;
    let path = format!("/topics/{}/records", segment(&args.topic));
    if let Some(value) = &args.value {
        let record = record(args.key.as_deref().map(str::as_bytes), value.as_bytes(), args, &headers);
        let v = client.post(&path, &json!({"encoding": "base64", "records": [record]}))?;
        if json_out {
            println!("{v}");
        } else {
            let o = &v["offsets"][0];
            println!("wrote to {} partition {} at offset {}", args.topic, o["partition"], o["offset"]);
        }
        return Ok(());
    }
    produce_stdin(client, &path, args, &headers, json_out)
}

/// `--protocol binary`: the flag's record, or one record per stdin line, through
/// es-client's batching, idempotent producer.
fn produce_binary(args: &ProduceArgs, json_out: bool) -> anyhow::Result<()> {
    let mut hdrs = Vec::new();
    for pair in &args.headers {
        let Some((k, v)) = pair.split_once('=') else { bail!("--header takes KEY=VALUE; got {pair:?}") };
        hdrs.push(es_core::Header { key: k.to_owned(), value: Some(v.as_bytes().to_vec().into()) });
    }
    let make = |key: Option<&[u8]>, value: &[u8]| es_core::Record {
        key: key.map(|k| k.to_vec().into()),
        value: Some(value.to_vec().into()),
        headers: hdrs.clone(),
        timestamp: None,
    };
    let written = match &args.value {
        Some(value) => {
            let one = std::iter::once(Ok(make(args.key.as_deref().map(str::as_bytes), value.as_bytes())));
            crate::binary::produce(&args.transport, &args.topic, args.partition, one, json_out)?
        }
        None => {
            let lines = std::io::stdin().lock().split(b'\n').map(|line| {
                let line = line.context("reading stdin")?;
                let (key, value) = split(trim_newline(&line), args)?;
                Ok(make(key, value))
            });
            crate::binary::produce(&args.transport, &args.topic, args.partition, lines, json_out)?
        }
    };
    if !json_out {
        println!("wrote {written} records to {} over the binary protocol", args.topic);
    }
    Ok(())
}

fn produce_stdin(
    client: &Client,
    path: &str,
    args: &ProduceArgs,
    headers: &[Value],
    json_out: bool,
) -> anyhow::Result<()> {
    let lines = read_lines_in_background();
    let linger = Duration::from_millis(args.linger_ms);
    let mut batch = Vec::new();
    let mut sent = 0usize;
    loop {
        // Wait for more lines only while a batch is open and younger than the linger,
        // so piped input goes in full batches and typed lines go out promptly.
        let next = if batch.is_empty() {
            lines.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            lines.recv_timeout(linger)
        };
        let idle = next.is_err();
        let done = match next {
            Ok(line) => {
                let line = line.context("reading stdin")?;
                let (key, value) = split(trim_newline(&line), args)?;
                batch.push(record(key, value, args, headers));
                false
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        };
        let full = batch.len() >= args.batch_size;
        if !batch.is_empty() && (full || idle) {
            let count = batch.len();
            let body = json!({"encoding": "base64", "records": std::mem::take(&mut batch)});
            let v = client
                .post(path, &body)
                .with_context(|| format!("sending records {}..{} from stdin", sent, sent + count))?;
            sent += count;
            if json_out {
                println!("{v}");
            }
        }
        if done {
            break;
        }
    }
    if !json_out {
        println!("wrote {sent} records to {}", args.topic);
    }
    Ok(())
}

/// Reads stdin line by line (as bytes, so any encoding passes) on a thread; the
/// channel closes at end of input.
fn read_lines_in_background() -> Receiver<std::io::Result<Vec<u8>>> {
    let (tx, rx) = mpsc::sync_channel(10_000);
    std::thread::spawn(move || {
        let mut input = std::io::stdin().lock();
        loop {
            let mut line = Vec::new();
            match input.read_until(b'\n', &mut line) {
                Ok(0) => break,
                Ok(_) => {
                    if tx.send(Ok(line)).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(e));
                    break;
                }
            }
        }
    });
    rx
}

fn trim_newline(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

/// Splits a stdin line into key and value at the first separator, if one is set.
fn split<'a>(line: &'a [u8], args: &'a ProduceArgs) -> anyhow::Result<(Option<&'a [u8]>, &'a [u8])> {
    let Some(sep) = args.key_separator.as_deref().filter(|s| !s.is_empty()) else {
        return Ok((args.key.as_deref().map(str::as_bytes), line));
    };
    let sep = sep.as_bytes();
    match line.windows(sep.len()).position(|w| w == sep) {
        Some(i) => Ok((Some(&line[..i]), &line[i + sep.len()..])),
        None => bail!(
            "a stdin line has no key separator {:?}: {:?}",
            args.key_separator.as_deref().unwrap_or_default(),
            String::from_utf8_lossy(line)
        ),
    }
}

/// One record in the request's base64 encoding, so any bytes pass unchanged.
fn record(key: Option<&[u8]>, value: &[u8], args: &ProduceArgs, headers: &[Value]) -> Value {
    let mut r = json!({
        "key": key.map(|k| B64.encode(k)),
        "value": B64.encode(value),
        "headers": headers,
    });
    if let Some(p) = args.partition {
        r["partition"] = json!(p);
    }
    r
}

fn headers(pairs: &[String]) -> anyhow::Result<Vec<Value>> {
    pairs
        .iter()
        .map(|pair| match pair.split_once('=') {
            Some((k, v)) => Ok(json!({"key": k, "value": B64.encode(v)})),
            None => bail!("--header takes KEY=VALUE; got {pair:?}"),
        })
        .collect()
}

/// Writes to stdout; a closed pipe (e.g. `| head`) is not an error.
pub fn write_out(out: &mut impl Write, bytes: &[u8]) -> anyhow::Result<bool> {
    match out.write_all(bytes) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e).context("writing to stdout"),
    }
}
