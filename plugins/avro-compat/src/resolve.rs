//! Avro's schema resolution rules (the specification's "Schema Resolution") as a
//! reader/writer compatibility check over apache-avro's parsed `Schema`: can data
//! written with `writer` be read with `reader`? It follows the Java reference
//! checker (`org.apache.avro.SchemaCompatibility`, which Confluent's registry
//! uses) rule for rule, but collects every incompatibility instead of stopping at
//! the first, and it does not use apache-avro's own `schema_compatibility`, which
//! ignores aliases and treats a missing enum symbol or union branch as partial.

use std::collections::{HashMap, HashSet};

use apache_avro::Schema;
use apache_avro::schema::{
    Aliases, EnumSchema, FixedSchema, InnerDecimalSchema, Name, RecordField, RecordSchema, UuidSchema,
};

/// What is wrong at one place of the reader schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The reader's type cannot read the writer's (no promotion applies).
    TypeMismatch { reader: &'static str, writer: &'static str },
    /// Named types (record, enum, fixed) whose names differ, with no reader alias
    /// matching the writer's full name.
    NameMismatch { reader: String, writer: String },
    /// Fixed types of different sizes.
    FixedSizeMismatch { reader: usize, writer: usize },
    /// Writer enum symbols the reader lacks, with no reader default symbol.
    MissingEnumSymbols { symbols: Vec<String> },
    /// A reader field the writer does not have, without a default value.
    ReaderFieldMissingDefaultValue { field: String },
    /// A reader union with no branch that reads this writer type.
    MissingUnionBranch { writer: &'static str },
    /// The check gave up after `STEPS_MAX` steps (a schema built to make it
    /// slow); counted as incompatible, so the registry fails closed.
    TooComplex { steps: usize },
}

impl Problem {
    /// Confluent's (and Avro's) name for the kind of incompatibility.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TypeMismatch { .. } => "TYPE_MISMATCH",
            Self::NameMismatch { .. } => "NAME_MISMATCH",
            Self::FixedSizeMismatch { .. } => "FIXED_SIZE_MISMATCH",
            Self::MissingEnumSymbols { .. } => "MISSING_ENUM_SYMBOLS",
            Self::ReaderFieldMissingDefaultValue { .. } => "READER_FIELD_MISSING_DEFAULT_VALUE",
            Self::MissingUnionBranch { .. } => "MISSING_UNION_BRANCH",
            Self::TooComplex { .. } => "SCHEMA_TOO_COMPLEX",
        }
    }
}

/// One incompatibility: where, as a JSON-pointer-like path into the reader
/// schema (`/fields/2/type`; `/` is the root), and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub path: String,
    pub problem: Problem,
}

/// Most steps (schema pairs compared) one `check` call of the plugin may take,
/// over all the schemas it compares. Real schemas need a few thousand at most;
/// without a bound, a small schema whose records each use the next one several
/// times would take exponential time, and every registration attempt would burn
/// the plugin's whole deadline.
pub const STEPS_MAX: usize = 50_000;

/// Every incompatibility of reading data written with `writer` using `reader`;
/// empty when the reader can read everything the writer writes. `steps` counts
/// the work of every check of one request: past `STEPS_MAX` the checks stop,
/// and the one that crossed the line reports `Problem::TooComplex` first.
pub fn check(reader: &Parsed, writer: &Parsed, steps: &mut usize) -> Vec<Found> {
    if *steps > STEPS_MAX {
        return Vec::new();
    }
    let (reader_names, writer_names) = (Named::of(reader), Named::of(writer));
    let (reader, writer) = (&reader.schema, &writer.schema);
    let mut checker = Checker {
        reader: &reader_names,
        writer: &writer_names,
        in_progress: HashMap::new(),
        lowest_assumed: usize::MAX,
        compatible: HashSet::new(),
        steps: *steps,
    };
    let out = checker.check(reader, writer, "");
    *steps = checker.steps;
    if checker.steps > STEPS_MAX {
        // First, so that cutting a long list short never hides why it is partial.
        let mut all = found("", Problem::TooComplex { steps: STEPS_MAX });
        all.extend(out);
        all
    } else {
        out
    }
}

