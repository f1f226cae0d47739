//! Topic configs over Kafka: DescribeConfigs (1-4), AlterConfigs (0-2) and
//! IncrementalAlterConfigs (0-1). es topic settings already carry Kafka's names
//! (`retention.ms`, `cleanup.policy`, `max.message.bytes`, ...), so the mapping is
//! one to one; a setting es does not have is refused with INVALID_CONFIG naming the
//! ones it has. A value equal to the default is reported with the default's source.
//! Broker resources describe as empty and refuse changes.

use std::collections::BTreeMap;

use es_kafka::kafka_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use es_kafka::kafka_protocol::messages::create_topics_response::CreatableTopicConfigs;
use es_kafka::kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult,
};
use es_kafka::kafka_protocol::messages::incremental_alter_configs_response as incremental;
use es_kafka::kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use serde_json::Value;

use super::error::{code, kafka_code};
use super::{Ctx, sb};
use crate::TopicConfig;
use crate::service::Principal;
use crate::service::error::{BrokerError, Result};

/// Kafka's resource types.
const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
/// Kafka's config sources.
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_DEFAULT: i8 = 5;
/// Kafka's config types.
const TYPE_BOOLEAN: i8 = 1;
const TYPE_STRING: i8 = 2;
const TYPE_LONG: i8 = 5;
/// IncrementalAlterConfigs operations.
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// One setting as Kafka shows it: name, value, whether it is the default, its type.
struct Entry {
    name: String,
    value: String,
    default: bool,
    kind: i8,
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Every setting of `config`, by name, marked where it equals the default.
fn entries(config: &TopicConfig) -> Vec<Entry> {
    let as_map = |c: &TopicConfig| match serde_json::to_value(c) {
        Ok(Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let (current, defaults) = (as_map(config), as_map(&TopicConfig::default()));
    current
        .into_iter()
        .map(|(name, v)| {
            let kind = match &v {
                Value::Bool(_) => TYPE_BOOLEAN,
                Value::Number(_) => TYPE_LONG,
                _ => TYPE_STRING,
            };
            let default = defaults.get(&name) == Some(&v);
            Entry { name, value: text(&v), default, kind }
        })
        .collect()
}

/// The configs CreateTopics v5+ returns for a created topic.
pub fn creatable(config: &TopicConfig) -> Vec<CreatableTopicConfigs> {
    entries(config)
        .into_iter()
        .map(|e| {
            CreatableTopicConfigs::default()
                .with_name(sb(e.name))
                .with_value(Some(sb(e.value)))
                .with_config_source(if e.default { SOURCE_DEFAULT } else { SOURCE_DYNAMIC_TOPIC })
        })
        .collect()
}

pub fn describe_configs(
    ctx: &Ctx,
    who: &Principal,
    version: i16,
    req: DescribeConfigsRequest,
) -> DescribeConfigsResponse {
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let base = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            if r.resource_type == RESOURCE_BROKER {
                return base;
            }
            if r.resource_type != RESOURCE_TOPIC {
                let message = format!(
                    "es describes topic and broker configs; resource type {} is neither",
                    r.resource_type
                );
                return base.with_error_code(code::INVALID_REQUEST).with_error_message(Some(sb(message)));
            }
            match ctx.service.topic_config(who, r.resource_name.as_str()) {
                Ok(config) => base.with_configs(described(&config, r.configuration_keys.as_deref(), version)),
                Err(e) => base.with_error_code(kafka_code(&e)).with_error_message(Some(sb(e.to_string()))),
            }
        })
        .collect();
    DescribeConfigsResponse::default().with_results(results)
}

fn described(
    config: &TopicConfig,
    keys: Option<&[es_kafka::kafka_protocol::protocol::StrBytes]>,
    version: i16,
) -> Vec<DescribeConfigsResourceResult> {
    entries(config)
        .into_iter()
        .filter(|e| keys.is_none_or(|k| k.iter().any(|k| k.as_str() == e.name)))
        .map(|e| {
            let r = DescribeConfigsResourceResult::default()
                .with_name(sb(e.name))
                .with_value(Some(sb(e.value)))
                .with_config_source(if e.default { SOURCE_DEFAULT } else { SOURCE_DYNAMIC_TOPIC });
            if version >= 3 { r.with_config_type(e.kind) } else { r }
        })
        .collect()
}

/// A topic resource's name, or the refusal for any other resource.
fn topic_resource(resource_type: i8, name: &str) -> Result<String> {
    if resource_type == RESOURCE_TOPIC {
        return Ok(name.to_owned());
    }
    Err(BrokerError::InvalidRequest(format!(
        "es changes topic configs only (resource type 2); got resource type {resource_type}"
    )))
}

/// AlterConfigs replaces a topic's whole config: every setting not given returns to
/// its default.
pub async fn alter_configs(ctx: &Ctx, who: &Principal, req: AlterConfigsRequest) -> AlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let mut changes: BTreeMap<String, Value> = defaults();
        for c in &r.configs {
            changes.insert(
                c.name.as_str().to_owned(),
                c.value.as_ref().map_or(Value::Null, |v| Value::String(v.as_str().to_owned())),
            );
        }
        changes.retain(|_, v| !v.is_null());
        let done =
            apply(ctx, who, r.resource_type, r.resource_name.as_str(), changes, req.validate_only).await;
        let (error, message) = super::error::code_and_message(&done);
        responses.push(
            AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name)
                .with_error_code(error)
                .with_error_message(message.map(sb)),
        );
    }
    AlterConfigsResponse::default().with_responses(responses)
}

