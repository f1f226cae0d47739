//! `es cluster status`: the cluster as the broker asked sees it (`GET /cluster`);
//! `es cluster transfer-leader`: hand a partition's leadership to another node;
//! `es cluster add-node` / `remove-node`: change the cluster's members.

use clap::Subcommand;
use serde_json::Value;

use crate::client::Client;
use crate::output::table;
use crate::topic::{array, text};

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Show the nodes, the controller and coordinator, and each partition's leader,
    /// epoch, replicas and in-sync replicas.
    Status,
    /// Hand a partition's leadership to another of its replicas (asked of any node:
    /// a follower's answer names the leader, and the request goes there). Waits
    /// until the node leads, up to 10 s.
    TransferLeader {
        topic: String,
        partition: u32,
        /// The node to lead (one of the partition's replicas; `es cluster status`
        /// lists them).
        #[arg(long)]
        to: u64,
    },
    /// Add a node to the cluster. Start it first with its own --node-id (never one
    /// the cluster used before), --cluster-peers listing every member and itself,
    /// the cluster's secret file, and --cluster-join. Every partition then copies
    /// its log to the node and makes it a replica once it caught up; watch
    /// `es cluster status`.
    AddNode {
        /// The new node's id.
        id: u64,
        /// Its peer listener, HOST:PORT (its own --cluster-peers entry).
        #[arg(long)]
        peer: String,
        /// Return once the change is committed, without waiting for every
        /// partition to take the node in.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for every partition, in seconds.
        #[arg(long, default_value_t = 600)]
        timeout_s: u64,
    },
    /// Remove a node from the cluster for good (to replace a failed node, add the
    /// new one first, then remove the old). Every partition drops it from its
    /// replicas; a running removed node closes its partitions and should be
    /// stopped. Its id may not be used again.
    RemoveNode {
        /// The node's id.
        id: u64,
        /// Return once the change is committed, without waiting for every
        /// partition to drop the node.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for every partition, in seconds.
        #[arg(long, default_value_t = 600)]
        timeout_s: u64,
    },
}

pub fn run(client: &Client, cmd: ClusterCommand, json_out: bool) -> anyhow::Result<()> {
    match cmd {
        ClusterCommand::Status => status(client, json_out),
        ClusterCommand::AddNode { id, peer, no_wait, timeout_s } => {
            let v = client.post("/cluster/nodes", &serde_json::json!({ "id": id, "peer": peer }))?;
            members_changed(&v, &format!("node {id} added at {peer}"), json_out);
            if no_wait {
                return Ok(());
            }
            let hint = format!("is node {id} running with --cluster-join, and reachable at {peer}?");
            follow_partitions(client, id, true, timeout_s, json_out, &hint)
        }
        ClusterCommand::RemoveNode { id, no_wait, timeout_s } => {
            let v = client.delete(&format!("/cluster/nodes/{id}"))?;
            members_changed(&v, &format!("node {id} removed"), json_out);
            if no_wait {
                return Ok(());
            }
            if v["node_id"].as_u64() == Some(id) {
                // The removed node closed its partitions: its view stays as it was.
                if !json_out {
                    println!(
                        "asked node {id} itself, which no longer follows its partitions: ask another node"
                    );
                }
                return Ok(());
            }
            let hint = "does every partition still have a majority of its replicas running?";
            follow_partitions(client, id, false, timeout_s, json_out, hint)
        }
        ClusterCommand::TransferLeader { topic, partition, to } => {
            let path = format!("/cluster/partitions/{}/{partition}/leader", crate::segment(&topic));
            let v = client.post(&path, &serde_json::json!({ "to": to }))?;
            if json_out {
                println!("{v}");
            } else {
                println!(
                    "node {} leads partition {partition} of {topic} now (epoch {})",
                    text(&v["leader"]),
                    text(&v["epoch"])
                );
            }
            Ok(())
        }
    }
}

