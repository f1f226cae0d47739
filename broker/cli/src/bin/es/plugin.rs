//! `es plugin ...`: upload, list, describe and remove plugins; and the
//! `--validator` flags of `es topic alter`, which bind validators to a topic.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Subcommand;
use serde_json::{Map, Value, json};

use crate::client::Client;
use crate::output::table;
use crate::segment;
use crate::target::PluginArg;
use crate::topic::{array, print_or, text};

#[derive(Debug, Subcommand)]
pub enum PluginCommand {
    /// Upload a WebAssembly component (checked, then stored on the broker's disk).
    Add {
        /// The component, e.g. target/wasm32-wasip2/release/my_plugin.wasm.
        file: PathBuf,
        /// The name topics bind it by.
        #[arg(long)]
        name: String,
        /// Replace the plugin of this name; topics bound to it move to the new
        /// version atomically.
        #[arg(long)]
        replace: bool,
        /// Default configuration as KEY=VALUE (or KEY=@FILE); repeatable.
        #[arg(long = "config", value_name = "KEY=VALUE")]
        config: Vec<String>,
        /// Deadline of one call (one batch), milliseconds.
        #[arg(long)]
        deadline_ms: Option<u64>,
        /// Memory cap of one instance, MiB.
        #[arg(long)]
        memory_mib: Option<usize>,
    },
    /// List plugins (built-in and uploaded) and the topics bound to each.
    List,
    /// Show one plugin's manifest.
    Describe {
        #[command(flatten)]
        plugin: PluginArg,
    },
    /// Remove an uploaded plugin (refused while a topic is bound to it).
    Remove {
        #[command(flatten)]
        plugin: PluginArg,
    },
}

pub fn run(client: &Client, cmd: PluginCommand, json: bool) -> anyhow::Result<()> {
    match cmd {
        PluginCommand::Add { file, name, replace, config, deadline_ms, memory_mib } => {
            let wasm = std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?;
            let mut query = vec![format!("replace={replace}")];
            for (k, v) in key_values(&config, "--config")? {
                query.push(format!("config.{}={}", encode(&k), encode(&v)));
            }
            if let Some(ms) = deadline_ms {
                query.push(format!("call_deadline_ms={ms}"));
            }
            if let Some(mib) = memory_mib {
                query.push(format!("memory_bytes_max={}", mib * 1024 * 1024));
            }
            // The sha256 stored before, to tell "unchanged" from "stored" or "replaced".
            let before =
                client.get(&format!("/plugins/{}", segment(&name))).ok().map(|p| p["sha256"].clone());
            let path = format!("/plugins/{}?{}", segment(&name), query.join("&"));
            let v = client.post_bytes(&path, &wasm, "application/wasm")?;
            let verb = match &before {
                None => "stored",
                Some(sha) if *sha == v["sha256"] => "unchanged:",
                Some(_) => "replaced",
            };
            print_or(json, &v, || {
                println!(
                    "{verb} plugin {} {} ({}, sha256 {})",
                    text(&v["name"]),
                    text(&v["version"]),
                    text(&v["world"]),
                    text(&v["sha256"])
                );
                let bound = array(&v["bound_to"]);
                if !bound.is_empty() {
                    let names: Vec<String> = bound.iter().map(text).collect();
                    println!("topics now running this version: {}", names.join(", "));
                }
            });
        }
        PluginCommand::List => {
            let v = client.get("/plugins")?;
            print_or(json, &v, || {
                let rows: Vec<Vec<String>> = array(&v["plugins"])
                    .iter()
                    .map(|p| {
                        let bound: Vec<String> = array(&p["bound_to"]).iter().map(text).collect();
                        vec![
                            text(&p["name"]),
                            text(&p["version"]),
                            text(&p["world"]),
                            if p["builtin"] == true { "built-in".into() } else { "uploaded".into() },
                            if bound.is_empty() { "-".into() } else { bound.join(",") },
                        ]
                    })
                    .collect();
                table(&["PLUGIN", "VERSION", "WORLD", "SOURCE", "BOUND TO"], &rows);
            });
        }
        PluginCommand::Describe { plugin } => {
            let v = client.get(&format!("/plugins/{}", segment(plugin.name())))?;
            print_or(json, &v, || {
                for key in ["name", "version", "world", "description", "sha256", "size_bytes", "builtin"] {
                    println!("{key:<12} {}", text(&v[key]));
                }
                let keys: Vec<String> = array(&v["config_keys"]).iter().map(text).collect();
                println!("{:<12} {}", "config keys", keys.join(", "));
                println!("{:<12} {}", "limits", v["limits"]);
                let bound: Vec<String> = array(&v["bound_to"]).iter().map(text).collect();
                println!(
                    "{:<12} {}",
                    "bound to",
                    if bound.is_empty() { "-".into() } else { bound.join(", ") }
                );
            });
        }
        PluginCommand::Remove { plugin } => {
            let name = plugin.name();
            client.delete(&format!("/plugins/{}", segment(name)))?;
            print_or(json, &json!({"removed": name}), || println!("removed plugin {name}"));
        }
    }
    Ok(())
}

