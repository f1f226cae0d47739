//! What a schema (with its `$ref` resolved) is, for comparison: a boolean schema,
//! a combinator, a negation, an enumeration or a schema for one instance type.
//!
//! This follows Karapace's reading of a schema: the combinators win over `type`,
//! a `type` array is an `anyOf` of one schema per type, and a schema without
//! `type` is an object schema, except that a schema made only of string, number
//! or array keywords (`{"maxLength": 5}` inside an `allOf`) is read as that type.

use serde_json::{Map, Value};
use std::borrow::Cow;

/// The instance types of JSON Schema's `type` keyword.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Null,
    Boolean,
    Integer,
    Number,
    String,
    Array,
    Object,
}

impl Type {
    fn parse(name: &str) -> Option<Type> {
        Some(match name {
            "null" => Type::Null,
            "boolean" => Type::Boolean,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "string" => Type::String,
            "array" => Type::Array,
            "object" => Type::Object,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Type::Null => "null",
            Type::Boolean => "boolean",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::String => "string",
            Type::Array => "array",
            Type::Object => "object",
        }
    }

    pub fn is_numeric(self) -> bool {
        matches!(self, Type::Integer | Type::Number)
    }
}

/// `allOf`, `anyOf` or `oneOf`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Combinator {
    AllOf,
    AnyOf,
    OneOf,
}

impl Combinator {
    pub fn keyword(self) -> &'static str {
        match self {
            Combinator::AllOf => "allOf",
            Combinator::AnyOf => "anyOf",
            Combinator::OneOf => "oneOf",
        }
    }
}

/// The classification of one schema.
#[derive(Debug, Clone)]
pub enum Shape<'a> {
    /// `true` or `false`.
    Bool(bool),
    /// A combinator and its subschemas (a `type` array becomes an `anyOf` of copies).
    Combined(Combinator, Vec<Cow<'a, Value>>),
    /// `not` and the negated schema.
    Not(&'a Value),
    /// An `enum` (or a `const`) without a `type`.
    Enum,
    /// A schema for one instance type (written or inferred).
    Typed(Type),
}

impl Shape<'_> {
    /// A name for messages: `string`, `anyOf`, `not`, `enum`, `true`.
    pub fn name(&self) -> &'static str {
        match self {
            Shape::Bool(true) => "the true schema",
            Shape::Bool(false) => "the false schema",
            Shape::Combined(c, _) => c.keyword(),
            Shape::Not(_) => "not",
            Shape::Enum => "enum",
            Shape::Typed(t) => t.name(),
        }
    }

    /// Karapace's notion of "the same kind of schema": both booleans, both
    /// negations, both enumerations, or the same instance type.
    pub fn same_kind(&self, other: &Shape<'_>) -> bool {
        match (self, other) {
            (Shape::Bool(_), Shape::Bool(_))
            | (Shape::Not(_), Shape::Not(_))
            | (Shape::Enum, Shape::Enum) => true,
            (Shape::Typed(a), Shape::Typed(b)) => a == b,
            _ => false,
        }
    }

    pub fn is_combined(&self) -> bool {
        matches!(self, Shape::Combined(..))
    }
}

const STRING_KEYWORDS: &[&str] =
    &["minLength", "maxLength", "pattern", "format", "contentEncoding", "contentMediaType"];
const NUMBER_KEYWORDS: &[&str] =
    &["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"];
const ARRAY_KEYWORDS: &[&str] =
    &["items", "prefixItems", "additionalItems", "contains", "minItems", "maxItems", "uniqueItems"];
const OBJECT_KEYWORDS: &[&str] = &[
    "properties",
    "additionalProperties",
    "patternProperties",
    "required",
    "minProperties",
    "maxProperties",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "propertyNames",
];

