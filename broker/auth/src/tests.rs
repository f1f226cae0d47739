//! Tests of the auth state: key life cycle through commands, grants, authorization
//! and ownership, and name tricks that must not widen a grant.

use std::sync::Arc;

use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::sasl::testing::{issuer, pepper, state_with_keys};
use crate::*;

fn plain(state: &AuthState, id: &KeyId, secret: &Secret) -> Step {
    let mut session = PlainSession::new(Arc::new(state.clone()), pepper());
    session.step(format!("\0{id}\0{}", secret.encode()).as_bytes())
}

fn grant(
    key: &ApiKey,
    resource: ResourceType,
    pattern: PatternType,
    name: &str,
    operation: Operation,
) -> Grant {
    Grant { key: key.id.clone(), resource, pattern, name: name.into(), operation }
}

fn add(state: &mut AuthState, grant: Grant) {
    let command = state.plan_add_grant(grant).unwrap().expect("a new grant");
    state.apply(command).unwrap();
}

fn principal(key: &ApiKey) -> Principal {
    Principal::Key(key.id.clone())
}

#[test]
fn a_created_key_stores_only_derived_forms_and_replays_from_its_commands() {
    let pepper = pepper();
    let mut rng = StdRng::seed_from_u64(5);
    let mut state = AuthState::default();
    let issued = state.plan_create_key("billing", &mut issuer(&pepper, &mut rng, 77)).unwrap();
    assert!(state.key(&issued.key.id).is_none(), "planning changes nothing");
    let stored = serde_json::to_string(&issued.command).unwrap();
    assert!(!stored.contains(&issued.key.secret.encode()), "the secret is never stored");
    let mut replayed = AuthState::default();
    replayed.apply(serde_json::from_str(&stored).unwrap()).unwrap();
    state.apply(issued.command).unwrap();
    assert_eq!(state, replayed);
    let record = state.key(&issued.key.id).unwrap();
    assert_eq!((record.name.as_str(), record.created_ms, record.revoked_ms), ("billing", 77, None));
    assert_eq!(record.scram_sha256.iterations, 4096);
    assert_ne!(record.scram_sha256.salt, record.scram_sha512.salt);
    let snapshot = serde_json::to_string(&state).unwrap();
    assert_eq!(serde_json::from_str::<AuthState>(&snapshot).unwrap(), state);
}

#[test]
fn rotation_replaces_the_secret_at_once() {
    let (mut state, keys) = state_with_keys(&["billing"]);
    let pepper = pepper();
    let mut rng = StdRng::seed_from_u64(6);
    let issued = state.plan_rotate_key(&keys[0].id, &mut issuer(&pepper, &mut rng, 50)).unwrap();
    assert_eq!(issued.key.id, keys[0].id);
    state.apply(issued.command).unwrap();
    assert_eq!(plain(&state, &keys[0].id, &keys[0].secret), Step::Failed(FailReason::InvalidCredentials));
    assert!(matches!(plain(&state, &keys[0].id, &issued.key.secret), Step::Done { .. }));
    assert_eq!(state.key(&keys[0].id).unwrap().rotated_ms, Some(50));
}

#[test]
fn a_revoked_key_is_dead_for_good() {
    let (mut state, keys) = state_with_keys(&["billing"]);
    let key = &keys[0];
    add(&mut state, grant(key, ResourceType::Topic, PatternType::Prefixed, "billing.", Operation::Write));
    state.apply(state.plan_revoke_key(&key.id, 60).unwrap()).unwrap();
    let denied = state.authorize(&principal(key), ResourceType::Topic, "billing.x", Operation::Write);
    assert_eq!(denied, Decision::Denied(DenyReason::KeyInactive));
    assert_eq!(plain(&state, &key.id, &key.secret), Step::Failed(FailReason::InvalidCredentials));
    let pepper = pepper();
    let mut rng = StdRng::seed_from_u64(7);
    assert_eq!(state.plan_revoke_key(&key.id, 61).unwrap_err(), AuthError::KeyRevoked(key.id.to_string()));
    assert!(state.plan_rotate_key(&key.id, &mut issuer(&pepper, &mut rng, 62)).is_err());
    let again = state.plan_import_key("again", key.clone(), &mut issuer(&pepper, &mut rng, 63));
    assert_eq!(again.unwrap_err(), AuthError::KeyExists(key.id.to_string()), "ids are never reused");
    let more = grant(key, ResourceType::Topic, PatternType::Literal, "x", Operation::Read);
    assert_eq!(state.plan_add_grant(more).unwrap_err(), AuthError::KeyRevoked(key.id.to_string()));
}

