//! `es group list|describe|reset-offsets|delete` and `es consume --group`, over the
//! broker's consumer-group HTTP API.

use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::{Value, json};
use tokio::signal::unix::{SignalKind, signal};

use crate::client::Client;
use crate::consume::{Printer, print};
use crate::output::table;
use crate::segment;
use crate::target::GroupArg;
use crate::topic::{array, text};

#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// List groups with members or committed offsets.
    List,
    /// Show a group's state, members, assignment and lag per partition.
    Describe {
        #[command(flatten)]
        group: GroupArg,
    },
    /// Move committed offsets (refused while the group has members).
    ResetOffsets {
        #[command(flatten)]
        group: GroupArg,
        /// The topic whose offsets move.
        #[arg(long)]
        topic: String,
        /// Reset to the earliest offset.
        #[arg(long, group = "to")]
        to_earliest: bool,
        /// Reset to the latest offset (skip everything written so far).
        #[arg(long, group = "to")]
        to_latest: bool,
        /// Reset to the first record at or after this timestamp (ms).
        #[arg(long, group = "to")]
        to_timestamp: Option<i64>,
        /// Reset to this offset.
        #[arg(long, group = "to")]
        to_offset: Option<u64>,
        /// Only these partitions (default: all).
        #[arg(long, value_delimiter = ',')]
        partitions: Option<Vec<u32>>,
    },
    /// Delete an empty group and its committed offsets.
    Delete {
        #[command(flatten)]
        group: GroupArg,
    },
}

pub fn run(client: &Client, cmd: GroupCommand, json_out: bool) -> anyhow::Result<()> {
    match cmd {
        GroupCommand::List => {
            let v = client.get("/groups")?;
            if json_out {
                println!("{v}");
                return Ok(());
            }
            let rows: Vec<Vec<String>> = array(&v["groups"])
                .iter()
                .map(|g| vec![text(&g["group"]), text(&g["state"]), text(&g["kind"])])
                .collect();
            table(&["GROUP", "STATE", "KIND"], &rows);
        }
        GroupCommand::Describe { group } => describe(client, group.name(), json_out)?,
        GroupCommand::ResetOffsets {
            group,
            topic,
            to_earliest,
            to_latest,
            to_timestamp,
            to_offset,
            partitions,
        } => {
            let mut body = match (to_earliest, to_latest, to_timestamp, to_offset) {
                (true, _, _, _) => json!({"to": "earliest"}),
                (_, true, _, _) => json!({"to": "latest"}),
                (_, _, Some(ts), _) => json!({"to": "timestamp", "timestamp": ts}),
                (_, _, _, Some(o)) => json!({"to": "offset", "offset": o}),
                _ => bail!("say where to: --to-earliest, --to-latest, --to-timestamp MS or --to-offset N"),
            };
            body["topic"] = json!(topic);
            if let Some(p) = partitions {
                body["partitions"] = json!(p);
            }
            let v = client.post(&format!("/groups/{}/reset-offsets", segment(group.name())), &body)?;
            if let Some(wanted) = to_offset {
                warn_clamped(&v, wanted);
            }
            print_offsets(&v, json_out);
        }
        GroupCommand::Delete { group } => {
            let group = group.name();
            client.delete(&format!("/groups/{}", segment(group)))?;
            if !json_out {
                println!("deleted group {group}");
            }
        }
    }
    Ok(())
}

fn describe(client: &Client, group: &str, json_out: bool) -> anyhow::Result<()> {
    let v = client.get(&format!("/groups/{}", segment(group)))?;
    if json_out {
        println!("{v}");
        return Ok(());
    }
    let (name, state, generation) = (text(&v["group"]), text(&v["state"]), text(&v["generation"]));
    println!("group {name} state {state} generation {generation} kind {}", text(&v["kind"]));
    let rows: Vec<Vec<String>> = array(&v["partitions"])
        .iter()
        .map(|p| {
            let opt = |x: &Value| if x.is_null() { "-".to_owned() } else { text(x) };
            vec![
                text(&p["topic"]),
                text(&p["partition"]),
                opt(&p["committed"]),
                text(&p["high_watermark"]),
                text(&p["lag"]),
                opt(&p["owner"]),
            ]
        })
        .collect();
    table(&["TOPIC", "PARTITION", "COMMITTED", "HIGH-WATERMARK", "LAG", "OWNER"], &rows);
    Ok(())
}

