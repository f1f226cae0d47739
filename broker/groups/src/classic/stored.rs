//! A classic group's durable record (Kafka's `GroupMetadataValue`): its generation,
//! protocol, leader and members with their chosen protocol's metadata and their
//! assignments. Written to `__es_offsets` when a generation's assignment is complete
//! (before the members get it) and when the group becomes empty; a coordinator that
//! starts, or takes over in a cluster, loads the newest one of each group, so its
//! members keep heartbeating in their generation instead of rebalancing.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A group as the coordinator persists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredGroup {
    pub generation: i32,
    /// The members' protocol type (an empty group keeps its last one).
    pub protocol_type: String,
    /// The chosen protocol; none while the group is empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// In join order.
    #[serde(default)]
    pub members: Vec<StoredMember>,
}

/// One member of a [`StoredGroup`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoredMember {
    pub member_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: u64,
    pub rebalance_timeout_ms: u64,
    /// Its metadata for the chosen protocol (a consumer's subscription), base64.
    #[serde(with = "b64")]
    pub metadata: Vec<u8>,
    /// What the leader assigned it in this generation, base64.
    #[serde(with = "b64")]
    pub assignment: Vec<u8>,
}

/// A write the coordinator asks its caller to make durable, in the order asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreRequest {
    pub group: String,
    /// Names this request in [`super::ClassicCoordinator::stored`] (unique in its coordinator).
    pub seq: u64,
    pub generation: i32,
    /// None: the group was deleted (a tombstone).
    pub snapshot: Option<StoredGroup>,
    /// A call waits for it (the leader's SyncGroup handing out a generation, a
    /// static member's JoinGroup that replaced another): the caller reports the
    /// outcome with [`super::ClassicCoordinator::stored`].
    pub awaited: bool,
}

mod b64 {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&BASE64.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        BASE64.decode(text.as_bytes()).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_group_round_trips_through_json_with_base64_bytes() {
        let g = StoredGroup {
            generation: 7,
            protocol_type: "consumer".into(),
            protocol: Some("range".into()),
            leader: Some("m-1".into()),
            members: vec![StoredMember {
                member_id: "m-1".into(),
                instance_id: Some("i".into()),
                client_id: "app".into(),
                client_host: "/127.0.0.1".into(),
                session_timeout_ms: 10_000,
                rebalance_timeout_ms: 30_000,
                metadata: vec![0, 1, 255],
                assignment: b"A".to_vec(),
            }],
        };
        let json = serde_json::to_string(&g).unwrap();
        assert!(json.contains(r#""metadata":"AAH/""#), "{json}");
        assert_eq!(serde_json::from_str::<StoredGroup>(&json).unwrap(), g);
        let empty: StoredGroup =
            serde_json::from_str(r#"{"generation":3,"protocol_type":"consumer"}"#).unwrap();
        assert_eq!((empty.generation, empty.members.len(), empty.leader), (3, 0, None));
    }
}
