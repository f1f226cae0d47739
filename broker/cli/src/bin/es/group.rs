//! `es group list|describe|reset-offsets|delete` and `es consume --group`, over the
//! broker's consumer-group HTTP API.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Subcommand;
use serde_json::{Value, json};

use crate::client::Client;
use crate::output::table;
use crate::segment;
use crate::topic::{array, text};

#[derive(Debug, Subcommand)]
pub enum GroupCommand {
    /// List groups with members or committed offsets.
    List,
    /// Show a group's state, members, assignment and lag per partition.
    Describe {
        #[arg(long)]
        group: String,
    },
    /// Move committed offsets (refused while the group has members).
    ResetOffsets {
        #[arg(long)]
        group: String,
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
        #[arg(long)]
        group: String,
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
            let rows: Vec<Vec<String>> =
                array(&v["groups"]).iter().map(|g| vec![text(&g["group"]), text(&g["state"])]).collect();
            table(&["GROUP", "STATE"], &rows);
        }
        GroupCommand::Describe { group } => describe(client, &group, json_out)?,
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
            let v = client.post(&format!("/groups/{}/reset-offsets", segment(&group)), &body)?;
            print_offsets(&v, json_out);
        }
        GroupCommand::Delete { group } => {
            client.delete(&format!("/groups/{}", segment(&group)))?;
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
    println!("group {} state {} generation {}", text(&v["group"]), text(&v["state"]), text(&v["generation"]));
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

/// `es consume --group`: a simple HTTP session across all assigned partitions, with
/// auto-commit; leaves the group (committing) when done.
pub fn consume(
    client: &Client,
    group: &str,
    topic: &str,
    max_records: Option<usize>,
    follow: bool,
    json_out: bool,
) -> anyhow::Result<()> {
    let base = format!("/groups/{}/members", segment(group));
    let created = client.post(&base, &json!({"topics": [topic], "client_id": "es-cli"}))?;
    let member = segment(&text(&created["member_id"]));
    let result = poll_loop(client, &format!("{base}/{member}"), max_records, follow, json_out);
    let left = client.delete(&format!("{base}/{member}"));
    result.and(left.map(|_| ()))
}

fn poll_loop(
    client: &Client,
    path: &str,
    max: Option<usize>,
    follow: bool,
    json_out: bool,
) -> anyhow::Result<()> {
    let mut left = max.unwrap_or(usize::MAX);
    let mut out = std::io::stdout().lock();
    // Without --follow, stop after two seconds without records.
    let mut idle_since = Instant::now();
    while left > 0 {
        let v = client.get(&format!("{path}/records?wait_ms=1000&max_records={}", left.min(10_000)))?;
        let records = array(&v["records"]);
        for r in records.iter().take(left) {
            let line = if json_out {
                r.to_string()
            } else {
                format!("{}\t{}", r["key"].as_str().unwrap_or(""), r["value"].as_str().unwrap_or(""))
            };
            if writeln!(out, "{line}").is_err() {
                return Ok(());
            }
        }
        left -= records.len().min(left);
        if !records.is_empty() {
            idle_since = Instant::now();
        } else if !follow && idle_since.elapsed() > Duration::from_secs(2) {
            break;
        }
        out.flush().ok();
    }
    Ok(())
}
