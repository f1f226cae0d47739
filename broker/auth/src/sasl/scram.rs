//! SCRAM-SHA-256 and SCRAM-SHA-512, server side (RFC 5802, RFC 7677).
//!
//! Two client messages: client-first (`n,,n=<user>,r=<nonce>`) is answered with
//! server-first (`r=<nonce+server nonce>,s=<salt>,i=<iterations>`), client-final
//! (`c=<gs2 header>,r=<nonce>,p=<proof>`) with server-final (`v=<signature>`).
//! Channel binding: `n` and `y` are accepted, `p=` (a `-PLUS` request) is refused.
//!
//! User enumeration: a user name that names no active key gets a fake credential
//! derived from the pepper and the name (HMAC, so the salt is stable across calls and
//! looks like a real one) and the same iteration count as real keys; the handshake
//! then fails at the proof, with the same reason as a wrong password. The fake is
//! derived for every handshake, so a known user costs the same work as an unknown one.

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::grant::Principal;
use crate::key::{KeyId, Pepper};
use crate::limits::{
    SASL_USERNAME_BYTES_MAX, SCRAM_CLIENT_NONCE_BYTES_MAX, SCRAM_SALT_BYTES, SCRAM_SERVER_NONCE_BYTES,
};
use crate::sasl::{
    CredentialSource, FailReason, MechanismSession, ScramCredential, ScramMechanism, Step, StepGuard,
};

pub struct ScramSession {
    mechanism: ScramMechanism,
    source: Arc<dyn CredentialSource>,
    pepper: Pepper,
    rng: Box<dyn RngCore + Send>,
    /// Iterations of the fake credential: the count real keys are created with.
    iterations: u32,
    guard: StepGuard,
    state: State,
    /// Test hook: a fixed server nonce, to replay RFC 7677's exchange byte for byte.
    #[cfg(test)]
    fixed_server_nonce: Option<String>,
}

enum State {
    Initial,
    SentFirst(Box<Pending>),
    Ended,
}

/// What the final step needs from the first.
struct Pending {
    gs2_header: String,
    client_first_bare: String,
    server_first: String,
    nonce: String,
    /// Bytes of `nonce` that are the client's.
    client_nonce_len: usize,
    credential: ScramCredential,
    /// `None` for a fake credential: the proof is checked, then refused anyway.
    key: Option<KeyId>,
}

/// The parts of client-first that matter.
struct ClientFirst<'a> {
    gs2_header: &'a str,
    bare: &'a str,
    username: String,
    nonce: &'a str,
}

impl ScramSession {
    pub fn new(
        mechanism: ScramMechanism,
        source: Arc<dyn CredentialSource>,
        pepper: Pepper,
        rng: Box<dyn RngCore + Send>,
        iterations: u32,
    ) -> ScramSession {
        ScramSession {
            mechanism,
            source,
            pepper,
            rng,
            iterations,
            guard: StepGuard::default(),
            state: State::Initial,
            #[cfg(test)]
            fixed_server_nonce: None,
        }
    }

    #[cfg(test)]
    pub(crate) fn with_server_nonce(mut self, nonce: &str) -> ScramSession {
        self.fixed_server_nonce = Some(nonce.to_owned());
        self
    }

    fn server_nonce(&mut self) -> String {
        #[cfg(test)]
        if let Some(nonce) = &self.fixed_server_nonce {
            return nonce.clone();
        }
        let mut bytes = [0u8; SCRAM_SERVER_NONCE_BYTES];
        self.rng.fill_bytes(&mut bytes);
        STANDARD.encode(bytes)
    }

    fn first(&mut self, message: &str) -> Result<Step, FailReason> {
        let first = parse_client_first(message)?;
        let fake = fake_credential(&self.pepper, self.mechanism, &first.username, self.iterations);
        let (key, credential) = match self.source.scram_credential(&first.username, self.mechanism) {
            Some((id, credential)) => (Some(id), credential),
            None => (None, fake),
        };
        let nonce = format!("{}{}", first.nonce, self.server_nonce());
        let server_first =
            format!("r={nonce},s={},i={}", STANDARD.encode(&credential.salt), credential.iterations);
        let reply = server_first.clone().into_bytes();
        self.state = State::SentFirst(Box::new(Pending {
            gs2_header: first.gs2_header.to_owned(),
            client_first_bare: first.bare.to_owned(),
            server_first,
            client_nonce_len: first.nonce.len(),
            nonce,
            credential,
            key,
        }));
        Ok(Step::Challenge(reply))
    }

