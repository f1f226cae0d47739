//! `es-tools dump --online`: a running broker's data directory, from a snapshot the
//! broker takes (`POST /snapshots`: every partition cut at its log end, its
//! segments sealed, synced and hard-linked under `<data>/snapshots/<id>/` beside a
//! copy of the metadata). That directory is laid out like a data directory, so it
//! is archived by the offline dump's own code (same manifest, same checks); the
//! lease is renewed while the archive is written and the snapshot released at the
//! end, also on failure. The data directory's LOCK is not taken: the broker holds it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::dump::{self, DumpOptions};
use crate::error::{Result, ToolsError};
use crate::layout;
use crate::manifest::Manifest;

/// How long one request to the broker may take (a snapshot rolls and syncs every
/// partition; on a large broker that takes seconds).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub struct OnlineOptions {
    /// `data_dir`, `out`, `topics_prefix` and `progress` apply as offline.
    pub dump: DumpOptions,
    /// The broker's HTTP API, e.g. `http://127.0.0.1:9000`.
    pub url: String,
    /// An API key with a cluster admin grant (auth on).
    pub key: Option<String>,
    /// The snapshot's lease; renewed every third of it while the dump runs.
    pub lease_ms: u64,
}

#[derive(Debug, Clone)]
pub struct OnlineReport {
    pub manifest: Manifest,
    pub snapshot: String,
    /// How long the broker took to take the snapshot.
    pub took_ms: u64,
}

/// The parts of the broker's snapshot answer es-tools uses.
#[derive(Debug, Clone, Deserialize)]
struct SnapshotView {
    id: String,
    dir: String,
    took_ms: u64,
    partitions: Vec<SnapshotPartition>,
}

#[derive(Debug, Clone, Deserialize)]
struct SnapshotPartition {
    topic: String,
    partition: u32,
    log_end: u64,
}

/// Dumps a running broker's data directory from a snapshot it takes.
pub fn dump_online(options: &OnlineOptions) -> Result<OnlineReport> {
    let data_dir = &options.dump.data_dir;
    layout::check_data_dir(data_dir)?;
    dump::check_output(&options.dump)?;
    let broker = Broker::new(&options.url, options.key.clone());
    let body = json!({"lease_ms": options.lease_ms});
    let view: SnapshotView = serde_json::from_value(broker.call("POST", "/snapshots", &body)?)
        .map_err(|e| broker.not_es(&format!("its snapshot answer is not one es-tools reads: {e}")))?;
    let held = Held::start(broker, view.id.clone(), options.lease_ms);
    let root = snapshot_root(data_dir, &view)?;
    let source = DumpOptions { data_dir: root.clone(), ..options.dump.clone() };
    let layout = layout::scan(&root, options.dump.topics_prefix.as_deref())?;
    let manifest = dump::archive(&source, &layout)?;
    if let Err(e) = check_cut(&view, &manifest) {
        let _ = std::fs::remove_file(&options.dump.out);
        return Err(e);
    }
    held.release()?;
    Ok(OnlineReport { manifest, snapshot: view.id, took_ms: view.took_ms })
}

/// The snapshot's directory, which must be inside `--data-dir`: a snapshot taken
/// by another broker than the one whose directory was named is refused.
fn snapshot_root(data_dir: &Path, view: &SnapshotView) -> Result<PathBuf> {
    let valid_id = view.id.len() == 16 && view.id.bytes().all(|b| b.is_ascii_hexdigit());
    if !valid_id || view.dir != format!("snapshots/{}", view.id) {
        return Err(ToolsError::SnapshotElsewhere {
            dir: data_dir.to_owned(),
            reason: format!("the broker named {:?} as the snapshot's directory", view.dir),
        });
    }
    let root = data_dir.join(&view.dir);
    if !root.join("partitions").is_dir() {
        return Err(ToolsError::SnapshotElsewhere {
            dir: data_dir.to_owned(),
            reason: format!("it has no {}; is --url the broker whose --data-dir this is?", view.dir),
        });
    }
    Ok(root)
}

/// Each partition's archived offsets must end exactly at the broker's cut.
fn check_cut(view: &SnapshotView, manifest: &Manifest) -> Result<()> {
    for topic in &manifest.topics {
        for p in &topic.partitions {
            let cut = view.partitions.iter().find(|c| c.topic == topic.name && c.partition == p.partition);
            let Some(cut) = cut else {
                let reason = format!("{}: the broker's snapshot does not name it", p.dir);
                return Err(ToolsError::SnapshotMismatch { reason });
            };
            if cut.log_end != p.log_end {
                let reason = format!(
                    "{} ends at offset {} in the archive, the broker cut it at {}",
                    p.dir, p.log_end, cut.log_end
                );
                return Err(ToolsError::SnapshotMismatch { reason });
            }
        }
    }
    Ok(())
}

/// A held snapshot: its lease renewed on a thread until it is released, which
/// dropping it does too (an error on the way out still releases it).
struct Held {
    broker: Arc<Broker>,
    id: String,
    stop: Option<mpsc::Sender<()>>,
    renewer: Option<JoinHandle<()>>,
    released: bool,
}

