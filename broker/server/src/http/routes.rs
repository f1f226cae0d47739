//! Which service call every HTTP route is: the HTTP side of the one
//! authorization table (`service::authz::Call::access`). A test checks that every
//! route the OpenAPI document describes has a row here, and every row a route.

use std::collections::BTreeMap;

use crate::service::Call;

/// (method, path template, call).
pub const ROUTES: &[(&str, &str, Call)] = &[
    ("get", "/healthz", Call::Health),
    ("get", "/readyz", Call::Health),
    ("get", "/openapi.json", Call::Health),
    ("get", "/topics", Call::ListTopics),
    ("post", "/topics", Call::CreateTopic),
    ("get", "/topics/{topic}", Call::DescribeTopic),
    ("delete", "/topics/{topic}", Call::DeleteTopic),
    ("get", "/topics/{topic}/config", Call::DescribeTopicConfig),
    ("patch", "/topics/{topic}/config", Call::AlterTopicConfig),
    ("post", "/topics/{topic}/partitions", Call::AddPartitions),
    ("post", "/topics/{topic}/records", Call::Produce),
    ("get", "/topics/{topic}/partitions/{partition}/records", Call::Fetch),
    ("get", "/topics/{topic}/offsets", Call::ListOffsets),
    ("post", "/producers", Call::InitProducerId),
    ("get", "/topics/{topic}/validators", Call::DescribeValidators),
    ("put", "/topics/{topic}/validators", Call::BindValidators),
    ("get", "/plugins", Call::ListPlugins),
    ("get", "/plugins/{name}", Call::DescribePlugin),
    ("post", "/plugins/{name}", Call::UploadPlugin),
    ("delete", "/plugins/{name}", Call::RemovePlugin),
    ("get", "/groups", Call::ListGroups),
    ("get", "/groups/{group}", Call::DescribeGroup),
    ("delete", "/groups/{group}", Call::DeleteGroup),
    ("post", "/groups/{group}/join", Call::GroupJoin),
    ("post", "/groups/{group}/sync", Call::GroupSync),
    ("post", "/groups/{group}/heartbeat", Call::GroupHeartbeat),
    ("post", "/groups/{group}/leave", Call::GroupLeave),
    ("get", "/groups/{group}/offsets", Call::GroupFetchOffsets),
    ("post", "/groups/{group}/offsets", Call::GroupCommit),
    ("post", "/groups/{group}/reset-offsets", Call::ResetGroupOffsets),
    ("post", "/groups/{group}/members", Call::GroupJoin),
    ("get", "/groups/{group}/members/{member}/records", Call::GroupPoll),
    ("post", "/groups/{group}/members/{member}/commit", Call::GroupCommit),
    ("delete", "/groups/{group}/members/{member}", Call::GroupLeave),
    ("get", "/registry/", Call::SchemaRead),
    ("post", "/registry/", Call::SchemaRead),
    ("get", "/registry/v1/metadata/id", Call::SchemaRead),
    ("get", "/registry/v1/metadata/version", Call::SchemaRead),
    ("get", "/registry/subjects/", Call::SchemaRead),
    ("get", "/registry/schemas", Call::SchemaRead),
    ("get", "/registry/schemas/", Call::SchemaRead),
    ("get", "/registry/subjects/{subject}/metadata", Call::SchemaRead),
    ("get", "/registry/contexts", Call::SchemaRead),
    ("delete", "/registry/contexts/{context}", Call::SchemaWrite),
    ("post", "/registry/subjects/{subject}/versions/{version}/tags", Call::SchemaWrite),
    ("get", "/registry/subjects", Call::SchemaRead),
    ("post", "/registry/subjects/{subject}", Call::SchemaRead),
    ("delete", "/registry/subjects/{subject}", Call::SchemaWrite),
    ("get", "/registry/subjects/{subject}/versions", Call::SchemaRead),
    ("post", "/registry/subjects/{subject}/versions", Call::SchemaWrite),
    ("get", "/registry/subjects/{subject}/versions/{version}", Call::SchemaRead),
    ("delete", "/registry/subjects/{subject}/versions/{version}", Call::SchemaWrite),
    ("get", "/registry/subjects/{subject}/versions/{version}/schema", Call::SchemaRead),
    ("get", "/registry/subjects/{subject}/versions/{version}/referencedby", Call::SchemaRead),
    ("get", "/registry/schemas/types", Call::SchemaRead),
    ("get", "/registry/schemas/ids/{id}", Call::SchemaRead),
    ("get", "/registry/schemas/ids/{id}/schema", Call::SchemaRead),
    ("get", "/registry/schemas/ids/{id}/versions", Call::SchemaRead),
    ("get", "/registry/schemas/ids/{id}/subjects", Call::SchemaRead),
    ("post", "/registry/compatibility/subjects/{subject}/versions", Call::SchemaRead),
    ("post", "/registry/compatibility/subjects/{subject}/versions/{version}", Call::SchemaRead),
    ("get", "/registry/config", Call::SchemaRead),
    ("put", "/registry/config", Call::SchemaWrite),
    ("delete", "/registry/config", Call::SchemaWrite),
    ("get", "/registry/config/{subject}", Call::SchemaRead),
    ("put", "/registry/config/{subject}", Call::SchemaWrite),
    ("delete", "/registry/config/{subject}", Call::SchemaWrite),
    ("get", "/registry/mode", Call::SchemaRead),
    ("put", "/registry/mode", Call::SchemaWrite),
    ("delete", "/registry/mode", Call::SchemaWrite),
    ("get", "/registry/mode/{subject}", Call::SchemaRead),
    ("put", "/registry/mode/{subject}", Call::SchemaWrite),
    ("delete", "/registry/mode/{subject}", Call::SchemaWrite),
    ("post", "/keys", Call::CreateKey),
    ("get", "/keys", Call::ListKeys),
    ("get", "/keys/{key}", Call::DescribeKey),
    ("delete", "/keys/{key}", Call::RevokeKey),
    ("post", "/keys/{key}/rotate", Call::RotateKey),
    ("post", "/keys/{key}/grants", Call::GrantKey),
    ("put", "/keys/{key}/quota", Call::SetKeyQuota),
    ("get", "/metrics", Call::ScrapeMetrics),
    ("get", "/cluster", Call::DescribeBroker),
    ("post", "/cluster/partitions/{topic}/{partition}/leader", Call::TransferLeader),
    ("post", "/cluster/partitions/{topic}/{partition}/replicas", Call::ChangeMembership),
    ("post", "/cluster/nodes", Call::ChangeMembership),
    ("delete", "/cluster/nodes/{node}", Call::ChangeMembership),
    ("post", "/snapshots", Call::Snapshot),
    ("post", "/snapshots/{snapshot}/lease", Call::Snapshot),
    ("delete", "/snapshots/{snapshot}", Call::Snapshot),
];

