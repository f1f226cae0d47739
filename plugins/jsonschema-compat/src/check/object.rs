//! Object schemas: properties against the open, partially open (patternProperties,
//! additionalProperties schema) or closed (`additionalProperties: false`) content
//! model of the other side, `required`, dependencies and property counts.

use super::{Checker, counts};
use crate::report::{Incompatibility, Kind, Location};
use crate::shape::accepts_everything;
use serde_json::{Map, Value, json};

fn map<'v>(schema: &'v Value, key: &str) -> Option<&'v Map<String, Value>> {
    schema.get(key).and_then(Value::as_object)
}

fn names<'v>(schema: &'v Value, key: &str) -> Vec<&'v str> {
    schema
        .get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

/// Open: every property without its own schema may hold any value.
fn is_open(schema: &Value) -> bool {
    map(schema, "patternProperties").is_none_or(Map::is_empty)
        && schema.get("additionalProperties").is_none_or(accepts_everything)
}

/// True when the ECMA-262 regex `pattern` matches somewhere in `name`, as
/// `patternProperties` requires; an invalid pattern matches nothing.
fn pattern_matches(pattern: &str, name: &str) -> bool {
    jsonschema::validator_for(&json!({"pattern": pattern})).is_ok_and(|v| v.is_valid(&json!(name)))
}

/// The schema a property without its own schema gets from `patternProperties` or
/// `additionalProperties`; `None` when neither applies (any value is allowed).
fn schema_for_unlisted<'v>(schema: &'v Value, name: &str) -> Option<&'v Value> {
    let by_pattern = map(schema, "patternProperties").and_then(|patterns| {
        patterns.iter().find(|(pattern, _)| pattern_matches(pattern, name)).map(|(_, s)| s)
    });
    by_pattern.or_else(|| schema.get("additionalProperties"))
}

