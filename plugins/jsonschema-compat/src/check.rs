//! The reader/writer comparison: can a reader with one schema read every value a
//! writer with another schema produces? It walks both schemas together and
//! collects every reason it cannot, instead of stopping at the first.
//!
//! The rules follow Karapace's checker (itself modelled on Confluent Schema
//! Registry's), so verdicts match what Kafka users already get; where Karapace
//! ignores a keyword (`format`, `const`, `uniqueItems`, `contains`, `if`) or reads
//! one loosely (negations, dependencies, `minimum` against `exclusiveMinimum`), the
//! rule here is the one the keyword's meaning gives. docs/schema-registry.md lists
//! the rules and every known disagreement with the conformance data.

mod array;
mod object;

use crate::document::Document;
use crate::report::{Incompatibility, Kind, Location};
use crate::shape::{Combinator, Shape, Type, accepts_everything, allowed_values, classify, is_empty_schema};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::HashSet;

/// Comparisons nested deeper than this are cut short with `NESTING_TOO_DEEP`, so a
/// hostile schema cannot exhaust the guest's stack.
const DEPTH_MAX: usize = 128;

/// How many schema pairs one check may compare, over every existing schema and
/// direction: real schemas need a few thousand, while nested combinators built to
/// make the pairing exponential stop here with `SCHEMA_TOO_COMPLEX` instead of
/// running into the host's deadline.
pub const STEPS_MAX: usize = 25_000;

/// The comparison steps left for one `check` call, shared by its comparisons.
#[derive(Debug)]
pub struct Budget {
    left: Cell<usize>,
}

impl Budget {
    pub fn new(steps: usize) -> Self {
        Self { left: Cell::new(steps) }
    }

    pub fn exhausted(&self) -> bool {
        self.left.get() == 0
    }

    /// Takes one step; false when none is left.
    fn take(&self) -> bool {
        let left = self.left.get();
        self.left.set(left.saturating_sub(1));
        left > 0
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::new(STEPS_MAX)
    }
}

/// Every reason a reader with schema `reader` cannot read what a writer with
/// schema `writer` produces; empty when it can.
pub fn compatibility(reader: &Value, writer: &Value) -> Vec<Incompatibility> {
    compatibility_within(reader, writer, &Budget::default())
}

/// [`compatibility`] drawing on a shared step budget. When the budget runs out the
/// result is the single `SCHEMA_TOO_COMPLEX` incompatibility: the partial findings
/// cannot be trusted either way.
pub fn compatibility_within(reader: &Value, writer: &Value, budget: &Budget) -> Vec<Incompatibility> {
    compatibility_of(Document::new(reader), Document::new(writer), budget)
}

/// [`compatibility_within`] of two documents' roots, each with the documents its
/// `$ref`s may name (the schema's references).
pub fn compatibility_of(reader: Document<'_>, writer: Document<'_>, budget: &Budget) -> Vec<Incompatibility> {
    let found =
        Checker::new(reader, writer, 0, budget).compare(reader.root(), writer.root(), &Location::default());
    if budget.exhausted() {
        let detail = format!("comparing these schemas takes more than {STEPS_MAX} steps");
        return vec![Location::default().at(Kind::SchemaTooComplex, detail)];
    }
    found
}

struct Checker<'d> {
    reader: Document<'d>,
    writer: Document<'d>,
    /// Pairs of (reader, writer) schemas being compared further up the stack: a
    /// recursive schema reaching the same pair again is compatible so far.
    active: HashSet<(usize, usize)>,
    depth: usize,
    budget: &'d Budget,
}

impl<'d> Checker<'d> {
    fn new(reader: Document<'d>, writer: Document<'d>, depth: usize, budget: &'d Budget) -> Self {
        Self { reader, writer, active: HashSet::new(), depth, budget }
    }

