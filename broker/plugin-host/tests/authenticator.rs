//! The authenticator world through `Authenticator` and `AuthSession`, against the
//! `hostile-auth` fixture and the JWT example: host lookups reach the guest, a
//! session keeps its state across steps, and every failure (trap, loop, memory
//! bomb, endless challenges) is a typed error that ends that session only.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use common::*;
use es_plugin_host::limits::{AUTH_STEP_DEADLINE_MS_DEFAULT, AUTH_STEPS_MAX};
use es_plugin_host::{AuthLookup, AuthStep, Authenticator, PluginError, PluginLimits, ScramSecret};
use hmac::{Hmac, Mac};
use sha2::Sha256;

const KEY_ID: &str = "7a19fb2d099a9557";
const HS256_KEY: &str = "a-test-key-of-at-least-thirty-two-bytes";
const NOW_MS: i64 = 1_800_000_000_000;

/// One known key and a fixed clock.
struct Keys;

impl AuthLookup for Keys {
    fn key_exists(&self, id: &str) -> bool {
        id == KEY_ID
    }
    fn scram_credential(&self, _mechanism: &str, _id: &str) -> Option<ScramSecret> {
        None
    }
    fn now_ms(&self) -> i64 {
        NOW_MS
    }
    fn random_bytes(&self, len: usize) -> Vec<u8> {
        vec![7; len]
    }
}

fn lookup() -> Arc<dyn AuthLookup> {
    Arc::new(Keys)
}

fn hostile() -> Authenticator {
    let wasm = fixture("es_fixture_hostile_auth");
    Authenticator::load(engine(), "hostile-auth", &wasm, Vec::new(), PluginLimits::auth()).expect("load")
}

fn jwt() -> Authenticator {
    let wasm = fixture("es_example_jwt");
    let config = config(&[("hs256_key", HS256_KEY)]);
    Authenticator::load(engine(), "jwt", &wasm, config, PluginLimits::auth()).expect("load jwt")
}

fn one_step(a: &Authenticator, mechanism: &str, message: &[u8]) -> Result<AuthStep, PluginError> {
    a.session(mechanism, lookup())?.step(message)
}

#[test]
fn lookups_reach_the_guest_and_sessions_keep_state() {
    let a = hostile();
    assert_eq!(a.mechanisms(), ["X-HOSTILE"]);
    assert_eq!(a.info().name, "hostile-auth");
    let ok = one_step(&a, "X-HOSTILE", format!("ok:{KEY_ID}").as_bytes()).unwrap();
    assert_eq!(ok, AuthStep::Done(KEY_ID.into()));
    assert!(matches!(one_step(&a, "X-HOSTILE", b"ok:ffffffffffffffff").unwrap(), AuthStep::Failed(_)));
    // The guest may name anything: the broker, not the host, refuses unknown keys.
    assert_eq!(one_step(&a, "X-HOSTILE", b"as:admin").unwrap(), AuthStep::Done("admin".into()));
    let mut s = a.session("X-HOSTILE", lookup()).unwrap();
    assert_eq!(s.step(b"nonce").unwrap(), AuthStep::Challenge(vec![7; 16]));
    assert_eq!(s.step(format!("ok:{KEY_ID}").as_bytes()).unwrap(), AuthStep::Done(KEY_ID.into()));
    assert!(matches!(s.step(b"ok:x"), Err(PluginError::Garbage { .. })), "no step after done");
    assert!(a.session("PLAIN", lookup()).is_err(), "a mechanism the plugin does not list");
}

#[test]
fn a_trap_fails_its_session_and_the_next_one_works() {
    let a = hostile();
    let err = one_step(&a, "X-HOSTILE", b"trap").unwrap_err();
    assert!(matches!(err, PluginError::Trap { .. }), "{err}");
    assert!(matches!(one_step(&a, "X-HOSTILE", format!("ok:{KEY_ID}").as_bytes()), Ok(AuthStep::Done(_))));
}

#[test]
fn a_loop_hits_the_step_deadline() {
    let a = hostile();
    let start = Instant::now();
    let err = one_step(&a, "X-HOSTILE", b"loop").unwrap_err();
    assert!(matches!(err, PluginError::Deadline { deadline_ms: AUTH_STEP_DEADLINE_MS_DEFAULT, .. }), "{err}");
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    assert!(matches!(one_step(&a, "X-HOSTILE", format!("ok:{KEY_ID}").as_bytes()), Ok(AuthStep::Done(_))));
}

