//! The difference between two versions of a Protobuf schema, with the rules of
//! Confluent's `ProtobufSchema` diff: the `original` schema wrote the data, the
//! `update` reads it. Messages are matched by name within their scope, fields by
//! number. Only the differences Confluent counts as incompatible are reported;
//! the compatible ones (fields, messages, enums, enum constants and oneofs added
//! or removed, fields renamed, messages reordered) are not.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use prost_reflect::{Cardinality, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor};

/// An incompatible difference, named as in Confluent's `Difference.Type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DiffKind {
    PackageChanged,
    MessageRemoved,
    FieldKindChanged,
    FieldScalarKindChanged,
    FieldNamedTypeChanged,
    FieldNumericLabelChanged,
    RequiredFieldAdded,
    RequiredFieldRemoved,
    OneofFieldRemoved,
    MultipleFieldsMovedToOneof,
    FieldMovedToExistingOneof,
}

impl DiffKind {
    /// Confluent's name for the difference.
    pub fn name(self) -> &'static str {
        match self {
            Self::PackageChanged => "PACKAGE_CHANGED",
            Self::MessageRemoved => "MESSAGE_REMOVED",
            Self::FieldKindChanged => "FIELD_KIND_CHANGED",
            Self::FieldScalarKindChanged => "FIELD_SCALAR_KIND_CHANGED",
            Self::FieldNamedTypeChanged => "FIELD_NAMED_TYPE_CHANGED",
            Self::FieldNumericLabelChanged => "FIELD_NUMERIC_LABEL_CHANGED",
            Self::RequiredFieldAdded => "REQUIRED_FIELD_ADDED",
            Self::RequiredFieldRemoved => "REQUIRED_FIELD_REMOVED",
            Self::OneofFieldRemoved => "ONEOF_FIELD_REMOVED",
            Self::MultipleFieldsMovedToOneof => "MULTIPLE_FIELDS_MOVED_TO_ONEOF",
            Self::FieldMovedToExistingOneof => "FIELD_MOVED_TO_EXISTING_ONEOF",
        }
    }

    /// A sentence about the difference at `path`. `reader` and `writer` name the
    /// two schemas, e.g. "new" and "old".
    pub fn describe(self, path: &str, reader: &str, writer: &str) -> String {
        match self {
            Self::PackageChanged => {
                format!("the package of the {reader} schema differs from that of the {writer} schema")
            }
            Self::MessageRemoved => format!(
                "the message type at '{path}' in the {writer} schema is missing from the {reader} schema"
            ),
            Self::FieldKindChanged => format!(
                "the field at '{path}' changed between scalar, message and map types from the {writer} schema to the {reader} schema"
            ),
            Self::FieldScalarKindChanged => format!(
                "the scalar type of the field at '{path}' in the {reader} schema cannot read values of its type in the {writer} schema"
            ),
            Self::FieldNamedTypeChanged => format!(
                "the message type of the field at '{path}' in the {reader} schema is not the same as, or not compatible with, its type in the {writer} schema"
            ),
            Self::FieldNumericLabelChanged => format!(
                "the numeric field at '{path}' changed between singular, repeated and required from the {writer} schema to the {reader} schema"
            ),
            Self::RequiredFieldAdded => {
                format!(
                    "the required field at '{path}' in the {reader} schema does not exist in the {writer} schema"
                )
            }
            Self::RequiredFieldRemoved => {
                format!(
                    "the required field at '{path}' in the {writer} schema is missing from the {reader} schema"
                )
            }
            Self::OneofFieldRemoved => {
                format!(
                    "the oneof field at '{path}' in the {writer} schema is missing from the {reader} schema"
                )
            }
            Self::MultipleFieldsMovedToOneof => format!(
                "the oneof at '{path}' in the {reader} schema holds several fields that are outside any oneof in the {writer} schema"
            ),
            Self::FieldMovedToExistingOneof => format!(
                "the oneof at '{path}' in the {reader} schema holds a field that is outside it in the {writer} schema, next to fields that were already there"
            ),
        }
    }
}

/// One incompatible difference and where it is, e.g. `#/Order/3`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Difference {
    pub kind: DiffKind,
    pub path: String,
}

