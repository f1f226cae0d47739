//! `es produce`: one record from flags or files, or one record per stdin line
//! (optionally split into key and value, optionally base64, or split at another
//! delimiter), sent in batches. Says where every record went: its partition and
//! offset, or the dead-letter topic a validator sent it to, and prints warnings.

use std::io::{BufRead, Read, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use anyhow::{Context, bail};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use clap::{Args, ValueEnum};
use serde_json::{Value, json};

use crate::client::{ApiError, Client};
use crate::target::TopicArg;
use crate::topic::{array, text};
use crate::{plural, segment};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Encoding {
    /// Bytes as given.
    Text,
    /// --key, --value and each stdin record's key and value are base64, decoded
    /// before sending (so any bytes fit on one line).
    Base64,
}

#[derive(Debug, Args)]
pub struct ProduceArgs {
    #[command(flatten)]
    topic: TopicArg,
    /// The record key (for stdin input: the key of every record without --key-separator).
    #[arg(long, conflicts_with = "key_file")]
    key: Option<String>,
    /// The record key is this file's bytes.
    #[arg(long, value_name = "FILE")]
    key_file: Option<PathBuf>,
    /// The record value; without it (or --value-file), each stdin line is a record.
    #[arg(long, conflicts_with = "value_file")]
    value: Option<String>,
    /// The record value is this file's bytes, unchanged (`-`: all of stdin as one record).
    #[arg(long, value_name = "FILE")]
    value_file: Option<PathBuf>,
    /// How --key, --value and stdin records are encoded.
    #[arg(long, value_enum, default_value = "text")]
    encoding: Encoding,
    /// What ends a stdin record: a newline by default; escapes \n, \t, \0 are understood
    /// (e.g. --delimiter '\0' for NUL-separated input).
    #[arg(long, value_name = "SEP", default_value = "\\n")]
    delimiter: String,
    /// Write to this partition instead of choosing by key.
    #[arg(long)]
    partition: Option<u32>,
    /// A header as key=value; repeatable.
    #[arg(long = "header", value_name = "KEY=VALUE")]
    headers: Vec<String>,
    /// Split each stdin record at the first SEP into key and value.
    #[arg(long, value_name = "SEP")]
    key_separator: Option<String>,
    /// Stdin records per request.
    #[arg(long, default_value_t = 500, value_name = "N")]
    batch_size: usize,
    /// How long a partly filled stdin batch waits for more lines before it is sent.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    linger_ms: u64,
    /// With --protocol binary: an idempotent producer (retries cannot write twice).
    /// A topic that dead-letters then refuses a batch holding a dead letter whole,
    /// since an idempotent batch is written whole or not at all.
    #[arg(long)]
    idempotent: bool,
    #[command(flatten)]
    transport: crate::binary::Transport,
}

/// A record read from the input: key and value bytes.
type Input = (Option<Vec<u8>>, Vec<u8>);

pub fn run(client: &Client, args: &ProduceArgs, json_out: bool) -> anyhow::Result<()> {
    if args.batch_size == 0 {
        bail!("--batch-size must be at least 1");
    }
    let parser = Parser::new(args)?;
    let single = single(args, &parser)?;
    if args.transport.is_binary() {
        return produce_binary(args, client.api_key(), client.binary_tls(), single, parser, json_out);
    }
    let headers = headers(&args.headers)?;
    let topic = args.topic.name();
    let path = format!("/topics/{}/records", segment(topic));
    if let Some((key, value)) = single {
        let record = record(key.as_deref(), &value, args, &headers);
        let v = client.post(&path, &json!({"encoding": "base64", "records": [record]}))?;
        let mut report = Report::default();
        report.add(topic, &v, 0);
        if json_out {
            println!("{v}");
        } else {
            report.print_single();
        }
        return Ok(());
    }
    produce_stdin(client, &path, args, parser, &headers, json_out)
}

/// The one record of `--value`/`--value-file`, or `None` for stdin records.
fn single(args: &ProduceArgs, parser: &Parser) -> anyhow::Result<Option<Input>> {
    let key = match (&args.key, &args.key_file) {
        (Some(k), _) => Some(parser.decode(k.as_bytes(), "--key")?),
        (None, Some(f)) => Some(read_file(f)?),
        (None, None) => None,
    };
    let value = match (&args.value, &args.value_file) {
        (Some(v), _) => parser.decode(v.as_bytes(), "--value")?,
        (None, Some(f)) => read_file(f)?,
        (None, None) => return Ok(None),
    };
    Ok(Some((key, value)))
}

fn read_file(path: &PathBuf) -> anyhow::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut all = Vec::new();
        std::io::stdin().lock().read_to_end(&mut all).context("reading stdin")?;
        return Ok(all);
    }
    std::fs::read(path).with_context(|| format!("reading {}", path.display()))
}

