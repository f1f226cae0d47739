//! The schema-compat world through `CompatChecker`, against the `hostile-compat`
//! fixture: what the host passes and returns, the world check at load, and every
//! failure (loop, memory bomb, trap, garbage) as a typed error.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use es_plugin_host::limits::COMPAT_DEADLINE_MS_DEFAULT;
use es_plugin_host::{CompatChecker, CompatLevel, PluginError, PluginLimits, Schema, Validator};

fn hostile(mode: &str, limits: PluginLimits) -> CompatChecker {
    CompatChecker::load(
        engine(),
        &format!("hostile-compat-{mode}"),
        &fixture("es_fixture_hostile_compat"),
        config(&[("mode", mode)]),
        limits,
    )
    .unwrap_or_else(|e| panic!("load hostile-compat {mode}: {e}"))
}

fn existing() -> Vec<Schema> {
    vec!["v1".into(), "v2".into()]
}

#[test]
fn a_checker_reports_info_supports_and_results() {
    let c = hostile("ok", PluginLimits::compat());
    assert_eq!(c.info().name, "hostile-compat");
    assert_eq!(c.supports(), ["HOSTILE".to_owned()]);
    assert_eq!(c.limits().call_deadline_ms, COMPAT_DEADLINE_MS_DEFAULT);
    assert_eq!(c.normalize(&"  s  ".into()).unwrap(), Ok("s".to_owned()));
    assert_eq!(c.normalize(&" ".into()).unwrap(), Err("empty schema".to_owned()));
    assert!(c.check(CompatLevel::Backward, &"v3".into(), &existing()).unwrap().is_empty());
    assert_eq!(c.stats().calls, 3);
    assert_eq!(c.stats().failures, 0);
}

#[test]
fn the_level_and_every_existing_schema_reach_the_guest() {
    let c = hostile("echo", PluginLimits::compat());
    let found = c.check(CompatLevel::FullTransitive, &"v3".into(), &existing()).unwrap();
    let got: Vec<(&str, &str)> = found.iter().map(|i| (i.path.as_str(), i.message.as_str())).collect();
    assert_eq!(got, [("/0", "FullTransitive v3 vs v1"), ("/1", "FullTransitive v3 vs v2")]);
}

#[test]
fn a_bad_configuration_is_refused_at_load() {
    let err = CompatChecker::load(
        engine(),
        "hostile-compat-bad",
        &fixture("es_fixture_hostile_compat"),
        config(&[("mode", "sideways")]),
        PluginLimits::compat(),
    )
    .unwrap_err();
    assert!(matches!(err, PluginError::Configure { .. }), "{err}");
    assert!(err.to_string().contains("unknown mode `sideways`"), "{err}");
}

#[test]
fn each_world_refuses_the_other() {
    let err = CompatChecker::load(
        engine(),
        "validator-as-checker",
        &fixture("es_fixture_hostile"),
        vec![],
        PluginLimits::compat(),
    )
    .unwrap_err();
    assert!(matches!(err, PluginError::WrongWorld { world: "es:plugin/schema-compat@0.1.0", .. }), "{err}");
    assert!(err.to_string().contains("es:plugin/compat@0.1."), "names the missing export: {err}");
    let err = Validator::load(
        engine(),
        "checker-as-validator",
        &fixture("es_fixture_hostile_compat"),
        vec![],
        PluginLimits::default(),
    )
    .unwrap_err();
    assert!(
        matches!(err, PluginError::WrongWorld { world: "es:plugin/record-validator@0.1.0", .. }),
        "{err}"
    );
}

#[test]
fn a_panic_is_a_trap_and_the_instance_is_replaced() {
    let c = hostile("trap", PluginLimits::compat());
    let created = c.stats().instances_created;
    let err = c.check(CompatLevel::Backward, &"v3".into(), &existing()).unwrap_err();
    assert!(matches!(err, PluginError::Trap { .. }), "{err}");
    assert!(err.to_string().contains("hostile-compat-trap"), "{err}");
    assert!(err.to_string().contains("panics on purpose"), "the panic message is kept: {err}");
    assert_eq!(c.warm_instances(), 0, "a trapped instance must not go back to the pool");
    // normalize does not panic: a fresh instance serves it.
    assert_eq!(c.normalize(&"s".into()).unwrap(), Ok("s".to_owned()));
    assert_eq!(c.stats().instances_created, created + 1);
    assert_eq!(c.stats().failures, 1);
    engine_still_works();
}

