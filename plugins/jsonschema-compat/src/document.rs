//! One parsed schema document and the resolution of its `$ref`s: JSON pointers
//! (`#/definitions/A`, `#/$defs/A`), plain-name anchors (`#A`, from `$anchor` or
//! a fragment-only `$id`/`id`), the document's own `$id`, and other documents:
//! the schemas it references (Confluent's schema `references`), each under the
//! reference's name, the URL its `$ref`s use (`address.json`,
//! `address.json#/definitions/Street`).

use serde_json::Value;

/// How many `$ref`s in a row are followed before a chain is called circular.
const REF_CHAIN_MAX: usize = 64;

/// Why a `$ref` does not lead to a schema in the same document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnresolvedRef {
    pub reference: String,
    pub reason: &'static str,
}

/// A referenced schema document, under the name `$ref`s use for it.
#[derive(Debug, Clone, PartialEq)]
pub struct External {
    name: String,
    root: Value,
}

impl External {
    /// `root` is the referenced schema. Its fragment-only `$ref`s (`#/definitions/A`)
    /// are rewritten to name it (`address.json#/definitions/A`), so they still lead
    /// into it when they are followed from the referencing schema.
    pub fn new(name: impl Into<String>, mut root: Value) -> Self {
        let name = name.into();
        qualify_refs(&mut root, &name);
        Self { name, root }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The referenced schema (its own `$ref`s qualified with its name).
    pub fn root(&self) -> &Value {
        &self.root
    }
}

/// Prefixes every fragment-only `$ref` under `value` with `name`.
fn qualify_refs(value: &mut Value, name: &str) {
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(map) => {
                for (key, child) in map.iter_mut() {
                    match child {
                        Value::String(reference) if key == "$ref" && reference.starts_with('#') => {
                            *reference = format!("{name}{reference}");
                        }
                        _ => pending.push(child),
                    }
                }
            }
            Value::Array(items) => pending.extend(items.iter_mut()),
            _ => {}
        }
    }
}

/// A schema document: the root every `$ref` in it is resolved against, and the
/// documents it references.
#[derive(Debug, Clone, Copy)]
pub struct Document<'a> {
    root: &'a Value,
    externals: &'a [External],
}

impl<'a> Document<'a> {
    /// A document that references no other.
    pub fn new(root: &'a Value) -> Self {
        Self { root, externals: &[] }
    }

    /// A document whose `$ref`s may name the documents in `externals`.
    pub fn with_externals(root: &'a Value, externals: &'a [External]) -> Self {
        Self { root, externals }
    }

    pub fn root(&self) -> &'a Value {
        self.root
    }

    /// Follows `schema`'s `$ref` chain to the schema it names. A schema without a
    /// `$ref` is returned as is; as in drafts 4 to 7, a `$ref`'s siblings are ignored.
    pub fn resolve<'s>(&self, mut schema: &'s Value) -> Result<&'s Value, UnresolvedRef>
    where
        'a: 's,
    {
        for _ in 0..REF_CHAIN_MAX {
            let Some(reference) = schema.get("$ref").and_then(Value::as_str) else {
                return Ok(schema);
            };
            schema = self.lookup(reference)?;
        }
        let reference = schema.get("$ref").and_then(Value::as_str).unwrap_or_default().to_owned();
        Err(UnresolvedRef { reference, reason: "the chain of references never reaches a schema" })
    }

    /// Every `$ref` in the document, checked; the first that does not resolve.
    pub fn check_refs(&self) -> Result<(), UnresolvedRef> {
        let mut pending = vec![self.root];
        while let Some(value) = pending.pop() {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(_)) = map.get("$ref") {
                        self.resolve(value)?;
                    }
                    pending.extend(map.values());
                }
                Value::Array(items) => pending.extend(items),
                _ => {}
            }
        }
        Ok(())
    }

    fn lookup(&self, reference: &str) -> Result<&'a Value, UnresolvedRef> {
        let unresolved = |reason| UnresolvedRef { reference: reference.to_owned(), reason };
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let scope = if base.is_empty() || Some(base) == root_base(self.root) {
            self.root
        } else if let Some(scope) = find_by_id(self.root, base) {
            scope
        } else {
            self.external(base).ok_or_else(|| {
                unresolved("it names another document, and no schema reference has that name")
            })?
        };
        if fragment.is_empty() {
            return Ok(scope);
        }
        if fragment.starts_with('/') {
            let pointer = percent_decode(fragment).ok_or_else(|| unresolved("bad percent-encoding"))?;
            return scope.pointer(&pointer).ok_or_else(|| unresolved("no schema at that JSON pointer"));
        }
        find_anchor(scope, fragment).ok_or_else(|| unresolved("no schema declares that anchor"))
    }
}

impl<'a> Document<'a> {
    /// The referenced document `base` names: by the reference's name, by its
    /// own `$id`, or by the name resolved against this document's `$id`
    /// (`address.json` from `https://example.com/customer.json`).
    fn external(&self, base: &str) -> Option<&'a Value> {
        let own_base = root_base(self.root);
        self.externals
            .iter()
            .find(|e| {
                e.name == base
                    || root_base(&e.root) == Some(base)
                    || own_base.is_some_and(|own| joined(own, &e.name) == base)
            })
            .map(|e| &e.root)
    }
}

