//! State-machine tests with a stand-in checker (whitespace-insensitive canonical
//! form; a schema containing `BREAK` is incompatible with every schema it is
//! checked against), which records what the registry passed it.

use std::sync::{Arc, Mutex};

use crate::checker::{
    CheckerError, Form, Incompatibility, ResolvedReference, ResolvedSchema, SchemaChecker, SchemaCheckers,
};
use crate::record::{Change, ConfigValue};
use crate::types::{CompatLevel, Mode, Reference, RegisterRequest, SchemaType, VersionSpec};
use crate::{Plan, State};

#[derive(Default)]
struct Fake {
    calls: Mutex<Vec<(CompatLevel, Vec<String>)>>,
    /// Every schema passed to `normalize` or `check`, with its references.
    seen: Mutex<Vec<ResolvedSchema>>,
}

impl SchemaChecker for Fake {
    fn normalize(&self, schema: &ResolvedSchema) -> Result<Result<String, String>, CheckerError> {
        self.seen.lock().unwrap().push(schema.clone());
        let schema = schema.text.as_str();
        if schema.contains("TIMEOUT") {
            return Err(CheckerError::Timeout("deadline".into()));
        }
        if !schema.starts_with('{') {
            return Ok(Err("not an object".into()));
        }
        Ok(Ok(schema.split_whitespace().collect()))
    }

    fn check(
        &self,
        level: CompatLevel,
        proposed: &ResolvedSchema,
        existing: &[ResolvedSchema],
    ) -> Result<Vec<Incompatibility>, CheckerError> {
        self.seen.lock().unwrap().extend(existing.iter().cloned());
        self.calls.lock().unwrap().push((level, existing.iter().map(|e| e.text.clone()).collect()));
        Ok(if proposed.text.contains("BREAK") {
            existing
                .iter()
                .map(|e| Incompatibility { path: "/".into(), message: format!("breaks {}", e.text) })
                .collect()
        } else {
            Vec::new()
        })
    }
}

fn setup() -> (State, SchemaCheckers, Arc<Fake>) {
    let checkers = SchemaCheckers::new();
    let fake = Arc::new(Fake::default());
    checkers.set(SchemaType::Avro, fake.clone());
    (State::new(), checkers, fake)
}

fn req(schema: &str) -> RegisterRequest {
    RegisterRequest { schema: Some(schema.into()), ..RegisterRequest::default() }
}

/// Plans against the state, then applies the plan as the broker does after the fsync.
fn commit<T>(state: &mut State, plan: impl FnOnce(&State) -> Plan<T>) -> T {
    let plan = plan(state);
    apply_plan(state, plan)
}

fn apply_plan<T>(state: &mut State, plan: Plan<T>) -> T {
    for c in plan.changes {
        // Every record survives its own encoding: the state is rebuilt from bytes.
        let (k, v) = c.encode();
        state.apply(Change::decode(&k, v.as_deref()).unwrap());
    }
    plan.answer
}

fn register(
    state: &mut State,
    checkers: &SchemaCheckers,
    subject: &str,
    schema: &str,
) -> crate::Result<(i32, i32)> {
    let plan = state.plan_register(checkers, subject, &req(schema), false)?;
    let r = apply_plan(state, plan);
    Ok((r.id, r.version.version))
}

#[test]
fn same_schema_same_id_across_subjects_and_reregistering_is_idempotent() {
    let (mut s, c, _) = setup();
    assert_eq!(register(&mut s, &c, "a", "{ \"x\": 1 }").unwrap(), (1, 1));
    // Same canonical form: same id, no new version.
    let plan = s.plan_register(&c, "a", &req("{\"x\":   1}"), false).unwrap();
    assert!(plan.changes.is_empty());
    assert_eq!(plan.answer.id, 1);
    assert_eq!(register(&mut s, &c, "b", "{\"x\": 1}").unwrap(), (1, 1));
    // Both subjects serve the first text for id 1.
    assert_eq!(s.version("b", VersionSpec::Latest, false).unwrap().schema, "{ \"x\": 1 }");
    assert_eq!(register(&mut s, &c, "a", "{\"y\": 2}").unwrap(), (2, 2));
    assert_eq!(s.id_versions(1, false).unwrap(), vec![("a".into(), 1), ("b".into(), 1)]);
}