/// Every incompatible difference between a writer's schema (`original`) and a
/// reader's (`update`), in a stable order.
pub fn diff(original: &FileDescriptor, update: &FileDescriptor) -> Vec<Difference> {
    let mut ctx = Diff::default();
    if original.package_name() != update.package_name() {
        ctx.push(DiffKind::PackageChanged, "#/".to_owned());
    }
    ctx.compare_messages("#", original.messages(), update.messages());
    ctx.out
}

#[derive(Default)]
struct Diff {
    out: Vec<Difference>,
    /// Verdicts on pairs of message types referenced by fields, by full names.
    verdicts: HashMap<(String, String), bool>,
    /// Pairs being compared; a reference back to one counts as compatible, which
    /// ends recursion (its differences are reported where it is declared).
    visiting: HashSet<(String, String)>,
}

impl Diff {
    fn push(&mut self, kind: DiffKind, path: String) {
        self.out.push(Difference { kind, path });
    }

    fn compare_messages(
        &mut self,
        scope: &str,
        original: impl Iterator<Item = MessageDescriptor>,
        update: impl Iterator<Item = MessageDescriptor>,
    ) {
        // Map entries are compared through their map fields.
        let original: BTreeMap<String, MessageDescriptor> =
            original.filter(|m| !m.is_map_entry()).map(|m| (m.name().to_owned(), m)).collect();
        let update: HashMap<String, MessageDescriptor> =
            update.filter(|m| !m.is_map_entry()).map(|m| (m.name().to_owned(), m)).collect();
        for (name, original) in &original {
            let path = format!("{scope}/{name}");
            match update.get(name) {
                None => self.push(DiffKind::MessageRemoved, path),
                Some(update) => self.compare_message(&path, original, update),
            }
        }
    }

    fn compare_message(&mut self, path: &str, original: &MessageDescriptor, update: &MessageDescriptor) {
        let key = (original.full_name().to_owned(), update.full_name().to_owned());
        let entered = self.visiting.insert(key.clone());
        self.compare_fields(path, original, update);
        if entered {
            self.visiting.remove(&key);
        }
        self.compare_messages(path, original.child_messages(), update.child_messages());
    }

    fn compare_fields(&mut self, path: &str, original: &MessageDescriptor, update: &MessageDescriptor) {
        let old = Fields::of(original);
        let new = Fields::of(update);
        self.check_oneof_moves(path, &old, &new);
        // A oneof that is gone along with all of its fields was deleted whole,
        // which is compatible; fields of a oneof that survives in part are not.
        let deleted: HashSet<&str> = old
            .oneofs
            .iter()
            .filter(|(name, tags)| {
                !new.oneofs.contains_key(*name) && tags.iter().all(|t| !new.by_tag.contains_key(t))
            })
            .map(|(name, _)| name.as_str())
            .collect();
        let tags: BTreeSet<u32> = old.by_tag.keys().chain(new.by_tag.keys()).copied().collect();
        for tag in tags {
            match (old.by_tag.get(&tag), new.by_tag.get(&tag)) {
                (Some(field), None) => match old.oneof_of.get(&tag) {
                    Some(oneof) if !deleted.contains(oneof.as_str()) => {
                        self.push(DiffKind::OneofFieldRemoved, format!("{path}/{oneof}/{tag}"));
                    }
                    Some(_) => {}
                    None if field.cardinality() == Cardinality::Required => {
                        self.push(DiffKind::RequiredFieldRemoved, format!("{path}/{tag}"));
                    }
                    None => {}
                },
                (None, Some(field)) => {
                    if !new.oneof_of.contains_key(&tag) && field.cardinality() == Cardinality::Required {
                        self.push(DiffKind::RequiredFieldAdded, format!("{path}/{tag}"));
                    }
                }
                (Some(old_field), Some(new_field)) => {
                    let at = match new.oneof_of.get(&tag) {
                        Some(oneof) => format!("{path}/{oneof}/{tag}"),
                        None => format!("{path}/{tag}"),
                    };
                    self.compare_field(&at, old_field, new_field);
                }
                (None, None) => unreachable!("the tag comes from one of the two messages"),
            }
        }
    }

