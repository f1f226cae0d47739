//! A small blocking HTTP client for the broker API that turns every failure into
//! a sentence saying what went wrong and what to do next.

use std::time::Duration;

use anyhow::{Context, anyhow};
use serde_json::Value;

/// Talks to one broker; clones share the connection pool.
#[derive(Clone)]
pub struct Client {
    base: String,
    agent: ureq::Agent,
    /// Sent as `Authorization: Bearer <key>` on every request.
    key: Option<String>,
    /// TLS for the binary protocol (`--tls-ca`).
    binary_tls: Option<es_client::ClientTls>,
}

impl Client {
    pub fn new(base: &str, key: Option<String>, tls: &crate::tls::TlsArgs) -> anyhow::Result<Self> {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(90)))
            .tls_config(tls.http()?)
            .build()
            .into();
        Ok(Self { base: base_url(base), agent, key, binary_tls: tls.binary()? })
    }

    /// TLS for the binary protocol (`--tls-ca`), `None` for plaintext.
    pub fn binary_tls(&self) -> Option<&es_client::ClientTls> {
        self.binary_tls.as_ref()
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
        let sent = self.bearer(self.agent.post(&url)).header("content-type", content_type).send(bytes);
        self.reply("POST", path, sent)
    }

    /// The API key (`--api-key`, `ES_API_KEY`) for the binary protocol too.
    pub fn api_key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    fn bearer<B>(&self, req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.key {
            Some(key) => req.header("authorization", format!("Bearer {key}")),
            None => req,
        }
    }

    /// Sends one JSON request. A cluster follower that answers `421` with the
    /// leader's URL (`es-leader`) did not act on the request (a produce included:
    /// the broker answers 421 only when it wrote none of it, and `503
    /// leadership_lost` when it may have), so it is sent to that leader, at most
    /// [`LEADER_HOPS_MAX`] times.
    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut base = self.base.clone();
        for hop in 0..=LEADER_HOPS_MAX {
            let url = format!("{base}{path}");
            let sent = match method {
                "GET" => self.bearer(self.agent.get(&url)).call(),
                "DELETE" => self.bearer(self.agent.delete(&url)).call(),
                "POST" => {
                    self.bearer(self.agent.post(&url)).header("content-type", "application/json").send(&body)
                }
                "PUT" => {
                    self.bearer(self.agent.put(&url)).header("content-type", "application/json").send(&body)
                }
                _ => {
                    self.bearer(self.agent.patch(&url)).header("content-type", "application/json").send(&body)
                }
            };
            let leader = match &sent {
                Ok(r) if hop < LEADER_HOPS_MAX && r.status() == 421 => {
                    r.headers().get("es-leader").and_then(|v| v.to_str().ok()).map(base_url)
                }
                _ => None,
            };
            match leader {
                Some(leader) if leader != base => base = leader,
                _ => return self.reply(method, path, sent),
            }
        }
        unreachable!("the last hop returns its reply")
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
        let value: Value = match serde_json::from_str(&text) {
            Ok(v) => v,
            Err(_) if text.is_empty() && status.is_success() => Value::Null,
            Err(_) => return Err(not_es(&self.base, method, path, status.as_u16()).into()),
        };
        if status.is_success() {
            return Ok(value);
        }
        if value["error"]["code"].is_null() && value["error_code"].is_null() {
            return Err(not_es(&self.base, method, path, status.as_u16()).into());
        }
        Err(api_error(status.as_u16(), value).into())
    }
}

/// How many times one request follows a follower's `421` to the leader it names
/// (a leader can move again while the request travels).
const LEADER_HOPS_MAX: usize = 3;

/// `--broker` as a base URL: `host:port` gets `http://`, a trailing `/` goes.
pub fn base_url(given: &str) -> String {
    let trimmed = given.trim().trim_end_matches('/');
    if trimmed.contains("://") { trimmed.to_owned() } else { format!("http://{trimmed}") }
}

/// A reply that is not an es broker's (no JSON, or JSON without an error code).
fn not_es(base: &str, method: &str, path: &str, status: u16) -> ApiError {
    let text = format!(
        "the server at {base} answered {method} {path} with HTTP {status} and no es error, so it is \
         probably not an es broker.\nPoint --broker (or ES_BROKER) at es-broker's HTTP address \
         (es-broker prints it in its `listening on` line)."
    );
    ApiError { status, body: Value::Null, text }
}

/// A refusal from the broker: its status, its JSON body (printed as is under
/// `--json`) and a sentence with what to do next.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub body: Value,
    text: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::error::Error for ApiError {}