    fn last(&self, pending: &Pending, message: &str) -> Result<Step, FailReason> {
        let (without_proof, proof) = message.rsplit_once(",p=").ok_or(FailReason::Malformed("no proof"))?;
        let mut attrs = without_proof.split(',');
        let binding =
            attrs.next().and_then(|a| a.strip_prefix("c=")).ok_or(FailReason::Malformed("no c="))?;
        let nonce = attrs.next().and_then(|a| a.strip_prefix("r=")).ok_or(FailReason::Malformed("no r="))?;
        if STANDARD.decode(binding).ok().as_deref() != Some(pending.gs2_header.as_bytes()) {
            return Err(FailReason::Malformed("c= is not the gs2 header of client-first"));
        }
        if !nonce_matches(pending, nonce) {
            return Err(FailReason::Malformed("the nonce differs from the server's"));
        }
        let proof = STANDARD.decode(proof).map_err(|_| FailReason::Malformed("proof is not base64"))?;
        if proof.len() != self.mechanism.key_bytes() {
            return Err(FailReason::Malformed("proof has the wrong length"));
        }
        let auth_message = format!("{},{},{without_proof}", pending.client_first_bare, pending.server_first);
        let (valid, signature) = verify_proof(self.mechanism, &pending.credential, &auth_message, &proof);
        match (&pending.key, valid) {
            (Some(id), true) => Ok(Step::Done {
                principal: Principal::Key(id.clone()),
                final_bytes: format!("v={}", STANDARD.encode(signature)).into_bytes(),
            }),
            (Some(_), false) | (None, true | false) => Err(FailReason::InvalidCredentials),
        }
    }

    fn advance(&mut self, client_bytes: &[u8]) -> Result<Step, FailReason> {
        let message =
            std::str::from_utf8(client_bytes).map_err(|_| FailReason::Malformed("SCRAM is UTF-8"))?;
        match std::mem::replace(&mut self.state, State::Ended) {
            State::Initial => self.first(message),
            State::SentFirst(pending) => self.last(&pending, message),
            State::Ended => Err(FailReason::TooManySteps),
        }
    }
}

impl MechanismSession for ScramSession {
    fn mechanism(&self) -> &'static str {
        self.mechanism.name()
    }

    fn step(&mut self, client_bytes: &[u8]) -> Step {
        if let Err(reason) = self.guard.admit(client_bytes) {
            self.state = State::Ended;
            return Step::Failed(reason);
        }
        let step = self.advance(client_bytes).unwrap_or_else(Step::Failed);
        if !matches!(step, Step::Challenge(_)) {
            self.state = State::Ended;
        }
        self.guard.finish(step)
    }
}

/// The final nonce must be the server's. librdkafka up to at least 2.0 sends the
/// client's nonce twice (client nonce + the whole server nonce), which Kafka
/// accepts (it checks that the final nonce ends with the server's); es accepts
/// exactly that form too. Either way it holds the fresh server part, and the proof
/// signs the final message as sent, so nothing about replay changes.
fn nonce_matches(pending: &Pending, nonce: &str) -> bool {
    let client = &pending.nonce[..pending.client_nonce_len];
    nonce == pending.nonce || nonce.strip_prefix(client) == Some(pending.nonce.as_str())
}

/// Checks `proof` against the credential; returns the verdict and the server signature.
/// Both are computed whatever the verdict, so a refusal costs what a success does.
fn verify_proof(
    mechanism: ScramMechanism,
    credential: &ScramCredential,
    auth_message: &str,
    proof: &[u8],
) -> (bool, Vec<u8>) {
    let client_signature = mechanism.hmac(&credential.stored_key, auth_message.as_bytes());
    let client_key: Vec<u8> = proof.iter().zip(&client_signature).map(|(p, s)| p ^ s).collect();
    let valid: bool = mechanism.hash(&client_key).ct_eq(&credential.stored_key).into();
    (valid, mechanism.hmac(&credential.server_key, auth_message.as_bytes()))
}