    fn compare(&mut self, reader: &Value, writer: &Value, at: &Location) -> Vec<Incompatibility> {
        if !self.budget.take() {
            // Incompatible, so no caller mistakes a cut-short branch for a match;
            // `compatibility_within` replaces the whole result.
            return vec![at.at(Kind::SchemaTooComplex, "out of comparison steps")];
        }
        let (reader, writer) = match (self.reader.resolve(reader), self.writer.resolve(writer)) {
            (Ok(r), Ok(w)) => (r, w),
            (Err(e), _) | (_, Err(e)) => {
                let detail = format!("cannot resolve $ref `{}`: {}", e.reference, e.reason);
                return vec![at.at(Kind::ReferenceUnresolved, detail)];
            }
        };
        if self.depth >= DEPTH_MAX {
            return vec![
                at.at(Kind::NestingTooDeep, format!("schemas nest more than {DEPTH_MAX} levels deep")),
            ];
        }
        let key = (reader as *const Value as usize, writer as *const Value as usize);
        if !self.active.insert(key) {
            return Vec::new();
        }
        self.depth += 1;
        let found = self.compare_resolved(reader, writer, at);
        self.depth -= 1;
        self.active.remove(&key);
        found
    }

    fn compare_resolved(&mut self, reader: &Value, writer: &Value, at: &Location) -> Vec<Incompatibility> {
        // A writer with the false schema produces nothing, and the empty reader
        // schema `{}` (or one with only annotations) accepts everything (Confluent's EmptySchema and FalseSchema
        // rules). The reader `true` stays a boolean schema, as Karapace reads it.
        if writer == &Value::Bool(false) || is_empty_schema(reader) {
            return Vec::new();
        }
        let (r, w) = (classify(reader), classify(writer));
        let objectish = |s: &Shape<'_>| matches!(s, Shape::Typed(Type::Object) | Shape::Bool(true));
        if let (Shape::Typed(rt), Shape::Typed(wt)) = (&r, &w)
            && rt.is_numeric()
            && wt.is_numeric()
        {
            let mut out = numbers(reader, writer, *rt, *wt, at);
            self.common(reader, writer, at, &mut out);
            return out;
        }
        if r.is_combined() || w.is_combined() {
            return self.combined(reader, r, writer, w, at);
        }
        match (&r, &w) {
            _ if objectish(&r) && objectish(&w) => {
                let empty = Value::Object(Map::new());
                let reader = if reader.is_boolean() { &empty } else { reader };
                let writer = if writer.is_boolean() { &empty } else { writer };
                let mut out = self.objects(reader, writer, at);
                self.common(reader, writer, at, &mut out);
                out
            }
            _ if !r.same_kind(&w) => vec![type_changed(&r, &w, at)],
            (Shape::Bool(false), Shape::Bool(true)) => {
                vec![at.at(
                    Kind::TypeChanged,
                    "the reader is the false schema and rejects every value the writer produces",
                )]
            }
            (Shape::Bool(_), Shape::Bool(_)) => Vec::new(),
            (Shape::Not(r_negated), Shape::Not(w_negated)) => {
                // The reader rejects what its negated schema accepts; that is safe when
                // the writer already rejects all of it, i.e. when the writer's negated
                // schema, as a reader, accepts everything the reader's negated schema does.
                let mut swapped = Checker::new(self.writer, self.reader, self.depth + 1, self.budget);
                let found = swapped.compare(w_negated, r_negated, &at.child("not"));
                if found.is_empty() {
                    return found;
                }
                let detail =
                    "the reader rejects values the writer may produce (its negated schema accepts more)";
                let mut out = vec![at.child("not").at(Kind::NotTypeExtended, detail)];
                out.extend(found);
                out
            }
            _ => {
                let mut out = match r {
                    Shape::Typed(Type::String) => strings(reader, writer, at),
                    Shape::Typed(Type::Array) => self.arrays(reader, writer, at),
                    _ => Vec::new(),
                };
                self.common(reader, writer, at, &mut out);
                out
            }
        }
    }

    /// Checks every type shares: `enum`/`const` and `if`/`then`/`else`.
    fn common(&mut self, reader: &Value, writer: &Value, at: &Location, out: &mut Vec<Incompatibility>) {
        enums(reader, writer, at, out);
        self.conditionals(reader, writer, at, out);
    }