/// Turns stdin bytes into records: the delimiter, the key separator, the encoding.
#[derive(Debug, Clone)]
struct Parser {
    delimiter: Vec<u8>,
    key_separator: Option<Vec<u8>>,
    key: Option<Vec<u8>>,
    base64: bool,
}

impl Parser {
    fn new(args: &ProduceArgs) -> anyhow::Result<Self> {
        let delimiter = unescape(&args.delimiter);
        if delimiter.is_empty() {
            bail!("--delimiter must not be empty");
        }
        let mut p = Parser {
            delimiter,
            key_separator: args.key_separator.as_deref().filter(|s| !s.is_empty()).map(unescape),
            key: None,
            base64: args.encoding == Encoding::Base64,
        };
        p.key = match (&args.key, &args.key_file) {
            (Some(k), _) => Some(p.decode(k.as_bytes(), "--key")?),
            (None, Some(f)) if args.value.is_none() && args.value_file.is_none() => Some(read_file(f)?),
            _ => None,
        };
        Ok(p)
    }

    fn decode(&self, text: &[u8], what: &str) -> anyhow::Result<Vec<u8>> {
        if !self.base64 {
            return Ok(text.to_vec());
        }
        B64.decode(text).with_context(|| {
            format!("{what} is not valid base64 (--encoding base64): {:?}", String::from_utf8_lossy(text))
        })
    }

    /// One stdin record (its delimiter already removed) as key and value.
    fn parse(&self, number: usize, raw: &[u8]) -> anyhow::Result<Input> {
        let raw = if self.delimiter == b"\n" { raw.strip_suffix(b"\r").unwrap_or(raw) } else { raw };
        let what = |part: &str| format!("the {part} of stdin record {number}");
        let Some(sep) = &self.key_separator else {
            return Ok((self.key.clone(), self.decode(raw, &what("value"))?));
        };
        match raw.windows(sep.len()).position(|w| w == sep.as_slice()) {
            Some(i) => Ok((
                Some(self.decode(&raw[..i], &what("key"))?),
                self.decode(&raw[i + sep.len()..], &what("value"))?,
            )),
            None => bail!(
                "stdin record {number} has no key separator {:?}: {:?}",
                String::from_utf8_lossy(sep),
                String::from_utf8_lossy(raw)
            ),
        }
    }
}

/// `\n`, `\t`, `\r`, `\0` and `\\` in a flag value as bytes.
fn unescape(s: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        match chars.next() {
            Some('n') => out.push(b'\n'),
            Some('t') => out.push(b'\t'),
            Some('r') => out.push(b'\r'),
            Some('0') => out.push(0),
            Some('\\') => out.push(b'\\'),
            Some(other) => {
                out.push(b'\\');
                let mut buf = [0u8; 4];
                out.extend_from_slice(other.encode_utf8(&mut buf).as_bytes());
            }
            None => out.push(b'\\'),
        }
    }
    out
}

/// `--protocol binary`: the flag's record, or the stdin records, through
/// es-client's batching, idempotent producer.
fn produce_binary(
    args: &ProduceArgs,
    api_key: Option<&str>,
    tls: Option<&es_client::ClientTls>,
    single: Option<Input>,
    parser: Parser,
    json_out: bool,
) -> anyhow::Result<()> {
    let mut hdrs = Vec::new();
    for pair in &args.headers {
        let Some((k, v)) = pair.split_once('=') else { bail!("--header takes KEY=VALUE; got {pair:?}") };
        hdrs.push(es_core::Header { key: k.to_owned(), value: Some(v.as_bytes().to_vec().into()) });
    }
    let make = |(key, value): Input| es_core::Record {
        key: key.map(Into::into),
        value: Some(value.into()),
        headers: hdrs.clone(),
        timestamp: None,
    };
    let topic = args.topic.name();
    let is_single = single.is_some();
    let placed = match single {
        Some(one) => crate::binary::produce(
            crate::binary::Endpoint { transport: &args.transport, api_key, tls },
            topic,
            args.partition,
            std::iter::once(Ok(make(one))),
            args.idempotent,
            json_out,
        )?,
        None => {
            let records = read_records_in_background(parser).into_iter().map(|r| r.map(make));
            crate::binary::produce(
                crate::binary::Endpoint { transport: &args.transport, api_key, tls },
                topic,
                args.partition,
                records,
                args.idempotent,
                json_out,
            )?
        }
    };
    if !json_out {
        let mut report = Report::default();
        for (number, meta) in placed.iter().enumerate() {
            let finding = meta.finding.as_ref().map(crate::binary::finding_json);
            report.place(number, meta.topic.clone(), meta.partition.into(), meta.offset.into(), finding);
        }
        if is_single { report.print_single() } else { report.print_summary(topic) }
    }
    Ok(())
}

