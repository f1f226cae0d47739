//! Example authenticator: SASL OAUTHBEARER (RFC 7628) whose bearer token is an
//! HS256 JWT (RFC 7519) signed with a configured key. The token's `sub` claim (or
//! the configured `principal_claim`) must be the id of an active es API key; the
//! connection then has that key's grants. `exp` is required and `nbf` honoured,
//! both against the broker's clock.
//!
//! Config: `hs256_key` (the shared secret; `base64:` prefix for binary keys),
//! `principal_claim` (default `sub`), `leeway_s` (clock skew allowed, default 0).
//!
//! Every refusal is `failed` with the reason for the broker's log; the client
//! sees one generic error, whatever the reason (no oracle).

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use es_plugin_sdk::auth::broker;
use es_plugin_sdk::{AuthSession, AuthStep, Authenticator, Config, export_authenticator};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

/// Longest token accepted; longer ones are refused before decoding.
const TOKEN_BYTES_MAX: usize = 8 * 1024;

#[derive(Clone)]
struct Jwt {
    key: Vec<u8>,
    principal_claim: String,
    leeway_s: i64,
}

impl Authenticator for Jwt {
    const NAME: &'static str = "jwt";
    const VERSION: &'static str = "0.1.0";
    const DESCRIPTION: &'static str = "OAUTHBEARER with HS256 JWTs whose subject is an es API key id.";
    const CONFIG_KEYS: &'static [&'static str] = &["hs256_key", "principal_claim", "leeway_s"];
    const MECHANISMS: &'static [&'static str] = &["OAUTHBEARER"];

    type Session = Session;

    fn configure(config: &Config) -> Result<Self, String> {
        config.reject_unknown(Self::CONFIG_KEYS)?;
        let text = config.require("hs256_key")?;
        let key = match text.strip_prefix("base64:") {
            Some(b64) => STANDARD.decode(b64).map_err(|e| format!("hs256_key: {e}"))?,
            None => text.as_bytes().to_vec(),
        };
        // RFC 7518 3.2: an HS256 key must be at least as long as the hash.
        if key.len() < 32 {
            return Err("hs256_key must be at least 32 bytes".into());
        }
        let principal_claim = config.get("principal_claim").unwrap_or("sub").to_owned();
        let leeway_s = config.parse::<i64>("leeway_s")?.unwrap_or(0).max(0);
        Ok(Jwt { key, principal_claim, leeway_s })
    }

    fn start(&self, _mechanism: &str) -> Session {
        Session { jwt: self.clone(), done: false }
    }
}

struct Session {
    jwt: Jwt,
    done: bool,
}

impl AuthSession for Session {
    fn step(&mut self, response: &[u8]) -> AuthStep {
        // OAUTHBEARER is one client message; anything after it is a protocol error.
        if std::mem::replace(&mut self.done, true) {
            return AuthStep::Failed("OAUTHBEARER takes one message".into());
        }
        match bearer_token(response).and_then(|token| self.jwt.verify(token)) {
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

impl Jwt {
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
        // Only HS256: `none` and any other algorithm are refused, whatever the
        // token claims (the algorithm comes from configuration, not the token).
        if header.get("alg").and_then(Value::as_str) != Some("HS256") {
            return Err("the token's alg is not HS256".into());
        }
        self.check_signature(&token[..header_len(token)], signature)?;
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

    fn check_signature(&self, signed: &str, signature: &str) -> Result<(), String> {
        let signature =
            URL_SAFE_NO_PAD.decode(signature).map_err(|_| "signature is not base64url".to_owned())?;
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).map_err(|e| e.to_string())?;
        mac.update(signed.as_bytes());
        // Constant-time comparison.
        mac.verify_slice(&signature).map_err(|_| "bad signature".to_owned())
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