/// A parsed schema and the schemas its references define, whose named types
/// it may use.
pub struct Parsed {
    pub schema: Schema,
    pub referenced: Vec<Schema>,
}

/// The named types of one schema (its references' included) by full name, so a
/// `Schema::Ref` (a later use of a named type, a type defined by a referenced
/// schema, and the way recursive types are written) can be followed.
struct Named<'a>(HashMap<String, &'a Schema>);

impl<'a> Named<'a> {
    fn of(parsed: &'a Parsed) -> Self {
        let mut named = Self(HashMap::new());
        parsed.referenced.iter().for_each(|s| named.collect(s));
        named.collect(&parsed.schema);
        named
    }

    fn collect(&mut self, schema: &'a Schema) {
        let name = match schema {
            Schema::Record(r) => Some(&r.name),
            Schema::Enum(e) => Some(&e.name),
            Schema::Fixed(f) | Schema::Duration(f) => Some(&f.name),
            Schema::Decimal(d) => match &d.inner {
                InnerDecimalSchema::Fixed(f) => Some(&f.name),
                InnerDecimalSchema::Bytes => None,
            },
            Schema::Uuid(UuidSchema::Fixed(f)) => Some(&f.name),
            _ => None,
        };
        if let Some(name) = name {
            self.0.insert(name.fullname(None), schema);
        }
        match schema {
            Schema::Record(r) => r.fields.iter().for_each(|f| self.collect(&f.schema)),
            Schema::Array(a) => self.collect(&a.items),
            Schema::Map(m) => self.collect(&m.types),
            Schema::Union(u) => u.variants().iter().for_each(|v| self.collect(v)),
            _ => {}
        }
    }
}

