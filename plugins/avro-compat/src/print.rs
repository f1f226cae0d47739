//! An Avro schema printed as Java Avro's `Schema.toString` prints it, which is
//! the text Confluent's registry stores, answers and compares for an `AVRO`
//! schema (its `canonicalString`), and, with the references inlined, its
//! `format=resolved`.
//!
//! Java reads the schema into its model and prints the model, so the print is
//! what the model keeps, in the model's order, compact, with Jackson's escapes:
//! - a record: `type`, `name`, `namespace` (only when it differs from the
//!   enclosing one: a nested type in its parent's namespace is printed without
//!   one, a type without a namespace inside one that has one gets `""`), `doc`,
//!   `fields`, the other attributes in the order written, `aliases`;
//! - a field: `name`, `type`, `doc`, `default`, `order` (unless ascending),
//!   `aliases`, the other attributes in the order written;
//! - an enum: `type`, `name`, `namespace`, `doc`, `symbols`, `default`, the
//!   others, `aliases`; a fixed: `type`, `name`, `namespace`, `doc`, `size`, the
//!   others, `aliases`;
//! - an array `type`, `items`, the others; a map `type`, `values`, the others;
//!   a union its branches; a primitive its name alone, or `type` then its
//!   attributes (`logicalType`, `precision`, ...) when it has any;
//! - a named type defined once is printed in full where it is first met and by
//!   name after that, the name short when its namespace is the enclosing one
//!   (unless the short name is a type's name, e.g. `int`), full otherwise;
//!   aliases are printed relative to their own type's namespace;
//! - what the model drops is gone: a `doc` that is not a string, a primitive's
//!   `name` or `namespace`, the attributes of a `{"type": "SomeName"}` reference;
//!   a float or double default written as a string becomes the number;
//!   numbers are read as Jackson reads them (integers as integers, anything
//!   with a fraction or an exponent as a double: `1.50` prints `1.5`).
//!
//! Schema references: the referenced schemas' named types are defined for the
//! schema, as Java's parser defines them when it reads the references first.
//! `Form::Canonical` prints each referenced schema's own (top-level) type by name,
//! as Confluent's `canonicalString` does; `Form::Resolved` prints each in full at
//! its first use.

use std::collections::{HashMap, HashSet};

use crate::json::{self, Json};

/// Which print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// Java's `toString(referencedSchemas)`: referenced types by name.
    Canonical,
    /// Java's `toString()`: referenced types inlined where first used.
    Resolved,
}

/// `text` printed in `form`, its references' texts (dependencies first) defining
/// the names it may use. The schema must already have parsed (apache-avro).
pub fn print<'a>(
    text: &str,
    references: impl IntoIterator<Item = &'a str>,
    form: Form,
) -> Result<String, String> {
    let mut model = Model::default();
    let mut roots = Vec::new();
    for reference in references {
        if let Type::Named(i) = model.read(&json::parse(reference)?)? {
            roots.push(i);
        }
    }
    let schema = model.read(&json::parse(text)?)?;
    let known = match form {
        Form::Canonical => roots.into_iter().collect(),
        Form::Resolved => HashSet::new(),
    };
    let mut printer = Printer { model: &model, known, space: None, out: String::with_capacity(text.len()) };
    printer.schema(&schema, 0)?;
    Ok(printer.out)
}

/// Attributes kept as written, in order.
type Props = Vec<(String, Json)>;

