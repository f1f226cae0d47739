//! Array schemas: lists (`items` as one schema), tuples (`prefixItems`, or `items`
//! as an array before 2020-12) with their additional items, `contains`, item
//! counts and `uniqueItems`.

use super::{Checker, counts};
use crate::report::{Incompatibility, Kind, Location};
use crate::shape::accepts_everything;
use serde_json::Value;

/// The item schemas of an array schema, whatever the draft.
struct Items<'v> {
    /// Positional schemas of a tuple; `None` for a list.
    tuple: Option<&'v [Value]>,
    /// The schema of every other item (`items` of a list, `additionalItems` or
    /// 2020-12 `items` of a tuple); `None` when not constrained.
    rest: Option<&'v Value>,
    /// Keyword names, for locations.
    tuple_key: &'static str,
    rest_key: &'static str,
}

fn items(schema: &Value) -> Items<'_> {
    if let Some(Value::Array(prefix)) = schema.get("prefixItems") {
        return Items {
            tuple: Some(prefix),
            rest: schema.get("items"),
            tuple_key: "prefixItems",
            rest_key: "items",
        };
    }
    match schema.get("items") {
        Some(Value::Array(tuple)) => Items {
            tuple: Some(tuple),
            rest: schema.get("additionalItems"),
            tuple_key: "items",
            rest_key: "additionalItems",
        },
        rest => Items { tuple: None, rest, tuple_key: "items", rest_key: "items" },
    }
}

/// `None` (unconstrained) for a missing or accept-everything schema.
fn constrained(schema: Option<&Value>) -> Option<&Value> {
    schema.filter(|s| !accepts_everything(s))
}

impl Checker<'_> {
    pub(super) fn arrays(&mut self, reader: &Value, writer: &Value, at: &Location) -> Vec<Incompatibility> {
        let mut out = Vec::new();
        let (r, w) = (items(reader), items(writer));
        match (r.tuple, w.tuple) {
            (Some(r_tuple), Some(w_tuple)) => self.tuples(&r, r_tuple, &w, w_tuple, at, &mut out),
            (None, None) => self.rest_items(&r, &w, at, &mut out),
            // A reader list without an item schema reads any tuple.
            (None, Some(_)) if constrained(r.rest).is_none() => {}
            _ => {
                let detail = "the array changed between a list (one item schema) and a tuple (one schema per position)";
                return vec![at.child("items").at(Kind::TypeChanged, detail)];
            }
        }
        if let Some(r_contains) = reader.get("contains") {
            match writer.get("contains") {
                Some(w_contains) => out.extend(self.compare(r_contains, w_contains, &at.child("contains"))),
                None => out.push(
                    at.child("contains").at(Kind::ContainsAdded, "the reader added a contains constraint"),
                ),
            }
        }
        counts(
            reader,
            writer,
            at,
            "maxItems",
            false,
            (Kind::MaxItemsAdded, Kind::MaxItemsDecreased),
            &mut out,
        );
        counts(
            reader,
            writer,
            at,
            "minItems",
            true,
            (Kind::MinItemsAdded, Kind::MinItemsIncreased),
            &mut out,
        );
        let unique = |s: &Value| s.get("uniqueItems") == Some(&Value::Bool(true));
        if unique(reader) && !unique(writer) {
            out.push(
                at.child("uniqueItems").at(Kind::UniqueItemsAdded, "the reader now requires unique items"),
            );
        }
        out
    }

    /// Two lists, or the items after two tuples' positions.
    fn rest_items(&mut self, r: &Items<'_>, w: &Items<'_>, at: &Location, out: &mut Vec<Incompatibility>) {
        let Some(r_rest) = constrained(r.rest) else { return };
        let here = at.child(r.rest_key);
        match w.rest {
            Some(Value::Bool(false)) => {}
            Some(w_rest) if !accepts_everything(w_rest) => out.extend(self.compare(r_rest, w_rest, &here)),
            _ if r.tuple.is_some() => {
                out.push(here.at(
                    Kind::AdditionalItemsRemoved,
                    "the reader restricts additional items the writer allows",
                ));
            }
            _ => out.push(here.at(
                Kind::ItemsAdded,
                "the reader now restricts the items, which the writer left unconstrained",
            )),
        }
    }

    fn tuples(
        &mut self,
        r: &Items<'_>,
        r_tuple: &[Value],
        w: &Items<'_>,
        w_tuple: &[Value],
        at: &Location,
        out: &mut Vec<Incompatibility>,
    ) {
        for (index, (r_item, w_item)) in r_tuple.iter().zip(w_tuple).enumerate() {
            out.extend(self.compare(r_item, w_item, &at.child(r.tuple_key).child(index.to_string())));
        }
        // Positions only the writer describes meet the reader's additional items.
        for (index, w_item) in w_tuple.iter().enumerate().skip(r_tuple.len()) {
            let here = at.child(w.tuple_key).child(index.to_string());
            match constrained(r.rest) {
                None => {}
                Some(Value::Bool(false)) => {
                    let detail =
                        format!("the reader's closed tuple no longer accepts an item at position {index}");
                    out.push(here.at(Kind::ItemRemovedFromClosedContentModel, detail));
                }
                Some(r_rest) => {
                    let found = self.compare(r_rest, w_item, &here);
                    if !found.is_empty() {
                        let detail = format!(
                            "the reader's additional items reject the writer's item at position {index}"
                        );
                        out.push(here.at(Kind::ItemRemovedNotCoveredByPartiallyOpenContentModel, detail));
                        out.extend(found);
                    }
                }
            }
        }
        // Positions only the reader describes meet the writer's additional items.
        for (index, r_item) in r_tuple.iter().enumerate().skip(w_tuple.len()) {
            let here = at.child(r.tuple_key).child(index.to_string());
            match w.rest {
                Some(Value::Bool(false)) => {}
                Some(w_rest) if !accepts_everything(w_rest) => {
                    let found = self.compare(r_item, w_rest, &here);
                    if !found.is_empty() {
                        let detail = format!(
                            "the reader's new item at position {index} rejects the writer's additional items"
                        );
                        out.push(here.at(Kind::ItemAddedNotCoveredByPartiallyOpenContentModel, detail));
                        out.extend(found);
                    }
                }
                _ if accepts_everything(r_item) => {}
                _ => {
                    let detail = format!(
                        "the reader describes position {index}, where the writer may have written any value"
                    );
                    out.push(here.at(Kind::ItemAddedToOpenContentModel, detail));
                }
            }
        }
        self.rest_items(r, w, at, out);
    }
}