/// A schema as resolution sees it: references followed, and logical types
/// replaced by the types they annotate (resolution ignores logical types, as
/// Avro's reference checker does).
#[derive(Clone, Copy)]
enum View<'a> {
    Null,
    Boolean,
    Int,
    Long,
    Float,
    Double,
    Bytes,
    String,
    Array(&'a Schema),
    Map(&'a Schema),
    Union(&'a [Schema]),
    Record(&'a RecordSchema),
    Enum(&'a EnumSchema),
    Fixed(&'a FixedSchema),
    /// A reference to a type the schema never defines (the parser refuses
    /// those, so this is only a guard).
    Unknown,
}

impl View<'_> {
    fn kind(self) -> &'static str {
        match self {
            Self::Null => "null",
            Self::Boolean => "boolean",
            Self::Int => "int",
            Self::Long => "long",
            Self::Float => "float",
            Self::Double => "double",
            Self::Bytes => "bytes",
            Self::String => "string",
            Self::Array(_) => "array",
            Self::Map(_) => "map",
            Self::Union(_) => "union",
            Self::Record(_) => "record",
            Self::Enum(_) => "enum",
            Self::Fixed(_) => "fixed",
            Self::Unknown => "undefined named type",
        }
    }
}

fn view<'a>(schema: &'a Schema, named: &Named<'a>) -> View<'a> {
    match schema {
        Schema::Null => View::Null,
        Schema::Boolean => View::Boolean,
        Schema::Int | Schema::Date | Schema::TimeMillis => View::Int,
        Schema::Long
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => View::Long,
        Schema::Float => View::Float,
        Schema::Double => View::Double,
        Schema::Bytes | Schema::BigDecimal | Schema::Uuid(UuidSchema::Bytes) => View::Bytes,
        Schema::String | Schema::Uuid(UuidSchema::String) => View::String,
        Schema::Array(a) => View::Array(&a.items),
        Schema::Map(m) => View::Map(&m.types),
        Schema::Union(u) => View::Union(u.variants()),
        Schema::Record(r) => View::Record(r),
        Schema::Enum(e) => View::Enum(e),
        Schema::Fixed(f) | Schema::Duration(f) | Schema::Uuid(UuidSchema::Fixed(f)) => View::Fixed(f),
        Schema::Decimal(d) => match &d.inner {
            InnerDecimalSchema::Bytes => View::Bytes,
            InnerDecimalSchema::Fixed(f) => View::Fixed(f),
        },
        Schema::Ref { name } => match named.0.get(&name.fullname(None)) {
            // A named type's definition is never itself a reference.
            Some(target) if !matches!(target, Schema::Ref { .. }) => view(target, named),
            _ => View::Unknown,
        },
    }
}

struct Checker<'n, 'a> {
    reader: &'n Named<'a>,
    writer: &'n Named<'a>,
    /// Record pairs (reader full name, writer full name) being checked further up
    /// the stack, with their depth: meeting one again means a recursive type,
    /// which is compatible as far as this branch goes (its fields are being
    /// checked already).
    in_progress: HashMap<(String, String), usize>,
    /// The shallowest in-progress pair the current record's verdict assumed
    /// compatible (`usize::MAX`: none).
    lowest_assumed: usize,
    /// Record pairs already found compatible, so a record used in many places is
    /// checked once (an incompatible pair is checked again at each place, so each
    /// place is reported).
    compatible: HashSet<(String, String)>,
    /// Steps taken; past `STEPS_MAX` every check is cut short.
    steps: usize,
}

impl<'a> Checker<'_, 'a> {
    fn check(&mut self, reader: &'a Schema, writer: &'a Schema, path: &str) -> Vec<Found> {
        self.steps += 1;
        if self.steps > STEPS_MAX {
            // `check` (the entry point) reports this once.
            return Vec::new();
        }
        let (r, w) = (view(reader, self.reader), view(writer, self.writer));
        match (r, w) {
            (View::Union(_), View::Union(branches)) => {
                self.writer_union_in_reader_union(reader, branches, path)
            }
            // Reading a writer union: every branch the writer may have used must
            // be readable.
            (_, View::Union(branches)) => branches.iter().flat_map(|b| self.check(reader, b, path)).collect(),
            (View::Union(branches), _) => {
                if branches.iter().any(|b| self.check(b, writer, path).is_empty()) {
                    Vec::new()
                } else {
                    found(path, Problem::MissingUnionBranch { writer: w.kind() })
                }
            }
            (View::Null, View::Null)
            | (View::Boolean, View::Boolean)
            | (View::Int, View::Int)
            | (View::Long, View::Long | View::Int)
            | (View::Float, View::Float | View::Long | View::Int)
            | (View::Double, View::Double | View::Float | View::Long | View::Int)
            | (View::Bytes, View::Bytes | View::String)
            | (View::String, View::String | View::Bytes) => Vec::new(),
            (View::Array(ri), View::Array(wi)) => self.check(ri, wi, &format!("{path}/items")),
            (View::Map(rv), View::Map(wv)) => self.check(rv, wv, &format!("{path}/values")),
            (View::Fixed(rf), View::Fixed(wf)) => {
                let mut out = names(&rf.name, &rf.aliases, &wf.name, path);
                if rf.size != wf.size {
                    let problem = Problem::FixedSizeMismatch { reader: rf.size, writer: wf.size };
                    out.extend(found(&format!("{path}/size"), problem));
                }
                out
            }
            (View::Enum(re), View::Enum(we)) => {
                let mut out = names(&re.name, &re.aliases, &we.name, path);
                out.extend(enum_symbols(re, we, path));
                out
            }
            (View::Record(rr), View::Record(wr)) => {
                let mut out = names(&rr.name, &rr.aliases, &wr.name, path);
                out.extend(self.record(rr, wr, path));
                out
            }
            _ => found(path, Problem::TypeMismatch { reader: r.kind(), writer: w.kind() }),
        }
    }

    /// The fields of a record pair, unless the pair is known compatible or is
    /// already being checked further up (a recursive type).
    fn record(&mut self, reader: &'a RecordSchema, writer: &'a RecordSchema, path: &str) -> Vec<Found> {
        let pair = (reader.name.fullname(None), writer.name.fullname(None));
        if self.compatible.contains(&pair) {
            return Vec::new();
        }
        if let Some(&depth) = self.in_progress.get(&pair) {
            self.lowest_assumed = self.lowest_assumed.min(depth);
            return Vec::new();
        }
        let depth = self.in_progress.len();
        self.in_progress.insert(pair.clone(), depth);
        let outer_assumed = std::mem::replace(&mut self.lowest_assumed, usize::MAX);
        let out = self.fields(reader, writer, path);
        self.in_progress.remove(&pair);
        // Remember a compatible verdict only if it rests on no assumption about a
        // pair further up, which might still turn out incompatible.
        if out.is_empty() && self.lowest_assumed >= depth {
            self.compatible.insert(pair);
        }
        self.lowest_assumed = self.lowest_assumed.min(outer_assumed);
        out
    }

    /// Both sides unions: each writer branch must be readable by the reader
    /// union; an unreadable one is reported at `<path>/<branch index>`.
    fn writer_union_in_reader_union(
        &mut self,
        reader: &'a Schema,
        writer: &'a [Schema],
        path: &str,
    ) -> Vec<Found> {
        let mut out = Vec::new();
        for (i, branch) in writer.iter().enumerate() {
            if !self.check(reader, branch, path).is_empty() {
                let kind = view(branch, self.writer).kind();
                out.extend(found(&format!("{path}/{i}"), Problem::MissingUnionBranch { writer: kind }));
            }
        }
        out
    }

    /// Each reader field must be in the writer (by name, or by one of the reader
    /// field's aliases) with a readable type, or have a default.
    fn fields(&mut self, reader: &'a RecordSchema, writer: &'a RecordSchema, path: &str) -> Vec<Found> {
        let mut out = Vec::new();
        for (i, field) in reader.fields.iter().enumerate() {
            let field_path = format!("{path}/fields/{i}");
            match writer_field(writer, field) {
                Some(w) => out.extend(self.check(&field.schema, &w.schema, &format!("{field_path}/type"))),
                None if field.default.is_none() => {
                    let problem = Problem::ReaderFieldMissingDefaultValue { field: field.name.clone() };
                    out.extend(found(&field_path, problem));
                }
                None => {}
            }
        }
        out
    }
}

/// The writer field a reader field reads: the one with its name, else one named
/// like one of its aliases. The writer's own field aliases play no part, as in
/// Avro's reference implementation.
fn writer_field<'a>(writer: &'a RecordSchema, field: &RecordField) -> Option<&'a RecordField> {
    let named = |name: &str| writer.fields.iter().find(|w| w.name == name);
    named(&field.name).or_else(|| field.aliases.iter().find_map(|alias| named(alias)))
}