#[test]
fn an_infinite_loop_hits_the_compat_deadline() {
    let c = hostile("loop", PluginLimits::compat());
    let started = Instant::now();
    let err = c.check(CompatLevel::Forward, &"v3".into(), &existing()).unwrap_err();
    let took = started.elapsed();
    assert!(matches!(err, PluginError::Deadline { deadline_ms: COMPAT_DEADLINE_MS_DEFAULT, .. }), "{err}");
    // The epoch ticks every millisecond or a little slower on a loaded machine:
    // the call ran for about the deadline, not for the 20 ms of a validator, and
    // was stopped within seconds.
    assert!(
        took >= Duration::from_millis(COMPAT_DEADLINE_MS_DEFAULT * 3 / 4),
        "interrupted early, after {took:?}"
    );
    assert!(took < Duration::from_secs(3), "interrupted after {took:?}");
    engine_still_works();
}

#[test]
fn a_memory_bomb_hits_the_memory_cap() {
    let limits = PluginLimits { memory_bytes_max: 16 << 20, ..PluginLimits::compat() };
    let c = hostile("bomb", limits);
    let err = c.check(CompatLevel::Full, &"v3".into(), &existing()).unwrap_err();
    assert!(matches!(err, PluginError::Memory { limit_bytes, .. } if limit_bytes == 16 << 20), "{err}");
    engine_still_works();
}