/// The call of a request, with the path's parameters (`{topic}`, `{group}`, ...).
pub fn call_for(method: &str, path: &str) -> Option<(Call, BTreeMap<String, String>)> {
    ROUTES.iter().filter(|(m, _, _)| *m == method).find_map(|(_, template, call)| {
        let params = match_template(template, path)?;
        Some((*call, params))
    })
}

fn match_template(template: &str, path: &str) -> Option<BTreeMap<String, String>> {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    if t.len() != p.len() {
        return None;
    }
    let mut params = BTreeMap::new();
    for (t, p) in t.iter().zip(&p) {
        match t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
            Some(name) => {
                params.insert(name.to_owned(), (*p).to_owned());
            }
            None if t == p => {}
            None => return None,
        }
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use utoipa::OpenApi;

    use super::ROUTES;

    /// Every documented route has exactly one row in the authorization table, and
    /// every row is a documented route.
    #[test]
    fn every_route_has_an_authorization_row() {
        let doc = serde_json::to_value(super::super::openapi::ApiDoc::openapi()).unwrap();
        let mut documented = BTreeSet::new();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for method in item.as_object().unwrap().keys() {
                if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                    documented.insert((method.clone(), path.clone()));
                }
            }
        }
        let rows: BTreeSet<(String, String)> =
            ROUTES.iter().map(|(m, p, _)| ((*m).to_owned(), (*p).to_owned())).collect();
        assert_eq!(rows.len(), ROUTES.len(), "a route has two rows");
        let missing: Vec<_> = documented.difference(&rows).collect();
        let stale: Vec<_> = rows.difference(&documented).collect();
        assert!(missing.is_empty(), "routes without an authorization row: {missing:?}");
        assert!(stale.is_empty(), "rows for routes that do not exist: {stale:?}");
    }

    #[test]
    fn requests_find_their_row_and_resource() {
        let (call, params) = super::call_for("post", "/topics/orders/records").unwrap();
        assert_eq!(call, crate::service::Call::Produce);
        assert_eq!(params["topic"], "orders");
        assert_eq!(super::call_for("get", "/groups/g/offsets").unwrap().1["group"], "g");
        assert!(super::call_for("get", "/nope").is_none());
    }
}
