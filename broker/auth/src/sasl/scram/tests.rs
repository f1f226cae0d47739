//! SCRAM server tests: RFC 7677's exchange byte for byte, round trips over both
//! mechanisms, the unknown-user disguise, channel binding and malformed messages.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use proptest::prelude::*;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::*;
use crate::sasl::testing::{ScramClient, pepper, scram_session, state_with_keys};
use crate::state::AuthState;

/// RFC 7677 §3's user, as a source that maps `user` to one key.
struct RfcSource(ScramCredential);

impl CredentialSource for RfcSource {
    fn secret_hash(&self, _: &KeyId) -> Option<crate::key::SecretHash> {
        None
    }
    fn scram_credential(&self, username: &str, _: ScramMechanism) -> Option<(KeyId, ScramCredential)> {
        (username == "user").then(|| (KeyId::parse("0123456789abcdef").unwrap(), self.0.clone()))
    }
}

#[test]
fn rfc_7677_exchange_is_reproduced_byte_for_byte() {
    let salt = STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let credential = ScramCredential::derive(ScramMechanism::Sha256, b"pencil", &salt, 4096);
    let rng = Box::new(StdRng::seed_from_u64(0));
    let mut session =
        ScramSession::new(ScramMechanism::Sha256, Arc::new(RfcSource(credential)), pepper(), rng, 4096)
            .with_server_nonce("%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
    let first = session.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let expected = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    assert_eq!(first, Step::Challenge(expected.as_bytes().to_vec()));
    let last = session.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
    );
    let Step::Done { principal, final_bytes } = last else { panic!("{last:?}") };
    assert_eq!(principal, Principal::Key(KeyId::parse("0123456789abcdef").unwrap()));
    assert_eq!(final_bytes, b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    assert_eq!(session.step(b"n,,n=user,r=x"), Step::Failed(FailReason::TooManySteps));
}

fn exchange(state: &AuthState, mechanism: ScramMechanism, client: &mut ScramClient) -> Step {
    let mut session = scram_session(state, mechanism, 9);
    let Step::Challenge(server_first) = session.step(&client.first()) else { panic!("no challenge") };
    session.step(&client.last(&server_first))
}

#[test]
fn both_mechanisms_round_trip_with_a_real_key() {
    let (state, keys) = state_with_keys(&["billing"]);
    let key = &keys[0];
    for mechanism in ScramMechanism::ALL {
        let mut client =
            ScramClient::new(mechanism, key.id.as_str(), &key.secret.encode(), "fyko+d2lbbFgONRv9qkxdawL");
        let step = exchange(&state, mechanism, &mut client);
        let expected =
            Step::Done { principal: Principal::Key(key.id.clone()), final_bytes: client.expected_final() };
        assert_eq!(step, expected, "{}", mechanism.name());
    }
}

#[test]
fn a_wrong_password_fails_at_the_proof() {
    let (state, keys) = state_with_keys(&["billing"]);
    let wrong = crate::key::Secret::random(&mut StdRng::seed_from_u64(3)).encode();
    let mut client = ScramClient::new(ScramMechanism::Sha512, keys[0].id.as_str(), &wrong, "abc");
    assert_eq!(
        exchange(&state, ScramMechanism::Sha512, &mut client),
        Step::Failed(FailReason::InvalidCredentials)
    );
}

/// server-first, with the random server nonce cut out.
fn server_first_of(state: &AuthState, mechanism: ScramMechanism, user: &str, seed: u64) -> (String, String) {
    let mut session = scram_session(state, mechanism, seed);
    let Step::Challenge(bytes) = session.step(format!("n,,n={user},r=clientnonce").as_bytes()) else {
        panic!("no challenge")
    };
    let text = String::from_utf8(bytes).unwrap();
    let (nonce, rest) = text.split_once(',').unwrap();
    (nonce.to_owned(), rest.to_owned())
}

#[test]
fn an_unknown_user_looks_like_a_known_one_and_its_salt_is_stable() {
    let (mut state, keys) = state_with_keys(&["billing", "revoked"]);
    state.apply(state.plan_revoke_key(&keys[1].id, 5).unwrap()).unwrap();
    let known = keys[0].id.as_str();
    for mechanism in ScramMechanism::ALL {
        let (known_nonce, known_rest) = server_first_of(&state, mechanism, known, 1);
        for unknown in ["ffffffffffffffff", keys[1].id.as_str(), "admin"] {
            let (nonce, rest) = server_first_of(&state, mechanism, unknown, 2);
            // Same shape: nonce length, salt length, iteration count.
            assert_eq!(nonce.len(), known_nonce.len());
            assert_eq!(rest.len(), known_rest.len(), "{rest} vs {known_rest}");
            assert!(rest.ends_with(",i=4096") && known_rest.ends_with(",i=4096"));
            assert_ne!(rest, known_rest);
            // Stable across sessions with other nonces, unlike a fresh random salt.
            let (again_nonce, again) = server_first_of(&state, mechanism, unknown, 3);
            assert_eq!(again, rest);
            assert_ne!(again_nonce, nonce);
        }
        let (_, a) = server_first_of(&state, mechanism, "ffffffffffffffff", 1);
        let (_, b) = server_first_of(&state, mechanism, "fffffffffffffffe", 1);
        assert_ne!(a, b, "each name has its own fake salt");
    }
    let (_, sha256) = server_first_of(&state, ScramMechanism::Sha256, "admin", 1);
    let (_, sha512) = server_first_of(&state, ScramMechanism::Sha512, "admin", 1);
    assert_ne!(sha256, sha512);
}

#[test]
fn an_unknown_user_fails_exactly_as_a_wrong_password_does() {
    let (state, keys) = state_with_keys(&["billing"]);
    let password = keys[0].secret.encode();
    let mut unknown = ScramClient::new(ScramMechanism::Sha256, "ffffffffffffffff", &password, "n1");
    let mut wrong = ScramClient::new(ScramMechanism::Sha256, keys[0].id.as_str(), "not-the-secret", "n1");
    let a = exchange(&state, ScramMechanism::Sha256, &mut unknown);
    let b = exchange(&state, ScramMechanism::Sha256, &mut wrong);
    assert_eq!(a, Step::Failed(FailReason::InvalidCredentials));
    assert_eq!(a, b);
}

#[test]
fn channel_binding_is_refused_but_y_and_n_are_accepted() {
    let (state, keys) = state_with_keys(&["billing"]);
    let (id, password) = (keys[0].id.as_str(), keys[0].secret.encode());
    let mut session = scram_session(&state, ScramMechanism::Sha256, 1);
    let plus = format!("p=tls-server-end-point,,n={id},r=abc");
    assert_eq!(session.step(plus.as_bytes()), Step::Failed(FailReason::ChannelBindingUnsupported));
    for header in ["y,,", "n,,", &format!("n,a={id},")] {
        let mut client =
            ScramClient::new(ScramMechanism::Sha256, id, &password, "abc").with_gs2_header(header);
        let step = exchange(&state, ScramMechanism::Sha256, &mut client);
        assert!(matches!(step, Step::Done { .. }), "{header}: {step:?}");
    }
}

#[test]
fn the_final_message_must_echo_the_header_and_nonce() {
    let (state, keys) = state_with_keys(&["billing"]);
    let tamper = |from: &str, to: &str| {
        let mut client =
            ScramClient::new(ScramMechanism::Sha256, keys[0].id.as_str(), &keys[0].secret.encode(), "abc");
        let mut session = scram_session(&state, ScramMechanism::Sha256, 1);
        let Step::Challenge(first) = session.step(&client.first()) else { panic!("no challenge") };
        let last = String::from_utf8(client.last(&first)).unwrap().replacen(from, to, 1);
        session.step(last.as_bytes())
    };
    let malformed = |what| Step::Failed(FailReason::Malformed(what));
    assert_eq!(tamper("c=biws", "c=eSws"), malformed("c= is not the gs2 header of client-first"));
    assert_eq!(tamper(",r=abc", ",r=abd"), malformed("the nonce differs from the server's"));
    assert_eq!(tamper(",p=", ",p=AAAA"), malformed("proof has the wrong length"));
    assert_eq!(tamper("c=biws", "x=1"), malformed("no c="));
    // An extension changes the signed message, so the proof no longer verifies.
    assert_eq!(tamper(",p=", ",x=y,p="), Step::Failed(FailReason::InvalidCredentials));
}

#[test]
fn client_first_grammar() {
    let (state, _) = state_with_keys(&["billing"]);
    let first = |message: &str| scram_session(&state, ScramMechanism::Sha256, 1).step(message.as_bytes());
    let malformed = |message: &str| matches!(first(message), Step::Failed(FailReason::Malformed(_)));
    assert!(malformed("n,,m=ext,n=user,r=abc"), "mandatory extensions are refused");
    assert!(malformed("n,,n=us=2Ger,r=abc"), "bad escape");
    assert!(malformed("n,,n=,r=abc"));
    assert!(malformed("n,,n=user,r="));
    assert!(malformed("n,,n=user,r=a b"));
    assert!(malformed("n,,n=user"));
    assert!(malformed("x,,n=user,r=abc"));
    assert!(malformed("n,a=other,n=user,r=abc"));
    assert!(malformed("n,b=user,n=user,r=abc"));
    assert!(malformed("n,,n=us\0er,r=abc"));
    assert!(matches!(first("n,,n=us=2Cer=3D,r=abc,ext=1"), Step::Challenge(_)));
    assert_eq!(decode_saslname("a=2Cb=3Dc").unwrap(), "a,b=c");
}

#[test]
fn sizes_and_steps_are_bounded() {
    let (state, _) = state_with_keys(&["billing"]);
    let mut session = scram_session(&state, ScramMechanism::Sha256, 1);
    let huge = format!("n,,n=user,r={}", "a".repeat(crate::limits::SASL_MESSAGE_BYTES_MAX));
    assert_eq!(session.step(huge.as_bytes()), Step::Failed(FailReason::TooLarge));
    assert_eq!(session.step(b"n,,n=user,r=abc"), Step::Failed(FailReason::TooManySteps));
    let long_nonce = format!("n,,n=user,r={}", "a".repeat(crate::limits::SCRAM_CLIENT_NONCE_BYTES_MAX + 1));
    let mut session = scram_session(&state, ScramMechanism::Sha256, 1);
    assert!(matches!(session.step(long_nonce.as_bytes()), Step::Failed(FailReason::Malformed(_))));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn arbitrary_messages_never_panic_or_authenticate(
        first in proptest::collection::vec(any::<u8>(), 0..200),
        last in proptest::collection::vec(any::<u8>(), 0..200),
    ) {
        let state = AuthState::default();
        let mut session = scram_session(&state, ScramMechanism::Sha256, 1);
        for message in [first, last.clone(), last] {
            let authenticated = matches!(session.step(&message), Step::Done { .. });
            prop_assert!(!authenticated);
        }
    }
}

#[test]
fn sessions_are_chosen_by_mechanism_name_behind_one_trait() {
    let (state, keys) = state_with_keys(&["billing"]);
    let source: Arc<dyn CredentialSource> = Arc::new(state.clone());
    let make = |name: &str| -> Option<Box<dyn MechanismSession>> {
        if name == "PLAIN" {
            return Some(Box::new(crate::sasl::PlainSession::new(source.clone(), pepper())));
        }
        let mechanism = ScramMechanism::from_name(name)?;
        Some(Box::new(ScramSession::new(
            mechanism,
            source.clone(),
            pepper(),
            Box::new(StdRng::seed_from_u64(1)),
            4096,
        )))
    };
    for name in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] {
        assert_eq!(make(name).unwrap().mechanism(), name);
    }
    assert!(make("SCRAM-SHA-256-PLUS").is_none() && make("scram-sha-256").is_none());
    let mut plain = make("PLAIN").unwrap();
    let step = plain.step(format!("\0{}\0{}", keys[0].id, keys[0].secret.encode()).as_bytes());
    assert!(matches!(step, Step::Done { .. }));
}