/// The validator flags of `es topic alter`.
#[derive(Debug, Default, clap::Args)]
pub struct ValidatorArgs {
    /// Bind this validator plugin (repeat for several; they run in the given
    /// order). Replaces the topic's validators.
    #[arg(long = "validator", value_name = "PLUGIN")]
    pub validators: Vec<String>,
    /// Configuration KEY=VALUE (KEY=@FILE reads the value from a file) for the
    /// validator; with several validators, prefix PLUGIN: (rules:key.required=true).
    #[arg(long = "validator-config", value_name = "[PLUGIN:]KEY=VALUE")]
    pub validator_config: Vec<String>,
    /// What to do with refused records: reject (default), dead-letter or warn;
    /// with several validators, prefix PLUGIN:.
    #[arg(long = "on-failure", value_name = "[PLUGIN:]POLICY")]
    pub on_failure: Vec<String>,
    /// Topic for dead-lettered records; with several validators, prefix PLUGIN:.
    #[arg(long = "dead-letter-topic", value_name = "[PLUGIN:]TOPIC")]
    pub dead_letter_topic: Vec<String>,
    /// `enforce` (default) or `shadow`: a shadow validator runs on every batch
    /// and counts what it would have done, but never refuses or moves a record;
    /// with several validators, prefix PLUGIN:.
    #[arg(long = "mode", value_name = "[PLUGIN:]MODE")]
    pub mode: Vec<String>,
    /// Remove every validator from the topic.
    #[arg(long, conflicts_with = "validators")]
    pub no_validators: bool,
}

impl ValidatorArgs {
    pub fn is_set(&self) -> bool {
        self.no_validators || !self.validators.is_empty()
    }

    /// Refuses per-validator flags given without any `--validator`.
    pub fn check_alone(&self) -> anyhow::Result<()> {
        let extras = !(self.validator_config.is_empty()
            && self.on_failure.is_empty()
            && self.dead_letter_topic.is_empty()
            && self.mode.is_empty());
        if self.validators.is_empty() && !self.no_validators && extras {
            bail!("--validator-config, --on-failure, --dead-letter-topic and --mode need --validator PLUGIN");
        }
        Ok(())
    }
}

/// Binds (or clears) the topic's validators as the flags say and prints the result.
pub fn bind(client: &Client, topic: &str, args: &ValidatorArgs, json: bool) -> anyhow::Result<()> {
    args.check_alone()?;
    let mut bindings = Vec::new();
    for plugin in &args.validators {
        let mut config = Map::new();
        for item in owned_by(plugin, &args.validators, &args.validator_config, "--validator-config")? {
            let Some((k, v)) = item.split_once('=') else {
                bail!("--validator-config takes KEY=VALUE; got {item:?}");
            };
            config.insert(k.trim().to_owned(), Value::String(read_value(v)?));
        }
        let mut binding = json!({"plugin": plugin, "config": config});
        if let Some(policy) = owned_by(plugin, &args.validators, &args.on_failure, "--on-failure")?.last() {
            binding["on_failure"] = json!(policy);
        }
        if let Some(dlq) =
            owned_by(plugin, &args.validators, &args.dead_letter_topic, "--dead-letter-topic")?.last()
        {
            binding["dead_letter_topic"] = json!(dlq);
        }
        if let Some(mode) = owned_by(plugin, &args.validators, &args.mode, "--mode")?.last() {
            binding["mode"] = json!(mode);
        }
        bindings.push(binding);
    }
    let path = format!("/topics/{}/validators", segment(topic));
    let v = client.put(&path, &json!({ "validators": bindings }))?;
    print_or(json, &v, || validators_table(&v));
    Ok(())
}

