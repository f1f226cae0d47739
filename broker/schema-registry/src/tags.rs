//! Schema tags (Confluent's `POST /subjects/{s}/versions/{v}/tags`): the
//! `confluent:tags` a request adds to or removes from a record or a field of an
//! AVRO or JSON schema's text, and the registration that request stands for.
//! Objects keep their keys in the order written (the registry's text identity
//! depends on it), so the text is edited as an ordered tree, not a `serde_json::Value`.

use std::collections::VecDeque;
use std::fmt;

use serde::de::{Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

use crate::checker::SchemaCheckers;
use crate::error::{RegistryError, Result};
use crate::plan::{Plan, Registered};
use crate::state::{State, validate_subject};
use crate::types::{RegisterRequest, SchemaType, SubjectVersion, VersionSpec};

/// The key Confluent's providers keep a record's or a field's tags under.
pub const TAGS_KEY: &str = "confluent:tags";

/// What an entity path names: a record (Avro record, JSON object schema) or one of its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub enum EntityType {
    #[serde(rename = "sr_record")]
    Record,
    #[serde(rename = "sr_field")]
    Field,
}

/// Where tags go: Confluent's `SchemaEntity`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaEntity {
    pub entity_path: String,
    pub entity_type: EntityType,
}

/// Tags for one entity: Confluent's `SchemaTags`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SchemaTags {
    pub schema_entity: SchemaEntity,
    #[serde(default)]
    pub tags: Vec<String>,
}

/// Confluent's `TagSchemaRequest`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TagSchemaRequest {
    #[serde(default)]
    pub new_version: Option<i32>,
    #[serde(default)]
    pub tags_to_add: Option<Vec<SchemaTags>>,
    #[serde(default)]
    pub tags_to_remove: Option<Vec<SchemaTags>>,
    #[serde(default)]
    pub metadata: Option<serde_json::Value>,
    #[serde(default)]
    pub rule_set: Option<serde_json::Value>,
    #[serde(default)]
    pub rules_to_merge: Option<serde_json::Value>,
    #[serde(default)]
    pub rules_to_remove: Option<Vec<String>>,
}

impl State {
    /// `POST /subjects/{s}/versions/{v}/tags`: a registration of version `v`'s
    /// schema with its tags edited (Confluent's `modifySchemaTags`), planned and
    /// answered as any registration, so it is stored as one and checked for
    /// compatibility as one.
    pub fn plan_tags(
        &self,
        checkers: &SchemaCheckers,
        subject: &str,
        spec: VersionSpec,
        req: &TagSchemaRequest,
    ) -> Result<Plan<Registered>> {
        validate_subject(subject)?;
        let base = self.version(subject, spec, false)?;
        let previous = if edits_rules(req) {
            let at = previous_rules_version(req).map_or(VersionSpec::Latest, VersionSpec::Number);
            self.version(subject, at, false).ok().and_then(|v| v.rule_set)
        } else {
            None
        };
        let registration = tagged_request(&base, req, previous)?;
        self.plan_register(checkers, subject, &registration, false)
    }
}

/// The registration a tag request on `base` stands for, as Confluent builds it:
/// `base`'s text with the tags edited (added, then removed), the request's
/// metadata or else `base`'s, the request's rules (or the previous version's
/// with `rulesToMerge` / `rulesToRemove` applied, given as `previous_rules`), and
/// `newVersion` as the explicit version.
pub fn tagged_request(
    base: &SubjectVersion,
    req: &TagSchemaRequest,
    previous_rules: Option<serde_json::Value>,
) -> Result<RegisterRequest> {
    let rule_set = rules_for(req, previous_rules)?;
    let schema = retag(base.schema_type, &base.schema, req)?;
    Ok(RegisterRequest {
        schema: Some(schema),
        schema_type: Some(base.schema_type.as_str().to_owned()),
        references: base.references.clone(),
        id: None,
        version: req.new_version,
        metadata: Some(with_confluent_version(req.metadata.clone().or_else(|| base.metadata.clone()), req)),
        rule_set,
    })
}

