//! Compatibility levels over the schema diff: which schema reads and which writes,
//! against which existing versions, and the messages the registry returns.

use es_plugin_sdk::{CompatLevel, Incompatibility};

use crate::diff::{Difference, diff};
use crate::schema::Schema;

/// Checks `proposed` against each of `existing` at `level`; empty means compatible.
/// The host passes one existing schema for the plain levels and every version for
/// the transitive ones, so each schema given is checked. Every incompatibility is
/// reported, each once; its message starts with Confluent's difference name, e.g.
/// `FIELD_KIND_CHANGED: the field at '#/Order/3' changed ...`.
pub fn check(
    level: CompatLevel,
    proposed: &es_plugin_sdk::Schema,
    existing: &[es_plugin_sdk::Schema],
) -> Vec<Incompatibility> {
    let (backward, forward) = (level.checks_backward(), level.checks_forward());
    if !backward && !forward {
        return Vec::new();
    }
    let proposed = match parse(proposed) {
        Ok(schema) => schema,
        Err(e) => return vec![invalid("new", &e.to_string())],
    };
    let mut out: Vec<Incompatibility> = Vec::new();
    let mut push = |found: Incompatibility| {
        if !out.contains(&found) {
            out.push(found);
        }
    };
    for old in existing {
        let old = match parse(old) {
            Ok(schema) => schema,
            Err(e) => {
                push(invalid("old", &e.to_string()));
                continue;
            }
        };
        // Backward: the new schema reads what the old one wrote.
        if backward {
            for difference in diff(&old.file, &proposed.file) {
                push(incompatibility(&difference, "new", "old"));
            }
        }
        // Forward: the old schema reads what the new one writes.
        if forward {
            for difference in diff(&proposed.file, &old.file) {
                push(incompatibility(&difference, "old", "new"));
            }
        }
    }
    out
}

/// Compiles a schema with its references as importable files.
pub fn parse(schema: &es_plugin_sdk::Schema) -> Result<Schema, crate::schema::SchemaError> {
    let references: Vec<(&str, &str)> = schema.references().iter().map(|r| (r.name(), r.text())).collect();
    Schema::parse_with(schema.text(), &references)
}

fn incompatibility(difference: &Difference, reader: &str, writer: &str) -> Incompatibility {
    let description = difference.kind.describe(&difference.path, reader, writer);
    Incompatibility::new(difference.path.clone(), format!("{}: {description}", difference.kind.name()))
}

fn invalid(which: &str, reason: &str) -> Incompatibility {
    Incompatibility::new("#/", format!("the {which} schema is invalid: {reason}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use es_plugin_sdk::Schema;

    fn check(level: CompatLevel, proposed: &str, existing: &[Schema]) -> Vec<Incompatibility> {
        super::check(level, &proposed.into(), existing)
    }

    #[test]
    fn referenced_messages_are_compared() {
        let customer = "syntax = \"proto3\";\npackage acme;\nimport \"address.proto\";\n\
                        message Customer { Address home = 1; }";
        let v1 = "syntax = \"proto3\";\npackage acme;\nmessage Address { string zip = 1; }";
        let v2 = "syntax = \"proto3\";\npackage acme;\nmessage Address { double zip = 1; }";
        let old = [Schema::new(customer).with_reference("address.proto", v1)];
        let same = Schema::new(customer).with_reference("address.proto", v1);
        assert!(super::check(CompatLevel::Full, &same, &old).is_empty());
        let retyped = Schema::new(customer).with_reference("address.proto", v2);
        let found = super::check(CompatLevel::Backward, &retyped, &old);
        assert_eq!(paths(&found), ["#/Customer/1"], "{found:?}");
        assert!(found[0].message.starts_with("FIELD_NAMED_TYPE_CHANGED"), "{found:?}");
    }

    const V1: &str = "syntax = \"proto3\";\npackage shop;\nmessage Order { string id = 1; }";
    const V2: &str = "syntax = \"proto3\";\npackage shop;\nmessage Order { string id = 1; int64 total = 2; }";
    const V3: &str =
        "syntax = \"proto3\";\npackage shop;\nmessage Order { string id = 1; string total = 2; }";

    fn paths(found: &[Incompatibility]) -> Vec<&str> {
        found.iter().map(|i| i.path.as_str()).collect()
    }

    #[test]
    fn plain_levels_check_the_given_version() {
        assert!(check(CompatLevel::Backward, V2, &[V1.into()]).is_empty());
        assert!(check(CompatLevel::Backward, V3, &[V1.into()]).is_empty());
        let found = check(CompatLevel::Backward, V3, &[V2.into()]);
        assert_eq!(paths(&found), ["#/Order/2"]);
        assert_eq!(
            found[0].message,
            "FIELD_SCALAR_KIND_CHANGED: the scalar type of the field at '#/Order/2' in the new schema \
             cannot read values of its type in the old schema"
        );
        assert_eq!(paths(&check(CompatLevel::Forward, V3, &[V2.into()])), ["#/Order/2"]);
        // Both directions fail, each with its own reader and writer.
        let full = check(CompatLevel::Full, V3, &[V2.into()]);
        assert_eq!(paths(&full), ["#/Order/2", "#/Order/2"]);
        assert_ne!(full[0].message, full[1].message);
        assert!(check(CompatLevel::None, V3, &[V2.into()]).is_empty());
    }

    #[test]
    fn transitive_levels_check_every_version() {
        // V3 against V1 alone is fine; against V2 it is not.
        assert_eq!(
            paths(&check(CompatLevel::BackwardTransitive, V3, &[V1.into(), V2.into()])),
            ["#/Order/2"]
        );
        assert!(check(CompatLevel::BackwardTransitive, V3, &[V1.into()]).is_empty());
    }

    #[test]
    fn directions_differ_for_required_fields() {
        let old = "syntax = \"proto2\";\nmessage M { optional int32 a = 1; }";
        let new = "syntax = \"proto2\";\nmessage M { optional int32 a = 1; required int32 b = 2; }";
        let backward = check(CompatLevel::Backward, new, &[old.into()]);
        assert!(backward[0].message.contains("REQUIRED_FIELD_ADDED"), "{backward:?}");
        let forward = check(CompatLevel::Forward, new, &[old.into()]);
        assert!(forward[0].message.contains("REQUIRED_FIELD_REMOVED"), "{forward:?}");
        assert_eq!(check(CompatLevel::Full, new, &[old.into()]).len(), 2);
    }

    #[test]
    fn invalid_schemas_are_reported() {
        let found = check(CompatLevel::Backward, "message {", &[V1.into()]);
        assert_eq!(found.len(), 1);
        assert!(found[0].message.starts_with("the new schema is invalid"), "{}", found[0].message);
        let found = check(CompatLevel::Backward, V1, &["nonsense".into()]);
        assert!(found[0].message.starts_with("the old schema is invalid"), "{}", found[0].message);
    }
}