#[test]
fn invalid_schemas_types_and_missing_checkers_are_42201() {
    let (mut s, c, _) = setup();
    assert_eq!(register(&mut s, &c, "a", "nope").unwrap_err().error_code(), 42201);
    assert_eq!(register(&mut s, &c, "a", "  ").unwrap_err().error_code(), 42201);
    let proto = RegisterRequest { schema_type: Some("PROTOBUF".into()), ..req("{}") };
    let err = s.plan_register(&c, "a", &proto, false).unwrap_err();
    assert_eq!(err.error_code(), 42201);
    assert!(err.to_string().contains("PROTOBUF"), "{err}");
    assert_eq!(register(&mut s, &c, "a", "{TIMEOUT}").unwrap_err().error_code(), 50002);
}

#[test]
fn plain_levels_check_the_latest_and_transitive_ones_every_live_version() {
    let (mut s, c, fake) = setup();
    register(&mut s, &c, "a", "{1}").unwrap();
    register(&mut s, &c, "a", "{2}").unwrap();
    register(&mut s, &c, "a", "{3}").unwrap();
    fake.calls.lock().unwrap().clear();
    register(&mut s, &c, "a", "{4}").unwrap();
    assert_eq!(fake.calls.lock().unwrap().pop().unwrap(), (CompatLevel::Backward, vec!["{3}".to_owned()]));
    commit(&mut s, |s| s.plan_delete_version("a", VersionSpec::Number(2), false).unwrap());
    let level = ConfigValue::level(CompatLevel::FullTransitive);
    commit(&mut s, |s| s.plan_set_config(Some("a"), level).unwrap());
    register(&mut s, &c, "a", "{5}").unwrap();
    let expected: Vec<String> = ["{1}", "{3}", "{4}"].map(String::from).to_vec();
    assert_eq!(fake.calls.lock().unwrap().pop().unwrap(), (CompatLevel::FullTransitive, expected));
    let err = register(&mut s, &c, "a", "{BREAK}").unwrap_err();
    assert_eq!(err.error_code(), 409);
    assert!(err.to_string().contains("description:'Breaks {1}', additionalInfo:'/'}"), "{err}");
    assert!(err.to_string().contains("{oldSchemaVersion: 5}, {oldSchema: '{5}'}"), "{err}");
    commit(&mut s, |s| s.plan_set_config(Some("a"), ConfigValue::level(CompatLevel::None)).unwrap());
    fake.calls.lock().unwrap().clear();
    register(&mut s, &c, "a", "{BREAK}").unwrap();
    assert!(fake.calls.lock().unwrap().is_empty(), "NONE never calls the checker");
}

#[test]
fn compatibility_endpoint_selects_versions_like_registration() {
    let (mut s, c, fake) = setup();
    let none = s.check_compatibility(&c, "a", None, &req("{BREAK}"), false).unwrap();
    assert!(none.is_compatible);
    assert_eq!(
        s.check_compatibility(&c, "a", Some(VersionSpec::Latest), &req("{x}"), false)
            .unwrap_err()
            .error_code(),
        40401
    );
    register(&mut s, &c, "a", "{1}").unwrap();
    register(&mut s, &c, "a", "{2}").unwrap();
    let r = s.check_compatibility(&c, "a", Some(VersionSpec::Number(1)), &req("{BREAK}"), false).unwrap();
    assert!(!r.is_compatible);
    assert_eq!(fake.calls.lock().unwrap().pop().unwrap().1, vec!["{1}".to_owned()]);
    assert!(r.messages.iter().any(|m| m.contains("Breaks {1}")), "{r:?}");
    assert!(r.messages.iter().any(|m| m.contains("BACKWARD")), "{r:?}");
    let err = s.check_compatibility(&c, "a", Some(VersionSpec::Number(9)), &req("{x}"), false).unwrap_err();
    assert_eq!(err.error_code(), 40402);
}

