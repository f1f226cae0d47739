//! `es topic ...` and `es offsets`: topic administration and offset lookups.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::client::Client;
use crate::output::table;
use crate::target::TopicArg;
use crate::{plural, segment};

#[derive(Debug, Subcommand)]
pub enum TopicCommand {
    /// Create a topic.
    Create {
        #[command(flatten)]
        topic: TopicArg,
        /// How many partitions (more can be added later with `es topic alter --partitions`).
        #[arg(long, default_value_t = 1)]
        partitions: u32,
        /// A setting as key=value, e.g. retention.ms=86400000; repeatable.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        config: Vec<String>,
        /// In a cluster, how many nodes keep each partition [default: 3, or every
        /// node of a smaller cluster]; a single node keeps 1.
        #[arg(long)]
        replication_factor: Option<u32>,
    },
    /// List topics.
    List,
    /// Show a topic's partitions, config and validators.
    Describe {
        #[command(flatten)]
        topic: TopicArg,
    },
    /// Delete a topic and all its records.
    Delete {
        #[command(flatten)]
        topic: TopicArg,
    },
    /// Change a topic's settings, its partition count or its validators.
    Alter {
        #[command(flatten)]
        topic: TopicArg,
        /// A setting as key=value; repeatable.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        config: Vec<String>,
        /// Grow the topic to N partitions (partitions never shrink; keys then map over
        /// the new count).
        #[arg(long, value_name = "N")]
        partitions: Option<u32>,
        #[command(flatten)]
        validators: crate::plugin::ValidatorArgs,
    },
    /// Show the validators bound to a topic and what they have done.
    Validators {
        #[command(flatten)]
        topic: TopicArg,
    },
}

#[derive(Debug, Args)]
pub struct OffsetsArgs {
    #[command(flatten)]
    topic: TopicArg,
    /// Also find the first offset at or after this time (ms since the epoch).
    #[arg(long, value_name = "MS")]
    timestamp: Option<i64>,
}

pub fn run(client: &Client, cmd: TopicCommand, json: bool) -> anyhow::Result<()> {
    match cmd {
        TopicCommand::Create { topic, partitions, config, replication_factor } => {
            let name = topic.name();
            let mut body = json!({"name": name, "partitions": partitions, "config": settings(&config)?});
            if let Some(rf) = replication_factor {
                body["replication_factor"] = json!(rf);
            }
            let v = client.post("/topics", &body)?;
            print_or(json, &v, || println!("created topic {name} with {}", plural(partitions, "partition")));
        }
        TopicCommand::List => {
            let v = client.get("/topics")?;
            print_or(json, &v, || list_table(&v));
        }
        TopicCommand::Describe { topic } => describe(client, topic.name(), json)?,
        TopicCommand::Delete { topic } => {
            let name = topic.name();
            client.delete(&format!("/topics/{}", segment(name)))?;
            print_or(json, &json!({"deleted": name}), || println!("deleted topic {name}"));
        }
        TopicCommand::Alter { topic, config, partitions, validators } => {
            alter(client, topic.name(), &config, partitions, &validators, json)?;
        }
        TopicCommand::Validators { topic } => {
            let v = client.get(&format!("/topics/{}/validators", segment(topic.name())))?;
            print_or(json, &v, || crate::plugin::validators_table(&v));
        }
    }
    Ok(())
}

fn describe(client: &Client, name: &str, json: bool) -> anyhow::Result<()> {
    let mut v = client.get(&format!("/topics/{}", segment(name)))?;
    let validators = client.get(&format!("/topics/{}/validators", segment(name)))?;
    if json {
        v["validators"] = validators["validators"].clone();
        println!("{v}");
        return Ok(());
    }
    describe_table(&v);
    println!();
    crate::plugin::validators_table(&validators);
    Ok(())
}

fn alter(
    client: &Client,
    name: &str,
    config: &[String],
    partitions: Option<u32>,
    validators: &crate::plugin::ValidatorArgs,
    json: bool,
) -> anyhow::Result<()> {
    if config.is_empty() && partitions.is_none() && !validators.is_set() {
        validators.check_alone()?;
        bail!(
            "say what to change: --config KEY=VALUE, --partitions N, --validator PLUGIN or --no-validators \
             (see `es topic alter --help`)"
        );
    }
    if !config.is_empty() {
        let path = format!("/topics/{}/config", segment(name));
        let v = client.patch(&path, &json!({"config": settings(config)?}))?;
        print_or(json, &v, || config_table(&v["config"]));
    }
    if let Some(count) = partitions {
        add_partitions(client, name, count, json)?;
    }
    if validators.is_set() {
        crate::plugin::bind(client, name, validators, json)?;
    }
    Ok(())
}

/// `--partitions N`: grows the topic through `POST /topics/{topic}/partitions`.
fn add_partitions(client: &Client, name: &str, count: u32, json: bool) -> anyhow::Result<()> {
    let path = format!("/topics/{}/partitions", segment(name));
    let v = match client.post(&path, &json!({"count": count})) {
        Ok(v) => v,
        Err(e) => {
            let route_missing = e
                .downcast_ref::<crate::client::ApiError>()
                .is_some_and(|a| matches!(a.code(), "not_found" | "method_not_allowed"));
            if route_missing {
                bail!(
                    "this broker cannot add partitions (it has no POST /topics/{{topic}}/partitions); upgrade es-broker"
                );
            }
            return Err(e);
        }
    };
    print_or(json, &v, || {
        let now = v["partition_count"].as_u64().unwrap_or(u64::from(count));
        println!(
            "topic {name} now has {}; keys map over the new count from now on",
            plural(now, "partition")
        );
    });
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
        println!("no topics yet; create one with `es topic create NAME`");
        return;
    }
    table(&["TOPIC", "PARTITIONS"], &rows);
}

fn describe_table(v: &Value) {
    let count = v["partition_count"].as_u64().unwrap_or(0);
    println!("topic {} ({})", text(&v["name"]), plural(count, "partition"));
    let rows: Vec<Vec<String>> = array(&v["partitions"])
        .iter()
        .map(|p| {
            let keys = ["partition", "log_start_offset", "high_watermark", "size_bytes", "segment_count"];
            let cold = ["cold_size_bytes", "cold_segment_count"];
            // A broker without the cold columns (older) shows 0 there.
            let cold = cold.iter().map(|k| if p[*k].is_null() { "0".to_owned() } else { text(&p[*k]) });
            keys.iter().map(|k| text(&p[*k])).chain(cold).collect()
        })
        .collect();
    let heads = ["PARTITION", "LOG START", "HIGH WATERMARK", "LOCAL BYTES", "LOCAL SEGMENTS"];
    table(&[&heads[..], &["COLD BYTES", "COLD SEGMENTS"]].concat(), &rows);
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
    let mut path = format!("/topics/{}/offsets", segment(args.topic.name()));
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