    /// Fields that were independent must not become mutually exclusive: each
    /// oneof of the update may only gather fields of one group of the original
    /// (one oneof, or one field outside any oneof). New fields do not count.
    fn check_oneof_moves(&mut self, path: &str, old: &Fields, new: &Fields) {
        for (name, tags) in &new.oneofs {
            let mut groups = BTreeSet::new();
            let mut moved_in = 0;
            for tag in tags {
                if let Some(oneof) = old.oneof_of.get(tag) {
                    groups.insert(format!("oneof:{oneof}"));
                } else if old.by_tag.contains_key(tag) {
                    groups.insert(format!("field:{tag}"));
                    moved_in += 1;
                }
            }
            if groups.len() > 1 {
                let kind = if moved_in > 1 {
                    DiffKind::MultipleFieldsMovedToOneof
                } else {
                    DiffKind::FieldMovedToExistingOneof
                };
                self.push(kind, format!("{path}/{name}"));
            }
        }
    }

    fn compare_field(&mut self, path: &str, original: &FieldDescriptor, update: &FieldDescriptor) {
        let old = FieldType::of(original);
        let new = FieldType::of(update);
        self.compare_types(path, label(original), label(update), &old, &new);
    }

    fn compare_types(
        &mut self,
        path: &str,
        old_label: Label,
        new_label: Label,
        old: &FieldType,
        new: &FieldType,
    ) {
        match (old, new) {
            (FieldType::Scalar(old), FieldType::Scalar(new)) => {
                if old != new {
                    self.push(DiffKind::FieldScalarKindChanged, path.to_owned());
                } else if old_label != new_label && old.is_numeric() {
                    // Repeated numbers are packed, which a singular reader cannot
                    // parse; strings and bytes read either way.
                    self.push(DiffKind::FieldNumericLabelChanged, path.to_owned());
                }
            }
            (FieldType::Message(old), FieldType::Message(new)) => {
                if local_name(old) != local_name(new) || !self.messages_compatible(old, new) {
                    self.push(DiffKind::FieldNamedTypeChanged, path.to_owned());
                }
            }
            (FieldType::Map(old_key, old_value), FieldType::Map(new_key, new_value)) => {
                self.compare_types(path, Label::Singular, Label::Singular, old_key, new_key);
                self.compare_types(path, Label::Singular, Label::Singular, old_value, new_value);
            }
            _ => self.push(DiffKind::FieldKindChanged, path.to_owned()),
        }
    }

    /// Whether the message types of a field in both versions are compatible. Their
    /// own differences are reported where the types are declared; this only
    /// decides whether the field itself changed type.
    fn messages_compatible(&mut self, original: &MessageDescriptor, update: &MessageDescriptor) -> bool {
        let key = (original.full_name().to_owned(), update.full_name().to_owned());
        if self.visiting.contains(&key) {
            return true;
        }
        if let Some(verdict) = self.verdicts.get(&key) {
            return *verdict;
        }
        let mut inner = Diff {
            out: Vec::new(),
            verdicts: std::mem::take(&mut self.verdicts),
            visiting: std::mem::take(&mut self.visiting),
        };
        inner.compare_message("#", original, update);
        self.verdicts = inner.verdicts;
        self.visiting = inner.visiting;
        let verdict = inner.out.is_empty();
        self.verdicts.insert(key, verdict);
        verdict
    }
}

/// The fields of a message by number, and which real oneof holds which.
struct Fields {
    by_tag: BTreeMap<u32, FieldDescriptor>,
    oneof_of: HashMap<u32, String>,
    oneofs: BTreeMap<String, Vec<u32>>,
}