#[test]
fn a_replayed_final_message_fails_in_a_new_session_and_in_the_old_one() {
    let (state, keys) = state_with_keys(&["billing"]);
    let key = &keys[0];
    let mut client = ScramClient::new(ScramMechanism::Sha256, key.id.as_str(), &key.secret.encode(), "abc");
    let mut session = scram_session(&state, ScramMechanism::Sha256, 1);
    let Step::Challenge(first) = session.step(&client.first()) else { panic!("no challenge") };
    let last = client.last(&first);
    assert!(matches!(session.step(&last), Step::Done { .. }));
    // The same session is over: a second final is refused.
    assert_eq!(session.step(&last), Step::Failed(FailReason::TooManySteps));
    // A new session draws a fresh server nonce, so the recorded final no longer fits.
    let mut replay = scram_session(&state, ScramMechanism::Sha256, 2);
    assert!(matches!(replay.step(&client.first()), Step::Challenge(_)));
    assert_eq!(
        replay.step(&last),
        Step::Failed(FailReason::Malformed("the nonce differs from the server's"))
    );
    // A final with no client-first before it is not a client-first either.
    assert!(matches!(scram_session(&state, ScramMechanism::Sha256, 3).step(&last), Step::Failed(_)));
}

#[test]
fn a_proof_from_another_password_or_mechanism_fails() {
    let (state, keys) = state_with_keys(&["billing", "other"]);
    let (key, other) = (&keys[0], &keys[1]);
    // The right user with another key's secret.
    let mut client = ScramClient::new(ScramMechanism::Sha512, key.id.as_str(), &other.secret.encode(), "n1");
    assert_eq!(
        exchange(&state, ScramMechanism::Sha512, &mut client),
        Step::Failed(FailReason::InvalidCredentials)
    );
    // A SHA-256 proof sent to a SHA-512 session has the wrong length.
    let mut client = ScramClient::new(ScramMechanism::Sha256, key.id.as_str(), &key.secret.encode(), "n2");
    let mut session = scram_session(&state, ScramMechanism::Sha512, 4);
    let Step::Challenge(first) = session.step(&client.first()) else { panic!("no challenge") };
    assert_eq!(
        session.step(&client.last(&first)),
        Step::Failed(FailReason::Malformed("proof has the wrong length"))
    );
}

