//! `es cluster status`: the cluster as the broker asked sees it (`GET /cluster`);
//! `es cluster transfer-leader`: hand a partition's leadership to another node;
//! `es cluster move`: move a partition's replicas to other nodes;
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
    /// Move a partition's replicas (asked of any node). The partition's leader adds
    /// the new replicas as learners, copies its log to them, makes them voters once
    /// caught up and drops the old ones, writes going on throughout. Waits until the
    /// partition is on exactly the nodes named.
    Move {
        topic: String,
        partition: u32,
        /// The new replicas, comma-separated node ids, the preferred leader first
        /// (e.g. 2,3,4).
        #[arg(long, value_delimiter = ',', required = true)]
        replicas: Vec<u64>,
        /// Return once the move is committed, without waiting for the copy.
        #[arg(long)]
        no_wait: bool,
        /// How long to wait for the move, in seconds.
        #[arg(long, default_value_t = 600)]
        timeout_s: u64,
    },
    /// Add a node to the cluster. Start it first with its own --node-id (never one
    /// the cluster used before), --cluster-peers listing every member and itself,
    /// the cluster's secret file, and --cluster-join. Topics created from then on
    /// may be placed on it, and `es cluster move` moves existing partitions to it
    /// (partitions of topics created before placement take it in as a replica at
    /// once); watch `es cluster status`.
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
    /// new one first, then remove the old). Each partition it replicates moves to
    /// the member holding the fewest replicas (or keeps the others alone when every
    /// member already has it); a running removed node closes its partitions and
    /// should be stopped. Its id may not be used again.
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
            follow_partitions(client, Some(id), timeout_s, json_out, &hint)
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
            follow_partitions(client, Some(id), timeout_s, json_out, hint)
        }
        ClusterCommand::Move { topic, partition, replicas, no_wait, timeout_s } => {
            let path = format!("/cluster/partitions/{}/{partition}/replicas", crate::segment(&topic));
            let v = client.post(&path, &serde_json::json!({ "replicas": replicas }))?;
            let to = replicas.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
            if json_out {
                println!("{v}");
            } else {
                println!("partition {partition} of {topic} is moving to {to} (from {})", ids(&v["replicas"]));
            }
            if no_wait {
                return Ok(());
            }
            let hint = format!("are nodes {to} running, and does the partition have a leader?");
            follow_partitions(client, None, timeout_s, json_out, &hint)
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

/// Waits until every partition's replicas are the ones it is assigned, as the
/// answering node sees it (each listed once its leader has moved it); a progress
/// bar on a terminal. `node`: the node whose addition or removal is followed.
fn follow_partitions(
    client: &Client,
    node: Option<u64>,
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
    bar.set_message("replicas placed");
    let set = |v: &Value| {
        let mut ids: Vec<u64> = array(v).iter().filter_map(Value::as_u64).collect();
        ids.sort_unstable();
        ids
    };
    loop {
        let v = client.get("/cluster")?;
        let partitions = array(&v["partitions"]);
        let done = partitions.iter().filter(|p| set(&p["replicas"]) == set(&p["assigned"])).count();
        bar.set_length(partitions.len() as u64);
        bar.set_position(done as u64);
        if done == partitions.len() {
            bar.finish_and_clear();
            if !json_out {
                match node {
                    Some(id) => {
                        let on = partitions
                            .iter()
                            .filter(|p| array(&p["replicas"]).iter().any(|r| r.as_u64() == Some(id)))
                            .count();
                        println!(
                            "every partition is on its assigned replicas ({done}); node {id} replicates {on}"
                        );
                    }
                    None => println!("every partition is on its assigned replicas ({done})"),
                }
            }
            return Ok(());
        }
        if std::time::Instant::now() >= deadline {
            bar.finish_and_clear();
            anyhow::bail!(
                "after {timeout_s} s {done} of {} partitions are on their assigned replicas: {hint} \
                 `es cluster status` lists each partition's replicas (the change goes on in the background)",
                partitions.len()
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
}

fn ids(v: &Value) -> String {
    array(v).iter().map(text).collect::<Vec<_>>().join(",")
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
            vec![
                text(&n["id"]),
                text(&n["leads"]),
                text(&n["http"]),
                text(&n["binary"]),
                text(&n["kafka"]),
                text(&n["rack"]),
            ]
        })
        .collect();
    table(&["NODE", "LEADS", "HTTP", "BINARY", "KAFKA", "RACK"], &nodes);
    let members: Vec<String> =
        array(&v["members"]).iter().map(|m| format!("{}={}", text(&m["id"]), text(&m["peer"]))).collect();
    if !members.is_empty() {
        println!("members (peer addresses): {}", members.join(" "));
    }
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
