//! A topic's replicas at creation: the creation-only `replication.factor` taken
//! out of the config changes, and the placement a cluster plans for new
//! partitions (`cluster/placement.rs`); a single node keeps one copy.

use std::collections::BTreeMap;

use serde_json::Value;

use super::Registry;
use super::metadata::Origin;
use crate::service::error::{BrokerError, Result};

/// The creation-only `replication.factor` out of a create's config changes (it is
/// no topic config: a topic's replicas are its placement, `cluster/placement.rs`).
/// A number or a numeric string, as Kafka tools and JSON clients send it.
pub(super) fn split_replication_factor(
    changes: &BTreeMap<String, Value>,
) -> Result<(Changes<'_>, Option<usize>)> {
    let Some(value) = changes.get(REPLICATION_FACTOR) else {
        return Ok((std::borrow::Cow::Borrowed(changes), None));
    };
    let rf = match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse::<u64>().ok(),
        _ => None,
    }
    .and_then(|n| usize::try_from(n).ok())
    .ok_or_else(|| {
        BrokerError::InvalidRequest(format!(
            "{REPLICATION_FACTOR} must be a whole number of replicas; got {value}"
        ))
    })?;
    let mut rest = changes.clone();
    rest.remove(REPLICATION_FACTOR);
    Ok((std::borrow::Cow::Owned(rest), Some(rf)))
}

/// Config changes, borrowed when nothing was taken out of them.
type Changes<'a> = std::borrow::Cow<'a, BTreeMap<String, Value>>;

/// The creation-only key naming a topic's number of replicas.
pub const REPLICATION_FACTOR: &str = "replication.factor";

impl Registry {
    /// Where `count` new partitions' replicas go, in a cluster (`cluster/placement.rs`):
    /// `asked` replicas each (`None`: the default factor); `keep`: the factor an
    /// existing topic's partitions have, which new ones follow even if members came
    /// or went. A single node (or the broker's own internal topics): `None`, and a
    /// factor above 1 is refused.
    pub(super) fn place_replicas(
        &self,
        origin: Origin,
        asked: Option<usize>,
        count: u32,
        keep: Option<usize>,
    ) -> Result<Option<Vec<Vec<u64>>>> {
        let Some(cluster) = self.replicator_for(origin) else {
            return match asked {
                Some(rf) if rf > 1 => Err(BrokerError::InvalidRequest(format!(
                    "replication factor {rf} is larger than the 1 node this broker is; a single node keeps \
                     one copy (docs/cluster.md starts a cluster)"
                ))),
                _ => Ok(None),
            };
        };
        let members = cluster.voters();
        let rf = match keep {
            Some(rf) => rf.min(members.len()),
            None => crate::cluster::placement::replication_factor(asked, members.len())?,
        };
        let metadata = self.metadata();
        let racks = cluster.racks();
        let unknown: Vec<u64> = members.iter().copied().filter(|m| !racks.contains_key(m)).collect();
        if unknown.len() < members.len() && !unknown.is_empty() {
            tracing::warn!(
                ?unknown,
                "placing {count} partition(s) without regard to racks: some nodes name a rack and nodes \
                 {unknown:?} name none or are not heard from yet (set cluster.rack on every node)"
            );
        }
        Ok(Some(crate::cluster::placement::place(&members, &racks, rf, count, metadata.topics())))
    }
}