pub async fn incremental_alter_configs(
    ctx: &Ctx,
    who: &Principal,
    req: IncrementalAlterConfigsRequest,
) -> IncrementalAlterConfigsResponse {
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in req.resources {
        let name = r.resource_name.as_str().to_owned();
        let done = match incremental_changes(ctx, who, r.resource_type, &name, &r.configs) {
            Ok(changes) => apply(ctx, who, r.resource_type, &name, changes, req.validate_only).await,
            Err(e) => Err(e),
        };
        let (error, message) = super::error::code_and_message(&done);
        responses.push(
            incremental::AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name)
                .with_error_code(error)
                .with_error_message(message.map(sb)),
        );
    }
    IncrementalAlterConfigsResponse::default().with_responses(responses)
}

/// Every setting at its default, as changes.
fn defaults() -> BTreeMap<String, Value> {
    match serde_json::to_value(TopicConfig::default()) {
        Ok(Value::Object(m)) => m.into_iter().collect(),
        _ => BTreeMap::new(),
    }
}

/// The changes one IncrementalAlterConfigs resource asks for. DELETE restores the
/// default; APPEND and SUBTRACT edit the one list setting, `cleanup.policy`.
fn incremental_changes(
    ctx: &Ctx,
    who: &Principal,
    resource_type: i8,
    name: &str,
    configs: &[es_kafka::kafka_protocol::messages::incremental_alter_configs_request::AlterableConfig],
) -> Result<BTreeMap<String, Value>> {
    let topic = topic_resource(resource_type, name)?;
    let defaults = defaults();
    let mut changes = BTreeMap::new();
    for c in configs {
        let key = c.name.as_str().to_owned();
        let value = c.value.as_ref().map(|v| v.as_str().to_owned()).unwrap_or_default();
        let next = match c.config_operation {
            OP_SET => Value::String(value),
            OP_DELETE => defaults.get(&key).cloned().ok_or_else(|| unknown(&key))?,
            OP_APPEND | OP_SUBTRACT => {
                let current = ctx.service.topic_config(who, &topic)?;
                Value::String(edit_list(&key, &current, &value, c.config_operation == OP_APPEND)?)
            }
            op => return Err(BrokerError::InvalidRequest(format!("unknown config operation {op}"))),
        };
        changes.insert(key, next);
    }
    Ok(changes)
}

fn unknown(key: &str) -> BrokerError {
    BrokerError::InvalidConfig(format!(
        "unknown setting {key:?}; known settings: {}",
        crate::config::KEYS.join(", ")
    ))
}

/// `cleanup.policy` with `value` appended or removed.
fn edit_list(key: &str, current: &TopicConfig, value: &str, append: bool) -> Result<String> {
    if key != "cleanup.policy" {
        return Err(BrokerError::InvalidConfig(format!(
            "{key} is not a list setting; only cleanup.policy is"
        )));
    }
    let mut items: Vec<String> = current.cleanup_policy.split(',').map(str::to_owned).collect();
    for v in value.split(',').filter(|v| !v.is_empty()) {
        items.retain(|i| i != v);
        if append {
            items.push(v.to_owned());
        }
    }
    Ok(items.join(","))
}

/// Applies (or, when `validate_only`, only checks) changes to a topic's config.
async fn apply(
    ctx: &Ctx,
    who: &Principal,
    resource_type: i8,
    name: &str,
    changes: BTreeMap<String, Value>,
    validate_only: bool,
) -> Result<TopicConfig> {
    let topic = topic_resource(resource_type, name)?;
    if validate_only {
        return ctx.service.topic_config(who, &topic)?.with_changes(&changes);
    }
    ctx.service.alter_topic_config(who, topic, changes).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_show_kafka_names_values_and_sources() {
        let config = TopicConfig { retention_ms: 1234, ..TopicConfig::default() };
        let e = entries(&config);
        let retention = e.iter().find(|e| e.name == "retention.ms").unwrap();
        assert_eq!((retention.value.as_str(), retention.default, retention.kind), ("1234", false, TYPE_LONG));
        let policy = e.iter().find(|e| e.name == "cleanup.policy").unwrap();
        assert_eq!((policy.value.as_str(), policy.default, policy.kind), ("delete", true, TYPE_STRING));
        assert!(e.iter().any(|e| e.name == "max.message.bytes"));
    }

    #[test]
    fn cleanup_policy_appends_and_subtracts() {
        let config = TopicConfig::default();
        assert_eq!(edit_list("cleanup.policy", &config, "compact", true).unwrap(), "delete,compact");
        assert_eq!(edit_list("cleanup.policy", &config, "delete", false).unwrap(), "");
        assert!(edit_list("retention.ms", &config, "1", true).is_err());
    }

    #[test]
    fn only_topic_resources_change() {
        assert!(topic_resource(RESOURCE_TOPIC, "t").is_ok());
        assert!(matches!(topic_resource(RESOURCE_BROKER, "0"), Err(BrokerError::InvalidRequest(_))));
    }
}