pub fn validators_table(v: &Value) {
    let rows: Vec<Vec<String>> = array(&v["validators"])
        .iter()
        .map(|b| {
            vec![
                text(&b["plugin"]),
                b["mode"].as_str().unwrap_or("enforce").to_owned(),
                text(&b["on_failure"]),
                text(&b["dead_letter_topic"]),
                b["config"].as_object().map_or(0, Map::len).to_string(),
                text(&b["sha256"]).chars().take(12).collect(),
                text(&b["batches"]),
                text(&b["rejected"]),
                text(&b["dead_lettered"]),
                text(&b["warned"]),
                text(&b["plugin_failures"]),
            ]
        })
        .collect();
    if rows.is_empty() {
        println!("topic {} has no validators", text(&v["topic"]));
        return;
    }
    table(
        &[
            "VALIDATOR",
            "MODE",
            "ON FAILURE",
            "DEAD LETTER TOPIC",
            "CONFIG KEYS",
            "VERSION",
            "BATCHES",
            "REJECTED",
            "DEAD-LETTERED",
            "WARNED",
            "FAILURES",
        ],
        &rows,
    );
    for b in array(&v["validators"]) {
        if let Some(e) = b["load_error"].as_str() {
            println!("{}: cannot be loaded: {e}", text(&b["plugin"]));
        }
    }
}

/// The values of a per-validator flag that belong to `plugin`: unprefixed values
/// when there is one validator, `plugin:`-prefixed ones otherwise. A prefix that
/// names no bound validator is refused rather than passed on as part of the value.
fn owned_by(plugin: &str, all: &[String], values: &[String], flag: &str) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for value in values {
        match plugin_prefix(value) {
            Some((p, rest)) if p == plugin => out.push(rest.to_owned()),
            Some((p, _)) if all.iter().any(|a| a == p) => {}
            Some((p, _)) => bail!(
                "{flag} {value:?} names plugin {p:?}, which is not one of the --validator plugins ({})",
                all.join(", ")
            ),
            None if all.len() == 1 => out.push(value.clone()),
            None => {
                bail!("with several validators, prefix {flag} with the plugin name: {flag} PLUGIN:{value}")
            }
        }
    }
    Ok(out)
}

/// `PLUGIN:rest` when the text before the first `:` is a plugin name (no `=`, so
/// `key=a:b` is a plain value).
fn plugin_prefix(value: &str) -> Option<(&str, &str)> {
    value.split_once(':').filter(|(p, _)| !p.is_empty() && !p.contains('='))
}

/// `KEY=VALUE` pairs; a value `@FILE` is read from the file.
fn key_values(pairs: &[String], flag: &str) -> anyhow::Result<Vec<(String, String)>> {
    pairs
        .iter()
        .map(|pair| {
            let Some((k, v)) = pair.split_once('=') else {
                bail!("{flag} takes KEY=VALUE; got {pair:?}");
            };
            Ok((k.trim().to_owned(), read_value(v)?))
        })
        .collect()
}

fn read_value(v: &str) -> anyhow::Result<String> {
    match v.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {path}")),
        None => Ok(v.to_owned()),
    }
}

/// Percent-encodes a query value.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'~') {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn a_prefix_names_a_bound_plugin_or_is_refused() {
        let one = all(&["rules"]);
        let got =
            owned_by("rules", &one, &all(&["rules:key.required=true", "value.max.bytes=5"]), "--x").unwrap();
        assert_eq!(got, all(&["key.required=true", "value.max.bytes=5"]));
        let err = owned_by("rules", &one, &all(&["other:k=v"]), "--x").unwrap_err().to_string();
        assert!(err.contains("\"other\"") && err.contains("rules"), "{err}");
        // A colon after the `=` is part of the value, not a prefix.
        assert_eq!(owned_by("rules", &one, &all(&["schema=@a:b"]), "--x").unwrap(), all(&["schema=@a:b"]));
        let two = all(&["rules", "mine"]);
        assert!(owned_by("rules", &two, &all(&["k=v"]), "--x").is_err());
        assert!(owned_by("rules", &two, &all(&["mine:k=v"]), "--x").unwrap().is_empty());
    }
}