fn produce_stdin(
    client: &Client,
    path: &str,
    args: &ProduceArgs,
    parser: Parser,
    headers: &[Value],
    json_out: bool,
) -> anyhow::Result<()> {
    let records = read_records_in_background(parser);
    let linger = Duration::from_millis(args.linger_ms);
    let mut batch = Vec::new();
    let mut sent = 0usize;
    let mut report = Report::default();
    let topic = args.topic.name();
    loop {
        // Wait for more records only while a batch is open and younger than the linger,
        // so piped input goes in full batches and typed lines go out promptly.
        let next = if batch.is_empty() {
            records.recv().map_err(|_| RecvTimeoutError::Disconnected)
        } else {
            records.recv_timeout(linger)
        };
        let idle = next.is_err();
        let done = match next {
            Ok(input) => {
                let (key, value) = input?;
                batch.push(record(key.as_deref(), &value, args, headers));
                false
            }
            Err(RecvTimeoutError::Timeout) => false,
            Err(RecvTimeoutError::Disconnected) => true,
        };
        let full = batch.len() >= args.batch_size;
        if !batch.is_empty() && (full || idle) {
            let count = batch.len();
            let body = json!({"encoding": "base64", "records": std::mem::take(&mut batch)});
            let v = match client.post(path, &body) {
                Ok(v) => v,
                Err(e) => {
                    let what = batch_outcome(&e);
                    let last = sent + count - 1;
                    return Err(numbered_from(e, sent)
                        .context(format!("sending stdin records {sent}..{last} ({what})")));
                }
            };
            report.add(topic, &v, sent);
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
        report.print_summary(topic);
    }
    Ok(())
}

/// A refusal's record numbers count from the batch; make them count from the input.
/// What a failed produce request left behind: a refusal (4xx but a timeout) wrote
/// nothing; a 5xx, a timeout or a lost connection may have written the batch.
fn batch_outcome(e: &anyhow::Error) -> &'static str {
    match e.downcast_ref::<ApiError>() {
        Some(api) if (400..500).contains(&api.status) && api.status != 408 => {
            "nothing of this batch was written"
        }
        _ => "this batch may or may not be written: read the topic before sending it again",
    }
}

fn numbered_from(e: anyhow::Error, first: usize) -> anyhow::Error {
    match e.downcast::<ApiError>() {
        Ok(api) if first > 0 => api.renumbered(first).into(),
        Ok(api) => api.into(),
        Err(other) => other,
    }
}

/// Where the records went, from the broker's produce answers.
#[derive(Debug, Default)]
struct Report {
    /// (destination topic, partition, offset) per record, in input order.
    placed: Vec<(String, Value, Value)>,
    /// Dead-lettered records: (input number, finding).
    dead: Vec<(usize, Value)>,
    warnings: Vec<(usize, Value)>,
}

impl Report {
    /// Adds one answer whose records are input numbers `first..`.
    fn add(&mut self, topic: &str, v: &Value, first: usize) {
        for o in array(&v["offsets"]) {
            let to = o["topic"].as_str().unwrap_or(topic).to_owned();
            self.placed.push((to, o["partition"].clone(), o["offset"].clone()));
        }
        for f in array(&v["violations"]) {
            let number = f["index"].as_u64().unwrap_or(0) as usize + first;
            self.note(number, &f);
        }
    }

    /// One record's place (the binary protocol answers per record).
    fn place(&mut self, number: usize, to: String, partition: Value, offset: Value, finding: Option<Value>) {
        self.placed.push((to, partition, offset));
        if let Some(f) = finding {
            self.note(number, &f);
        }
    }