#[test]
fn librdkafkas_doubled_client_nonce_is_accepted_and_nothing_else() {
    let (state, keys) = state_with_keys(&["billing"]);
    let key = &keys[0];
    let run = |edit: &dyn Fn(&str) -> String| {
        let mut client =
            ScramClient::new(ScramMechanism::Sha256, key.id.as_str(), &key.secret.encode(), "cn");
        let mut session = scram_session(&state, ScramMechanism::Sha256, 5);
        let Step::Challenge(first) = session.step(&client.first()) else { panic!("no challenge") };
        let text = String::from_utf8(first.clone()).unwrap();
        let nonce = text.split(',').find_map(|a| a.strip_prefix("r=")).unwrap().to_owned();
        // The client signs its final message as sent, so only the nonce check can refuse it.
        let last = client.last_with_nonce(&first, &edit(&nonce));
        session.step(&last)
    };
    assert!(matches!(run(&|n| n.to_owned()), Step::Done { .. }));
    assert!(matches!(run(&|n| format!("cn{n}")), Step::Done { .. }), "librdkafka's form");
    let refused = Step::Failed(FailReason::Malformed("the nonce differs from the server's"));
    assert_eq!(run(&|n| format!("xx{n}")), refused);
    assert_eq!(run(&|n| format!("cncn{n}")), refused);
    assert_eq!(run(&|n| n[..n.len() - 1].to_owned()), refused);
}