#[test]
fn deletes_are_soft_first_then_permanent() {
    let (mut s, c, _) = setup();
    register(&mut s, &c, "a", "{1}").unwrap();
    register(&mut s, &c, "a", "{2}").unwrap();
    let code = |r: crate::Result<Plan<i32>>| r.unwrap_err().error_code();
    assert_eq!(code(s.plan_delete_version("a", VersionSpec::Number(1), true)), 40407);
    assert_eq!(code(s.plan_delete_version("a", VersionSpec::Number(7), false)), 40402);
    assert_eq!(code(s.plan_delete_version("zz", VersionSpec::Number(1), false)), 40401);
    assert_eq!(commit(&mut s, |s| s.plan_delete_version("a", VersionSpec::Number(1), false).unwrap()), 1);
    assert_eq!(code(s.plan_delete_version("a", VersionSpec::Number(1), false)), 40406);
    assert_eq!(s.versions("a", false).unwrap(), vec![2]);
    assert_eq!(s.versions("a", true).unwrap(), vec![1, 2]);
    assert_eq!(s.version("a", VersionSpec::Number(1), false).unwrap_err().error_code(), 40402);
    assert!(s.version("a", VersionSpec::Number(1), true).unwrap().deleted);
    // A soft-deleted id still serves its schema.
    assert_eq!(s.schema_by_id(1).unwrap().schema, "{1}");
    assert_eq!(s.plan_delete_subject("a", true).unwrap_err().error_code(), 40405);
    assert_eq!(commit(&mut s, |s| s.plan_delete_subject("a", false).unwrap()), vec![2]);
    assert_eq!(s.plan_delete_subject("a", false).unwrap_err().error_code(), 40404);
    assert!(s.subjects(false, false, "").is_empty());
    assert_eq!(s.subjects(true, false, ""), vec!["a".to_owned()]);
    assert_eq!(commit(&mut s, |s| s.plan_delete_subject("a", true).unwrap()), vec![1, 2]);
    assert_eq!(s.plan_delete_subject("a", false).unwrap_err().error_code(), 40401);
    assert_eq!(s.schema_by_id(1).unwrap_err().error_code(), 40403);
    // Ids are never reused, even after every holder was hard-deleted.
    assert_eq!(register(&mut s, &c, "a", "{1}").unwrap(), (3, 1));
}

#[test]
fn references_must_exist_and_block_deletes() {
    let (mut s, c, _) = setup();
    register(&mut s, &c, "base", "{b}").unwrap();
    let with_ref = |version| RegisterRequest {
        references: vec![Reference { name: "B".into(), subject: "base".into(), version }],
        ..req("{top}")
    };
    assert_eq!(s.plan_register(&c, "top", &with_ref(2), false).unwrap_err().error_code(), 42201);
    let r = commit(&mut s, |s| s.plan_register(&c, "top", &with_ref(-1), false).unwrap());
    assert_eq!(r.version.references[0].version, 1, "-1 resolves to the latest version");
    assert_eq!(s.referenced_by("base", 1), vec![r.id]);
    assert_eq!(s.plan_delete_version("base", VersionSpec::Number(1), false).unwrap_err().error_code(), 42206);
    commit(&mut s, |s| s.plan_delete_subject("top", false).unwrap());
    commit(&mut s, |s| s.plan_delete_version("base", VersionSpec::Number(1), false).unwrap());
}

#[test]
fn modes_guard_writes_and_import_keeps_given_ids() {
    let (mut s, c, _) = setup();
    register(&mut s, &c, "a", "{1}").unwrap();
    commit(&mut s, |s| s.plan_set_mode(Some("a"), Mode::ReadOnly, false).unwrap());
    assert_eq!(register(&mut s, &c, "a", "{2}").unwrap_err().error_code(), 42205);
    assert_eq!(s.plan_delete_subject("a", false).unwrap_err().error_code(), 42205);
    register(&mut s, &c, "b", "{2}").unwrap();
    commit(&mut s, |s| s.plan_delete_mode(Some("a")).unwrap());
    commit(&mut s, |s| s.plan_set_mode(None, Mode::ReadOnlyOverride, false).unwrap());
    assert_eq!(register(&mut s, &c, "b", "{3}").unwrap_err().error_code(), 42205);
    commit(&mut s, |s| s.plan_set_mode(None, Mode::ReadWrite, false).unwrap());

    let with_id = RegisterRequest { id: Some(100), version: Some(5), ..req("{imported}") };
    assert_eq!(s.plan_register(&c, "imp", &with_id, false).unwrap_err().error_code(), 42205);
    assert_eq!(s.plan_set_mode(Some("a"), Mode::Import, false).unwrap_err().error_code(), 42205);
    commit(&mut s, |s| s.plan_set_mode(Some("imp"), Mode::Import, false).unwrap());
    let r = commit(&mut s, |s| s.plan_register(&c, "imp", &with_id, false).unwrap());
    assert_eq!((r.id, r.version.version), (100, 5));
    let clash = RegisterRequest { id: Some(100), ..req("{other}") };
    assert_eq!(s.plan_register(&c, "imp", &clash, false).unwrap_err().error_code(), 42205);
    // New ids continue above the largest imported one.
    assert_eq!(register(&mut s, &c, "c", "{new}").unwrap().0, 101);
    assert_eq!(s.mode(Some("c"), false).unwrap_err().error_code(), 40409);
    assert_eq!(s.mode(Some("c"), true).unwrap(), Mode::ReadWrite);
}