    fn conditionals(
        &mut self,
        reader: &Value,
        writer: &Value,
        at: &Location,
        out: &mut Vec<Incompatibility>,
    ) {
        if reader.get("if").is_none() && writer.get("if").is_none() {
            return;
        }
        if reader.get("if") != writer.get("if") {
            let detail = "the `if` condition changed, so values may now take the other branch";
            out.push(at.child("if").at(Kind::ConditionChanged, detail));
            return;
        }
        for branch in ["then", "else"] {
            let Some(r) = reader.get(branch).filter(|s| !accepts_everything(s)) else { continue };
            match writer.get(branch) {
                None => out.push(
                    at.child(branch)
                        .at(Kind::ConditionBranchAdded, format!("the reader added an `{branch}` branch")),
                ),
                Some(w) => out.extend(self.compare(r, w, &at.child(branch))),
            }
        }
    }

    fn combined(
        &mut self,
        reader: &Value,
        r: Shape<'_>,
        writer: &Value,
        w: Shape<'_>,
        at: &Location,
    ) -> Vec<Incompatibility> {
        match (r, w) {
            (Shape::Combined(rc, r_subs), Shape::Combined(wc, w_subs)) => {
                self.both_combined(rc, &r_subs, wc, &w_subs, at)
            }
            (Shape::Combined(rc, r_subs), w) => self.reader_combined(rc, &r_subs, writer, &w, at),
            (r, Shape::Combined(wc, w_subs)) => self.writer_combined(reader, &r, wc, &w_subs, at),
            _ => unreachable!("combined() is only called when one side is a combinator"),
        }
    }

