//! The registry as it stands, for a node whose next metadata command is no longer
//! in its log: it joined, or was down, after the metadata log's retention removed
//! what it had not applied (its log then restarts at the leader's snapshot). It
//! asks a peer that applied past its log's start for an image (RPC kind 137) and
//! installs it, then applies the log from the image's offset on, as KRaft's
//! brokers load a metadata snapshot.
//!
//! The image is what applying the log up to `next` left on the peer: topics (with
//! their config, placement and bindings), keys and grants, uploaded plugins'
//! manifests (the blobs follow by hash, `blobs.rs`), the members, and the dedupe
//! window (so the installer skips the same retried proposals as the others). It is
//! taken under the peer's applier lock, so it matches `next` exactly.
//!
//! Installing turns the difference between this node's registry and the image into
//! the commands that make it (members added, plugins put, topics deleted,
//! created or changed, plugins removed, members removed) and applies them as the
//! log's would be applied, so partition groups open and close the same way. Each
//! step is idempotent: an install cut short is done again from the start.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use bytes::Bytes;
use es_peer::RpcError;
use serde::{Deserialize, Serialize};

use super::Cluster;
use super::members::Members;
use super::metadata::{Checkpoint, Seen};
use crate::plugins::Manifest;
use crate::registry::metadata::{Command, is_internal};
use crate::service::error::{BrokerError, Result};
use crate::store::TopicMeta;

/// Asks a peer for its image: the lowest `next` the asker can use (u64 BE);
/// answers the image (JSON).
pub(super) const METADATA_IMAGE: u8 = 137;
/// How long one ask may take (the peer may wait for its applier's current step).
const CALL_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Image {
    /// The next metadata offset to apply after installing this image.
    pub next: u64,
    pub topics: Vec<TopicMeta>,
    /// The peer's pepper fingerprint and its keys, grants, owners and quotas.
    pub pepper: String,
    pub auth: es_auth::AuthState,
    /// Uploaded plugins (built-in ones are every node's own).
    pub plugins: Vec<Manifest>,
    pub members: Members,
    /// The dedupe window before `next` ([`Checkpoint::encode`], base64).
    pub seen: String,
}

/// Answers a peer's ask with this node's image, once it applied at least what the
/// peer asks for.
pub(super) async fn serve(cluster: &Cluster, payload: &[u8]) -> std::result::Result<Bytes, RpcError> {
    let failed = |e: String| RpcError::new(super::rpc::FAILED, e);
    let at_least = payload
        .try_into()
        .map(u64::from_be_bytes)
        .map_err(|_| failed(format!("an image request of {} bytes", payload.len())))?;
    let mut guard = cluster.metadata.applying.lock().await;
    let next = cluster.metadata.applied();
    if super::metadata::missing_here(cluster.metadata.group().log(), next).is_some() {
        // Catching up itself (or cut short installing an image): its registry may
        // be past `next`.
        return Err(failed("this node is itself installing a peer's registry".into()));
    }
    let seen = cluster.metadata.window(&mut guard).map_err(|e| failed(e.to_string()))?;
    if next < at_least {
        return Err(failed(format!(
            "this node applied the metadata log up to offset {next}, not yet {at_least}"
        )));
    }
    let (pepper, auth) = cluster.registry.auth().image();
    let image = Image {
        next,
        // Each node's internal topics are its own (ids differ from node to node).
        topics: cluster.registry.topic_metas().into_iter().filter(|t| !is_internal(&t.name)).collect(),
        pepper,
        auth,
        plugins: cluster.registry.plugins().uploaded(),
        members: cluster.members.read().expect("members lock").clone(),
        seen: B64.encode(Checkpoint { next, entries: seen.entries(next) }.encode()),
    };
    drop(guard);
    serde_json::to_vec(&image).map(Bytes::from).map_err(|e| failed(e.to_string()))
}

/// Brings this node's registry from `next` (below `start`, its log's first
/// offset) to a peer's image of at least `start`, then sets the applier there.
pub(super) async fn catch_up(cluster: &Arc<Cluster>, next: u64, start: u64) -> Result<()> {
    tracing::warn!(
        applied = next,
        log_start = start,
        "this node's next metadata command is no longer in its log (it joined or was down while the log \
         was purged); installing the registry from a peer"
    );
    let image = fetch(cluster, start).await?;
    let checkpoint = B64
        .decode(&image.seen)
        .map_err(|e| e.to_string())
        .and_then(|b| Checkpoint::decode(&b))
        .map_err(|e| BrokerError::Internal(format!("a peer's metadata image has a bad window: {e}")))?;
    let mut guard = cluster.metadata.applying.lock().await;
    install(cluster, &image).await?;
    let seen = Seen::from_entries(checkpoint.entries);
    // The window first: a crash before the applied offset is saved installs again.
    cluster.metadata.save_checkpoint(&seen, image.next)?;
    cluster.metadata.save_applied(image.next)?;
    cluster.metadata.installed(next, image.next);
    *guard = Some(seen);
    tracing::info!(next = image.next, topics = image.topics.len(), "installed the registry from a peer");
    Ok(())
}

