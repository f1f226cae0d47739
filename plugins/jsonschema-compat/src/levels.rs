//! A compatibility level applied to a proposed schema and the existing ones:
//! BACKWARD reads each existing schema's data with the proposed one, FORWARD the
//! reverse, FULL both. The host passes the latest schema for plain levels and
//! every version for transitive ones, so each schema given is checked.

use crate::check::{Budget, STEPS_MAX, compatibility_of};
use crate::document::{Document, External};
use crate::normalize::{SchemaError, externals, parse_document};
use es_plugin_sdk::Schema;
use serde_json::Value;

/// Which directions to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Directions {
    /// The proposed schema reads data written with each existing one.
    pub backward: bool,
    /// Each existing schema reads data written with the proposed one.
    pub forward: bool,
}

/// One finding, ready for the wire: a JSON pointer and a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub path: String,
    pub message: String,
}

/// Every incompatibility of `proposed` against `existing` (oldest first) in the
/// requested directions. A schema that does not parse is itself reported, since a
/// registry must not accept what it cannot check.
/// Each schema's `$ref`s may name its own references.
pub fn check(directions: Directions, proposed: &Schema, existing: &[Schema]) -> Vec<Finding> {
    if !directions.backward && !directions.forward {
        return Vec::new();
    }
    let proposed = match Parsed::of(proposed) {
        Ok(schema) => schema,
        Err(e) => {
            return vec![Finding {
                path: "/".to_owned(),
                message: format!("INVALID_SCHEMA: the new schema: {e}"),
            }];
        }
    };
    let mut out = Vec::new();
    let budget = Budget::default();
    for (index, schema) in existing.iter().enumerate() {
        let which = match existing.len() {
            1 => "the old schema".to_owned(),
            count => format!("old schema {} of {count}", index + 1),
        };
        let old = match Parsed::of(schema) {
            Ok(schema) => schema,
            Err(e) => {
                out.push(Finding { path: "/".to_owned(), message: format!("INVALID_SCHEMA: {which}: {e}") });
                continue;
            }
        };
        if directions.backward {
            let context = format!("the new schema reading data written with {which}");
            report(&proposed, &old, &context, &budget, &mut out);
        }
        if directions.forward {
            let context = format!("{which} reading data written with the new schema");
            report(&old, &proposed, &context, &budget, &mut out);
        }
        if budget.exhausted() {
            // One verdict for the whole call: what was found so far is incomplete.
            let message =
                format!("SCHEMA_TOO_COMPLEX: checking takes more than {STEPS_MAX} comparison steps");
            return vec![Finding { path: "/".to_owned(), message }];
        }
    }
    out
}

/// A schema and its referenced documents, parsed.
struct Parsed {
    root: Value,
    externals: Vec<External>,
}

impl Parsed {
    fn of(schema: &Schema) -> Result<Self, SchemaError> {
        let externals = externals(schema.references().iter().map(|r| (r.name(), r.text())))?;
        let root = parse_document(schema.text(), &externals)?;
        Ok(Self { root, externals })
    }

    fn document(&self) -> Document<'_> {
        Document::with_externals(&self.root, &self.externals)
    }
}

fn report(reader: &Parsed, writer: &Parsed, context: &str, budget: &Budget, out: &mut Vec<Finding>) {
    for found in compatibility_of(reader.document(), writer.document(), budget) {
        out.push(Finding { path: found.path.clone(), message: format!("{} ({context})", found.message()) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BACKWARD: Directions = Directions { backward: true, forward: false };
    const FORWARD: Directions = Directions { backward: false, forward: true };
    const FULL: Directions = Directions { backward: true, forward: true };
    const NONE: Directions = Directions { backward: false, forward: false };

    fn schemas(texts: &[&str]) -> Vec<Schema> {
        texts.iter().map(|t| Schema::new(*t)).collect()
    }

    fn check(directions: Directions, proposed: &str, existing: &[Schema]) -> Vec<Finding> {
        super::check(directions, &Schema::new(proposed), existing)
    }

    #[test]
    fn directions_pick_the_reader() {
        // Widening integer to number: backward-compatible only.
        let old = schemas(&[r#"{"type": "integer"}"#]);
        let new = r#"{"type": "number"}"#;
        assert!(check(BACKWARD, new, &old).is_empty());
        let forward = check(FORWARD, new, &old);
        assert_eq!(forward.len(), 1);
        assert_eq!(forward[0].path, "/type");
        assert!(forward[0].message.starts_with("TYPE_NARROWED: "), "{}", forward[0].message);
        assert!(forward[0].message.ends_with("(the old schema reading data written with the new schema)"));
        assert_eq!(check(FULL, new, &old), forward);
        assert!(check(NONE, r#"{"type": "string"}"#, &old).is_empty());
    }

    #[test]
    fn every_existing_schema_is_checked_and_named() {
        let old = schemas(&[r#"{"type": "string"}"#, r#"{"type": "integer"}"#]);
        let found = check(BACKWARD, r#"{"type": "integer"}"#, &old);
        assert_eq!(found.len(), 1);
        assert!(found[0].message.contains("old schema 1 of 2"), "{}", found[0].message);
    }

    #[test]
    fn an_exponential_schema_stops_with_schema_too_complex() {
        // Each level is an anyOf of three references to the level below: small
        // text, but every reader branch is paired with every writer branch at
        // every level, 9^12 comparisons without a budget.
        let levels = |leaf: &str| {
            let mut definitions = vec![format!(r#""d0": {{"type": "{leaf}"}}"#)];
            for i in 1..=12 {
                let below = format!(r##"{{"$ref": "#/definitions/d{}"}}"##, i - 1);
                definitions.push(format!(
                    r#""d{i}": {{"anyOf": [{below}, {below}, {below}, {{"type": "string"}}]}}"#
                ));
            }
            format!(r##"{{"$ref": "#/definitions/d12", "definitions": {{{}}}}}"##, definitions.join(", "))
        };
        let (schema, old) = (levels("integer"), levels("number"));
        let found = check(FORWARD, &schema, &schemas(&[&old]));
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].path, "/");
        assert!(found[0].message.starts_with("SCHEMA_TOO_COMPLEX: "), "{}", found[0].message);
    }

    #[test]
    fn referenced_documents_are_compared_through_their_refs() {
        let customer = r#"{"type": "object", "properties": {"home": {"$ref": "address.json"}}}"#;
        let v1 = r#"{"type": "object", "properties": {"zip": {"type": "string"}}}"#;
        let v2 = r#"{"type": "object", "properties": {"zip": {"type": "integer"}}}"#;
        let old = [Schema::new(customer).with_reference("address.json", v1)];
        let same = Schema::new(customer).with_reference("address.json", v1);
        assert!(super::check(FULL, &same, &old).is_empty());
        let retyped = Schema::new(customer).with_reference("address.json", v2);
        let found = super::check(BACKWARD, &retyped, &old);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].path, "/properties/home/properties/zip/type");
        assert!(found[0].message.starts_with("TYPE_CHANGED: "), "{}", found[0].message);
        let unreferenced = super::check(BACKWARD, &Schema::new(customer), &old);
        assert!(unreferenced[0].message.contains("no schema reference has that name"), "{unreferenced:?}");
    }

    #[test]
    fn unparsable_schemas_are_reported() {
        let found = check(BACKWARD, "{", &schemas(&["true"]));
        assert!(
            found[0].message.starts_with("INVALID_SCHEMA: the new schema: the schema is not JSON"),
            "{found:?}"
        );
        let found = check(FORWARD, "true", &schemas(&["42"]));
        assert!(found[0].message.contains("object or a boolean"), "{found:?}");
    }
}