#[test]
fn weak_scram_credentials_are_refused_when_planned_and_when_replayed() {
    let pepper = pepper();
    let mut rng = StdRng::seed_from_u64(4);
    let state = AuthState::default();
    let mut weak = issuer(&pepper, &mut rng, 1);
    weak.scram_iterations = 1000;
    assert!(matches!(state.plan_create_key("k", &mut weak), Err(AuthError::InvalidCredential(_))));
    let issued = state.plan_create_key("k", &mut issuer(&pepper, &mut rng, 1)).unwrap();
    let Command::CreateKey(mut record) = issued.command else { panic!("not a create") };
    record.scram_sha512 = ScramCredential::derive(ScramMechanism::Sha512, b"pw", b"salt", 1000);
    let forged = Command::CreateKey(record.clone());
    assert!(matches!(state.clone().apply(forged), Err(AuthError::InvalidCredential(_))));
    record.scram_sha256.stored_key.pop();
    assert!(matches!(state.clone().apply(Command::CreateKey(record)), Err(AuthError::InvalidCredential(_))));
}

#[test]
fn the_bootstrap_key_is_imported_as_given() {
    let pepper = pepper();
    let mut rng = StdRng::seed_from_u64(8);
    let key = ApiKey::random(&mut StdRng::seed_from_u64(99));
    let mut state = AuthState::default();
    let issued = state.plan_import_key("bootstrap", key.clone(), &mut issuer(&pepper, &mut rng, 1)).unwrap();
    state.apply(issued.command).unwrap();
    assert!(matches!(plain(&state, &key.id, &key.secret), Step::Done { .. }));
    let bad_names = ["", "a\nb", &"n".repeat(129)];
    for name in bad_names {
        let planned = state.plan_create_key(name, &mut issuer(&pepper, &mut rng, 1));
        assert!(matches!(planned, Err(AuthError::InvalidKeyName(_))), "{name:?}");
    }
}

#[test]
fn grants_deny_by_default_and_cluster_admin_is_the_superuser() {
    let (mut state, keys) = state_with_keys(&["app", "admin"]);
    let (app, admin) = (&keys[0], &keys[1]);
    let topic = |state: &AuthState, who: &Principal, name: &str, op| {
        state.authorize(who, ResourceType::Topic, name, op)
    };
    assert_eq!(
        topic(&state, &principal(app), "t", Operation::Describe),
        Decision::Denied(DenyReason::NoGrant)
    );
    assert_eq!(
        topic(&state, &Principal::Anonymous, "t", Operation::Describe),
        Decision::Denied(DenyReason::Anonymous)
    );
    let stranger = Principal::Key(KeyId::parse("ffffffffffffffff").unwrap());
    assert_eq!(topic(&state, &stranger, "t", Operation::Describe), Decision::Denied(DenyReason::KeyInactive));

    add(&mut state, grant(app, ResourceType::Topic, PatternType::Prefixed, "app.", Operation::Read));
    assert!(topic(&state, &principal(app), "app.events", Operation::Read).is_allowed());
    assert!(topic(&state, &principal(app), "app.events", Operation::Describe).is_allowed());
    assert!(!topic(&state, &principal(app), "app.events", Operation::Write).is_allowed());
    let cluster = state.authorize(&principal(app), ResourceType::Cluster, CLUSTER_NAME, Operation::Describe);
    assert_eq!(cluster, Decision::Denied(DenyReason::NoGrant));

    add(
        &mut state,
        grant(admin, ResourceType::Cluster, PatternType::Literal, CLUSTER_NAME, Operation::Admin),
    );
    for (resource, name) in
        [(ResourceType::Topic, "any"), (ResourceType::Group, "g"), (ResourceType::Cluster, "cluster")]
    {
        assert!(state.authorize(&principal(admin), resource, name, Operation::Admin).is_allowed());
    }
    let odd_cluster = state.authorize(&principal(admin), ResourceType::Cluster, "cluster2", Operation::Admin);
    assert_eq!(odd_cluster, Decision::Denied(DenyReason::InvalidName));
}