/// Confluent sets `confluent:version` on every tagged schema (to `newVersion`,
/// or 0), so the registration then records the version it gets there.
fn with_confluent_version(metadata: Option<serde_json::Value>, req: &TagSchemaRequest) -> serde_json::Value {
    let mut metadata = match metadata {
        Some(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let props = metadata.entry("properties").or_insert_with(|| serde_json::json!({}));
    if let Some(props) = props.as_object_mut() {
        let version = req.new_version.unwrap_or(0).to_string();
        props.insert(crate::state::CONFLUENT_VERSION.to_owned(), version.into());
    }
    metadata.into()
}

/// The version whose rules `rulesToMerge` / `rulesToRemove` start from: the one
/// before `newVersion`, else the latest (Confluent's choice).
fn previous_rules_version(req: &TagSchemaRequest) -> Option<i32> {
    req.new_version.map(|n| n - 1).filter(|n| *n > 0)
}

/// Whether the request edits rules rather than replacing them.
fn edits_rules(req: &TagSchemaRequest) -> bool {
    req.rules_to_merge.is_some() || req.rules_to_remove.is_some()
}

fn rules_for(
    req: &TagSchemaRequest,
    previous: Option<serde_json::Value>,
) -> Result<Option<serde_json::Value>> {
    if !edits_rules(req) {
        return Ok(req.rule_set.clone());
    }
    if req.rule_set.is_some() {
        return Err(RegistryError::InvalidRuleSet(
            "ruleSet should be omitted if specifying rulesToMerge or rulesToRemove".into(),
        ));
    }
    let mut rules = match &req.rules_to_merge {
        Some(merge) => crate::plan::merge_rule_sets(previous, Some(merge.clone())),
        None => previous,
    };
    if let (Some(serde_json::Value::Object(set)), Some(remove)) = (&mut rules, &req.rules_to_remove) {
        for kind in set.values_mut().filter_map(|v| v.as_array_mut()) {
            kind.retain(|r| {
                !r.get("name").and_then(|n| n.as_str()).is_some_and(|n| remove.iter().any(|x| x == n))
            });
        }
    }
    Ok(rules)
}

/// `text` with every entity's tags edited; adds are applied before removes.
pub fn retag(schema_type: SchemaType, text: &str, req: &TagSchemaRequest) -> Result<String> {
    let edits = entity_edits(req);
    if edits.is_empty() {
        return Ok(text.to_owned());
    }
    if schema_type == SchemaType::Protobuf {
        // Confluent writes them as options of its own confluent/meta.proto, which
        // the Protobuf checker does not import.
        return Err(RegistryError::InvalidSchema(
            "schema tags on PROTOBUF schemas are not supported: they are options of confluent/meta.proto"
                .into(),
        ));
    }
    let mut root: Node = serde_json::from_str(text)
        .map_err(|e| RegistryError::InvalidSchema(format!("the stored schema is not JSON: {e}")))?;
    for (entity, add, remove) in edits {
        let node = match schema_type {
            SchemaType::Avro => find_avro(&mut root, entity),
            SchemaType::Json => find_json(&mut root, entity),
            SchemaType::Protobuf => None,
        }
        .ok_or_else(|| no_match(entity))?;
        edit_tags(node, &add, &remove);
    }
    serde_json::to_string(&root).map_err(|e| RegistryError::InvalidSchema(e.to_string()))
}

fn no_match(entity: &SchemaEntity) -> RegistryError {
    RegistryError::InvalidSchema(format!("No matching path '{}' found in the schema", entity.entity_path))
}

/// Each entity once, in the order first named, with the tags to add and to remove.
fn entity_edits(req: &TagSchemaRequest) -> Vec<(&SchemaEntity, Vec<String>, Vec<String>)> {
    let mut out: Vec<(&SchemaEntity, Vec<String>, Vec<String>)> = Vec::new();
    let lists = [(req.tags_to_add.as_deref(), true), (req.tags_to_remove.as_deref(), false)];
    for (list, adding) in lists {
        for t in list.unwrap_or_default() {
            let at = match out.iter().position(|(e, _, _)| **e == t.schema_entity) {
                Some(i) => i,
                None => {
                    out.push((&t.schema_entity, Vec::new(), Vec::new()));
                    out.len() - 1
                }
            };
            let slot = if adding { &mut out[at].1 } else { &mut out[at].2 };
            slot.extend(t.tags.iter().cloned());
        }
    }
    out
}

/// The entity's `confluent:tags`: the existing ones, then `add`, less `remove`;
/// the key goes when nothing is left, and a new key goes last.
fn edit_tags(node: &mut Node, add: &[String], remove: &[String]) {
    let Node::Obj(fields) = node else { return };
    let mut tags: Vec<String> = Vec::new();
    let existing = fields.iter().find(|(k, _)| k == TAGS_KEY).map(|(_, v)| v);
    if let Some(Node::Arr(items)) = existing {
        tags.extend(items.iter().filter_map(|t| match t {
            Node::Str(s) => Some(s.clone()),
            Node::Null | Node::Bool(_) | Node::Num(_) | Node::Arr(_) | Node::Obj(_) => None,
        }));
    }
    for t in add {
        if !tags.contains(t) {
            tags.push(t.clone());
        }
    }
    tags.retain(|t| !remove.contains(t));
    let value = Node::Arr(tags.into_iter().map(Node::Str).collect());
    match fields.iter().position(|(k, _)| k == TAGS_KEY) {
        Some(i) if value.is_empty_array() => {
            fields.remove(i);
        }
        Some(i) => fields[i].1 = value,
        None if value.is_empty_array() => {}
        None => fields.push((TAGS_KEY.to_owned(), value)),
    }
}

/// An Avro entity path `ns.Record` or `ns.Record.field`: a breadth-first search
/// from the root through fields, unions, array items and map values for a record
/// of that name (the namespace, when given, is the one in scope), as Confluent's
/// Avro provider searches.
fn find_avro<'a>(root: &'a mut Node, entity: &SchemaEntity) -> Option<&'a mut Node> {
    let parts: Vec<&str> = entity.entity_path.split('.').collect();
    let name_at = match entity.entity_type {
        EntityType::Record => parts.len().checked_sub(1)?,
        EntityType::Field => parts.len().checked_sub(2)?,
    };
    let (namespace, record) = (parts[..name_at].join("."), parts[name_at]);
    let route = avro_route(root, &namespace, record)?;
    let mut node = root;
    for step in route {
        node = node.child_mut(&step)?;
    }
    match entity.entity_type {
        EntityType::Record => Some(node),
        EntityType::Field => node
            .get_mut("fields")?
            .items_mut()?
            .iter_mut()
            .find(|f| f.get("name").and_then(Node::as_str) == Some(parts[name_at + 1])),
    }
}

