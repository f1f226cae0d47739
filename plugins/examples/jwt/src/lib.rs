//! Example authenticator: SASL OAUTHBEARER (RFC 7628) whose bearer token is a
//! JWT (RFC 7519) signed with HS256 (a shared secret) or RS256 (an RSA key whose
//! public half is configured). The token's `sub` claim (or the configured
//! `principal_claim`) must be the id of an active es API key; the connection then
//! has that key's grants. `exp` is required and `nbf` honoured, both against the
//! broker's clock.
//!
//! Config: `hs256_key` (the shared secret; `base64:` prefix for binary keys),
//! `rs256_public_key` (a PEM public key, SubjectPublicKeyInfo or PKCS#1), at least
//! one of the two; `principal_claim` (default `sub`), `leeway_s` (clock skew
//! allowed, default 0). A token is checked with the key of the algorithm its
//! header names, and refused when that algorithm has no configured key: the
//! RSA public key is never taken for an HMAC secret (the "alg confusion" attack).
//!
//! Every refusal is `failed` with the reason for the broker's log; the client
//! sees one generic error, whatever the reason (no oracle).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use es_plugin_sdk::auth::broker;
use es_plugin_sdk::{AuthSession, AuthStep, Authenticator, Config, export_authenticator};
use hmac::{Hmac, Mac};
use rsa::RsaPublicKey;
use rsa::pkcs1::DecodeRsaPublicKey as _;
use rsa::pkcs1v15::{Signature, VerifyingKey};
use rsa::pkcs8::DecodePublicKey as _;
use rsa::signature::Verifier as _;
use serde_json::Value;
use sha2::Sha256;
use std::rc::Rc;

/// Longest token accepted; longer ones are refused before decoding.
const TOKEN_BYTES_MAX: usize = 8 * 1024;
/// RSA modulus sizes accepted: below 2048 bits is breakable (NIST SP 800-131A),
/// above 8192 makes each check slow for no gain.
const RSA_BITS: std::ops::RangeInclusive<usize> = 2048..=8192;

/// The plugin: its configuration, parsed once and shared by every session.
struct Jwt(Rc<Keys>);

/// The configured keys and claim rules.
struct Keys {
    hs256: Option<Vec<u8>>,
    rs256: Option<VerifyingKey<Sha256>>,
    principal_claim: String,
    leeway_s: i64,
}

impl Authenticator for Jwt {
    const NAME: &'static str = "jwt";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str =
        "OAUTHBEARER with HS256 or RS256 JWTs whose subject is an es API key id.";
    const CONFIG_KEYS: &'static [&'static str] =
        &["hs256_key", "rs256_public_key", "principal_claim", "leeway_s"];
    const MECHANISMS: &'static [&'static str] = &["OAUTHBEARER"];

    type Session = Session;

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        let hs256 = config.get("hs256_key").map(hs256_key).transpose()?;
        let rs256 = config.get("rs256_public_key").map(rs256_key).transpose()?;
        if hs256.is_none() && rs256.is_none() {
            return Err("configure hs256_key, rs256_public_key or both".into());
        }
        let principal_claim = config.get("principal_claim").unwrap_or("sub").to_owned();
        let leeway_s = config.parse::<i64>("leeway_s")?.unwrap_or(0).max(0);
        Ok(Jwt(Rc::new(Keys { hs256, rs256, principal_claim, leeway_s })))
    }

    fn start(&self, _mechanism: &str) -> Session {
        Session { keys: Rc::clone(&self.0), done: false }
    }
}

/// The HS256 secret of `text`: at least as long as the hash (RFC 7518 3.2).
fn hs256_key(text: &str) -> Result<Vec<u8>, String> {
    let key = match text.strip_prefix("base64:") {
        Some(b64) => STANDARD.decode(b64).map_err(|e| format!("hs256_key: {e}"))?,
        None => text.as_bytes().to_vec(),
    };
    if key.len() < 32 {
        return Err("hs256_key must be at least 32 bytes".into());
    }
    Ok(key)
}

/// The RS256 verifying key of a PEM `PUBLIC KEY` (SubjectPublicKeyInfo, what
/// `openssl pkey -pubout` writes) or `RSA PUBLIC KEY` (PKCS#1).
fn rs256_key(pem: &str) -> Result<VerifyingKey<Sha256>, String> {
    let pem = pem.trim();
    let key = RsaPublicKey::from_public_key_pem(pem)
        .or_else(|_| RsaPublicKey::from_pkcs1_pem(pem))
        .map_err(|e| format!("rs256_public_key is not a PEM RSA public key: {e}"))?;
    let bits = rsa::traits::PublicKeyParts::size(&key) * 8;
    if !RSA_BITS.contains(&bits) {
        return Err(format!("rs256_public_key has {bits} bits; 2048 to 8192 are accepted"));
    }
    Ok(VerifyingKey::new(key))
}