#[test]
fn a_memory_bomb_hits_the_memory_cap() {
    let a = hostile();
    let err = one_step(&a, "X-HOSTILE", b"bomb").unwrap_err();
    assert!(matches!(err, PluginError::Memory { .. }), "{err}");
    assert!(matches!(one_step(&a, "X-HOSTILE", format!("ok:{KEY_ID}").as_bytes()), Ok(AuthStep::Done(_))));
}

#[test]
fn endless_challenges_hit_the_step_cap() {
    let a = hostile();
    let mut s = a.session("X-HOSTILE", lookup()).unwrap();
    for _ in 0..AUTH_STEPS_MAX {
        assert!(matches!(s.step(b"chatty").unwrap(), AuthStep::Challenge(_)));
    }
    assert!(matches!(s.step(b"chatty"), Err(PluginError::Garbage { .. })));
}

/// An HS256 JWT over `claims` signed with `key`.
fn token(claims: &serde_json::Value, key: &str) -> String {
    let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = URL_SAFE_NO_PAD.encode(claims.to_string());
    let signed = format!("{header}.{payload}");
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).unwrap();
    mac.update(signed.as_bytes());
    format!("{signed}.{}", URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes()))
}

fn bearer(token: &str) -> Vec<u8> {
    format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
}

#[test]
fn jwt_accepts_a_good_token_and_refuses_each_bad_one() {
    let a = jwt();
    assert_eq!(a.mechanisms(), ["OAUTHBEARER"]);
    let now_s = NOW_MS / 1000;
    let good = serde_json::json!({"sub": KEY_ID, "exp": now_s + 60});
    let step = |t: &str| one_step(&a, "OAUTHBEARER", &bearer(t)).unwrap();
    assert_eq!(step(&token(&good, HS256_KEY)), AuthStep::Done(KEY_ID.into()));
    let refused = |t: &str, why: &str| match step(t) {
        AuthStep::Failed(reason) => assert!(reason.contains(why), "{reason}"),
        other => panic!("{other:?}"),
    };
    refused(&token(&serde_json::json!({"sub": KEY_ID, "exp": now_s}), HS256_KEY), "expired");
    refused(
        &token(&serde_json::json!({"sub": KEY_ID, "exp": now_s + 60, "nbf": now_s + 30}), HS256_KEY),
        "not valid yet",
    );
    refused(&token(&good, "another-key-of-at-least-thirty-two-bytes"), "bad signature");
    refused(
        &token(&serde_json::json!({"sub": "ffffffffffffffff", "exp": now_s + 60}), HS256_KEY),
        "not an active key",
    );
    refused(&token(&serde_json::json!({"sub": KEY_ID}), HS256_KEY), "exp");
    let none = format!(
        "{}.{}.",
        URL_SAFE_NO_PAD.encode(br#"{"alg":"none"}"#),
        URL_SAFE_NO_PAD.encode(good.to_string())
    );
    refused(&none, "alg");
    match one_step(&a, "OAUTHBEARER", b"garbage").unwrap() {
        AuthStep::Failed(reason) => assert!(reason.contains("GS2"), "{reason}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn jwt_refuses_a_short_key_at_load() {
    let wasm = fixture("es_example_jwt");
    let err =
        Authenticator::load(engine(), "jwt", &wasm, config(&[("hs256_key", "short")]), PluginLimits::auth())
            .unwrap_err();
    assert!(matches!(err, PluginError::Configure { .. }), "{err}");
}

#[test]
fn each_world_refuses_the_other() {
    let err = Authenticator::load(
        engine(),
        "rules",
        es_plugin_host::builtin::RULES,
        Vec::new(),
        PluginLimits::auth(),
    )
    .unwrap_err();
    assert!(matches!(err, PluginError::WrongWorld { .. }), "{err}");
    let err = es_plugin_host::Validator::inspect(engine(), "jwt", &fixture("es_example_jwt")).unwrap_err();
    assert!(matches!(err, PluginError::WrongWorld { .. }), "{err}");
}