/// One step from a node to a child: an object key or an array index.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// The steps from the root to the matching Avro record, found read-only first so
/// that the mutable walk is a straight path.
fn avro_route(root: &Node, namespace: &str, record: &str) -> Option<Vec<Step>> {
    let mut queue: VecDeque<(&Node, Option<String>, Vec<Step>)> = VecDeque::new();
    let root_ns = root.get("namespace").and_then(Node::as_str).map(str::to_owned);
    queue.push_back((root, root_ns, Vec::new()));
    while let Some((node, ns, route)) = queue.pop_front() {
        let Some(kind) = node.get("type") else {
            // A union (or a type name): its branches, in the same namespace.
            for (i, branch) in node.items().unwrap_or_default().iter().enumerate() {
                queue.push_back((branch, ns.clone(), with(&route, Step::Index(i))));
            }
            continue;
        };
        let is_match = (namespace.is_empty() || Some(namespace) == ns.as_deref())
            && node.get("name").and_then(Node::as_str) == Some(record);
        match kind.as_str() {
            Some("record") if is_match => return Some(route),
            Some("record") => {
                let fields = node.get("fields").and_then(Node::items).unwrap_or_default();
                for (i, f) in fields.iter().enumerate() {
                    let at = with(&with(&route, Step::Key("fields".into())), Step::Index(i));
                    queue.push_back((f, ns.clone(), at));
                }
            }
            Some("array") => push_child(&mut queue, node, "items", &ns, &route),
            Some("map") => push_child(&mut queue, node, "values", &ns, &route),
            _ => push_child(&mut queue, node, "type", &ns, &route),
        }
    }
    None
}

type Queue<'a> = VecDeque<(&'a Node, Option<String>, Vec<Step>)>;

fn push_child<'a>(queue: &mut Queue<'a>, node: &'a Node, key: &str, ns: &Option<String>, route: &[Step]) {
    if let Some(child) = node.get(key) {
        queue.push_back((child, ns.clone(), with(route, Step::Key(key.to_owned()))));
    }
}

fn with(route: &[Step], step: Step) -> Vec<Step> {
    let mut r = route.to_vec();
    r.push(step);
    r
}

