//! Test helpers: a state holding keys, and a SCRAM client written from RFC 5802 to
//! drive the server sessions.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::key::{ApiKey, Pepper};
use crate::limits::SCRAM_ITERATIONS_DEFAULT;
use crate::sasl::{ScramMechanism, ScramSession};
use crate::state::{AuthState, Issuer};

pub(crate) fn pepper() -> Pepper {
    Pepper::new([42; 32])
}

pub(crate) fn issuer<'a>(pepper: &'a Pepper, rng: &'a mut StdRng, now_ms: i64) -> Issuer<'a> {
    Issuer { pepper, rng, scram_iterations: SCRAM_ITERATIONS_DEFAULT, now_ms }
}

/// A state holding one active key per name, and those keys.
pub(crate) fn state_with_keys(names: &[&str]) -> (AuthState, Vec<ApiKey>) {
    let pepper = pepper();
    let mut rng = StdRng::seed_from_u64(1);
    let mut state = AuthState::default();
    let mut keys = Vec::new();
    for name in names {
        let issued = state.plan_create_key(name, &mut issuer(&pepper, &mut rng, 1_000)).unwrap();
        state.apply(issued.command).unwrap();
        keys.push(issued.key);
    }
    (state, keys)
}

pub(crate) fn scram_session(state: &AuthState, mechanism: ScramMechanism, seed: u64) -> ScramSession {
    let source = Arc::new(state.clone());
    ScramSession::new(
        mechanism,
        source,
        pepper(),
        Box::new(StdRng::seed_from_u64(seed)),
        SCRAM_ITERATIONS_DEFAULT,
    )
}

/// The client side of one SCRAM exchange.
pub(crate) struct ScramClient {
    mechanism: ScramMechanism,
    gs2_header: String,
    first_bare: String,
    password: String,
    server_signature: Vec<u8>,
}

impl ScramClient {
    pub(crate) fn new(mechanism: ScramMechanism, user: &str, password: &str, nonce: &str) -> ScramClient {
        let user = user.replace('=', "=3D").replace(',', "=2C");
        ScramClient {
            mechanism,
            gs2_header: "n,,".into(),
            first_bare: format!("n={user},r={nonce}"),
            password: password.into(),
            server_signature: Vec::new(),
        }
    }

    pub(crate) fn with_gs2_header(mut self, header: &str) -> ScramClient {
        self.gs2_header = header.into();
        self
    }

    pub(crate) fn first(&self) -> Vec<u8> {
        format!("{}{}", self.gs2_header, self.first_bare).into_bytes()
    }

    /// client-final for `server_first`, remembering the signature to expect.
    pub(crate) fn last(&mut self, server_first: &[u8]) -> Vec<u8> {
        let text = std::str::from_utf8(server_first).unwrap();
        let nonce = text.split(',').find_map(|a| a.strip_prefix("r=")).expect("r=").to_owned();
        self.last_with_nonce(server_first, &nonce)
    }

    /// client-final sending `nonce` as its `r=` (a client may get it wrong).
    pub(crate) fn last_with_nonce(&mut self, server_first: &[u8], nonce: &str) -> Vec<u8> {
        let server_first = std::str::from_utf8(server_first).unwrap();
        let attr = |name: &str| {
            server_first.split(',').find_map(|a| a.strip_prefix(name)).unwrap_or_else(|| panic!("{name}"))
        };
        let salt = STANDARD.decode(attr("s=")).unwrap();
        let iterations: u32 = attr("i=").parse().unwrap();
        let m = self.mechanism;
        let salted = m.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = m.hmac(&salted, b"Client Key");
        let stored_key = m.hash(&client_key);
        let without_proof = format!("c={},r={nonce}", STANDARD.encode(&self.gs2_header));
        let auth_message = format!("{},{server_first},{without_proof}", self.first_bare);
        let signature = m.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key.iter().zip(&signature).map(|(k, s)| k ^ s).collect();
        self.server_signature = m.hmac(&m.hmac(&salted, b"Server Key"), auth_message.as_bytes());
        format!("{without_proof},p={}", STANDARD.encode(proof)).into_bytes()
    }

    pub(crate) fn expected_final(&self) -> Vec<u8> {
        format!("v={}", STANDARD.encode(&self.server_signature)).into_bytes()
    }
}