#[test]
fn configs_fall_back_to_global_and_normalize_stores_the_canonical_form() {
    let (mut s, c, _) = setup();
    assert_eq!(s.config(None, false).unwrap().compatibility_level, Some(CompatLevel::Backward));
    assert_eq!(s.config(Some("a"), false).unwrap_err().error_code(), 40408);
    commit(&mut s, |s| {
        s.plan_set_config(
            None,
            ConfigValue { normalize: Some(true), ..ConfigValue::level(CompatLevel::Forward) },
        )
        .unwrap()
    });
    assert_eq!(s.config(Some("a"), true).unwrap().compatibility_level, Some(CompatLevel::Forward));
    assert_eq!(s.plan_delete_config(Some("a")).unwrap_err().error_code(), 40401);
    let r = commit(&mut s, |s| s.plan_register(&c, "a", &req("{ a  b }"), false).unwrap());
    assert_eq!(r.version.schema, "{ab}");
    assert_eq!(s.plan_delete_config(Some("a")).unwrap_err().error_code(), 40408);
    let old = commit(&mut s, |s| s.plan_delete_config(None).unwrap());
    assert_eq!(old.compatibility_level, Some(CompatLevel::Forward));
    assert_eq!(s.config(None, false).unwrap().compatibility_level, Some(CompatLevel::Backward));
}

#[test]
fn lookup_finds_the_version_by_canonical_form() {
    let (mut s, c, _) = setup();
    assert_eq!(s.lookup(&c, "a", &req("{1}"), false, false).unwrap_err().error_code(), 40401);
    register(&mut s, &c, "a", "{1}").unwrap();
    register(&mut s, &c, "a", "{2}").unwrap();
    assert_eq!(s.lookup(&c, "a", &req("{ 2 }"), false, false).unwrap().version, 2);
    assert_eq!(s.lookup(&c, "a", &req("{3}"), false, false).unwrap_err().error_code(), 40403);
    commit(&mut s, |s| s.plan_delete_version("a", VersionSpec::Number(1), false).unwrap());
    assert_eq!(s.lookup(&c, "a", &req("{1}"), false, false).unwrap_err().error_code(), 40403);
    assert_eq!(s.lookup(&c, "a", &req("{1}"), false, true).unwrap().version, 1);
    // Re-registering a soft-deleted schema makes a new version with the same id.
    assert_eq!(register(&mut s, &c, "a", "{1}").unwrap(), (1, 3));
}

fn reference(name: &str, subject: &str, version: i32) -> Reference {
    Reference { name: name.into(), subject: subject.into(), version }
}

fn with_refs(schema: &str, references: Vec<Reference>) -> RegisterRequest {
    RegisterRequest { references, ..req(schema) }
}

fn resolved(schema: &str, references: &[(&str, &str)]) -> ResolvedSchema {
    ResolvedSchema {
        text: schema.into(),
        references: references
            .iter()
            .map(|(name, text)| ResolvedReference { name: (*name).into(), text: (*text).into() })
            .collect(),
    }
}