/// A JSON Schema entity path as Confluent's JSON provider reads it:
/// `object.name.name...` through `properties` (or `definitions.X` / `$defs.X`),
/// `array` through `items`, `not` through `not`; a record is an object schema
/// the path ends on, a field the property it names. (Paths through `anyOf`,
/// `allOf` and `oneOf`, which Confluent numbers after sorting the branches, are
/// not followed.)
fn find_json<'a>(root: &'a mut Node, entity: &SchemaEntity) -> Option<&'a mut Node> {
    let mut words: VecDeque<&str> = entity.entity_path.split('.').collect();
    let mut node = root;
    loop {
        match words.pop_front()? {
            "object" => {
                if entity.entity_type == EntityType::Record && words.is_empty() {
                    return Some(node);
                }
                let container = match *words.front()? {
                    "definitions" | "$defs" => words.pop_front()?,
                    _ => "properties",
                };
                node = dotted_member(node.get_mut(container)?, &mut words)?;
                if words.is_empty() {
                    return Some(node);
                }
            }
            "array" => node = node.get_mut("items")?,
            "not" => node = node.get_mut("not")?,
            _ => return None,
        }
    }
}

/// The member of `node` named by the next words: the shortest run of words,
/// joined with dots, that names a key (a property name may hold dots).
fn dotted_member<'a>(node: &'a mut Node, words: &mut VecDeque<&str>) -> Option<&'a mut Node> {
    let mut name = words.pop_front()?.to_owned();
    while node.get(&name).is_none() {
        name = format!("{name}.{}", words.pop_front()?);
    }
    node.get_mut(&name)
}

/// A JSON value whose objects keep their keys in the order written.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Null,
    Bool(bool),
    Num(serde_json::Number),
    Str(String),
    Arr(Vec<Node>),
    Obj(Vec<(String, Node)>),
}

impl Node {
    fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Obj(fields) => fields.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            Node::Null | Node::Bool(_) | Node::Num(_) | Node::Str(_) | Node::Arr(_) => None,
        }
    }

    fn get_mut(&mut self, key: &str) -> Option<&mut Node> {
        match self {
            Node::Obj(fields) => fields.iter_mut().find(|(k, _)| k == key).map(|(_, v)| v),
            Node::Null | Node::Bool(_) | Node::Num(_) | Node::Str(_) | Node::Arr(_) => None,
        }
    }

    fn items(&self) -> Option<&[Node]> {
        match self {
            Node::Arr(items) => Some(items),
            Node::Null | Node::Bool(_) | Node::Num(_) | Node::Str(_) | Node::Obj(_) => None,
        }
    }

    fn items_mut(&mut self) -> Option<&mut Vec<Node>> {
        match self {
            Node::Arr(items) => Some(items),
            Node::Null | Node::Bool(_) | Node::Num(_) | Node::Str(_) | Node::Obj(_) => None,
        }
    }

    fn child_mut(&mut self, step: &Step) -> Option<&mut Node> {
        match step {
            Step::Key(k) => self.get_mut(k),
            Step::Index(i) => self.items_mut()?.get_mut(*i),
        }
    }

    fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            Node::Null | Node::Bool(_) | Node::Num(_) | Node::Arr(_) | Node::Obj(_) => None,
        }
    }

    fn is_empty_array(&self) -> bool {
        matches!(self, Node::Arr(items) if items.is_empty())
    }
}

impl Serialize for Node {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Node::Null => s.serialize_unit(),
            Node::Bool(b) => s.serialize_bool(*b),
            Node::Num(n) => n.serialize(s),
            Node::Str(v) => s.serialize_str(v),
            Node::Arr(items) => s.collect_seq(items),
            Node::Obj(fields) => {
                let mut m = s.serialize_map(Some(fields.len()))?;
                for (k, v) in fields {
                    m.serialize_entry(k, v)?;
                }
                m.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Node, D::Error> {
        d.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = Node;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> std::result::Result<Node, E> {
        Ok(Node::Null)
    }

    fn visit_bool<E>(self, v: bool) -> std::result::Result<Node, E> {
        Ok(Node::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> std::result::Result<Node, E> {
        Ok(Node::Num(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> std::result::Result<Node, E> {
        Ok(Node::Num(v.into()))
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<Node, E> {
        serde_json::Number::from_f64(v).map(Node::Num).ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_str<E>(self, v: &str) -> std::result::Result<Node, E> {
        Ok(Node::Str(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> std::result::Result<Node, E> {
        Ok(Node::Str(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<Node, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Node::Arr(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<Node, A::Error> {
        let mut fields: Vec<(String, Node)> = Vec::new();
        while let Some((k, v)) = map.next_entry::<String, Node>()? {
            // A repeated key keeps its first place and its last value, as Jackson's tree does.
            match fields.iter_mut().find(|(key, _)| *key == k) {
                Some(slot) => slot.1 = v,
                None => fields.push((k, v)),
            }
        }
        Ok(Node::Obj(fields))
    }
}

#[cfg(test)]
#[path = "tags_tests.rs"]
mod tests;