#[test]
fn empty_messages_and_empty_schemas_are_garbage() {
    let c = hostile("garbage", PluginLimits::compat());
    let err = c.check(CompatLevel::Backward, &"v3".into(), &existing()).unwrap_err();
    assert!(matches!(err, PluginError::Garbage { .. }), "{err}");
    assert!(err.to_string().contains("empty message"), "{err}");
    let err = c.normalize(&"s".into()).unwrap_err();
    assert!(matches!(err, PluginError::Garbage { .. }), "{err}");
    assert_eq!(c.stats().failures, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocking_variants_run_off_the_task() {
    let c = Arc::new(hostile("echo", PluginLimits::compat()));
    let found = c.clone().check_blocking(CompatLevel::Backward, "v3".into(), existing()).await.unwrap();
    assert_eq!(found.len(), 2);
    assert_eq!(c.normalize_blocking("s".into()).await.unwrap(), Ok("s".to_owned()));
}

#[test]
fn inspect_reads_info_without_configuring_and_checks_the_world() {
    let wasm = fixture("es_fixture_hostile_compat");
    let info = CompatChecker::inspect(engine(), "upload", &wasm).expect("inspect");
    assert_eq!(info.name, "hostile-compat");
    assert_eq!(info.config_keys, ["mode"]);
    let err = CompatChecker::inspect(engine(), "upload", &fixture("es_fixture_hostile")).unwrap_err();
    assert!(matches!(err, PluginError::WrongWorld { world: "es:plugin/schema-compat@0.1.0", .. }), "{err}");
}

#[test]
fn references_reach_the_guest_in_order_with_each_schema() {
    let c = hostile("echo", PluginLimits::compat());
    let schema = Schema::new("v3").with_reference("a", "A").with_reference("b", "B");
    assert_eq!(c.normalize(&schema).unwrap(), Ok("v3 [a=A, b=B]".to_owned()));
    let existing = [Schema::new("v1").with_reference("a", "A0"), Schema::new("v2")];
    let found = c.check(CompatLevel::Backward, &schema, &existing).unwrap();
    let got: Vec<&str> = found.iter().map(|i| i.message.as_str()).collect();
    assert_eq!(got, ["Backward v3 [a=A, b=B] vs v1 [a=A0]", "Backward v3 [a=A, b=B] vs v2"]);
}

/// Messages of `check`, for assertions.
fn messages(c: &CompatChecker, level: CompatLevel, proposed: &Schema, existing: &[Schema]) -> Vec<String> {
    let found = c.check(level, proposed, existing).unwrap_or_else(|e| panic!("check: {e}"));
    found.into_iter().map(|i| format!("{} {}", i.path, i.message)).collect()
}

#[test]
fn avro_named_types_come_from_references() {
    let c = builtin_checker("avro-compat");
    let address = |zip: &str| {
        format!(
            r#"{{"type": "record", "name": "Address", "namespace": "com.acme", "fields": [{{"name": "zip", "type": "{zip}"}}]}}"#
        )
    };
    let customer = r#"{"type": "record", "name": "Customer", "namespace": "com.acme", "fields": [{"name": "home", "type": "com.acme.Address"}]}"#;
    let alone = c.normalize(&customer.into()).unwrap().expect_err("an unknown named type");
    assert!(alone.contains("com.acme.Address"), "{alone}");
    let v1 = Schema::new(customer).with_reference("com.acme.Address", address("string"));
    let canonical = c.normalize(&v1).unwrap().expect("valid with its reference");
    assert!(canonical.contains(r#""type":"com.acme.Address""#), "not inlined: {canonical}");
    assert!(messages(&c, CompatLevel::Full, &v1, std::slice::from_ref(&v1)).is_empty());
    let v2 = Schema::new(customer).with_reference("com.acme.Address", address("int"));
    let found = messages(&c, CompatLevel::Backward, &v2, &[v1]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("/fields/0/type/fields/0/type TYPE_MISMATCH"), "{found:?}");
    let unnamed = Schema::new(customer).with_reference("x", r#""string""#);
    let refused = c.normalize(&unnamed).unwrap().expect_err("an unnamed reference");
    assert!(refused.contains("`x` is not a named type"), "{refused}");
}

#[test]
fn json_schema_refs_name_references() {
    let c = builtin_checker("jsonschema-compat");
    let address =
        |zip: &str| format!(r#"{{"type": "object", "properties": {{"zip": {{"type": "{zip}"}}}}}}"#);
    let customer = r#"{"type": "object", "properties": {"home": {"$ref": "address.json"}}}"#;
    let alone = c.normalize(&customer.into()).unwrap().expect_err("an unknown document");
    assert!(alone.contains("address.json"), "{alone}");
    let v1 = Schema::new(customer).with_reference("address.json", address("string"));
    let canonical = c.normalize(&v1).unwrap().expect("valid with its reference");
    assert!(canonical.contains(r#""$ref":"address.json""#), "not inlined: {canonical}");
    assert!(messages(&c, CompatLevel::Full, &v1, std::slice::from_ref(&v1)).is_empty());
    let v2 = Schema::new(customer).with_reference("address.json", address("integer"));
    let found = messages(&c, CompatLevel::Backward, &v2, &[v1]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("/properties/home/properties/zip/type TYPE_CHANGED"), "{found:?}");
}

#[test]
fn protobuf_imports_are_references() {
    let c = builtin_checker("protobuf-compat");
    let address =
        |zip: &str| format!("syntax = \"proto3\";\npackage acme;\nmessage Address {{ {zip} zip = 1; }}\n");
    let customer = "syntax = \"proto3\";\npackage acme;\nimport \"address.proto\";\nmessage Customer { Address home = 1; }\n";
    let alone = c.normalize(&customer.into()).unwrap().expect_err("an unknown import");
    assert!(alone.contains("address.proto"), "{alone}");
    let v1 = Schema::new(customer).with_reference("address.proto", address("string"));
    let canonical = c.normalize(&v1).unwrap().expect("valid with its reference");
    assert!(canonical.contains("import \"address.proto\";"), "{canonical}");
    assert!(messages(&c, CompatLevel::Full, &v1, std::slice::from_ref(&v1)).is_empty());
    let v2 = Schema::new(customer).with_reference("address.proto", address("double"));
    let found = messages(&c, CompatLevel::Backward, &v2, &[v1]);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("#/Customer/1 FIELD_NAMED_TYPE_CHANGED"), "{found:?}");
}

/// The broker installs the built-ins for `COMPAT_TYPES` before compiling them:
/// the table must say what each one answers to `supports()`.
#[test]
fn the_built_in_checkers_support_the_types_the_broker_installs_them_for() {
    let names: Vec<&str> = es_plugin_host::builtin::COMPAT_TYPES.iter().map(|(name, _)| *name).collect();
    assert_eq!(names, es_plugin_host::builtin::COMPAT_NAMES);
    for (name, types) in es_plugin_host::builtin::COMPAT_TYPES {
        assert_eq!(builtin_checker(name).supports(), *types, "{name}");
    }
}