#[test]
fn checkers_get_references_transitively_dependencies_first_each_once() {
    let (mut s, c, fake) = setup();
    register(&mut s, &c, "base", "{base}").unwrap();
    let mid = with_refs("{mid}", vec![reference("base.x", "base", 1)]);
    commit(&mut s, |s| s.plan_register(&c, "mid", &mid, false).unwrap());
    // A diamond: top references mid (which references base) and base itself.
    let top = with_refs("{top}", vec![reference("mid.x", "mid", 1), reference("base.x", "base", -1)]);
    fake.seen.lock().unwrap().clear();
    commit(&mut s, |s| s.plan_register(&c, "top", &top, false).unwrap());
    let expected = resolved("{top}", &[("base.x", "{base}"), ("mid.x", "{mid}")]);
    assert_eq!(fake.seen.lock().unwrap().as_slice(), std::slice::from_ref(&expected));

    // A new version is checked against the old one, each with its own references.
    register(&mut s, &c, "base", "{base2}").unwrap();
    let top2 = with_refs("{top2}", vec![reference("base.x", "base", 2)]);
    fake.seen.lock().unwrap().clear();
    commit(&mut s, |s| s.plan_register(&c, "top", &top2, false).unwrap());
    let seen = fake.seen.lock().unwrap().clone();
    assert_eq!(seen, [resolved("{top2}", &[("base.x", "{base2}")]), expected]);
}

#[test]
fn a_missing_reference_is_42201_naming_it() {
    let (mut s, c, _) = setup();
    register(&mut s, &c, "base", "{base}").unwrap();
    for r in [reference("b", "base", 7), reference("b", "nobody", 1), reference("b", "nobody", -1)] {
        let err = s.plan_register(&c, "top", &with_refs("{top}", vec![r]), false).unwrap_err();
        assert_eq!(err.error_code(), 42201, "{err}");
        assert!(err.to_string().contains("reference 'b'"), "{err}");
        let err =
            s.check_compatibility(&c, "base", None, &with_refs("{x}", vec![reference("b", "no", 1)]), false);
        assert_eq!(err.unwrap_err().error_code(), 42201);
    }
}

#[test]
fn circular_references_are_refused_not_followed_forever() {
    // The planners never create a cycle (a reference points at an existing
    // version); a log written otherwise must still not hang the resolver.
    let (mut s, c, _) = setup();
    for (subject, other) in [("a", "b"), ("b", "a")] {
        let value = crate::record::SchemaValue {
            subject: subject.into(),
            version: 1,
            id: if subject == "a" { 1 } else { 2 },
            schema: format!("{{{subject}}}"),
            schema_type: SchemaType::Avro,
            references: vec![reference(other, other, 1)],
            canonical: format!("{{{subject}}}"),
            metadata: None,
            rule_set: None,
            deleted: false,
        };
        s.apply(Change::Schema { subject: subject.into(), version: 1, value: Some(value) });
    }
    let err =
        s.plan_register(&c, "top", &with_refs("{top}", vec![reference("a", "a", 1)]), false).unwrap_err();
    assert_eq!(err.error_code(), 42201);
    assert!(err.to_string().contains("circular schema references"), "{err}");
}

#[test]
fn versions_follow_confluents_rules_outside_import() {
    let (mut s, c, _) = setup();
    let at = |v: i32, schema: &str| RegisterRequest { version: Some(v), ..req(schema) };
    // -1 (and 0) mean the next version.
    let r = commit(&mut s, |s| s.plan_register(&c, "a", &at(-1, "{1}"), false).unwrap());
    assert_eq!((r.id, r.version.version, r.filled_in), (1, 1, false));
    let e = s.plan_register(&c, "a", &at(5, "{2}"), false).unwrap_err();
    assert_eq!(
        (e.error_code(), e.to_string().as_str()),
        (42201, "Version is not one more than previous version")
    );
    // An explicit next version records confluent:version, and the answer is the whole schema.
    let r = commit(&mut s, |s| s.plan_register(&c, "a", &at(2, "{2}"), false).unwrap());
    assert!(r.filled_in);
    assert_eq!(r.version.metadata, Some(serde_json::json!({"properties": {"confluent:version": "2"}})));
    // Without a schema, the latest version's is used; with none at all it is "Empty schema".
    let empty = RegisterRequest::default();
    let r = commit(&mut s, |s| s.plan_register(&c, "a", &empty, false).unwrap());
    assert_eq!((r.id, r.version.version), (2, 2), "the latest schema again: the same version");
    let e = s.plan_register(&c, "b", &empty, false).unwrap_err();
    assert_eq!((e.error_code(), e.to_string().as_str()), (42201, "Empty schema"));
    let lower = RegisterRequest { schema_type: Some("avro".into()), ..req("{x}") };
    assert_eq!(s.plan_register(&c, "b", &lower, false).unwrap_err().error_code(), 42201);
    for bad in ["__GLOBAL", "__EMPTY", "a\u{7}b"] {
        assert_eq!(s.plan_register(&c, bad, &req("{x}"), false).unwrap_err().error_code(), 42208, "{bad}");
    }
}