#[test]
fn granting_twice_and_removing_are_idempotent() {
    let (mut state, keys) = state_with_keys(&["app"]);
    let g = grant(&keys[0], ResourceType::Group, PatternType::Literal, "g", Operation::Read);
    add(&mut state, g.clone());
    assert_eq!(state.plan_add_grant(g.clone()).unwrap(), None);
    let removal = state.plan_remove_grant(g.clone()).unwrap();
    state.apply(removal).unwrap();
    assert_eq!(state.plan_remove_grant(g.clone()), None);
    assert!(!state.authorize_group(&principal(&keys[0]), "g", Operation::Read).is_allowed());
    let empty = Grant { name: String::new(), pattern: PatternType::Prefixed, ..g };
    assert!(matches!(state.plan_add_grant(empty), Err(AuthError::InvalidResourceName(_))));
}

#[test]
fn name_tricks_in_requests_are_denied() {
    let (mut state, keys) = state_with_keys(&["app"]);
    add(&mut state, grant(&keys[0], ResourceType::Topic, PatternType::Prefixed, "app.", Operation::Admin));
    let who = principal(&keys[0]);
    let decide = |name: &str| state.authorize(&who, ResourceType::Topic, name, Operation::Read);
    assert_eq!(decide("app.\0"), Decision::Denied(DenyReason::InvalidName));
    assert_eq!(decide("app.x\0other"), Decision::Denied(DenyReason::InvalidName));
    assert_eq!(decide(""), Decision::Denied(DenyReason::InvalidName));
    assert_eq!(decide(&format!("app.{}", "x".repeat(250))), Decision::Denied(DenyReason::InvalidName));
    for name in ["APP.x", "App.x", "аpp.x", "app", "app", "ap.p.x", "..app.x", "app\u{2024}x", " app.x"] {
        assert_eq!(decide(name), Decision::Denied(DenyReason::NoGrant), "{name:?}");
    }
    assert!(decide("app.../x").is_allowed(), "`..` is only two dots, still under the prefix");
}

#[test]
fn a_group_belongs_to_the_key_that_claimed_it() {
    let (mut state, keys) = state_with_keys(&["owner", "other", "group-admin"]);
    let (owner, other, group_admin) = (&keys[0], &keys[1], &keys[2]);
    for key in [owner, other] {
        add(&mut state, grant(key, ResourceType::Group, PatternType::Prefixed, "billing.", Operation::Read));
    }
    add(
        &mut state,
        grant(group_admin, ResourceType::Group, PatternType::Prefixed, "billing.", Operation::Admin),
    );
    let claim = state.plan_claim_group(&principal(owner), "billing.workers").unwrap().unwrap();
    state.apply(claim).unwrap();
    assert_eq!(state.plan_claim_group(&principal(owner), "billing.workers").unwrap(), None);
    assert!(state.authorize_group(&principal(owner), "billing.workers", Operation::Read).is_allowed());
    let stolen = state.authorize_group(&principal(other), "billing.workers", Operation::Read);
    assert_eq!(stolen, Decision::Denied(DenyReason::NotOwner), "an overlapping grant is not enough");
    assert!(matches!(
        state.plan_claim_group(&principal(other), "billing.workers"),
        Err(AuthError::NotOwner { .. })
    ));
    let claim_over = Command::ClaimGroup { group: "billing.workers".into(), owner: other.id.clone() };
    assert!(state.clone().apply(claim_over).is_err(), "a replayed conflicting claim is refused");
    assert!(state.authorize_group(&principal(group_admin), "billing.workers", Operation::Read).is_allowed());
    // Unowned groups follow the grants alone.
    assert!(state.authorize_group(&principal(other), "billing.fresh", Operation::Read).is_allowed());
    state.apply(Command::ReleaseGroup { group: "billing.workers".into() }).unwrap();
    assert!(state.authorize_group(&principal(other), "billing.workers", Operation::Read).is_allowed());
}