#[derive(Debug, Clone)]
enum Type {
    Primitive(&'static str, Props),
    /// A named type: an index into `Model::named`.
    Named(usize),
    Array(Box<Type>, Props),
    Map(Box<Type>, Props),
    Union(Vec<Type>),
}

#[derive(Debug, Clone)]
struct Named {
    name: String,
    space: Option<String>,
    doc: Option<String>,
    /// Full names.
    aliases: Vec<String>,
    props: Props,
    kind: Kind,
}

#[derive(Debug, Clone)]
enum Kind {
    Record { error: bool, fields: Vec<Field> },
    Enum { symbols: Vec<String>, default: Option<String> },
    Fixed { size: Json },
}

#[derive(Debug, Clone)]
struct Field {
    name: String,
    schema: Type,
    doc: Option<String>,
    default: Option<Json>,
    /// `descending` or `ignore`; ascending (the default) is not printed.
    order: Option<String>,
    aliases: Vec<String>,
    props: Props,
}

const PRIMITIVES: [&str; 8] = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"];

/// The names of Avro's types, which a short name may not be printed as.
const TYPE_NAMES: [&str; 14] = [
    "record", "enum", "array", "map", "union", "fixed", "string", "bytes", "int", "long", "float", "double",
    "boolean", "null",
];

/// What Java keeps as a named or other type's own attributes (the rest are
/// properties); an enum also owns `default`.
const SCHEMA_RESERVED: [&str; 10] =
    ["doc", "fields", "items", "name", "namespace", "size", "symbols", "values", "type", "aliases"];
const FIELD_RESERVED: [&str; 6] = ["default", "doc", "name", "order", "type", "aliases"];

/// The schemas read so far: named types by full name, and the namespace in force.
#[derive(Default)]
struct Model {
    named: Vec<Named>,
    by_name: HashMap<String, usize>,
    space: Option<String>,
}

/// A name and namespace as Java's `Name` makes them: a dotted name carries its
/// own namespace, an empty namespace is none.
fn split_name(name: &str, space: Option<&str>) -> (String, Option<String>) {
    let (name, space) = match name.rsplit_once('.') {
        Some((space, short)) => (short, Some(space)),
        None => (name, space),
    };
    (name.to_owned(), space.filter(|s| !s.is_empty()).map(str::to_owned))
}

fn full_name(name: &str, space: Option<&str>) -> String {
    match space {
        Some(space) => format!("{space}.{name}"),
        None => name.to_owned(),
    }
}

fn props(object: &Json, reserved: &[&str]) -> Props {
    match object {
        Json::Object(entries) => {
            entries.iter().filter(|(k, _)| !reserved.contains(&k.as_str())).cloned().collect()
        }
        _ => Vec::new(),
    }
}

/// A list of aliases, each once, in order (Java's `LinkedHashSet`).
fn aliases(object: &Json) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    match object.get("aliases") {
        None => {}
        Some(Json::Array(items)) => {
            for item in items {
                let alias = item.text().ok_or("an alias is not a string")?;
                if !out.iter().any(|a| a == alias) {
                    out.push(alias.to_owned());
                }
            }
        }
        Some(_) => return Err("aliases is not an array".into()),
    }
    Ok(out)
}

impl Model {
    /// Reads one schema, defining the named types it declares.
    fn read(&mut self, node: &Json) -> Result<Type, String> {
        self.space = None;
        self.schema(node, 0)
    }

    fn lookup(&self, name: &str) -> Result<Type, String> {
        if let Some(p) = PRIMITIVES.iter().find(|p| **p == name) {
            return Ok(Type::Primitive(p, Vec::new()));
        }
        let (short, space) = split_name(name, self.space.as_deref());
        let found = self.by_name.get(&full_name(&short, space.as_deref())).or_else(|| self.by_name.get(name));
        found.map(|i| Type::Named(*i)).ok_or_else(|| format!("undefined name: {name}"))
    }

    fn schema(&mut self, node: &Json, depth: usize) -> Result<Type, String> {
        if depth > 256 {
            return Err("the schema nests too deeply".into());
        }
        match node {
            Json::String(name) => self.lookup(name),
            Json::Array(branches) => {
                branches.iter().map(|b| self.schema(b, depth + 1)).collect::<Result<_, _>>().map(Type::Union)
            }
            Json::Object(_) => self.object(node, depth),
            other => Err(format!("not a schema: {other:?}")),
        }
    }

    fn object(&mut self, node: &Json, depth: usize) -> Result<Type, String> {
        let kind = node.get("type").and_then(Json::text).ok_or("a schema object has no type")?;
        match kind {
            "record" | "error" | "enum" | "fixed" => self.named(node, kind, depth),
            "array" => {
                let items = self.schema(node.get("items").ok_or("an array has no items")?, depth + 1)?;
                Ok(Type::Array(Box::new(items), props(node, &SCHEMA_RESERVED)))
            }
            "map" => {
                let values = self.schema(node.get("values").ok_or("a map has no values")?, depth + 1)?;
                Ok(Type::Map(Box::new(values), props(node, &SCHEMA_RESERVED)))
            }
            _ => match PRIMITIVES.iter().find(|p| **p == kind) {
                Some(p) => Ok(Type::Primitive(p, props(node, &SCHEMA_RESERVED))),
                // `{"type": "SomeName"}`: the named type, its other attributes dropped.
                None => {
                    let (short, space) = split_name(kind, self.space.as_deref());
                    let full = full_name(&short, space.as_deref());
                    self.by_name
                        .get(&full)
                        .map(|i| Type::Named(*i))
                        .ok_or(format!("type not supported: {kind}"))
                }
            },
        }
    }