#[test]
fn import_needs_an_id_and_readwrite_refuses_one() {
    let (mut s, c, _) = setup();
    register(&mut s, &c, "held", "{1}").unwrap();
    commit(&mut s, |s| s.plan_set_mode(Some("imp"), Mode::Import, false).unwrap());
    let e = s.plan_register(&c, "imp", &req("{1}"), false).unwrap_err();
    assert_eq!((e.error_code(), e.to_string().as_str()), (42205, "Subject imp is not in read-write mode"));
    let with = |id: i32, schema: &str| RegisterRequest { id: Some(id), ..req(schema) };
    // The id another subject holds this schema under may be given again.
    let r = commit(&mut s, |s| s.plan_register(&c, "imp", &with(1, "{1}"), false).unwrap());
    assert_eq!((r.id, r.version.version), (1, 1));
    let e = s.plan_register(&c, "imp", &with(1, "{2}"), false).unwrap_err();
    assert_eq!(
        (e.error_code(), e.to_string().as_str()),
        (42205, "Overwrite new schema with id 1 is not permitted.")
    );
    let e = s.plan_register(&c, "held", &with(9, "{9}"), false).unwrap_err();
    assert_eq!((e.error_code(), e.to_string().as_str()), (42205, "Subject held is not in import mode"));
}

#[test]
fn metadata_is_part_of_identity_and_config_metadata_merges() {
    let (mut s, c, _) = setup();
    let with_md = |schema: &str, md: serde_json::Value| RegisterRequest { metadata: Some(md), ..req(schema) };
    let r1 = commit(&mut s, |s| {
        s.plan_register(&c, "a", &with_md("{1}", serde_json::json!({"properties": {"o": "x"}})), false)
            .unwrap()
    });
    let r2 = commit(&mut s, |s| {
        s.plan_register(&c, "a", &with_md("{1}", serde_json::json!({"properties": {"o": "y"}})), false)
            .unwrap()
    });
    assert_eq!(
        (r1.id, r1.version.version, r2.id, r2.version.version),
        (1, 1, 2, 2),
        "other metadata: a new version"
    );
    // Without metadata of its own, a registration inherits the latest version's: the same schema.
    let r3 = commit(&mut s, |s| s.plan_register(&c, "a", &req("{1}"), false).unwrap());
    assert_eq!((r3.id, r3.version.version), (2, 2));
    let bad = with_md("{1}", serde_json::json!({"properties": {"o": 1}}));
    assert_eq!(s.plan_register(&c, "a", &bad, false).unwrap_err().error_code(), 422);
    let cfg = ConfigValue {
        default_metadata: Some(serde_json::json!({"properties": {"team": "t", "o": "default"}})),
        override_metadata: Some(serde_json::json!({"properties": {"pinned": "p"}})),
        ..ConfigValue::default()
    };
    let echoed = commit(&mut s, |s| s.plan_set_config(Some("b"), cfg.clone()).unwrap());
    assert_eq!(echoed, cfg, "the answer is what was set");
    let r = commit(&mut s, |s| {
        s.plan_register(&c, "b", &with_md("{b}", serde_json::json!({"properties": {"o": "mine"}})), false)
            .unwrap()
    });
    assert_eq!(
        r.version.metadata,
        Some(serde_json::json!({"properties": {"team": "t", "o": "mine", "pinned": "p"}}))
    );
    assert_eq!(s.version_by_metadata("b", &[("team".into(), "t".into())]).unwrap().version, 1);
    // A lookup without metadata (a serializer's) finds the version the config's metadata went into.
    assert_eq!(s.lookup(&c, "b", &req("{b}"), false, false).unwrap().version, 1);
    let other = with_md("{b}", serde_json::json!({"properties": {"o": "else"}}));
    assert_eq!(s.lookup(&c, "b", &other, false, false).unwrap_err().error_code(), 40403);
    assert_eq!(s.version_by_metadata("b", &[("team".into(), "u".into())]).unwrap_err().error_code(), 40403);
}

