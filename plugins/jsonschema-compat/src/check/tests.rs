//! Unit tests of the comparison rules, one behaviour each; the conformance suites
//! run through the broker in tests/tests/schema_compat_jsonschema.rs.

use super::compatibility;
use crate::report::Kind;
use serde_json::{Value, json};

fn kinds(reader: Value, writer: Value) -> Vec<(String, Kind)> {
    compatibility(&reader, &writer).into_iter().map(|i| (i.path, i.kind)).collect()
}

#[test]
fn identical_schemas_are_compatible() {
    let schema =
        json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 3}}, "required": ["a"]});
    assert!(kinds(schema.clone(), schema).is_empty());
}

#[test]
fn integer_widens_to_number_but_not_back() {
    assert!(kinds(json!({"type": "number"}), json!({"type": "integer"})).is_empty());
    assert_eq!(
        kinds(json!({"type": "integer"}), json!({"type": "number"})),
        [("/type".to_owned(), Kind::TypeNarrowed)]
    );
}

#[test]
fn every_incompatibility_is_reported_with_its_path() {
    let reader = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 2}, "b": {"type": "integer"}}});
    let writer = json!({"type": "object", "properties": {"a": {"type": "string", "maxLength": 5}, "b": {"type": "string"}}});
    let found = kinds(reader, writer);
    assert!(found.contains(&("/properties/a/maxLength".to_owned(), Kind::MaxLengthDecreased)), "{found:?}");
    assert!(found.contains(&("/properties/b/type".to_owned(), Kind::TypeChanged)), "{found:?}");
    assert_eq!(found.len(), 2);
}

#[test]
fn closed_and_open_content_models() {
    let closed =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": false});
    let wider = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}});
    // The closed reader rejects `b`, which the writer may produce.
    let found = kinds(closed.clone(), wider.clone());
    assert!(
        found.contains(&("/properties/b".to_owned(), Kind::PropertyRemovedFromClosedContentModel)),
        "{found:?}"
    );
    // The open writer may have put anything under `b`.
    let found = kinds(wider, closed.clone());
    assert!(found.is_empty(), "a closed writer never produced b: {found:?}");
    let open = json!({"type": "object", "properties": {"a": {"type": "integer"}}});
    let with_b = json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}});
    assert_eq!(kinds(with_b, open), [("/properties/b".to_owned(), Kind::PropertyAddedToOpenContentModel)]);
}

#[test]
fn a_new_required_property_breaks_readers_unless_it_has_a_default() {
    let writer = json!({"type": "object", "properties": {"a": {"type": "string"}}});
    let reader = json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
    assert_eq!(kinds(reader, writer.clone()), [("/required".to_owned(), Kind::RequiredAttributeAdded)]);
    let with_default =
        json!({"type": "object", "properties": {"a": {"type": "string", "default": ""}}, "required": ["a"]});
    assert!(kinds(with_default, writer).is_empty());
}

#[test]
fn enums_may_widen_but_not_narrow() {
    assert!(kinds(json!({"enum": ["A", "B", "C"]}), json!({"enum": ["A", "B"]})).is_empty());
    assert_eq!(
        kinds(json!({"enum": ["A"]}), json!({"enum": ["A", "B"]})),
        [("/enum".to_owned(), Kind::EnumArrayNarrowed)]
    );
    assert!(kinds(json!({"enum": ["x"]}), json!({"const": "x"})).is_empty());
}

#[test]
fn bounds_compare_exclusive_and_inclusive_forms_across_drafts() {
    let draft4 = json!({"type": "number", "minimum": 10, "exclusiveMinimum": true});
    let draft6 = json!({"type": "number", "exclusiveMinimum": 10});
    assert!(kinds(draft4.clone(), draft6.clone()).is_empty());
    assert!(kinds(draft6.clone(), draft4).is_empty());
    assert!(kinds(json!({"type": "number", "minimum": 10}), draft6.clone()).is_empty());
    let found = kinds(draft6, json!({"type": "number", "minimum": 10}));
    assert_eq!(found, [("/exclusiveMinimum".to_owned(), Kind::ExclusiveMinimumIncreased)]);
}

#[test]
fn multiple_of_must_divide_the_writers() {
    assert!(
        kinds(json!({"type": "number", "multipleOf": 5}), json!({"type": "number", "multipleOf": 10}))
            .is_empty()
    );
    let found =
        kinds(json!({"type": "number", "multipleOf": 7}), json!({"type": "number", "multipleOf": 10}));
    assert_eq!(found, [("/multipleOf".to_owned(), Kind::MultipleOfChanged)]);
}

#[test]
fn combinators_match_branches_in_any_order() {
    let a = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
    let b = json!({"anyOf": [{"type": "integer"}, {"type": "string"}]});
    assert!(kinds(a.clone(), b).is_empty());
    let narrower = json!({"anyOf": [{"type": "string"}]});
    assert!(kinds(a.clone(), narrower.clone()).is_empty());
    assert_eq!(kinds(narrower, a), [("/anyOf".to_owned(), Kind::SumTypeNarrowed)]);
    let all = json!({"allOf": [{"type": "string"}, {"maxLength": 3}]});
    assert_eq!(
        kinds(all, json!({"oneOf": [{"type": "string"}, {"maxLength": 3}]})),
        [("/allOf".to_owned(), Kind::CombinedTypeChanged)]
    );
}

#[test]
fn negations_compare_the_negated_schemas_the_other_way_round() {
    let reader = json!({"not": {"type": "string", "maxLength": 5}});
    let writer = json!({"not": {"type": "string", "maxLength": 10}});
    assert!(kinds(reader.clone(), writer.clone()).is_empty());
    assert!(kinds(writer, reader).iter().any(|(_, k)| *k == Kind::NotTypeExtended));
}

#[test]
fn tuples_against_closed_and_partially_open_additional_items() {
    let closed = json!({"type": "array", "items": [{"type": "string"}], "additionalItems": false});
    let longer =
        json!({"type": "array", "items": [{"type": "string"}, {"type": "number"}], "additionalItems": false});
    // The writer never produces a second item, so the reader's new position is safe.
    assert!(kinds(longer.clone(), closed.clone()).is_empty());
    assert_eq!(kinds(closed, longer), [("/items/1".to_owned(), Kind::ItemRemovedFromClosedContentModel)]);
    let list = json!({"type": "array", "items": {"type": "string"}});
    let tuple = json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "string"}});
    assert_eq!(kinds(list, tuple), [("/items".to_owned(), Kind::TypeChanged)]);
}

#[test]
fn references_resolve_and_recursion_terminates() {
    let tree = json!({
        "$ref": "#/$defs/node",
        "$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}},
    });
    assert!(kinds(tree.clone(), tree.clone()).is_empty());
    let inline =
        json!({"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}});
    assert!(kinds(tree, inline).is_empty());
    let found = kinds(json!({"$ref": "#/nowhere"}), json!({}));
    assert_eq!(found, [("/".to_owned(), Kind::ReferenceUnresolved)]);
}

#[test]
fn boolean_schemas() {
    // The writer `false` produces nothing; the reader `{}` accepts everything.
    assert!(kinds(json!({"type": "string"}), json!(false)).is_empty());
    assert!(kinds(json!({"title": "anything"}), json!({"type": "string"})).is_empty());
    assert_eq!(kinds(json!(false), json!(true)), [("/".to_owned(), Kind::TypeChanged)]);
    // Karapace's reading of `true`, kept for conformance: it is not a string schema.
    assert_eq!(kinds(json!(true), json!({"type": "string"})), [("/type".to_owned(), Kind::TypeChanged)]);
}
