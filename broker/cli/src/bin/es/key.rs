//! `es key generate|create|list|describe|revoke|rotate|grant`: API keys over the
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
}

pub fn run(client: &Client, cmd: KeyCommand, json_out: bool) -> anyhow::Result<()> {
    let answer = match cmd {
        KeyCommand::Generate => {
            println!("{}", es_auth::ApiKey::random(&mut rand::rng()).reveal());
            return Ok(());
        }
        KeyCommand::Create { name, grants } => {
            client.post("/keys", &json!({"name": name, "grants": grants}))?
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

fn print_key(k: &Value) {
    if let Some(secret) = k["key"].as_str() {
        println!("key:     {secret}");
        println!("         (shown once: store it now; the broker keeps only a hash)");
    }
    println!("id:      {}", k["id"].as_str().unwrap_or(""));
    println!("name:    {}", k["name"].as_str().unwrap_or(""));
    println!("status:  {}", status(k));
    println!("grants:  {}", grants(k));
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