/// Classifies a resolved schema. Anything that is neither a boolean nor an object
/// (the normalizer refuses those) is read as the permissive `true`.
pub fn classify(schema: &Value) -> Shape<'_> {
    let Value::Object(map) = schema else {
        return Shape::Bool(schema.as_bool().unwrap_or(true));
    };
    if let Some(Value::Array(types)) = map.get("type") {
        let copies = types
            .iter()
            .map(|t| {
                let mut copy = map.clone();
                copy.insert("type".to_owned(), t.clone());
                Cow::Owned(Value::Object(copy))
            })
            .collect();
        return Shape::Combined(Combinator::AnyOf, copies);
    }
    for combinator in [Combinator::AllOf, Combinator::AnyOf, Combinator::OneOf] {
        if let Some(Value::Array(subschemas)) = map.get(combinator.keyword()) {
            return Shape::Combined(combinator, subschemas.iter().map(Cow::Borrowed).collect());
        }
    }
    if let Some(negated) = map.get("not") {
        return Shape::Not(negated);
    }
    if let Some(t) = map.get("type").and_then(Value::as_str).and_then(Type::parse) {
        return Shape::Typed(t);
    }
    if map.contains_key("enum") || map.contains_key("const") {
        return Shape::Enum;
    }
    Shape::Typed(infer(map))
}

/// The type an untyped schema constrains, when its keywords name only one.
fn infer(map: &Map<String, Value>) -> Type {
    let has = |keywords: &[&str]| keywords.iter().any(|k| map.contains_key(*k));
    match (has(OBJECT_KEYWORDS), has(ARRAY_KEYWORDS), has(STRING_KEYWORDS), has(NUMBER_KEYWORDS)) {
        (false, true, false, false) => Type::Array,
        (false, false, true, false) => Type::String,
        (false, false, false, true) => Type::Number,
        _ => Type::Object,
    }
}

/// The values a schema allows by `enum` or `const`, if it restricts them so.
pub fn allowed_values(schema: &Value) -> Option<Cow<'_, [Value]>> {
    if let Some(Value::Array(values)) = schema.get("enum") {
        return Some(Cow::Borrowed(values.as_slice()));
    }
    schema.get("const").map(|value| Cow::Owned(vec![value.clone()]))
}

/// Keywords that never reject a value: identifiers, annotations and the places
/// definitions are kept.
const ANNOTATIONS: &[&str] = &[
    "$schema",
    "$id",
    "id",
    "$anchor",
    "$comment",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "definitions",
    "$defs",
];

/// True for `{}` and schemas with only annotations: they accept every value.
pub fn is_empty_schema(schema: &Value) -> bool {
    schema.as_object().is_some_and(|map| map.keys().all(|k| ANNOTATIONS.contains(&k.as_str())))
}

/// True for `true`, `{}` and schemas with only annotations.
pub fn accepts_everything(schema: &Value) -> bool {
    schema == &Value::Bool(true) || is_empty_schema(schema)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn combinators_win_over_type_and_type_arrays_become_any_of() {
        assert!(matches!(
            classify(&json!({"type": "number", "allOf": []})),
            Shape::Combined(Combinator::AllOf, _)
        ));
        let schema = json!({"type": ["string", "null"], "maxLength": 3});
        let Shape::Combined(Combinator::AnyOf, copies) = classify(&schema) else {
            panic!("a type array is an anyOf");
        };
        assert_eq!(copies[1].as_ref(), &json!({"type": "null", "maxLength": 3}));
    }

    #[test]
    fn untyped_schemas_are_objects_unless_their_keywords_say_otherwise() {
        assert!(matches!(classify(&json!({})), Shape::Typed(Type::Object)));
        assert!(matches!(classify(&json!({"maxLength": 5})), Shape::Typed(Type::String)));
        assert!(matches!(classify(&json!({"maximum": 5})), Shape::Typed(Type::Number)));
        assert!(matches!(classify(&json!({"items": [true]})), Shape::Typed(Type::Array)));
        assert!(matches!(classify(&json!({"maxLength": 5, "properties": {}})), Shape::Typed(Type::Object)));
        assert!(matches!(classify(&json!({"const": 1})), Shape::Enum));
        assert!(matches!(classify(&json!(false)), Shape::Bool(false)));
    }
}