/// The stable fake credential of a user name that names no key. The keys are random
/// to anyone without the pepper, so no proof verifies against them in practice (and
/// a fake never authenticates even if one did).
pub(crate) fn fake_credential(
    pepper: &Pepper,
    mechanism: ScramMechanism,
    username: &str,
    iterations: u32,
) -> ScramCredential {
    let label = mechanism.name().as_bytes();
    let salt = pepper.mac(b"es-scram-fake-salt", &[label, username.as_bytes()]);
    let seed = pepper.mac(b"es-scram-fake-key", &[label, username.as_bytes()]);
    const _: () = assert!(SCRAM_SALT_BYTES <= 32, "the fake salt is one HMAC-SHA256 output");
    ScramCredential {
        salt: salt[..SCRAM_SALT_BYTES].to_vec(),
        iterations,
        stored_key: mechanism.hmac(&seed, b"stored"),
        server_key: mechanism.hmac(&seed, b"server"),
    }
}

/// Parses `gs2-header client-first-bare`.
fn parse_client_first(message: &str) -> Result<ClientFirst<'_>, FailReason> {
    let mut gs2 = message.splitn(3, ',');
    let (Some(cbind), Some(authzid), Some(bare)) = (gs2.next(), gs2.next(), gs2.next()) else {
        return Err(FailReason::Malformed("no gs2 header"));
    };
    match cbind {
        "n" | "y" => {}
        flag if flag.starts_with("p=") => return Err(FailReason::ChannelBindingUnsupported),
        _ => return Err(FailReason::Malformed("the channel-binding flag is n, y or p=")),
    }
    let gs2_header = &message[..cbind.len() + authzid.len() + 2];
    let mut attrs = bare.split(',');
    let username = match attrs.next() {
        Some(attr) if attr.starts_with("m=") => return Err(FailReason::Malformed("mandatory extension")),
        Some(attr) => decode_saslname(attr.strip_prefix("n=").ok_or(FailReason::Malformed("no n="))?)?,
        None => return Err(FailReason::Malformed("no n=")),
    };
    let nonce = attrs.next().and_then(|a| a.strip_prefix("r=")).ok_or(FailReason::Malformed("no r="))?;
    check_nonce(nonce)?;
    // An authzid may only repeat the user name: a key never acts as another.
    if !authzid.is_empty() {
        let named = authzid.strip_prefix("a=").ok_or(FailReason::Malformed("the authzid is a=<name>"))?;
        if decode_saslname(named)? != username {
            return Err(FailReason::Malformed("authzid differs from the user name"));
        }
    }
    // Extensions after the nonce are optional by definition; none is understood.
    Ok(ClientFirst { gs2_header, bare, username, nonce })
}

/// `saslname`: `=2C` is `,` and `=3D` is `=`; any other `=` is malformed.
fn decode_saslname(text: &str) -> Result<String, FailReason> {
    if text.is_empty() || text.len() > SASL_USERNAME_BYTES_MAX {
        return Err(FailReason::Malformed("the user name is empty or too long"));
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        match rest.get(at..at + 3) {
            Some("=2C") => out.push(','),
            Some("=3D") => out.push('='),
            _ => return Err(FailReason::Malformed("bad escape in the user name")),
        }
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    if out.contains('\0') {
        return Err(FailReason::Malformed("NUL in the user name"));
    }
    Ok(out)
}

/// A nonce is 1.. printable ASCII characters other than `,`.
fn check_nonce(nonce: &str) -> Result<(), FailReason> {
    let printable = nonce.bytes().all(|b| (0x21..=0x7e).contains(&b) && b != b',');
    if nonce.is_empty() || nonce.len() > SCRAM_CLIENT_NONCE_BYTES_MAX || !printable {
        return Err(FailReason::Malformed("the nonce is empty, too long or not printable"));
    }
    Ok(())
}

#[cfg(test)]
mod tests;