struct Session {
    keys: Rc<Keys>,
    done: bool,
}

impl AuthSession for Session {
    fn step(&mut self, response: &[u8]) -> AuthStep {
        // OAUTHBEARER is one client message; anything after it is a protocol error.
        if std::mem::replace(&mut self.done, true) {
            return AuthStep::Failed("OAUTHBEARER takes one message".into());
        }
        match bearer_token(response).and_then(|token| self.keys.verify(token)) {
            Ok(id) => AuthStep::Done(id),
            Err(reason) => AuthStep::Failed(reason),
        }
    }
}

/// The token of an RFC 7628 initial client response:
/// `gs2-header \x01 *(key=value \x01) \x01`, with `auth=Bearer <token>`.
fn bearer_token(message: &[u8]) -> Result<&str, String> {
    let text = std::str::from_utf8(message).map_err(|_| "the message is not UTF-8".to_owned())?;
    let mut parts = text.split('\x01');
    let gs2 = parts.next().unwrap_or_default();
    if !(gs2.starts_with("n,") || gs2.starts_with("y,")) {
        return Err("no GS2 header (channel binding is not supported)".into());
    }
    parts
        .find_map(|kv| kv.strip_prefix("auth="))
        .and_then(|auth| auth.strip_prefix("Bearer ").or_else(|| auth.strip_prefix("bearer ")))
        .map(str::trim)
        .ok_or_else(|| "no `auth=Bearer` in the message".to_owned())
}

impl Keys {
    /// The key id the token names, if its signature, times and key check out.
    fn verify(&self, token: &str) -> Result<String, String> {
        if token.len() > TOKEN_BYTES_MAX {
            return Err("token too long".into());
        }
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("a JWS compact token has three parts".into());
        };
        let header: Value = decode_json(header, "header")?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or_default();
        self.check_signature(alg, &token[..header_len(token)], signature)?;
        let claims: Value = decode_json(payload, "payload")?;
        self.check_times(&claims)?;
        let id = claims
            .get(&self.principal_claim)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("no string claim `{}`", self.principal_claim))?;
        if !broker::key_exists(id) {
            return Err(format!("`{id}` is not an active key"));
        }
        Ok(id.to_owned())
    }

    /// Checks `signature` over `signed` with the configured key of `alg`. Only
    /// HS256 and RS256, each only when its key is configured: `none` and any other
    /// algorithm are refused whatever the token claims.
    fn check_signature(&self, alg: &str, signed: &str, signature: &str) -> Result<(), String> {
        let signature =
            URL_SAFE_NO_PAD.decode(signature).map_err(|_| "signature is not base64url".to_owned())?;
        match (alg, &self.hs256, &self.rs256) {
            ("HS256", Some(key), _) => {
                let mut mac = Hmac::<Sha256>::new_from_slice(key).map_err(|e| e.to_string())?;
                mac.update(signed.as_bytes());
                // Constant-time comparison.
                mac.verify_slice(&signature).map_err(|_| "bad signature".to_owned())
            }
            ("RS256", _, Some(key)) => {
                let signature =
                    Signature::try_from(signature.as_slice()).map_err(|_| "bad signature".to_owned())?;
                key.verify(signed.as_bytes(), &signature).map_err(|_| "bad signature".to_owned())
            }
            _ => Err(format!("the token's alg `{alg}` has no configured key")),
        }
    }

    fn check_times(&self, claims: &Value) -> Result<(), String> {
        let now_s = broker::now_ms().div_euclid(1000);
        let exp = claims.get("exp").and_then(Value::as_i64).ok_or("no numeric `exp` claim")?;
        if now_s >= exp.saturating_add(self.leeway_s) {
            return Err("the token has expired".into());
        }
        if let Some(nbf) = claims.get("nbf") {
            let nbf = nbf.as_i64().ok_or("`nbf` is not a number")?;
            if now_s.saturating_add(self.leeway_s) < nbf {
                return Err("the token is not valid yet".into());
            }
        }
        Ok(())
    }
}

/// Length of `header.payload`, the signed part.
fn header_len(token: &str) -> usize {
    token.rfind('.').unwrap_or(0)
}

fn decode_json(part: &str, what: &str) -> Result<Value, String> {
    let bytes = URL_SAFE_NO_PAD.decode(part).map_err(|_| format!("the {what} is not base64url"))?;
    serde_json::from_slice(&bytes).map_err(|_| format!("the {what} is not JSON"))
}

export_authenticator!(Jwt);
