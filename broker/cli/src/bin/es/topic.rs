//! `es topic ...` and `es offsets`: topic administration and offset lookups.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::client::Client;
use crate::output::table;
use crate::segment;

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create a topic.
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, default_value_t = 1)]
        partitions: u32,
        /// A setting as key=value, e.g. retention.ms=86400000; repeatable.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        config: Vec<String>,
    },
    /// List topics.
    List,
    /// Show a topic's partitions and config.
    Describe {
        #[arg(long)]
        name: String,
    },
    /// Delete a topic and all its records.
    Delete {
        #[arg(long)]
        name: String,
    },
    /// Change a topic's settings and its validators.
    Alter {
        /// The topic (or --name).
        #[arg(value_name = "TOPIC", required_unless_present = "name")]
        topic: Option<String>,
        #[arg(long, conflicts_with = "topic")]
        name: Option<String>,
        /// A setting as key=value; repeatable.
        #[arg(long = "config", value_name = "KEY=VALUE", required_unless_present_any = ["validators", "no_validators"])]
        config: Vec<String>,
        #[command(flatten)]
        validators: crate::plugin::ValidatorArgs,
    },
    /// Show the validators bound to a topic and what they have done.
    Validators {
        /// The topic.
        topic: String,
    },
}

#[derive(Debug, Args)]
pub struct OffsetsArgs {
    #[arg(long)]
    topic: String,
    /// Also find the first offset at or after this time (ms since the epoch).
    #[arg(long)]
    timestamp: Option<i64>,
}

pub fn run(client: &Client, cmd: TopicCommand, json: bool) -> anyhow::Result<()> {
    match cmd {
        TopicCommand::Create { name, partitions, config } => {
            let body = json!({"name": name, "partitions": partitions, "config": settings(&config)?});
            let v = client.post("/topics", &body)?;
            print_or(json, &v, || println!("created topic {name} with {partitions} partitions"));
        }
        TopicCommand::List => {
            let v = client.get("/topics")?;
            print_or(json, &v, || list_table(&v));
        }
        TopicCommand::Describe { name } => {
            let v = client.get(&format!("/topics/{}", segment(&name)))?;
            print_or(json, &v, || describe_table(&v));
        }
        TopicCommand::Delete { name } => {
            client.delete(&format!("/topics/{}", segment(&name)))?;
            print_or(json, &json!({"deleted": name}), || println!("deleted topic {name}"));
        }
        TopicCommand::Alter { topic, name, config, validators } => {
            let name = topic.or(name).expect("clap requires TOPIC or --name");
            if !config.is_empty() {
                let path = format!("/topics/{}/config", segment(&name));
                let v = client.patch(&path, &json!({"config": settings(&config)?}))?;
                print_or(json, &v, || config_table(&v["config"]));
            }
            if validators.is_set() {
                crate::plugin::bind(client, &name, &validators, json)?;
            }
        }
        TopicCommand::Validators { topic } => {
            let v = client.get(&format!("/topics/{}/validators", segment(&topic)))?;
            print_or(json, &v, || crate::plugin::validators_table(&v));
        }
    }
    Ok(())
}

pub fn print_or(json: bool, v: &Value, human: impl FnOnce()) {
    if json {
        println!("{v}");
    } else {
        human();
    }
}

/// `key=value` flags as a JSON object; values stay strings, the broker parses them.
fn settings(pairs: &[String]) -> anyhow::Result<Value> {
    let mut map = Map::new();
    for pair in pairs {
        let Some((k, v)) = pair.split_once('=') else {
            bail!("--config takes KEY=VALUE (e.g. retention.ms=86400000); got {pair:?}");
        };
        map.insert(k.trim().to_owned(), Value::String(v.trim().to_owned()));
    }
    Ok(Value::Object(map))
}

fn list_table(v: &Value) {
    let rows: Vec<Vec<String>> =
        array(&v["topics"]).iter().map(|t| vec![text(&t["name"]), text(&t["partition_count"])]).collect();
    if rows.is_empty() {
        println!("no topics yet; create one with `es topic create --name NAME`");
        return;
    }
    table(&["TOPIC", "PARTITIONS"], &rows);
}

fn describe_table(v: &Value) {
    println!("topic {} ({} partitions)", text(&v["name"]), text(&v["partition_count"]));
    let rows: Vec<Vec<String>> = array(&v["partitions"])
        .iter()
        .map(|p| {
            ["partition", "log_start_offset", "high_watermark", "size_bytes", "segment_count"]
                .iter()
                .map(|k| text(&p[*k]))
                .collect()
        })
        .collect();
    table(&["PARTITION", "LOG START", "HIGH WATERMARK", "SIZE BYTES", "SEGMENTS"], &rows);
    println!();
    config_table(&v["config"]);
}

fn config_table(config: &Value) {
    let rows: Vec<Vec<String>> = config
        .as_object()
        .map(|m| m.iter().map(|(k, v)| vec![k.clone(), text(v)]).collect())
        .unwrap_or_default();
    table(&["SETTING", "VALUE"], &rows);
}

pub fn offsets(client: &Client, args: &OffsetsArgs, json: bool) -> anyhow::Result<()> {
    let mut path = format!("/topics/{}/offsets", segment(&args.topic));
    if let Some(ts) = args.timestamp {
        path.push_str(&format!("?timestamp={ts}"));
    }
    let v = client.get(&path).context("looking up offsets")?;
    print_or(json, &v, || {
        let mut header = vec!["PARTITION", "EARLIEST", "LATEST"];
        if args.timestamp.is_some() {
            header.push("AT TIMESTAMP");
        }
        let rows: Vec<Vec<String>> = array(&v["partitions"])
            .iter()
            .map(|p| {
                let mut row = vec![text(&p["partition"]), text(&p["earliest"]), text(&p["latest"])];
                if args.timestamp.is_some() {
                    row.push(text(&p["timestamp_offset"]));
                }
                row
            })
            .collect();
        table(&header, &rows);
    });
    Ok(())
}

pub fn array(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// A JSON scalar as table text (strings without quotes).
pub fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}