impl Held {
    fn start(broker: Broker, id: String, lease_ms: u64) -> Held {
        let broker = Arc::new(broker);
        let (stop, stopped) = mpsc::channel::<()>();
        let (b, path) = (broker.clone(), format!("/snapshots/{id}/lease"));
        let every = Duration::from_millis(lease_ms / 3);
        let renewer = std::thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                if let Err(e) = b.call("POST", &path, &json!({"lease_ms": lease_ms})) {
                    // Said, not fatal: the files read so far stay valid (links are
                    // immutable), and a file removed with an expired snapshot fails
                    // its read, which the dump reports.
                    eprintln!("es-tools: renewing the snapshot's lease failed: {e}");
                }
            }
        });
        Held { broker, id, stop: Some(stop), renewer: Some(renewer), released: false }
    }

    fn release(mut self) -> Result<()> {
        self.stop_renewing();
        self.released = true;
        self.broker.call("DELETE", &format!("/snapshots/{}", self.id), &Value::Null).map(drop)
    }

    fn stop_renewing(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.stop_renewing();
        if !self.released {
            let _ = self.broker.call("DELETE", &format!("/snapshots/{}", self.id), &Value::Null);
        }
    }
}

/// The broker's HTTP API, as much of it as the dump needs.
struct Broker {
    base: String,
    agent: ureq::Agent,
    key: Option<String>,
}

impl Broker {
    fn new(url: &str, key: Option<String>) -> Broker {
        let trimmed = url.trim().trim_end_matches('/');
        let base = if trimmed.contains("://") { trimmed.to_owned() } else { format!("http://{trimmed}") };
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(REQUEST_TIMEOUT))
            .build()
            .into();
        Broker { base, agent, key }
    }

    /// One JSON request; a refusal becomes [`ToolsError::BrokerRefused`] with the
    /// broker's code and message.
    fn call(&self, method: &str, path: &str, body: &Value) -> Result<Value> {
        let url = format!("{}{path}", self.base);
        let bearer = self.key.as_ref().map(|k| format!("Bearer {k}"));
        let sent = match method {
            "DELETE" => {
                let req = self.agent.delete(&url);
                match &bearer {
                    Some(b) => req.header("authorization", b).call(),
                    None => req.call(),
                }
            }
            _ => {
                let req = self.agent.post(&url).header("content-type", "application/json");
                let req = match &bearer {
                    Some(b) => req.header("authorization", b),
                    None => req,
                };
                req.send(body.to_string().as_bytes())
            }
        };
        let mut resp = sent
            .map_err(|e| ToolsError::BrokerUnreachable { url: self.base.clone(), reason: e.to_string() })?;
        let status = resp.status().as_u16();
        let text =
            resp.body_mut().with_config().limit(crate::limits::MANIFEST_BYTES_MAX).read_to_string().map_err(
                |e| ToolsError::BrokerUnreachable {
                    url: self.base.clone(),
                    reason: format!("reading its answer to {method} {path}: {e}"),
                },
            )?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        if (200..300).contains(&status) {
            return Ok(value);
        }
        let Some(code) = value["error"]["code"].as_str() else {
            return Err(
                self.not_es(&format!("it answered {method} {path} with HTTP {status} and no es error"))
            );
        };
        Err(ToolsError::BrokerRefused {
            url: self.base.clone(),
            call: format!("{method} {path}"),
            status,
            code: code.to_owned(),
            message: value["error"]["message"].as_str().unwrap_or_default().to_owned(),
        })
    }

    fn not_es(&self, reason: &str) -> ToolsError {
        ToolsError::BrokerUnreachable {
            url: self.base.clone(),
            reason: format!("{reason}; is it an es broker?"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(dir: &str) -> SnapshotView {
        SnapshotView { id: "0123456789abcdef".into(), dir: dir.into(), took_ms: 1, partitions: vec![] }
    }

    #[test]
    fn a_snapshot_outside_the_data_dir_is_refused() {
        let d = tempfile::tempdir().unwrap();
        for dir in ["../elsewhere", "/tmp", "snapshots/0123456789abcdef/.."] {
            let err = snapshot_root(d.path(), &view(dir)).unwrap_err();
            assert!(matches!(err, ToolsError::SnapshotElsewhere { .. }), "{dir}: {err}");
        }
        let err = snapshot_root(d.path(), &view("snapshots/0123456789abcdef")).unwrap_err();
        assert!(err.to_string().contains("is --url the broker"), "{err}");
        std::fs::create_dir_all(d.path().join("snapshots/0123456789abcdef/partitions")).unwrap();
        snapshot_root(d.path(), &view("snapshots/0123456789abcdef")).unwrap();
    }

    #[test]
    fn an_unreachable_broker_is_a_typed_error_and_nothing_is_written() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("data/topics")).unwrap();
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let out = d.path().join("backup.tar");
        let options = OnlineOptions {
            dump: DumpOptions {
                data_dir: d.path().join("data"),
                out: out.clone(),
                topics_prefix: None,
                journal_dir: None,
                replay_journal: false,
                progress: false,
            },
            url: format!("127.0.0.1:{port}"),
            key: None,
            lease_ms: 60_000,
        };
        let err = dump_online(&options).unwrap_err();
        assert!(matches!(err, ToolsError::BrokerUnreachable { .. }), "{err}");
        assert!(!out.exists());
    }
}