/// `name` resolved against the URL `base` when it is relative (no scheme).
fn joined(base: &str, name: &str) -> String {
    if name.contains("://") || name.starts_with("urn:") {
        return name.to_owned();
    }
    let directory = base.rfind('/').map_or("", |i| &base[..=i]);
    format!("{directory}{}", name.trim_start_matches("./"))
}

/// The root's `$id` (or draft 4 `id`) without its fragment.
fn root_base(root: &Value) -> Option<&str> {
    let id = root.get("$id").or_else(|| root.get("id"))?.as_str()?;
    Some(id.split_once('#').map_or(id, |(base, _)| base)).filter(|base| !base.is_empty())
}

/// Depth-first search for a value satisfying `matches`; keys named `enum`,
/// `const`, `default` and `examples` hold data, not schemas, and are skipped.
fn find<'a>(root: &'a Value, matches: &dyn Fn(&serde_json::Map<String, Value>) -> bool) -> Option<&'a Value> {
    let mut pending = vec![root];
    while let Some(value) = pending.pop() {
        match value {
            Value::Object(map) => {
                if matches(map) {
                    return Some(value);
                }
                let schemas = map
                    .iter()
                    .filter(|(k, _)| !matches!(k.as_str(), "enum" | "const" | "default" | "examples"));
                pending.extend(schemas.map(|(_, v)| v));
            }
            Value::Array(items) => pending.extend(items),
            _ => {}
        }
    }
    None
}

fn find_by_id<'a>(root: &'a Value, base: &str) -> Option<&'a Value> {
    find(root, &|map| {
        ["$id", "id"].iter().any(|key| {
            map.get(*key)
                .and_then(Value::as_str)
                .is_some_and(|id| id.split_once('#').map_or(id, |(b, _)| b) == base)
        })
    })
}

fn find_anchor<'a>(scope: &'a Value, name: &str) -> Option<&'a Value> {
    let fragment_id = format!("#{name}");
    find(scope, &|map| {
        map.get("$anchor").and_then(Value::as_str) == Some(name)
            || ["$id", "id"]
                .iter()
                .any(|key| map.get(*key).and_then(Value::as_str) == Some(fragment_id.as_str()))
    })
}

/// Decodes `%XX` escapes (a URI fragment may percent-encode pointer characters).
fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = std::str::from_utf8(bytes.get(index + 1..index + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn resolves_pointers_anchors_and_the_root_id() {
        let schema = json!({
            "$id": "http://example.com/root.json",
            "definitions": {"A": {"type": "string"}, "B": {"$id": "#B", "type": "integer"}},
            "$defs": {"C": {"$anchor": "C", "type": "boolean"}, "D": {"$ref": "#/definitions/A"}},
        });
        let doc = Document::new(&schema);
        let resolve =
            |r: &str| doc.resolve(Box::leak(Box::new(json!({"$ref": r})))).map(|s| s["type"].clone());
        assert_eq!(resolve("#/definitions/A"), Ok(json!("string")));
        assert_eq!(resolve("#B"), Ok(json!("integer")));
        assert_eq!(resolve("#C"), Ok(json!("boolean")));
        assert_eq!(resolve("#/$defs/D"), Ok(json!("string")));
        assert_eq!(resolve("http://example.com/root.json#/definitions/A"), Ok(json!("string")));
        assert_eq!(resolve("#/definitions/Missing").unwrap_err().reason, "no schema at that JSON pointer");
        assert!(resolve("other.json#/A").is_err());
    }

    #[test]
    fn references_to_other_documents_resolve_by_name_and_stay_inside_them() {
        let address = External::new(
            "address.json",
            json!({"definitions": {"Street": {"type": "string"}}, "properties": {"street": {"$ref": "#/definitions/Street"}}}),
        );
        assert_eq!(address.root()["properties"]["street"]["$ref"], json!("address.json#/definitions/Street"));
        let externals = [address];
        let schema = json!({"$id": "https://example.com/customer.json", "properties": {"a": {"$ref": "address.json"}}});
        let doc = Document::with_externals(&schema, &externals);
        let resolve =
            |r: &str| doc.resolve(Box::leak(Box::new(json!({"$ref": r})))).map(|s| s.get("type").cloned());
        assert_eq!(resolve("address.json#/definitions/Street"), Ok(Some(json!("string"))));
        assert_eq!(
            resolve("https://example.com/address.json#/definitions/Street"),
            Ok(Some(json!("string")))
        );
        let street = doc.resolve(&externals[0].root()["properties"]["street"]).unwrap();
        assert_eq!(street["type"], json!("string"));
        assert!(doc.check_refs().is_ok());
        let err = resolve("other.json").unwrap_err();
        assert_eq!(err.reason, "it names another document, and no schema reference has that name");
        assert!(Document::new(&schema).check_refs().is_err());
    }

    #[test]
    fn a_circular_chain_is_an_error_not_a_hang() {
        let schema =
            json!({"definitions": {"A": {"$ref": "#/definitions/B"}, "B": {"$ref": "#/definitions/A"}}});
        let doc = Document::new(&schema);
        assert!(doc.check_refs().is_err());
    }
}