    fn named(&mut self, node: &Json, kind: &str, depth: usize) -> Result<Type, String> {
        let saved = self.space.clone();
        let space = node.get("namespace").and_then(Json::text).map(str::to_owned).or_else(|| saved.clone());
        let written = node.get("name").and_then(Json::text).ok_or("a named type has no name")?;
        let (name, space) = split_name(written, space.as_deref());
        let full = full_name(&name, space.as_deref());
        if self.by_name.contains_key(&full) {
            return Err(format!("can't redefine: {full}"));
        }
        let index = self.named.len();
        let doc = node.get("doc").and_then(Json::text).map(str::to_owned);
        let own_aliases = aliases(node)?
            .iter()
            .map(|a| {
                let (short, alias_space) = split_name(a, space.as_deref());
                full_name(&short, alias_space.as_deref())
            })
            .fold(Vec::<String>::new(), |mut out, a| {
                if !out.contains(&a) {
                    out.push(a);
                }
                out
            });
        let placeholder = Kind::Enum { symbols: Vec::new(), default: None };
        let mut own_props = props(node, &SCHEMA_RESERVED);
        if kind == "enum" {
            own_props.retain(|(k, _)| k != "default");
        }
        self.named.push(Named {
            name,
            space: space.clone(),
            doc,
            aliases: own_aliases,
            props: own_props,
            kind: placeholder,
        });
        self.by_name.insert(full, index);
        self.space = space;
        let kind = match kind {
            "enum" => {
                let symbols = match node.get("symbols") {
                    Some(Json::Array(items)) => items
                        .iter()
                        .map(|s| s.text().map(str::to_owned).ok_or("an enum symbol is not a string")),
                    _ => return Err("an enum has no symbols".into()),
                }
                .collect::<Result<Vec<_>, _>>()?;
                Kind::Enum { symbols, default: node.get("default").and_then(Json::text).map(str::to_owned) }
            }
            "fixed" => Kind::Fixed { size: node.get("size").cloned().ok_or("a fixed has no size")? },
            _ => {
                let Some(Json::Array(written)) = node.get("fields") else {
                    return Err("a record has no fields".into());
                };
                let mut fields = Vec::with_capacity(written.len());
                for field in written {
                    fields.push(self.field(field, depth)?);
                }
                Kind::Record { error: kind == "error", fields }
            }
        };
        self.named[index].kind = kind;
        self.space = saved;
        Ok(Type::Named(index))
    }

    fn field(&mut self, node: &Json, depth: usize) -> Result<Field, String> {
        let name = node.get("name").and_then(Json::text).ok_or("a field has no name")?.to_owned();
        let schema = self.schema(node.get("type").ok_or("a field has no type")?, depth + 1)?;
        let order = match node.get("order") {
            None => None,
            Some(order) => match order.text().map(str::to_ascii_lowercase).as_deref() {
                Some("ascending") => None,
                Some(o @ ("descending" | "ignore")) => Some(o.to_owned()),
                _ => return Err(format!("field {name}: order is not ascending, descending or ignore")),
            },
        };
        let mut default = node.get("default").cloned();
        if let (Some(Json::String(text)), Type::Primitive("float" | "double", _)) = (&default, &schema) {
            // Java Avro reads such a default as the number (`Double.valueOf`).
            default = Some(Json::Double(
                java_double_value(text)
                    .ok_or_else(|| format!("field {name}: the default {text:?} is not a number"))?,
            ));
        }
        Ok(Field {
            doc: node.get("doc").and_then(Json::text).map(str::to_owned),
            aliases: aliases(node)?,
            props: props(node, &FIELD_RESERVED),
            name,
            schema,
            default,
            order,
        })
    }
}

/// Java's `Double.valueOf` of a text, for the forms a schema writes.
fn java_double_value(text: &str) -> Option<f64> {
    let t = text.trim();
    match t {
        "NaN" => Some(f64::NAN),
        "Infinity" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        _ => t
            .trim_end_matches(['d', 'D', 'f', 'F'])
            .parse()
            .ok()
            .filter(|_| !t.contains(['i', 'I', 'n', 'N'])),
    }
}

struct Printer<'a> {
    model: &'a Model,
    /// Named types printed (or, for the canonical form, referenced) already.
    known: HashSet<usize>,
    /// The namespace in force (`Names.space`).
    space: Option<String>,
    out: String,
}