/// Asks the metadata leader, then every other member, for an image of at least
/// `at_least`.
async fn fetch(cluster: &Cluster, at_least: u64) -> Result<Image> {
    let leader = cluster.metadata.group().leader();
    let mut nodes: Vec<u64> = leader.into_iter().collect();
    nodes.extend(cluster.voters().into_iter().filter(|n| Some(*n) != leader));
    let mut errors = Vec::new();
    for node in nodes.into_iter().filter(|n| *n != cluster.node_id) {
        let payload = Bytes::copy_from_slice(&at_least.to_be_bytes());
        match cluster.host.call(node, METADATA_IMAGE, payload, CALL_TIMEOUT).await {
            Ok(bytes) => match serde_json::from_slice::<Image>(&bytes) {
                Ok(image) if image.next >= at_least => return Ok(image),
                Ok(image) => errors.push(format!("node {node}: an image of offset {}", image.next)),
                Err(e) => errors.push(format!("node {node}: an unreadable image: {e}")),
            },
            Err(e) => errors.push(format!("node {node}: {e}")),
        }
    }
    Err(BrokerError::Internal(format!(
        "no peer could send the registry as of metadata offset {at_least} ({}); retrying",
        errors.join("; ")
    )))
}

/// Applies the commands that turn this node's registry into `image`'s.
async fn install(cluster: &Arc<Cluster>, image: &Image) -> Result<()> {
    let local = cluster.members.read().expect("members lock").clone();
    for (id, peer) in &image.members.nodes {
        if local.nodes.get(id) != Some(peer) && !local.removed.contains(id) {
            apply(cluster, Command::AddNode { id: *id, peer: peer.clone() }).await?;
        }
    }
    cluster.registry.auth().install_image(&image.pepper, image.auth.clone())?;
    for manifest in &image.plugins {
        apply(cluster, Command::PutPlugin { manifest: manifest.clone(), replace: true }).await?;
    }
    let wanted: BTreeMap<&str, &TopicMeta> = image.topics.iter().map(|t| (t.name.as_str(), t)).collect();
    let local_topics = || cluster.registry.topic_metas().into_iter().filter(|t| !is_internal(&t.name));
    for have in local_topics() {
        if wanted.get(have.name.as_str()).is_none_or(|want| want.topic_id != have.topic_id) {
            apply(cluster, Command::DeleteTopic { name: have.name.clone() }).await?;
        }
    }
    let have: BTreeMap<String, TopicMeta> = local_topics().map(|t| (t.name.clone(), t)).collect();
    // Moved marks first: a partition's group opens (created, or grown) knowing it
    // moved. Bindings last: one may name another topic as its dead-letter target.
    let mut bindings = Vec::new();
    for want in &image.topics {
        if let Some(have) = have.get(&want.name)
            && !want.moved.is_subset(&have.moved)
        {
            let (registry, name, moved) = (cluster.registry.clone(), want.name.clone(), want.moved.clone());
            tokio::task::spawn_blocking(move || registry.mark_moved(&name, &moved))
                .await
                .map_err(|e| BrokerError::Internal(format!("the metadata install task failed: {e}")))??;
        }
        for command in topic_changes(have.get(&want.name), want) {
            match command {
                Command::SetValidators { .. } => bindings.push(command),
                command => apply(cluster, command).await?,
            }
        }
    }
    for command in bindings {
        apply(cluster, command).await?;
    }
    let kept: Vec<&str> = image.plugins.iter().map(|m| m.name.as_str()).collect();
    for manifest in cluster.registry.plugins().uploaded() {
        if !kept.contains(&manifest.name.as_str()) {
            apply(cluster, Command::RemovePlugin { name: manifest.name }).await?;
        }
    }
    // Only a removal the peer applied: a node not (yet) in the image's members
    // may be one this node was started knowing (itself, joining), whose AddNode
    // the log still holds.
    for id in local.nodes.keys().filter(|id| image.members.removed.contains(id)) {
        apply(cluster, Command::RemoveNode { id: *id }).await?;
    }
    let mut members = cluster.members.read().expect("members lock").clone();
    let known = members.removed.len();
    members.removed.extend(&image.members.removed);
    if members.removed.len() != known {
        members.save(&super::cluster_dir(&cluster.registry))?;
        *cluster.members.write().expect("members lock") = members;
    }
    Ok(())
}