impl Checker<'_> {
    pub(super) fn objects(&mut self, reader: &Value, writer: &Value, at: &Location) -> Vec<Incompatibility> {
        let mut out = Vec::new();
        self.properties(reader, writer, at, &mut out);
        required(reader, writer, at, &mut out);
        self.pattern_properties(reader, writer, at, &mut out);
        self.additional_properties(reader, writer, at, &mut out);
        self.dependencies(reader, writer, at, &mut out);
        if let (Some(r), Some(w)) = (reader.get("propertyNames"), writer.get("propertyNames")) {
            out.extend(self.compare(r, w, &at.child("propertyNames")));
        }
        let max_kinds = (Kind::MaxPropertiesAdded, Kind::MaxPropertiesDecreased);
        counts(reader, writer, at, "maxProperties", false, max_kinds, &mut out);
        let min_kinds = (Kind::MinPropertiesAdded, Kind::MinPropertiesIncreased);
        counts(reader, writer, at, "minProperties", true, min_kinds, &mut out);
        out
    }

    fn properties(&mut self, reader: &Value, writer: &Value, at: &Location, out: &mut Vec<Incompatibility>) {
        let empty = Map::new();
        let r_props = map(reader, "properties").unwrap_or(&empty);
        let w_props = map(writer, "properties").unwrap_or(&empty);
        let at_props = at.child("properties");
        for (name, r_prop) in r_props {
            let here = at_props.child(name.as_str());
            match w_props.get(name) {
                Some(w_prop) => {
                    // Draft 3's per-property `"required": true`.
                    if r_prop.get("required") == Some(&Value::Bool(true))
                        && w_prop.get("required") != Some(&Value::Bool(true))
                    {
                        out.push(
                            here.at(Kind::RequiredAttributeAdded, format!("property {name} became required")),
                        );
                    }
                    out.extend(self.compare(r_prop, w_prop, &here));
                }
                None => self.property_added(name, r_prop, writer, &here, out),
            }
        }
        if is_open(reader) {
            return;
        }
        for (name, w_prop) in w_props.iter().filter(|(name, _)| !r_props.contains_key(*name)) {
            let here = at_props.child(name.as_str());
            match schema_for_unlisted(reader, name) {
                None => {}
                Some(Value::Bool(false)) if w_prop != &Value::Bool(false) => {
                    let detail =
                        format!("the reader's closed content model no longer accepts property {name}");
                    out.push(here.at(Kind::PropertyRemovedFromClosedContentModel, detail));
                }
                Some(r_schema) => {
                    let found = self.compare(r_schema, w_prop, &here);
                    if !found.is_empty() {
                        let detail = format!(
                            "property {name} was removed and the reader's remaining schema for it rejects the writer's"
                        );
                        out.push(here.at(Kind::PropertyRemovedNotCoveredByPartiallyOpenContentModel, detail));
                        out.extend(found);
                    }
                }
            }
        }
    }

    /// A property the reader describes and the writer does not list.
    fn property_added(
        &mut self,
        name: &str,
        r_prop: &Value,
        writer: &Value,
        here: &Location,
        out: &mut Vec<Incompatibility>,
    ) {
        if is_open(writer) {
            let detail = format!(
                "property {name} is new in the reader, and the writer's open content model may have written any value under that name"
            );
            out.push(here.at(Kind::PropertyAddedToOpenContentModel, detail));
            return;
        }
        match schema_for_unlisted(writer, name) {
            Some(Value::Bool(false)) => {}
            None => {
                let detail = format!(
                    "property {name} is new in the reader, and the writer allowed any value under that name"
                );
                out.push(here.at(Kind::PropertyAddedToOpenContentModel, detail));
            }
            Some(w_schema) => {
                let found = self.compare(r_prop, w_schema, here);
                if !found.is_empty() {
                    let detail = format!(
                        "property {name} is new in the reader and rejects values the writer's remaining schema allows"
                    );
                    out.push(here.at(Kind::PropertyAddedNotCoveredByPartiallyOpenContentModel, detail));
                    out.extend(found);
                }
            }
        }
    }

    fn pattern_properties(
        &mut self,
        reader: &Value,
        writer: &Value,
        at: &Location,
        out: &mut Vec<Incompatibility>,
    ) {
        let Some(r_patterns) = map(reader, "patternProperties") else { return };
        let w_patterns = map(writer, "patternProperties");
        for (pattern, r_schema) in r_patterns.iter().filter(|(_, s)| !accepts_everything(s)) {
            let here = at.child("patternProperties").child(pattern.as_str());
            if let Some(w_schema) = w_patterns.and_then(|p| p.get(pattern)) {
                out.extend(self.compare(r_schema, w_schema, &here));
                continue;
            }
            match writer.get("additionalProperties") {
                Some(Value::Bool(false)) => {}
                Some(w_schema) if !accepts_everything(w_schema) => {
                    out.extend(self.compare(r_schema, w_schema, &here))
                }
                _ => {
                    let detail = format!(
                        "the reader constrains properties matching {pattern}, which the writer left unconstrained"
                    );
                    out.push(here.at(Kind::PatternPropertyAdded, detail));
                }
            }
        }
    }

    fn additional_properties(
        &mut self,
        reader: &Value,
        writer: &Value,
        at: &Location,
        out: &mut Vec<Incompatibility>,
    ) {
        let Some(r_schema) = reader.get("additionalProperties").filter(|s| !accepts_everything(s)) else {
            return;
        };
        let here = at.child("additionalProperties");
        match writer.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            None => out.push(here.at(
                Kind::AdditionalPropertiesNarrowed,
                "the reader restricts additional properties the writer allows",
            )),
            Some(w) if accepts_everything(w) => {
                out.push(here.at(
                    Kind::AdditionalPropertiesNarrowed,
                    "the reader restricts additional properties the writer allows",
                ));
            }
            Some(_) if r_schema == &Value::Bool(false) => {
                out.push(here.at(
                    Kind::AdditionalPropertiesRemoved,
                    "the reader no longer accepts additional properties",
                ));
            }
            Some(w_schema) => out.extend(self.compare(r_schema, w_schema, &here)),
        }
    }

    /// `dependencies` (drafts 4 to 7) and `dependentRequired`/`dependentSchemas`
    /// (2019-09 on): each of the reader's must already hold for the writer.
    fn dependencies(
        &mut self,
        reader: &Value,
        writer: &Value,
        at: &Location,
        out: &mut Vec<Incompatibility>,
    ) {
        for key in ["dependencies", "dependentRequired", "dependentSchemas"] {
            let Some(r_deps) = map(reader, key) else { continue };
            for (name, r_dep) in r_deps {
                let here = at.child(key).child(name.as_str());
                let w_dep = ["dependencies", "dependentRequired", "dependentSchemas"]
                    .iter()
                    .filter_map(|k| map(writer, k).and_then(|m| m.get(name)))
                    .find(|w| w.is_array() == r_dep.is_array());
                match (r_dep, w_dep) {
                    (Value::Array(r_names), None) if !r_names.is_empty() => {
                        out.push(here.at(
                            Kind::DependencyArrayAdded,
                            format!("the reader added a dependency of property {name}"),
                        ));
                    }
                    (Value::Array(r_names), Some(Value::Array(w_names))) => {
                        let added: Vec<String> =
                            r_names.iter().filter(|n| !w_names.contains(n)).map(Value::to_string).collect();
                        if !added.is_empty() {
                            let detail = format!("property {name} now also requires {}", added.join(", "));
                            out.push(here.at(Kind::DependencyArrayExtended, detail));
                        }
                    }
                    (Value::Array(_), _) => {}
                    (r_schema, None) if !accepts_everything(r_schema) => {
                        out.push(here.at(
                            Kind::DependencySchemaAdded,
                            format!("the reader added a dependent schema for property {name}"),
                        ));
                    }
                    (_, None) => {}
                    (r_schema, Some(w_schema)) => out.extend(self.compare(r_schema, w_schema, &here)),
                }
            }
        }
    }
}

/// Properties the reader requires must be required by the writer too, unless the
/// reader gives them a default (Confluent's REQUIRED_..._WITH_DEFAULT rule).
fn required(reader: &Value, writer: &Value, at: &Location, out: &mut Vec<Incompatibility>) {
    let w_required = names(writer, "required");
    let w_props = map(writer, "properties");
    for name in names(reader, "required").into_iter().filter(|n| !w_required.contains(n)) {
        if map(reader, "properties").and_then(|p| p.get(name)).is_some_and(|p| p.get("default").is_some()) {
            continue;
        }
        let here = at.child("required");
        if w_props.is_some_and(|p| p.contains_key(name)) || is_open(writer) {
            out.push(here.at(Kind::RequiredAttributeAdded, format!("property {name} became required")));
        } else {
            let detail =
                format!("property {name} is required by the reader but the writer never produced it");
            out.push(here.at(Kind::RequiredPropertyAddedToUnopenContentModel, detail));
        }
    }
}