    /// A reader combinator against a plain writer schema.
    fn reader_combined(
        &mut self,
        rc: Combinator,
        r_subs: &[Cow<'_, Value>],
        writer: &Value,
        w: &Shape<'_>,
        at: &Location,
    ) -> Vec<Incompatibility> {
        let at = at.child(rc.keyword());
        if r_subs.len() == 1 {
            // A single-branch combinator is its branch.
            return self.compare(&r_subs[0], writer, &at);
        }
        if rc == Combinator::AllOf {
            let mut out = Vec::new();
            for (index, sub) in r_subs.iter().enumerate() {
                out.extend(self.compare(sub, writer, &at.child(index.to_string())));
            }
            return out;
        }
        if r_subs.iter().any(|sub| self.compare(sub, writer, &at).is_empty()) {
            return Vec::new();
        }
        let detail = format!("no branch of the reader's {} accepts the writer's {}", rc.keyword(), w.name());
        vec![at.at(Kind::TypeChanged, detail)]
    }

    /// A plain reader schema against a writer combinator.
    fn writer_combined(
        &mut self,
        reader: &Value,
        r: &Shape<'_>,
        wc: Combinator,
        w_subs: &[Cow<'_, Value>],
        at: &Location,
    ) -> Vec<Incompatibility> {
        let at = at.child(wc.keyword());
        if w_subs.len() == 1 {
            return self.compare(reader, &w_subs[0], &at);
        }
        if wc == Combinator::AllOf {
            // The writer's values satisfy every branch: one accepted branch is enough.
            if w_subs.iter().any(|sub| self.compare(reader, sub, &at).is_empty()) {
                return Vec::new();
            }
            let detail = format!("the reader's {} accepts no branch of the writer's allOf", r.name());
            return vec![at.at(Kind::TypeChanged, detail)];
        }
        let mut out = Vec::new();
        for (index, sub) in w_subs.iter().enumerate() {
            if !self.compare(reader, sub, &at.child(index.to_string())).is_empty() {
                let detail = format!(
                    "the reader's {} rejects what branch {index} of the writer's {} produces",
                    r.name(),
                    wc.keyword()
                );
                out.push(at.child(index.to_string()).at(Kind::TypeChanged, detail));
            }
        }
        out
    }

    fn both_combined(
        &mut self,
        rc: Combinator,
        r_subs: &[Cow<'_, Value>],
        wc: Combinator,
        w_subs: &[Cow<'_, Value>],
        at: &Location,
    ) -> Vec<Incompatibility> {
        let at = at.child(rc.keyword());
        if rc != Combinator::AnyOf && rc != wc {
            let detail = format!("the combinator changed from {} to {}", wc.keyword(), rc.keyword());
            return vec![at.at(Kind::CombinedTypeChanged, detail)];
        }
        if rc == Combinator::AllOf && w_subs.len() < r_subs.len() {
            let detail = format!(
                "the reader's allOf requires {} schemas, the writer's {}",
                r_subs.len(),
                w_subs.len()
            );
            return vec![at.at(Kind::ProductTypeExtended, detail)];
        }
        if rc != Combinator::AllOf && w_subs.len() > r_subs.len() {
            let detail = format!(
                "the reader's {} has {} branches, the writer's {}",
                rc.keyword(),
                r_subs.len(),
                w_subs.len()
            );
            return vec![at.at(Kind::SumTypeNarrowed, detail)];
        }
        // Branches may be reordered: pair each one with a distinct compatible partner.
        let compatible: Vec<Vec<bool>> = r_subs
            .iter()
            .map(|r| w_subs.iter().map(|w| self.compare(r, w, &at).is_empty()).collect())
            .collect();
        let needed = if rc == Combinator::AllOf { r_subs.len() } else { w_subs.len() };
        let paired = max_matching(&compatible, w_subs.len());
        if paired < needed {
            let detail = format!("only {paired} of {needed} branches have a compatible counterpart");
            return vec![at.at(Kind::CombinedTypeSubschemasChanged, detail)];
        }
        Vec::new()
    }
}

fn type_changed(r: &Shape<'_>, w: &Shape<'_>, at: &Location) -> Incompatibility {
    let detail = format!("the reader expects {} but the writer produces {}", r.name(), w.name());
    at.child("type").at(Kind::TypeChanged, detail)
}

/// Size of a maximum matching between readers (rows) and writers (columns).
fn max_matching(compatible: &[Vec<bool>], writers: usize) -> usize {
    fn augment(r: usize, compatible: &[Vec<bool>], seen: &mut [bool], owner: &mut [Option<usize>]) -> bool {
        for w in 0..owner.len() {
            if compatible[r][w] && !seen[w] {
                seen[w] = true;
                if owner[w].is_none_or(|other| augment(other, compatible, seen, owner)) {
                    owner[w] = Some(r);
                    return true;
                }
            }
        }
        false
    }
    let mut owner = vec![None; writers];
    (0..compatible.len()).filter(|&r| augment(r, compatible, &mut vec![false; writers], &mut owner)).count()
}

/// The values of `enum`/`const`: the reader must allow every value the writer may.
fn enums(reader: &Value, writer: &Value, at: &Location, out: &mut Vec<Incompatibility>) {
    let Some(allowed) = allowed_values(reader) else { return };
    let Some(produced) = allowed_values(writer) else {
        out.push(at.child("enum").at(Kind::EnumArrayAdded, "the reader now restricts the values to an enum"));
        return;
    };
    let missing: Vec<String> =
        produced.iter().filter(|v| !allowed.contains(v)).map(Value::to_string).collect();
    if !missing.is_empty() {
        let detail = format!("the reader no longer accepts {}", missing.join(", "));
        out.push(at.child("enum").at(Kind::EnumArrayNarrowed, detail));
    }
}

/// A lower or upper bound: the value and whether it is exclusive.
#[derive(Debug, Clone, Copy)]
struct Bound {
    value: f64,
    exclusive: bool,
}

/// The effective bound from `minimum`/`exclusiveMinimum` (or the maximum pair),
/// accepting both draft 4's boolean `exclusiveMinimum` and draft 6's number.
fn bound(schema: &Value, inclusive_key: &str, exclusive_key: &str, lower: bool) -> Option<Bound> {
    let inclusive = schema.get(inclusive_key).and_then(Value::as_f64);
    let exclusive = match schema.get(exclusive_key) {
        Some(Value::Bool(true)) => return inclusive.map(|value| Bound { value, exclusive: true }),
        Some(value) => value.as_f64(),
        None => None,
    };
    let candidates = [
        inclusive.map(|value| Bound { value, exclusive: false }),
        exclusive.map(|value| Bound { value, exclusive: true }),
    ];
    candidates.into_iter().flatten().reduce(|a, b| {
        let b_stricter = if lower { b.value > a.value } else { b.value < a.value };
        if b_stricter || (b.value == a.value && b.exclusive) { b } else { a }
    })
}

fn numbers(reader: &Value, writer: &Value, rt: Type, wt: Type, at: &Location) -> Vec<Incompatibility> {
    let mut out = Vec::new();
    if rt == Type::Integer && wt == Type::Number {
        out.push(
            at.child("type")
                .at(Kind::TypeNarrowed, "the writer produces numbers but the reader accepts only integers"),
        );
    }
    for lower in [true, false] {
        let (inclusive_key, exclusive_key) =
            if lower { ("minimum", "exclusiveMinimum") } else { ("maximum", "exclusiveMaximum") };
        let Some(r) = bound(reader, inclusive_key, exclusive_key, lower) else { continue };
        let key = if r.exclusive { exclusive_key } else { inclusive_key };
        let (added, tightened) = match (lower, r.exclusive) {
            (true, false) => (Kind::MinimumAdded, Kind::MinimumIncreased),
            (true, true) => (Kind::ExclusiveMinimumAdded, Kind::ExclusiveMinimumIncreased),
            (false, false) => (Kind::MaximumAdded, Kind::MaximumDecreased),
            (false, true) => (Kind::ExclusiveMaximumAdded, Kind::ExclusiveMaximumDecreased),
        };
        match bound(writer, inclusive_key, exclusive_key, lower) {
            None => out.push(at.child(key).at(added, format!("the reader added {key} {}", r.value))),
            Some(w) => {
                let tighter = if lower { r.value > w.value } else { r.value < w.value };
                if tighter || (r.value == w.value && r.exclusive && !w.exclusive) {
                    let detail = format!(
                        "the reader's {key} {} rejects values the writer's bound {} allows",
                        r.value, w.value
                    );
                    out.push(at.child(key).at(tightened, detail));
                }
            }
        }
    }
    multiple_of(reader, writer, at, &mut out);
    out
}

fn multiple_of(reader: &Value, writer: &Value, at: &Location, out: &mut Vec<Incompatibility>) {
    let Some(r) = reader.get("multipleOf").and_then(Value::as_f64) else { return };
    let at = at.child("multipleOf");
    let Some(w) = writer.get("multipleOf").and_then(Value::as_f64) else {
        out.push(at.at(Kind::MultipleOfAdded, format!("the reader added multipleOf {r}")));
        return;
    };
    let ratio = w / r;
    if (ratio - ratio.round()).abs() > 1e-9 * ratio.abs().max(1.0) {
        let kind = if r > w { Kind::MultipleOfExpanded } else { Kind::MultipleOfChanged };
        out.push(
            at.at(kind, format!("the writer's multiples of {w} are not all multiples of the reader's {r}")),
        );
    }
}

fn strings(reader: &Value, writer: &Value, at: &Location) -> Vec<Incompatibility> {
    let mut out = Vec::new();
    counts(
        reader,
        writer,
        at,
        "maxLength",
        false,
        (Kind::MaxLengthAdded, Kind::MaxLengthDecreased),
        &mut out,
    );
    counts(reader, writer, at, "minLength", true, (Kind::MinLengthAdded, Kind::MinLengthIncreased), &mut out);
    let texts = [
        ("pattern", Kind::PatternAdded, Kind::PatternChanged),
        ("format", Kind::FormatAdded, Kind::FormatChanged),
        ("contentEncoding", Kind::ContentEncodingAdded, Kind::ContentEncodingChanged),
        ("contentMediaType", Kind::ContentMediaTypeAdded, Kind::ContentMediaTypeChanged),
    ];
    for (key, added, changed) in texts {
        let Some(r) = reader.get(key) else { continue };
        match writer.get(key) {
            None => out.push(at.child(key).at(added, format!("the reader added {key} {r}"))),
            Some(w) if w != r => {
                out.push(at.child(key).at(changed, format!("{key} changed from {w} to {r}")))
            }
            Some(_) => {}
        }
    }
    out
}

/// A count limit (`maxLength`, `minItems`, ...): the reader's must not be tighter.
/// A lower limit of 0 is no limit.
fn counts(
    reader: &Value,
    writer: &Value,
    at: &Location,
    key: &str,
    lower: bool,
    (added, tightened): (Kind, Kind),
    out: &mut Vec<Incompatibility>,
) {
    let read = |schema: &Value| schema.get(key).and_then(Value::as_f64).filter(|v| !(lower && *v <= 0.0));
    let Some(r) = read(reader) else { return };
    match read(writer) {
        None => out.push(at.child(key).at(added, format!("the reader added {key} {r}"))),
        Some(w) if (lower && r > w) || (!lower && r < w) => {
            out.push(at.child(key).at(tightened, format!("{key} changed from {w} to {r}")));
        }
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests;