#[test]
fn compatibility_groups_aliases_contexts_and_read_only_configs() {
    let (mut s, c, fake) = setup();
    let in_group = |schema: &str, g: &str| RegisterRequest {
        metadata: Some(serde_json::json!({"properties": {"major": g}})),
        ..req(schema)
    };
    commit(&mut s, |s| {
        s.plan_set_config(
            Some("g"),
            ConfigValue { compatibility_group: Some("major".into()), ..ConfigValue::default() },
        )
        .unwrap()
    });
    commit(&mut s, |s| s.plan_register(&c, "g", &in_group("{1}", "1"), false).unwrap());
    // A breaking schema in a new group is checked against nothing.
    commit(&mut s, |s| s.plan_register(&c, "g", &in_group("{BREAK}", "2"), false).unwrap());
    assert_eq!(s.plan_register(&c, "g", &in_group("{BREAK 2}", "1"), false).unwrap_err().error_code(), 409);
    fake.calls.lock().unwrap().clear();
    commit(&mut s, |s| {
        s.plan_set_config(Some("al"), ConfigValue { alias: Some("g".into()), ..ConfigValue::default() })
            .unwrap()
    });
    assert_eq!(s.resolve_alias("al"), "g");
    assert_eq!(s.resolve_alias("g"), "g");
    // A context's config and mode are its subjects' unless they have their own.
    commit(&mut s, |s| s.plan_set_config(Some(":.ctx:"), ConfigValue::level(CompatLevel::None)).unwrap());
    assert_eq!(s.effective_level(":.ctx:x"), CompatLevel::None);
    assert_eq!(s.effective_level("x"), CompatLevel::Backward);
    commit(&mut s, |s| s.plan_set_mode(Some(":.ctx:"), Mode::ReadOnly, false).unwrap());
    assert_eq!(s.effective_mode(":.ctx:x"), Mode::ReadOnly);
    assert_eq!(
        s.plan_set_config(Some(":.ctx:x"), ConfigValue::level(CompatLevel::Full)).unwrap_err().error_code(),
        42205
    );
    commit(&mut s, |s| s.plan_delete_mode(Some(":.ctx:")).unwrap());
    register(&mut s, &c, ":.ctx:x", "{c}").unwrap();
    assert_eq!(s.contexts(), [".", ".ctx"]);
    assert_eq!(
        s.all_schemas("", false, true, 0, None).iter().map(|v| v.subject.as_str()).collect::<Vec<_>>(),
        [":.ctx:x", "g"]
    );
    assert_eq!(s.all_schemas("g", false, false, 1, Some(1)).len(), 1);
}

/// A checker with Confluent's two prints: as written (whitespace collapsed, so
/// layout does not matter but order does) and normalized (words sorted), and a
/// serialized form.
struct Printing;

impl SchemaChecker for Printing {
    fn normalize(&self, schema: &ResolvedSchema) -> Result<Result<String, String>, CheckerError> {
        let mut words: Vec<&str> = schema.text.split_whitespace().collect();
        words.sort_unstable();
        Ok(Ok(words.join(" ")))
    }

    fn print(
        &self,
        schema: &ResolvedSchema,
        form: Form,
    ) -> Result<Option<Result<String, String>>, CheckerError> {
        let words: Vec<&str> = schema.text.split_whitespace().collect();
        Ok(Some(Ok(match form {
            Form::Canonical => words.join(" "),
            Form::Serialized => format!("serialized({})", words.join(" ")),
            Form::Resolved => format!("resolved({})", words.join(" ")),
            Form::IgnoreExtensions => format!("plain({})", words.join(" ")),
        })))
    }

    fn check(
        &self,
        _level: CompatLevel,
        _proposed: &ResolvedSchema,
        _existing: &[ResolvedSchema],
    ) -> Result<Vec<Incompatibility>, CheckerError> {
        Ok(Vec::new())
    }
}