/// Waits until every partition lists node `id` among its replicas (`joined`) or
/// none does, as the answering node sees it; a progress bar on a terminal.
fn follow_partitions(
    client: &Client,
    id: u64,
    joined: bool,
    timeout_s: u64,
    json_out: bool,
    hint: &str,
) -> anyhow::Result<()> {
    use std::io::IsTerminal;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(timeout_s);
    let bar = if std::io::stderr().is_terminal() && !json_out {
        indicatif::ProgressBar::new(0)
    } else {
        indicatif::ProgressBar::hidden()
    };
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} partitions") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(if joined { format!("node {id} a replica") } else { format!("node {id} dropped") });
    loop {
        let v = client.get("/cluster")?;
        let partitions = array(&v["partitions"]);
        let done = partitions
            .iter()
            .filter(|p| array(&p["replicas"]).iter().any(|r| r.as_u64() == Some(id)) == joined)
            .count();
        bar.set_length(partitions.len() as u64);
        bar.set_position(done as u64);
        if done == partitions.len() {
            bar.finish_and_clear();
            if !json_out {
                let state = if joined { "a replica of" } else { "gone from" };
                println!("node {id} is {state} every partition ({done})");
            }
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            bar.finish_and_clear();
            anyhow::bail!(
                "after {timeout_s} s node {id} is {} {done} of {} partitions: {hint} `es cluster status` \
                 lists each partition's replicas (the change goes on in the background)",
                if joined { "a replica of" } else { "gone from" },
                partitions.len()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

fn members_changed(v: &Value, done: &str, json_out: bool) {
    if json_out {
        println!("{v}");
        return;
    }
    let members: Vec<String> = array(&v["members"]).iter().map(|m| text(&m["id"])).collect();
    println!(
        "{done}; members now {}. The partitions follow as their leaders move their replicas: \
         `es cluster status` shows each one's replicas.",
        members.join(",")
    );
}

fn status(client: &Client, json_out: bool) -> anyhow::Result<()> {
    let v = client.get("/cluster")?;
    if json_out {
        println!("{v}");
        return Ok(());
    }
    if v["cluster"] != Value::Bool(true) {
        println!(
            "a single node, not a cluster member (es-broker --node-id, --cluster-peers and --cluster-secret-file make one)"
        );
        return Ok(());
    }
    let id = |v: &Value| v.as_u64().map_or_else(|| "none (electing)".to_owned(), |n| n.to_string());
    println!(
        "node {} answering; controller {}, group coordinator {}",
        id(&v["node_id"]),
        id(&v["controller"]),
        id(&v["coordinator"])
    );
    let nodes: Vec<Vec<String>> = array(&v["nodes"])
        .iter()
        .map(|n| {
            vec![text(&n["id"]), text(&n["leads"]), text(&n["http"]), text(&n["binary"]), text(&n["kafka"])]
        })
        .collect();
    table(&["NODE", "LEADS", "HTTP", "BINARY", "KAFKA"], &nodes);
    let members: Vec<String> =
        array(&v["members"]).iter().map(|m| format!("{}={}", text(&m["id"]), text(&m["peer"]))).collect();
    if !members.is_empty() {
        println!("members (peer addresses): {}", members.join(" "));
    }
    let ids = |v: &Value| array(v).iter().map(text).collect::<Vec<_>>().join(",");
    let partitions: Vec<Vec<String>> = array(&v["partitions"])
        .iter()
        .map(|p| {
            // Fenced: the answering node leads but no majority answers it.
            let none = if p["fenced"] == true { "- (no quorum here)" } else { "-" };
            let leader = p["leader"].as_u64().map_or_else(|| none.to_owned(), |n| n.to_string());
            vec![
                text(&p["topic"]),
                text(&p["partition"]),
                leader,
                text(&p["epoch"]),
                ids(&p["replicas"]),
                ids(&p["in_sync"]),
                // Quiet: idle, its Raft group neither ticks nor heartbeats here.
                if p["quiesced"] == true { "quiet" } else { "active" }.to_owned(),
            ]
        })
        .collect();
    if !partitions.is_empty() {
        println!();
        table(&["TOPIC", "PARTITION", "LEADER", "EPOCH", "REPLICAS", "IN-SYNC", "RAFT"], &partitions);
    }
    Ok(())
}
