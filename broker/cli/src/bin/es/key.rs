//! `es key generate|create|list|describe|revoke|rotate|grant|quota`: API keys over the
//! broker's `/keys` routes (cluster admins only). A new or rotated key's secret
//! is printed once, on stdout, and never again; `list` and `describe` never
//! show one.

use clap::Subcommand;
use serde_json::{Value, json};

use crate::client::Client;
use crate::output::table;

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Print a fresh random key without asking a broker (for the bootstrap key:
    /// `ES_AUTH_BOOTSTRAP_KEY` or `--auth-bootstrap-key-file`).
    Generate,
    /// Create a key; its secret is printed once.
    Create {
        /// A name for people (`billing`, `ci`); keys are identified by their id.
        #[arg(long)]
        name: String,
        /// A grant, repeatable: `topic:prefixed:billing.:write`,
        /// `group:literal:billing-workers:read`, `cluster:admin`.
        #[arg(long = "grant", value_name = "GRANT")]
        grants: Vec<String>,
        #[command(flatten)]
        quota: QuotaArgs,
    },
    /// List every key (revoked ones too) with its grants.
    List,
    /// Show one key.
    Describe { id: String },
    /// Revoke a key: refused from its next request on, everywhere.
    Revoke { id: String },
    /// Give a key a new secret (same id, same grants); the old one stops at once.
    Rotate { id: String },
    /// Add grants to a key.
    Grant {
        id: String,
        #[arg(long = "grant", value_name = "GRANT", required = true)]
        grants: Vec<String>,
    },
    /// Set a key's own limits, replacing all it had: a limit not given follows the
    /// broker's default again (no flags at all: back to the defaults everywhere).
    Quota {
        id: String,
        #[command(flatten)]
        quota: QuotaArgs,
    },
}

/// A key's own limits; each replaces the broker's default for this key only.
#[derive(Debug, clap::Args)]
pub struct QuotaArgs {
    /// Bytes per second this key may produce (instead of `--quota-produce-bytes-per-s`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    produce_bytes_per_s: Option<u64>,
    /// Bytes per second this key may fetch (instead of `--quota-fetch-bytes-per-s`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    fetch_bytes_per_s: Option<u64>,
    /// Requests per second this key may make (instead of `--requests-per-s-per-key`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    requests_per_s: Option<u64>,
}

impl QuotaArgs {
    fn body(&self) -> Value {
        json!({
            "produce_bytes_per_s": self.produce_bytes_per_s,
            "fetch_bytes_per_s": self.fetch_bytes_per_s,
            "requests_per_s": self.requests_per_s,
        })
    }
}

pub fn run(client: &Client, cmd: KeyCommand, json_out: bool) -> anyhow::Result<()> {
    let answer = match cmd {
        KeyCommand::Generate => {
            println!("{}", es_auth::ApiKey::random(&mut rand::rng()).reveal());
            return Ok(());
        }
        KeyCommand::Create { name, grants, quota } => {
            client.post("/keys", &json!({"name": name, "grants": grants, "quota": quota.body()}))?
        }
        KeyCommand::List => {
            let list = client.get("/keys")?;
            if json_out {
                println!("{list}");
            } else {
                print_list(&list);
            }
            return Ok(());
        }
        KeyCommand::Describe { id } => client.get(&format!("/keys/{}", crate::segment(&id)))?,
        KeyCommand::Revoke { id } => client.delete(&format!("/keys/{}", crate::segment(&id)))?,
        KeyCommand::Rotate { id } => {
            client.post(&format!("/keys/{}/rotate", crate::segment(&id)), &json!({}))?
        }
        KeyCommand::Grant { id, grants } => {
            client.post(&format!("/keys/{}/grants", crate::segment(&id)), &json!({"grants": grants}))?
        }
        KeyCommand::Quota { id, quota } => {
            client.put(&format!("/keys/{}/quota", crate::segment(&id)), &quota.body())?
        }
    };
    if json_out {
        println!("{answer}");
    } else {
        print_key(&answer);
    }
    Ok(())
}

fn status(k: &Value) -> &'static str {
    if k["revoked_ms"].is_null() { "active" } else { "revoked" }
}

fn grants(k: &Value) -> String {
    let list: Vec<&str> = k["grants"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    if list.is_empty() { "-".into() } else { list.join(", ") }
}

/// The key's own limits, or `default` for each it leaves to the broker.
fn quota(k: &Value) -> String {
    let limit = |field: &str, unit: &str| match k["quota"][field].as_u64() {
        Some(n) => format!("{n} {unit}"),
        None => "default".into(),
    };
    format!(
        "produce {}, fetch {}, requests {}",
        limit("produce_bytes_per_s", "B/s"),
        limit("fetch_bytes_per_s", "B/s"),
        limit("requests_per_s", "/s")
    )
}

fn print_key(k: &Value) {
    if let Some(secret) = k["key"].as_str() {
        println!("key:     {secret}");
        println!("         (shown once: store it now; the broker keeps only a hash)");
    }
    println!("id:      {}", k["id"].as_str().unwrap_or(""));
    println!("name:    {}", k["name"].as_str().unwrap_or(""));
    println!("status:  {}", status(k));
    println!("grants:  {}", grants(k));
    println!("quota:   {}", quota(k));
}

fn print_list(list: &Value) {
    let rows: Vec<Vec<String>> = list["keys"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| {
            let text = |f: &str| k[f].as_str().unwrap_or("").to_owned();
            vec![text("id"), text("name"), status(k).into(), grants(k)]
        })
        .collect();
    table(&["ID", "NAME", "STATUS", "GRANTS"], &rows);
}