impl Fields {
    fn of(message: &MessageDescriptor) -> Self {
        let mut fields =
            Fields { by_tag: BTreeMap::new(), oneof_of: HashMap::new(), oneofs: BTreeMap::new() };
        for field in message.fields() {
            fields.by_tag.insert(field.number(), field.clone());
        }
        // A proto3 `optional` field sits in a synthetic oneof of its own, which is
        // not a oneof in the schema's text.
        for oneof in message.oneofs().filter(|o| !o.is_synthetic()) {
            let tags: Vec<u32> = oneof.fields().map(|f| f.number()).collect();
            for tag in &tags {
                fields.oneof_of.insert(*tag, oneof.name().to_owned());
            }
            fields.oneofs.insert(oneof.name().to_owned(), tags);
        }
        fields
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Label {
    Singular,
    Repeated,
    Required,
}

fn label(field: &FieldDescriptor) -> Label {
    match field.cardinality() {
        Cardinality::Repeated => Label::Repeated,
        Cardinality::Required => Label::Required,
        Cardinality::Optional => Label::Singular,
    }
}

/// Confluent's wire-compatible groups of scalars; an enum reads like an int32.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScalarKind {
    GeneralNumber,
    SignedNumber,
    StringOrBytes,
    Fixed32,
    Fixed64,
    Float,
    Double,
}

impl ScalarKind {
    fn is_numeric(self) -> bool {
        self != Self::StringOrBytes
    }
}

enum FieldType {
    Scalar(ScalarKind),
    Message(MessageDescriptor),
    Map(Box<FieldType>, Box<FieldType>),
}

impl FieldType {
    fn of(field: &FieldDescriptor) -> Self {
        if field.is_map()
            && let Kind::Message(entry) = field.kind()
        {
            let key = entry.map_entry_key_field();
            let value = entry.map_entry_value_field();
            return Self::Map(Box::new(Self::of(&key)), Box::new(Self::of(&value)));
        }
        match field.kind() {
            Kind::Int32 | Kind::Int64 | Kind::Uint32 | Kind::Uint64 | Kind::Bool | Kind::Enum(_) => {
                Self::Scalar(ScalarKind::GeneralNumber)
            }
            Kind::Sint32 | Kind::Sint64 => Self::Scalar(ScalarKind::SignedNumber),
            Kind::String | Kind::Bytes => Self::Scalar(ScalarKind::StringOrBytes),
            Kind::Fixed32 | Kind::Sfixed32 => Self::Scalar(ScalarKind::Fixed32),
            Kind::Fixed64 | Kind::Sfixed64 => Self::Scalar(ScalarKind::Fixed64),
            Kind::Float => Self::Scalar(ScalarKind::Float),
            Kind::Double => Self::Scalar(ScalarKind::Double),
            Kind::Message(message) => Self::Message(message),
        }
    }
}

/// A message's name without its file's package, so a changed package alone does
/// not change every field's type.
fn local_name(message: &MessageDescriptor) -> &str {
    let package = message.package_name();
    let full = message.full_name();
    if package.is_empty() {
        full
    } else {
        full.strip_prefix(package).and_then(|s| s.strip_prefix('.')).unwrap_or(full)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Schema;

    fn kinds(old: &str, new: &str) -> Vec<(DiffKind, String)> {
        let old = Schema::parse(old).unwrap();
        let new = Schema::parse(new).unwrap();
        diff(&old.file, &new.file).into_iter().map(|d| (d.kind, d.path)).collect()
    }

    fn p3(body: &str) -> String {
        format!("syntax = \"proto3\";\npackage shop;\n{body}")
    }

    #[test]
    fn adding_and_removing_plain_fields_is_compatible() {
        let old = p3("message Order { string id = 1; int64 total = 2; }");
        let new = p3("message Order { string id = 1; string note = 3; }");
        assert!(kinds(&old, &new).is_empty());
        assert!(kinds(&new, &old).is_empty());
    }

    #[test]
    fn package_change() {
        let old = p3("message Order { string id = 1; }");
        let new = "syntax = \"proto3\";\npackage store;\nmessage Order { string id = 1; }";
        assert_eq!(kinds(&old, new), vec![(DiffKind::PackageChanged, "#/".into())]);
    }

    #[test]
    fn removed_and_renamed_messages() {
        let old = p3("message Order { string id = 1; message Line { int32 qty = 1; } }\nmessage Extra {}");
        let new = p3("message Order { string id = 1; message Item { int32 qty = 1; } }");
        assert_eq!(
            kinds(&old, &new),
            vec![
                (DiffKind::MessageRemoved, "#/Extra".into()),
                (DiffKind::MessageRemoved, "#/Order/Line".into())
            ]
        );
        assert!(
            kinds(
                &new,
                &p3("message Order { string id = 1; message Item { int32 qty = 1; } }\nmessage New {}")
            )
            .is_empty()
        );
    }

    #[test]
    fn scalar_groups() {
        let case = |a: &str, b: &str| {
            kinds(&p3(&format!("message M {{ {a} f = 1; }}")), &p3(&format!("message M {{ {b} f = 1; }}")))
        };
        for (a, b) in [
            ("int32", "int64"),
            ("uint32", "bool"),
            ("sint32", "sint64"),
            ("fixed32", "sfixed32"),
            ("fixed64", "sfixed64"),
            ("string", "bytes"),
        ] {
            assert!(case(a, b).is_empty(), "{a} -> {b}");
        }
        for (a, b) in [
            ("int32", "sint32"),
            ("int32", "string"),
            ("fixed32", "fixed64"),
            ("float", "double"),
            ("int64", "fixed64"),
        ] {
            assert_eq!(case(a, b), vec![(DiffKind::FieldScalarKindChanged, "#/M/1".into())], "{a} -> {b}");
        }
    }

    #[test]
    fn enums_read_as_general_numbers() {
        let old = p3("enum E { A = 0; }\nmessage M { E f = 1; }");
        assert!(kinds(&old, &p3("message M { int32 f = 1; }")).is_empty());
        assert_eq!(
            kinds(&old, &p3("message M { string f = 1; }")),
            vec![(DiffKind::FieldScalarKindChanged, "#/M/1".into())]
        );
        // Enum values added or removed, and enums removed, are compatible.
        assert!(kinds(&old, &p3("enum E { A = 0; B = 1; }\nmessage M { E f = 1; }")).is_empty());
    }

    #[test]
    fn kind_changes() {
        let old = p3("message M { int32 f = 1; map<string, int32> m = 2; N n = 3; }\nmessage N {}");
        let new = p3("message M { N f = 1; N m = 2; map<string, int32> n = 3; }\nmessage N {}");
        assert_eq!(
            kinds(&old, &new),
            vec![
                (DiffKind::FieldKindChanged, "#/M/1".into()),
                (DiffKind::FieldKindChanged, "#/M/2".into()),
                (DiffKind::FieldKindChanged, "#/M/3".into()),
            ]
        );
    }

    #[test]
    fn map_key_and_value_types() {
        let old = p3("message M { map<int32, string> m = 1; }");
        assert!(kinds(&old, &p3("message M { map<int64, bytes> m = 1; }")).is_empty());
        assert_eq!(
            kinds(&old, &p3("message M { map<int32, double> m = 1; }")),
            vec![(DiffKind::FieldScalarKindChanged, "#/M/1".into())]
        );
    }

    #[test]
    fn named_type_changes() {
        let old = p3("message A { int32 x = 1; }\nmessage B { int32 x = 1; }\nmessage M { A f = 1; }");
        assert_eq!(
            kinds(
                &old,
                &p3("message A { int32 x = 1; }\nmessage B { int32 x = 1; }\nmessage M { B f = 1; }")
            ),
            vec![(DiffKind::FieldNamedTypeChanged, "#/M/1".into())]
        );
        // The same type, changed incompatibly, also changes the field's type.
        assert_eq!(
            kinds(
                &old,
                &p3("message A { string x = 1; }\nmessage B { int32 x = 1; }\nmessage M { A f = 1; }")
            ),
            vec![
                (DiffKind::FieldScalarKindChanged, "#/A/1".into()),
                (DiffKind::FieldNamedTypeChanged, "#/M/1".into())
            ]
        );
    }

    #[test]
    fn recursive_types_terminate() {
        let old = p3("message Node { Node next = 1; int32 v = 2; }");
        let new = p3("message Node { Node next = 1; string v = 2; }");
        assert_eq!(kinds(&old, &new), vec![(DiffKind::FieldScalarKindChanged, "#/Node/2".into())]);
    }

    #[test]
    fn labels() {
        let old = p3("message M { int32 a = 1; string b = 2; N c = 3; }\nmessage N {}");
        let new =
            p3("message M { repeated int32 a = 1; repeated string b = 2; repeated N c = 3; }\nmessage N {}");
        assert_eq!(kinds(&old, &new), vec![(DiffKind::FieldNumericLabelChanged, "#/M/1".into())]);
        // proto3 `optional` is still singular.
        assert!(kinds(&old, &p3("message M { optional int32 a = 1; }\nmessage N {}")).is_empty());
    }

    #[test]
    fn required_fields() {
        let p2 = |body: &str| format!("syntax = \"proto2\";\npackage shop;\n{body}");
        let old = p2("message M { optional int32 a = 1; required string b = 2; }");
        assert_eq!(
            kinds(
                &old,
                &p2("message M { optional int32 a = 1; required string b = 2; required int32 c = 3; }")
            ),
            vec![(DiffKind::RequiredFieldAdded, "#/M/3".into())]
        );
        assert_eq!(
            kinds(&old, &p2("message M { optional int32 a = 1; }")),
            vec![(DiffKind::RequiredFieldRemoved, "#/M/2".into())]
        );
        assert!(
            kinds(
                &old,
                &p2("message M { optional int32 a = 1; required string b = 2; optional int32 c = 3; }")
            )
            .is_empty()
        );
    }

    #[test]
    fn oneofs() {
        let old = p3("message M { int32 a = 1; int32 b = 2; oneof o { int32 c = 3; int32 d = 4; } }");
        // A new field in an existing oneof, or a field moved out of one: compatible.
        assert!(kinds(&old, &p3("message M { int32 a = 1; int32 b = 2; oneof o { int32 c = 3; int32 d = 4; int32 e = 5; } }")).is_empty());
        assert!(
            kinds(&old, &p3("message M { int32 a = 1; int32 b = 2; int32 c = 3; oneof o { int32 d = 4; } }"))
                .is_empty()
        );
        // One field moved into a new oneof alone: compatible.
        assert!(kinds(&old, &p3("message M { oneof n { int32 a = 1; } int32 b = 2; oneof o { int32 c = 3; int32 d = 4; } }")).is_empty());
        assert_eq!(
            kinds(&old, &p3("message M { int32 b = 2; oneof o { int32 a = 1; int32 c = 3; int32 d = 4; } }")),
            vec![(DiffKind::FieldMovedToExistingOneof, "#/M/o".into())]
        );
        assert_eq!(
            kinds(
                &old,
                &p3(
                    "message M { oneof n { int32 a = 1; int32 b = 2; } oneof o { int32 c = 3; int32 d = 4; } }"
                )
            ),
            vec![(DiffKind::MultipleFieldsMovedToOneof, "#/M/n".into())]
        );
        assert_eq!(
            kinds(&old, &p3("message M { int32 a = 1; int32 b = 2; oneof o { int32 c = 3; } }")),
            vec![(DiffKind::OneofFieldRemoved, "#/M/o/4".into())]
        );
        // The whole oneof deleted: compatible.
        assert!(kinds(&old, &p3("message M { int32 a = 1; int32 b = 2; }")).is_empty());
        // A type change inside a oneof is reported at the oneof's path.
        assert_eq!(
            kinds(
                &old,
                &p3("message M { int32 a = 1; int32 b = 2; oneof o { int32 c = 3; string d = 4; } }")
            ),
            vec![(DiffKind::FieldScalarKindChanged, "#/M/o/4".into())]
        );
    }

    #[test]
    fn every_difference_is_reported() {
        let old = p3("message M { int32 a = 1; string b = 2; }\nmessage Gone {}");
        let new = "syntax = \"proto3\";\npackage other;\nmessage M { string a = 1; M b = 2; }";
        assert_eq!(
            kinds(&old, new),
            vec![
                (DiffKind::PackageChanged, "#/".into()),
                (DiffKind::MessageRemoved, "#/Gone".into()),
                (DiffKind::FieldScalarKindChanged, "#/M/1".into()),
                (DiffKind::FieldKindChanged, "#/M/2".into()),
            ]
        );
    }
}