/// Applies a made-up command as the log's are: this node failing to do its part
/// fails the install (retried); a refusal is logged and the install goes on.
async fn apply(cluster: &Arc<Cluster>, command: Command) -> Result<()> {
    let described = command.topic().map(str::to_owned);
    match super::metadata::apply_command(cluster, command).await {
        Err(e @ (BrokerError::Internal(_) | BrokerError::Storage(_))) => Err(e),
        Err(e) => {
            // The image came from a registry these commands built: a refusal is a
            // defect, and this node may now differ from the others.
            let topic = described.as_deref().unwrap_or("-");
            tracing::error!(error = %e, topic, "installing the metadata image: a change was refused");
            Ok(())
        }
        Ok(()) => Ok(()),
    }
}

/// The commands that turn `have` (this node's topic of the same name and id, if
/// any) into `want`. A created topic gets its bindings apart, as a client's would.
fn topic_changes(have: Option<&TopicMeta>, want: &TopicMeta) -> Vec<Command> {
    let name = want.name.clone();
    let mut commands = Vec::new();
    let Some(have) = have else {
        commands.push(Command::CreateTopic(TopicMeta { validators: Vec::new(), ..want.clone() }));
        if !want.validators.is_empty() {
            commands.push(Command::SetValidators { name, validators: want.validators.clone() });
        }
        return commands;
    };
    if want.partitions > have.partitions {
        let replicas =
            want.replicas.as_ref().map(|r| r.iter().skip(have.partitions as usize).cloned().collect());
        commands.push(Command::SetPartitions { name: name.clone(), count: want.partitions, replicas });
    }
    for partition in 0..have.partitions.min(want.partitions) {
        if let Some(replicas) = want.replicas_of(partition)
            && have.replicas_of(partition) != Some(replicas)
        {
            let replicas = replicas.to_vec();
            commands.push(Command::SetReplicas { name: name.clone(), partition, replicas });
        }
    }
    if want.config != have.config {
        commands.push(Command::SetConfig { name: name.clone(), config: want.config.clone() });
    }
    if want.validators != have.validators {
        commands.push(Command::SetValidators { name, validators: want.validators.clone() });
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topic(name: &str, partitions: u32, replicas: Vec<Vec<u64>>) -> TopicMeta {
        TopicMeta {
            name: name.into(),
            partitions,
            config: crate::config::TopicConfig::default(),
            created_ms: 1,
            validators: Vec::new(),
            topic_id: Some(format!("id-{name}")),
            replicas: Some(replicas),
            moved: Default::default(),
        }
    }

    #[test]
    fn a_topic_unknown_here_is_created_then_bound() {
        let mut want = topic("t", 2, vec![vec![1, 2], vec![2, 3]]);
        assert_eq!(topic_changes(None, &want), vec![Command::CreateTopic(want.clone())]);
        want.validators = vec![crate::plugins::binding::ValidatorBinding {
            plugin: "json-schema".into(),
            config: Default::default(),
            on_failure: Default::default(),
            dead_letter_topic: None,
            mode: Default::default(),
        }];
        let changes = topic_changes(None, &want);
        assert_eq!(changes.len(), 2);
        assert!(
            matches!(&changes[0], Command::CreateTopic(t) if t.validators.is_empty() && t.partitions == 2)
        );
        assert!(
            matches!(&changes[1], Command::SetValidators { validators, .. } if *validators == want.validators)
        );
    }

    #[test]
    fn a_known_topic_grows_moves_and_takes_the_config() {
        let have = topic("t", 2, vec![vec![1, 2], vec![2, 3]]);
        assert!(topic_changes(Some(&have), &have).is_empty(), "the same topic needs nothing");
        let mut want = topic("t", 3, vec![vec![1, 2], vec![3, 1], vec![1, 3]]);
        want.config.retention_ms = 1000;
        let changes = topic_changes(Some(&have), &want);
        assert_eq!(
            changes,
            vec![
                Command::SetPartitions { name: "t".into(), count: 3, replicas: Some(vec![vec![1, 3]]) },
                Command::SetReplicas { name: "t".into(), partition: 1, replicas: vec![3, 1] },
                Command::SetConfig { name: "t".into(), config: want.config.clone() },
            ]
        );
    }
}