/// Named types match when their unqualified names are equal or one of the
/// reader's aliases (qualified by the reader's namespace) is the writer's full name.
fn names(reader: &Name, aliases: &Aliases, writer: &Name, path: &str) -> Vec<Found> {
    let writer_full = writer.fullname(None);
    let aliased = aliases.iter().flatten().any(|alias| alias.fullname(None) == writer_full);
    if reader.name() == writer.name() || aliased {
        Vec::new()
    } else {
        let problem = Problem::NameMismatch { reader: reader.fullname(None), writer: writer_full };
        found(&format!("{path}/name"), problem)
    }
}

/// Every writer symbol must be a reader symbol, unless the reader has a default
/// symbol to read the unknown ones as.
fn enum_symbols(reader: &EnumSchema, writer: &EnumSchema, path: &str) -> Vec<Found> {
    let missing: Vec<String> =
        writer.symbols.iter().filter(|s| !reader.symbols.contains(s)).cloned().collect();
    let has_default = reader.default.as_ref().is_some_and(|d| reader.symbols.contains(d));
    if missing.is_empty() || has_default {
        Vec::new()
    } else {
        found(&format!("{path}/symbols"), Problem::MissingEnumSymbols { symbols: missing })
    }
}

fn found(path: &str, problem: Problem) -> Vec<Found> {
    let path = if path.is_empty() { "/".to_owned() } else { path.to_owned() };
    vec![Found { path, problem }]
}