#[test]
fn a_producer_id_belongs_to_the_key_it_was_issued_to() {
    let (mut state, keys) = state_with_keys(&["owner", "other", "admin"]);
    add(
        &mut state,
        grant(&keys[2], ResourceType::Cluster, PatternType::Literal, CLUSTER_NAME, Operation::Admin),
    );
    state.apply(state.plan_claim_producer_id(&principal(&keys[0]), 1000).unwrap()).unwrap();
    assert!(state.authorize_producer_id(&principal(&keys[0]), 1000).is_allowed());
    let reuse = state.authorize_producer_id(&principal(&keys[1]), 1000);
    assert_eq!(reuse, Decision::Denied(DenyReason::NotOwner));
    assert!(state.plan_claim_producer_id(&principal(&keys[1]), 1000).is_err());
    let unissued = state.authorize_producer_id(&principal(&keys[0]), 1001);
    assert_eq!(unissued, Decision::Denied(DenyReason::NotOwner));
    assert!(state.authorize_producer_id(&principal(&keys[2]), 1000).is_allowed());
    let anonymous = state.authorize_producer_id(&Principal::Anonymous, 1000);
    assert_eq!(anonymous, Decision::Denied(DenyReason::Anonymous));
    state.apply(Command::ReleaseProducerId { producer_id: 1000 }).unwrap();
    assert!(!state.authorize_producer_id(&principal(&keys[0]), 1000).is_allowed());
}

#[test]
fn a_plugin_can_only_name_an_existing_active_key() {
    let (mut state, keys) = state_with_keys(&["app", "gone"]);
    assert_eq!(state.accept_principal(keys[0].id.as_str()), Some(principal(&keys[0])));
    state.apply(state.plan_revoke_key(&keys[1].id, 3).unwrap()).unwrap();
    for name in [keys[1].id.as_str(), "ffffffffffffffff", "admin", "", &keys[0].id.as_str().to_uppercase()] {
        assert_eq!(state.accept_principal(name), None, "{name:?}");
    }
}