    fn note(&mut self, number: usize, f: &Value) {
        // The broker's word for the outcome (`Outcome`, serialized kebab-case).
        let list = if f["outcome"] == "dead-lettered" { &mut self.dead } else { &mut self.warnings };
        list.push((number, f.clone()));
        list.sort_by_key(|(n, _)| *n);
    }

    fn print_warnings(&self) {
        for (n, f) in &self.warnings {
            eprintln!("warning: record {n}: {}", finding(f));
        }
    }

    /// `--value`: the record's place, or its dead-letter topic and why.
    fn print_single(&self) {
        self.print_warnings();
        let Some((to, partition, offset)) = self.placed.first() else { return };
        match self.dead.first() {
            Some((_, f)) => {
                println!("dead-lettered to {to} partition {partition} at offset {offset}: {}", finding(f))
            }
            None => println!("wrote to {to} partition {partition} at offset {offset}"),
        }
    }

    /// stdin: counts per destination topic, then each dead-lettered record.
    fn print_summary(&self, topic: &str) {
        self.print_warnings();
        for (n, f) in &self.dead {
            let (to, partition, offset) = &self.placed[*n];
            eprintln!(
                "record {n} dead-lettered to {to} partition {partition} at offset {offset}: {}",
                finding(f)
            );
        }
        let kept = self.placed.iter().filter(|(to, ..)| to == topic).count();
        let mut line = format!("wrote {} to {topic}", plural(kept as u64, "record"));
        let mut dlqs: Vec<&str> =
            self.placed.iter().map(|(to, ..)| to.as_str()).filter(|to| *to != topic).collect();
        dlqs.sort_unstable();
        dlqs.dedup();
        for dlq in dlqs {
            let n = self.placed.iter().filter(|(to, ..)| to == dlq).count();
            line.push_str(&format!("; dead-lettered {} to {dlq}", plural(n as u64, "record")));
        }
        println!("{line}");
    }
}

/// A validator finding as "plugin (code): reason".
fn finding(f: &Value) -> String {
    format!("{} ({}): {}", text(&f["plugin"]), text(&f["code"]), text(&f["reason"]))
}

/// Reads stdin record by record (as bytes, so any encoding passes) on a thread; the
/// channel closes at end of input.
fn read_records_in_background(parser: Parser) -> Receiver<anyhow::Result<Input>> {
    let (tx, rx) = mpsc::sync_channel(10_000);
    std::thread::spawn(move || {
        let mut input = std::io::stdin().lock();
        let last = *parser.delimiter.last().expect("the delimiter is not empty");
        let mut number = 0usize;
        let mut pending = Vec::new();
        loop {
            let mut chunk = Vec::new();
            let n = match input.read_until(last, &mut chunk) {
                Ok(n) => n,
                Err(e) => {
                    let _ = tx.send(Err(anyhow::Error::new(e).context("reading stdin")));
                    break;
                }
            };
            pending.extend_from_slice(&chunk);
            let ended = n == 0;
            let complete = pending.ends_with(&parser.delimiter);
            if !complete && !ended {
                continue;
            }
            if complete {
                pending.truncate(pending.len() - parser.delimiter.len());
            } else if pending.is_empty() {
                break;
            }
            let record = parser.parse(number, &std::mem::take(&mut pending));
            number += 1;
            if tx.send(record).is_err() || ended {
                break;
            }
        }
    });
    rx
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parser(sep: Option<&str>, base64: bool) -> Parser {
        Parser { delimiter: b"\n".to_vec(), key_separator: sep.map(unescape), key: None, base64 }
    }

    #[test]
    fn escapes_become_bytes() {
        assert_eq!(unescape("\\0"), vec![0]);
        assert_eq!(unescape("a\\tb\\n"), b"a\tb\n".to_vec());
        assert_eq!(unescape("\\x"), b"\\x".to_vec());
    }

    #[test]
    fn base64_records_carry_any_bytes() {
        let p = parser(Some(":"), true);
        let (key, value) = p.parse(0, b"AAo=:CgAK").unwrap();
        assert_eq!(key.unwrap(), vec![0, 10]);
        assert_eq!(value, vec![10, 0, 10]);
        let err = p.parse(3, b"a:!!").unwrap_err().to_string();
        assert!(err.contains("stdin record 3") && err.contains("base64"), "{err}");
    }

    #[test]
    fn a_line_without_separator_is_refused_with_its_number() {
        let err = parser(Some(":"), false).parse(7, b"novalue").unwrap_err().to_string();
        assert!(err.contains("record 7") && err.contains("novalue"), "{err}");
    }
}