/// `--to-offset` past a partition's end (or before its start) is moved into the
/// log by the broker; say so rather than let it pass silently.
fn warn_clamped(v: &Value, wanted: u64) {
    for o in array(&v["offsets"]) {
        if o["offset"].as_u64().is_some_and(|got| got != wanted) {
            eprintln!(
                "note: partition {} has no offset {wanted}; its offset is set to {} (the nearest end of the log)",
                text(&o["partition"]),
                text(&o["offset"])
            );
        }
    }
}

fn print_offsets(v: &Value, json_out: bool) {
    if json_out {
        println!("{v}");
        return;
    }
    let rows: Vec<Vec<String>> = array(&v["offsets"])
        .iter()
        .map(|o| vec![text(&o["topic"]), text(&o["partition"]), text(&o["offset"])])
        .collect();
    table(&["TOPIC", "PARTITION", "OFFSET"], &rows);
}

/// What `es consume --group` reads.
pub struct Session<'a> {
    pub group: &'a str,
    pub topic: &'a str,
    pub max_records: Option<usize>,
    pub follow: bool,
    pub session_timeout_ms: Option<u64>,
}

/// `es consume --group` stopped by SIGINT or SIGTERM after leaving its group.
#[derive(Debug)]
pub struct Interrupted(pub i32);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "interrupted by signal {}", self.0)
    }
}

impl std::error::Error for Interrupted {}

impl Interrupted {
    /// The shell's convention: 128 + the signal number.
    pub fn exit_code(&self) -> u8 {
        (128 + self.0).clamp(0, 255) as u8
    }
}

/// Signal number of the first SIGINT/SIGTERM, or 0 while none came.
static SIGNALLED: AtomicI32 = AtomicI32::new(0);

/// Catches SIGINT and SIGTERM on a thread so the poll loop can leave the group
/// (committing what it printed) instead of dying and holding its partitions until
/// the session times out. A second signal ends the process at once.
fn catch_signals() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the signal handler")?;
    let (mut int, mut term) = rt
        .block_on(async {
            Ok::<_, std::io::Error>((signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?))
        })
        .context("installing the signal handler")?;
    std::thread::spawn(move || {
        rt.block_on(async {
            loop {
                let number = tokio::select! {
                    _ = int.recv() => 2,
                    _ = term.recv() => 15,
                };
                if SIGNALLED.swap(number, Ordering::SeqCst) != 0 {
                    std::process::exit(128 + number);
                }
            }
        });
    });
    Ok(())
}

/// `es consume --group`: a simple HTTP session across all assigned partitions, with
/// auto-commit; leaves the group (committing what was printed) when done, when
/// stdout closes, or on SIGINT/SIGTERM.
pub fn consume(client: &Client, s: &Session<'_>, printer: &Printer) -> anyhow::Result<()> {
    catch_signals()?;
    let base = format!("/groups/{}/members", segment(s.group));
    let mut body = json!({"topics": [s.topic], "client_id": "es-cli"});
    if let Some(ms) = s.session_timeout_ms {
        body["session_timeout_ms"] = json!(ms);
    }
    let created = client.post(&base, &body)?;
    let member = segment(&text(&created["member_id"]));
    let result = poll_loop(client, &format!("{base}/{member}"), s, printer);
    let left = client.delete(&format!("{base}/{member}"));
    result.and(left.map(|_| ()))?;
    match SIGNALLED.load(Ordering::SeqCst) {
        0 => Ok(()),
        number => Err(Interrupted(number).into()),
    }
}

fn poll_loop(client: &Client, path: &str, s: &Session<'_>, printer: &Printer) -> anyhow::Result<()> {
    let mut left = s.max_records.unwrap_or(usize::MAX);
    let mut printed = 0usize;
    let mut out = std::io::stdout().lock();
    // Without --follow, stop after two seconds without records.
    let mut idle_since = Instant::now();
    // Each poll waits at most a second, so a signal is acted on within about a second.
    while left > 0 && SIGNALLED.load(Ordering::SeqCst) == 0 {
        let url = format!("{path}/records?wait_ms=1000&max_records={}&encoding=base64", left.min(10_000));
        let v = client.get(&url)?;
        let records = array(&v["records"]);
        for r in records.iter().take(left) {
            let partition = r["partition"].as_u64().unwrap_or(0) as u32;
            if !print(&mut out, printer, r["topic"].as_str().unwrap_or(s.topic), partition, r)? {
                return Ok(());
            }
        }
        left -= records.len().min(left);
        printed += records.len();
        if !records.is_empty() {
            idle_since = Instant::now();
        } else if !s.follow && idle_since.elapsed() > Duration::from_secs(2) {
            break;
        }
        out.flush().ok();
    }
    if printed == 0 && crate::stderr_is_tty() {
        eprintln!("no records");
    }
    Ok(())
}