impl ApiError {
    /// The broker's error code (`topic_not_found`, ...), or "" for none.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// The same refusal with its violations' record numbers moved up by `first`
    /// (a batch's record 0 is the input's record `first`).
    pub fn renumbered(mut self, first: usize) -> ApiError {
        if let Some(all) = self.body["error"]["violations"].as_array_mut() {
            for v in all {
                let index = v["index"].as_u64().unwrap_or(0) + first as u64;
                v["index"] = Value::from(index);
            }
        }
        api_error(self.status, self.body)
    }
}

fn unreachable_broker(base: &str, e: &ureq::Error) -> anyhow::Error {
    anyhow!(
        "cannot reach the broker at {base} ({e}).\n\
         Is es-broker running? Start it with `es-broker`, or point ES_BROKER (or --broker) at a running broker."
    )
}

/// The broker's typed error as a sentence with a hint.
fn api_error(status: u16, body: Value) -> ApiError {
    let text = api_text(status, &body);
    ApiError { status, body, text }
}

fn api_text(status: u16, body: &Value) -> String {
    // The schema registry answers in Confluent's shape: {"error_code": N, "message": "..."}.
    if let Some(code) = body["error_code"].as_u64() {
        let message = body["message"].as_str().unwrap_or("");
        let hint = match code {
            40401 => "\nList the subjects with `es schema list`.",
            40402 => "\nList the subject's versions with `es schema versions SUBJECT`.",
            409 => "\nSee every incompatibility with `es schema check SUBJECT FILE`.",
            _ => "",
        };
        return format!("{message} (error_code {code}, HTTP {status}){hint}");
    }
    let code = body["error"]["code"].as_str().unwrap_or("unknown_error");
    let message = body["error"]["message"].as_str().map_or_else(|| body.to_string(), str::to_owned);
    let hint = match code {
        "topic_not_found" => {
            "List the topics with `es topic list`, or create it with `es topic create TOPIC`."
        }
        "partition_not_found" => "See the topic's partitions with `es topic describe TOPIC`.",
        "topic_already_exists" => "Pick another name, or delete the old topic first.",
        "offset_out_of_range" => "See valid offsets with `es offsets TOPIC`, or use --from-beginning.",
        // The broker's message names the key and, for an unknown one, every known key
        // (topic settings or the plugin's); a list kept here would drift from both.
        "invalid_config" if message.contains("es plugin describe") => "",
        "invalid_config" => "See the topic's current settings with `es topic describe TOPIC`.",
        "record_too_large" => {
            "One record is over the limit: make it smaller, or raise the topic's limit with \
             `es topic alter TOPIC --config max.message.bytes=N`."
        }
        "batch_too_large" | "request_too_large" => {
            "Send smaller batches (--batch-size N) or raise the topic's max.message.bytes."
        }
        "topic_in_use" => "Another topic uses it (e.g. as its dead-letter topic); change that topic first.",
        "plugin_failed" => {
            "The validator failed (trap, deadline or memory); see `es topic validators TOPIC`."
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
            "Build a component of an es:plugin world: record-validator, schema-compat or authenticator \
             (see docs/plugins.md)."
        }
        "validation_failed" => "The topic's validators refused the records; nothing was written.",
        _ => "",
    };
    let violations: String = body["error"]["violations"]
        .as_array()
        .map(|all| all.iter().map(|v| format!("\n  {}", violation(v))).collect())
        .unwrap_or_default();
    let hint = if hint.is_empty() { String::new() } else { format!("\n{hint}") };
    format!("{message} ({code}, HTTP {status}){violations}{hint}")
}

/// One validator finding as a line: record, plugin, code, reason, outcome.
pub fn violation(v: &Value) -> String {
    let text = |k: &str| v[k].as_str().unwrap_or("-").to_owned();
    format!(
        "record {}: {} by {} ({}: {})",
        v["index"],
        text("outcome"),
        text("plugin"),
        text("code"),
        text("reason")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_address_gets_a_scheme() {
        assert_eq!(base_url("127.0.0.1:9300"), "http://127.0.0.1:9300");
        assert_eq!(base_url("http://h:1/"), "http://h:1");
        assert_eq!(base_url("https://h"), "https://h");
    }

    #[test]
    fn every_violation_is_listed_and_renumbered() {
        let v = |i: u64| serde_json::json!({"index": i, "plugin": "rules", "code": "c", "reason": "r", "outcome": "rejected"});
        let body = serde_json::json!({"error": {"code": "validation_failed", "message": "m", "violations": [v(0), v(2)]}});
        let e = api_error(422, body);
        assert!(
            e.to_string().contains("record 0: rejected by rules (c: r)")
                && e.to_string().contains("record 2:")
        );
        let moved = e.renumbered(10).to_string();
        assert!(moved.contains("record 10:") && moved.contains("record 12:"), "{moved}");
    }
}
