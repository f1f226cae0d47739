//! A small blocking HTTP client for the broker API that turns every failure into
//! a sentence saying what went wrong and what to do next.

use std::time::Duration;

use anyhow::{Context, anyhow};
use serde_json::Value;

/// Talks to one broker.
pub struct Client {
    base: String,
    agent: ureq::Agent,
}

impl Client {
    pub fn new(base: &str) -> Self {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(90)))
            .build()
            .into();
        Self { base: base.trim_end_matches('/').to_owned(), agent }
    }

    pub fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send("GET", path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send("POST", path, Some(body))
    }

    pub fn patch(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send("PATCH", path, Some(body))
    }

    pub fn put(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send("PUT", path, Some(body))
    }

    pub fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.send("DELETE", path, None)
    }

    /// POSTs raw bytes (a plugin component) with `content_type`.
    pub fn post_bytes(&self, path: &str, bytes: &[u8], content_type: &str) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let sent = self.agent.post(&url).header("content-type", content_type).send(bytes);
        self.reply("POST", path, sent)
    }

    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let body = body.map(Value::to_string).unwrap_or_default();
        let sent = match method {
            "GET" => self.agent.get(&url).call(),
            "DELETE" => self.agent.delete(&url).call(),
            "POST" => self.agent.post(&url).header("content-type", "application/json").send(&body),
            "PUT" => self.agent.put(&url).header("content-type", "application/json").send(&body),
            _ => self.agent.patch(&url).header("content-type", "application/json").send(&body),
        };
        self.reply(method, path, sent)
    }

    fn reply(
        &self,
        method: &str,
        path: &str,
        sent: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
    ) -> anyhow::Result<Value> {
        let mut resp = sent.map_err(|e| unreachable_broker(&self.base, &e))?;
        let status = resp.status();
        let text = resp
            .body_mut()
            .with_config()
            .limit(256 * 1024 * 1024)
            .read_to_string()
            .with_context(|| format!("reading the broker's reply to {method} {path}"))?;
        let value: Value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text)
                .with_context(|| format!("the broker's reply to {method} {path} is not JSON"))?
        };
        if status.is_success() {
            return Ok(value);
        }
        Err(api_error(status.as_u16(), &value))
    }
}

fn unreachable_broker(base: &str, e: &ureq::Error) -> anyhow::Error {
    anyhow!(
        "cannot reach the broker at {base} ({e}).\n\
         Is es-broker running? Start it with `es-broker`, or point ES_BROKER (or --broker) at a running broker."
    )
}

/// The broker's typed error as a sentence with a hint.
fn api_error(status: u16, body: &Value) -> anyhow::Error {
    // The schema registry answers in Confluent's shape: {"error_code": N, "message": "..."}.
    if let Some(code) = body["error_code"].as_u64() {
        let message = body["message"].as_str().unwrap_or("");
        let hint = match code {
            40401 => "\nList the subjects with `es schema list`.",
            40402 => "\nList the subject's versions with `es schema versions SUBJECT`.",
            409 => "\nSee every incompatibility with `es schema check SUBJECT FILE`.",
            _ => "",
        };
        return anyhow!("{message} (error_code {code}, HTTP {status}){hint}");
    }
    let code = body["error"]["code"].as_str().unwrap_or("unknown_error");
    let message = body["error"]["message"].as_str().map_or_else(|| body.to_string(), str::to_owned);
    let hint = match code {
        "topic_not_found" => {
            "List the topics with `es topic list`, or create it with `es topic create --name ...`."
        }
        "partition_not_found" => "See the topic's partitions with `es topic describe --name ...`.",
        "topic_already_exists" => "Pick another name, or delete the old topic first.",
        "offset_out_of_range" => "See valid offsets with `es offsets --topic ...`, or use --from-beginning.",
        "invalid_config" => {
            "Settings are Kafka-style names: retention.ms, retention.bytes, segment.bytes, segment.ms, cleanup.policy, delete.retention.ms, max.message.bytes, cold.tier.enable."
        }
        "batch_too_large" | "record_too_large" | "request_too_large" => {
            "Send smaller batches (--batch-size) or raise the topic's max.message.bytes."
        }
        "shutting_down" => "The broker is stopping; try again once it is back.",
        "plugin_not_found" => {
            "List the plugins with `es plugin list`, or upload one with `es plugin add FILE.wasm --name NAME`."
        }
        "plugin_already_exists" => {
            "Pass --replace to move its bindings to the new version, or pick another name."
        }
        "plugin_in_use" => "Unbind it from those topics first: `es topic alter TOPIC --no-validators`.",
        "invalid_plugin" => {
            "Build a component of the es:plugin record-validator world (see docs/plugins.md)."
        }
        "validation_failed" => "The topic's validators refused the records; see each reason above.",
        _ => "",
    };
    let hint = if hint.is_empty() { String::new() } else { format!("\n{hint}") };
    anyhow!("{message} ({code}, HTTP {status}){hint}")
}