#[test]
fn a_checkers_print_is_stored_and_compared_unless_normalizing() {
    let mut s = State::new();
    let c = SchemaCheckers::new();
    c.set(SchemaType::Protobuf, Arc::new(Printing));
    let proto = |text: &str| RegisterRequest { schema_type: Some("PROTOBUF".into()), ..req(text) };
    let mut register = |text: &str, normalize: bool| {
        let plan = s.plan_register(&c, "p", &proto(text), normalize).unwrap();
        let r = apply_plan(&mut s, plan);
        (r.id, r.version.schema)
    };
    // Stored as printed; the same print is the same schema.
    assert_eq!(register("a  b\n c", false), (1, "a b c".to_owned()));
    assert_eq!(register("a b c", false).0, 1);
    // Another order prints differently: a new schema, as in Confluent.
    assert_eq!(register("c b a", false), (2, "c b a".to_owned()));
    // Normalizing stores and compares the normalized form, which may be an
    // earlier print.
    assert_eq!(register("b c a", true).0, 1);
    assert_eq!(register("z y x", true), (3, "x y z".to_owned()));
    assert_eq!(register("y z x", true).0, 3);
    // `format=serialized` asks the checker; other formats give the stored text.
    let formatted =
        |format: &str| s.formatted(&c, SchemaType::Protobuf, "a b c".into(), &[], format).unwrap();
    assert_eq!(formatted("serialized"), "serialized(a b c)");
    assert_eq!(formatted("default"), "a b c");
    // Each format belongs to one type, as in Confluent: `resolved` is Avro's,
    // and asked of a Protobuf schema it gives the stored text.
    assert_eq!(formatted("resolved"), "a b c");
    assert_eq!(formatted("ignore_extensions"), "plain(a b c)");
    c.set(SchemaType::Avro, Arc::new(Printing));
    let avro = |format: &str| s.formatted(&c, SchemaType::Avro, "a b c".into(), &[], format).unwrap();
    assert_eq!(avro("resolved"), "resolved(a b c)");
    assert_eq!(avro("serialized"), "a b c");
    assert_eq!(avro("nonsense"), "a b c");
}

/// A checker whose resolved print appends the referenced schemas' texts, as an
/// Avro print inlines the types they define.
struct Inlining;

impl SchemaChecker for Inlining {
    fn normalize(&self, schema: &ResolvedSchema) -> Result<Result<String, String>, CheckerError> {
        Ok(Ok(schema.text.clone()))
    }

    fn print(
        &self,
        schema: &ResolvedSchema,
        form: Form,
    ) -> Result<Option<Result<String, String>>, CheckerError> {
        Ok(match form {
            Form::Canonical => Some(Ok(schema.text.clone())),
            Form::Resolved => {
                let inlined = schema.references.iter().map(|r| r.text.as_str());
                Some(Ok(std::iter::once(schema.text.as_str()).chain(inlined).collect::<Vec<_>>().join(" ")))
            }
            Form::Serialized | Form::IgnoreExtensions => None,
        })
    }

    fn check(
        &self,
        _level: CompatLevel,
        _proposed: &ResolvedSchema,
        _existing: &[ResolvedSchema],
    ) -> Result<Vec<Incompatibility>, CheckerError> {
        Ok(Vec::new())
    }
}

#[test]
fn an_avro_schema_sent_with_its_references_inlined_is_the_version_holding_them() {
    let mut s = State::new();
    let c = SchemaCheckers::new();
    c.set(SchemaType::Avro, Arc::new(Inlining));
    let mut register = |subject: &str, r: RegisterRequest| {
        let plan = s.plan_register(&c, subject, &r, false).unwrap();
        let changed = !plan.changes.is_empty();
        (apply_plan(&mut s, plan).id, changed)
    };
    assert_eq!(register("addr", req("address")), (1, true));
    let with_reference =
        RegisterRequest { references: vec![reference("Address", "addr", 1)], ..req("customer") };
    assert_eq!(register("cust", with_reference), (2, true));
    // Confluent: "a schema sent with all references resolved" is that version.
    assert_eq!(register("cust", req("customer address")), (2, false));
    // Anything else inlined is a new schema.
    assert_eq!(register("cust", req("customer other")), (3, true));
    assert_eq!(s.lookup(&c, "cust", &req("customer address"), false, false).unwrap().version, 1);
    assert_eq!(s.lookup(&c, "cust", &req("customer other"), false, false).unwrap().version, 2);
    assert_eq!(s.lookup(&c, "cust", &req("nothing"), false, false).unwrap_err().error_code(), 40403);
}