/// Ways to bend a name: each yields a different byte string (or the same one).
fn bend(name: &str, how: u8) -> String {
    match how % 7 {
        0 => name.to_uppercase(),
        1 => format!("{name}\0"),
        2 => name.replacen('a', "а", 1), // Cyrillic a
        3 => name.replacen('e', "e\u{301}", 1),
        4 => name[..name.len() - 1].to_owned(),
        5 => format!("../{name}"),
        _ => format!(" {name}"),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn a_bent_name_is_allowed_only_when_its_bytes_still_match(
        name in "[a-z][a-z.]{0,11}",
        how in any::<u8>(),
        prefixed in any::<bool>(),
    ) {
        let (mut state, keys) = state_with_keys(&["app"]);
        let pattern = if prefixed { PatternType::Prefixed } else { PatternType::Literal };
        add(&mut state, grant(&keys[0], ResourceType::Topic, pattern, &name, Operation::Read));
        let bent = bend(&name, how);
        let allowed = state.authorize(&principal(&keys[0]), ResourceType::Topic, &bent, Operation::Read).is_allowed();
        let bytes_match = !bent.is_empty() && !bent.contains('\0') && if prefixed {
            bent.as_bytes().starts_with(name.as_bytes())
        } else {
            bent == name
        };
        prop_assert_eq!(allowed, bytes_match, "{:?} -> {:?}", name, bent);
    }
}

#[test]
fn a_keys_own_quota_is_set_replaced_and_cleared_by_commands() {
    let (mut state, keys) = state_with_keys(&["billing", "other"]);
    let id = &keys[0].id;
    let own = QuotaOverride { fetch_bytes_per_s: Some(1_000), ..Default::default() };
    let set = state.plan_set_quota(id, own).unwrap().expect("a change");
    assert_eq!(state.quota_of(id), QuotaOverride::default(), "planning changes nothing");
    state.apply(set).unwrap();
    assert_eq!(state.quota_of(id), own);
    assert_eq!(state.quota_of(&keys[1].id), QuotaOverride::default(), "the other key keeps the defaults");
    assert_eq!(state.plan_set_quota(id, own).unwrap(), None, "setting the same limits is a no-op");
    let zero = QuotaOverride { requests_per_s: Some(0), ..Default::default() };
    assert!(matches!(state.plan_set_quota(id, zero), Err(AuthError::InvalidQuota(_))));
    let forged = Command::SetQuota { id: id.clone(), quota: zero };
    assert!(matches!(state.clone().apply(forged), Err(AuthError::InvalidQuota(_))), "refused on replay too");
    state.apply(state.plan_set_quota(id, QuotaOverride::default()).unwrap().unwrap()).unwrap();
    assert_eq!(state.quota_of(id), QuotaOverride::default());
    assert!(!serde_json::to_string(&state).unwrap().contains("fetch_bytes_per_s"), "cleared, not kept empty");
    state.apply(state.plan_revoke_key(&keys[1].id, 9).unwrap()).unwrap();
    assert_eq!(
        state.plan_set_quota(&keys[1].id, own).unwrap_err(),
        AuthError::KeyRevoked(keys[1].id.to_string())
    );
    // A snapshot written before overrides existed has no `quotas` field.
    let mut old = serde_json::to_value(&state).unwrap();
    old.as_object_mut().unwrap().remove("quotas");
    assert_eq!(serde_json::from_value::<AuthState>(old).unwrap(), state);
}

/// The stored forms are a contract with every data directory: they never change.
#[test]
fn stored_commands_keep_their_json_form() {
    let (state, keys) = state_with_keys(&["billing"]);
    let id = keys[0].id.as_str();
    let g = grant(&keys[0], ResourceType::Topic, PatternType::Prefixed, "billing.", Operation::Write);
    let cases = [
        (
            Command::AddGrant(g),
            format!(
                r#"{{"type":"add_grant","key":"{id}","resource":"topic","pattern":"prefixed","name":"billing.","operation":"write"}}"#
            ),
        ),
        (
            state.plan_revoke_key(&keys[0].id, 17).unwrap(),
            format!(r#"{{"type":"revoke_key","id":"{id}","at_ms":17}}"#),
        ),
        (
            Command::ClaimGroup { group: "g".into(), owner: keys[0].id.clone() },
            format!(r#"{{"type":"claim_group","group":"g","owner":"{id}"}}"#),
        ),
        (
            Command::ClaimProducerId { producer_id: 4000, owner: keys[0].id.clone() },
            format!(r#"{{"type":"claim_producer_id","producer_id":4000,"owner":"{id}"}}"#),
        ),
        (
            Command::SetQuota {
                id: keys[0].id.clone(),
                quota: QuotaOverride {
                    produce_bytes_per_s: Some(5),
                    requests_per_s: Some(2),
                    ..Default::default()
                },
            },
            format!(
                r#"{{"type":"set_quota","id":"{id}","quota":{{"produce_bytes_per_s":5,"requests_per_s":2}}}}"#
            ),
        ),
    ];
    for (command, json) in cases {
        assert_eq!(serde_json::to_string(&command).unwrap(), json);
        assert_eq!(serde_json::from_str::<Command>(&json).unwrap(), command);
    }
    let record = serde_json::to_value(state.key(&keys[0].id).unwrap()).unwrap();
    // Sorted: serde_json keeps insertion order when another crate enables `preserve_order`.
    let names = |value: &serde_json::Value| {
        let mut names: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        names.sort();
        names
    };
    let fields = names(&record);
    let expected = [
        "created_ms",
        "id",
        "name",
        "revoked_ms",
        "rotated_ms",
        "scram_sha256",
        "scram_sha512",
        "secret_hash",
    ];
    assert_eq!(fields, expected);
    let scram = names(&record["scram_sha256"]);
    assert_eq!(scram, ["iterations", "salt", "server_key", "stored_key"]);
    assert!(serde_json::from_str::<Command>(r#"{"type":"revoke_key","id":"ABC","at_ms":1}"#).is_err());
}

/// One step of a random history, as indexes into the keys made so far.
#[derive(Debug, Clone)]
enum Op {
    Create,
    Rotate(usize),
    Revoke(usize),
    Grant(usize, bool),
    Claim(usize, u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        Just(Op::Create),
        any::<usize>().prop_map(Op::Rotate),
        any::<usize>().prop_map(Op::Revoke),
        (any::<usize>(), any::<bool>()).prop_map(|(k, p)| Op::Grant(k, p)),
        (any::<usize>(), 0u8..3).prop_map(|(k, g)| Op::Claim(k, g)),
    ]
}

/// Plans `op`; `None` when the planner refuses it or there is nothing to do.
fn plan(state: &AuthState, ids: &[KeyId], op: &Op, rng: &mut StdRng) -> Option<Command> {
    let pepper = pepper();
    let pick = |k: &usize| ids.get(k % ids.len().max(1)).cloned();
    match op {
        Op::Create => Some(state.plan_create_key("k", &mut issuer(&pepper, rng, 1)).ok()?.command),
        Op::Rotate(k) => Some(state.plan_rotate_key(&pick(k)?, &mut issuer(&pepper, rng, 2)).ok()?.command),
        Op::Revoke(k) => state.plan_revoke_key(&pick(k)?, 3).ok(),
        Op::Grant(k, prefixed) => {
            let pattern = if *prefixed { PatternType::Prefixed } else { PatternType::Literal };
            let g = Grant {
                key: pick(k)?,
                resource: ResourceType::Group,
                pattern,
                name: "g".into(),
                operation: Operation::Read,
            };
            state.plan_add_grant(g).ok()?
        }
        Op::Claim(k, group) => {
            state.plan_claim_group(&Principal::Key(pick(k)?), &format!("g{group}")).ok()?
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// Every planned command applies, and replaying the stored (JSON) commands on an
    /// empty state rebuilds the same state: what the broker relies on at start.
    #[test]
    fn a_stored_history_replays_to_the_same_state(ops in proptest::collection::vec(op(), 1..12)) {
        let mut rng = StdRng::seed_from_u64(11);
        let (mut state, mut ids, mut log) = (AuthState::default(), Vec::new(), Vec::new());
        for op in &ops {
            let Some(command) = plan(&state, &ids, op, &mut rng) else { continue };
            if let Command::CreateKey(record) = &command {
                ids.push(record.id.clone());
            }
            log.push(serde_json::to_string(&command).unwrap());
            state.apply(command).unwrap();
        }
        let mut replayed = AuthState::default();
        for line in &log {
            replayed.apply(serde_json::from_str(line).unwrap()).unwrap();
        }
        prop_assert_eq!(&replayed, &state);
        for (group, owner) in ["g0", "g1", "g2"].iter().filter_map(|g| state.group_owner(g).map(|o| (g, o))) {
            let owner_key = state.key(owner).unwrap();
            prop_assert!(ids.contains(&owner_key.id), "{} owned by a key that was made", group);
        }
    }
}