impl Printer<'_> {
    fn schema(&mut self, schema: &Type, depth: usize) -> Result<(), String> {
        if depth > 256 {
            return Err("the schema nests too deeply".into());
        }
        match schema {
            Type::Primitive(name, props) if props.is_empty() => json::write_string(&mut self.out, name),
            Type::Primitive(name, props) => {
                self.out.push_str("{\"type\":");
                json::write_string(&mut self.out, name);
                self.props(props);
                self.out.push('}');
            }
            Type::Array(items, props) => {
                self.out.push_str("{\"type\":\"array\",\"items\":");
                self.schema(items, depth + 1)?;
                self.props(props);
                self.out.push('}');
            }
            Type::Map(values, props) => {
                self.out.push_str("{\"type\":\"map\",\"values\":");
                self.schema(values, depth + 1)?;
                self.props(props);
                self.out.push('}');
            }
            Type::Union(branches) => {
                self.out.push('[');
                for (i, branch) in branches.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.schema(branch, depth + 1)?;
                }
                self.out.push(']');
            }
            Type::Named(index) => self.named(*index, depth)?,
        }
        Ok(())
    }

    fn named(&mut self, index: usize, depth: usize) -> Result<(), String> {
        let model = self.model;
        let named = &model.named[index];
        if !self.known.insert(index) {
            let reference = qualified(&named.name, named.space.as_deref(), self.space.as_deref());
            json::write_string(&mut self.out, &reference);
            return Ok(());
        }
        let kind = match &named.kind {
            Kind::Record { error: true, .. } => "error",
            Kind::Record { .. } => "record",
            Kind::Enum { .. } => "enum",
            Kind::Fixed { .. } => "fixed",
        };
        self.out.push_str("{\"type\":");
        json::write_string(&mut self.out, kind);
        self.out.push_str(",\"name\":");
        json::write_string(&mut self.out, &named.name);
        match (&named.space, &self.space) {
            (Some(space), enclosing) if enclosing.as_ref() != Some(space) => {
                self.out.push_str(",\"namespace\":");
                json::write_string(&mut self.out, space);
            }
            (None, Some(_)) => self.out.push_str(",\"namespace\":\"\""),
            _ => {}
        }
        if let Some(doc) = &named.doc {
            self.out.push_str(",\"doc\":");
            json::write_string(&mut self.out, doc);
        }
        match &named.kind {
            Kind::Record { fields, .. } => {
                let saved = std::mem::replace(&mut self.space, named.space.clone());
                self.out.push_str(",\"fields\":[");
                for (i, field) in fields.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    self.field(field, depth)?;
                }
                self.out.push(']');
                self.props(&named.props);
                self.aliases(named);
                self.space = saved;
            }
            Kind::Enum { symbols, default } => {
                self.out.push_str(",\"symbols\":[");
                for (i, symbol) in symbols.iter().enumerate() {
                    if i > 0 {
                        self.out.push(',');
                    }
                    json::write_string(&mut self.out, symbol);
                }
                self.out.push(']');
                if let Some(default) = default {
                    self.out.push_str(",\"default\":");
                    json::write_string(&mut self.out, default);
                }
                self.props(&named.props);
                self.aliases(named);
            }
            Kind::Fixed { size } => {
                self.out.push_str(",\"size\":");
                json::write(&mut self.out, size);
                self.props(&named.props);
                self.aliases(named);
            }
        }
        self.out.push('}');
        Ok(())
    }

    fn field(&mut self, field: &Field, depth: usize) -> Result<(), String> {
        self.out.push_str("{\"name\":");
        json::write_string(&mut self.out, &field.name);
        self.out.push_str(",\"type\":");
        self.schema(&field.schema, depth + 1)?;
        if let Some(doc) = &field.doc {
            self.out.push_str(",\"doc\":");
            json::write_string(&mut self.out, doc);
        }
        if let Some(default) = &field.default {
            self.out.push_str(",\"default\":");
            json::write(&mut self.out, default);
        }
        if let Some(order) = &field.order {
            self.out.push_str(",\"order\":");
            json::write_string(&mut self.out, order);
        }
        if !field.aliases.is_empty() {
            self.out.push_str(",\"aliases\":[");
            for (i, alias) in field.aliases.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                json::write_string(&mut self.out, alias);
            }
            self.out.push(']');
        }
        self.props(&field.props);
        self.out.push('}');
        Ok(())
    }

    fn props(&mut self, props: &Props) {
        for (key, value) in props {
            self.out.push(',');
            json::write_string(&mut self.out, key);
            self.out.push(':');
            json::write(&mut self.out, value);
        }
    }

    /// A named type's aliases, each relative to the type's own namespace.
    fn aliases(&mut self, named: &Named) {
        if named.aliases.is_empty() {
            return;
        }
        self.out.push_str(",\"aliases\":[");
        for (i, alias) in named.aliases.iter().enumerate() {
            if i > 0 {
                self.out.push(',');
            }
            let (short, space) = split_name(alias, None);
            let printed = qualified(&short, space.as_deref(), named.space.as_deref());
            json::write_string(&mut self.out, &printed);
        }
        self.out.push(']');
    }
}

/// Java's `Name.getQualified`: the short name when the namespace is the
/// default one and the short name is not a type's name; the full name otherwise.
fn qualified(name: &str, space: Option<&str>, default: Option<&str>) -> String {
    match space {
        Some(s) if Some(s) == default && !TYPE_NAMES.contains(&name) => name.to_owned(),
        _ => full_name(name, space),
    }
}

#[cfg(test)]
#[path = "print_tests.rs"]
mod tests;
