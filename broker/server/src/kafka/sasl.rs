//! SASL on the Kafka listener: SaslHandshake (v1) and SaslAuthenticate (v0-2) over
//! es-auth's mechanism sessions, and the gate every other request passes.
//!
//! With auth on, a connection starts unauthenticated: only ApiVersions and the SASL
//! exchange are served, under a small frame cap, and anything else closes it (as
//! Kafka does). A successful exchange sets the connection's principal, which every
//! later request hands to the service, so the one authorization table decides.
//! KIP-368: SaslAuthenticate v1+ tells the client how long its login lasts; it may
//! re-authenticate on the same connection (same mechanism, same key) before then,
//! and a connection that has not is closed at its next request, or when idle. A
//! failed exchange is answered once and the connection closed; failures count
//! against the auth-failure limits HTTP and binary logins share, and an address or
//! key id over them has its answer held back.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use es_auth::{KeyId, MechanismSession, Step};
use es_kafka::kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse,
};
use es_kafka::{FrameLimits, Header, KafkaRequest};

use super::dispatch::{self, Pending, Reply};
use super::error::code;
use super::sb;
use crate::auth::{Auth, AuthFailure};
use crate::limits::{KAFKA_AUTH_FAILURE_DELAY_MS_MAX, KAFKA_PRE_AUTH_FRAME_BYTES_MAX};
use crate::service::Principal;

use crate::auth::mechanisms::PLAIN;

/// One connection's authentication state.
pub struct SaslConn {
    /// Auth off: every connection is anonymous from the start and SASL is refused.
    enabled: bool,
    /// PLAIN is offered over TLS, or on a plaintext listener when allowed.
    plain_offered: bool,
    /// The configured mechanisms, in order (`--auth-mechanisms`).
    configured: Vec<&'static str>,
    lifetime_ms: u64,
    /// The key the connection is logged in as; `None` before the first login.
    principal: Option<Principal>,
    /// The mechanism of the login in force (a re-authentication must keep it).
    mechanism: Option<&'static str>,
    /// An exchange between SaslHandshake and its final SaslAuthenticate.
    exchange: Option<Exchange>,
    /// KIP-368: when the login in force ends.
    expires_at: Option<Instant>,
}

struct Exchange {
    mechanism: &'static str,
    session: Box<dyn MechanismSession>,
    /// The key id the client named, for the per-key failure limit.
    user: Option<KeyId>,
}

/// What the connection does with a decoded request.
pub enum Gate {
    /// Serve it as this principal.
    Serve(Principal),
    /// A SASL request: [`SaslConn::answer`] it, in order, before reading on.
    Sasl,
    /// Close the connection without an answer.
    Close(&'static str),
}

/// The answer to a SASL request, and whether the connection closes after it.
pub struct Answer {
    pub pending: Pending,
    pub close: bool,
}

impl SaslConn {
    /// `over_tls`: the connection is encrypted (PLAIN is then always offered).
    pub fn new(auth: &Auth, over_tls: bool) -> SaslConn {
        let options = auth.kafka_sasl();
        let enabled = auth.enabled();
        SaslConn {
            enabled,
            plain_offered: over_tls || options.allow_plaintext_plain,
            configured: auth.mechanisms().collect(),
            lifetime_ms: options.session_lifetime_ms,
            principal: (!enabled).then_some(Principal::ANONYMOUS),
            mechanism: None,
            exchange: None,
            expires_at: None,
        }
    }

    /// A connection whose verified client certificate maps to `key` (mTLS) is that
    /// key from its first request, with no SASL step; the one authz table still
    /// checks the key on every request, so a revocation applies at once.
    pub fn with_certificate(mut self, key: Option<KeyId>) -> SaslConn {
        if let (true, Some(key)) = (self.enabled, key) {
            self.principal = Some(Principal::key(key));
        }
        self
    }

    /// The frame cap: small until the first login.
    pub fn frame_limits(&self) -> FrameLimits {
        match self.principal {
            Some(_) => FrameLimits::authenticated(),
            None => FrameLimits { frame_bytes_max: KAFKA_PRE_AUTH_FRAME_BYTES_MAX },
        }
    }

    /// Whether a login (or a mapped client certificate, or auth being off) has
    /// given the connection a principal.
    pub fn has_principal(&self) -> bool {
        self.principal.is_some()
    }

    /// When the login in force ends, if it does.
    pub fn expires_at(&self) -> Option<Instant> {
        self.expires_at
    }

    pub fn gate(&self, api: ApiKey, now: Instant) -> Gate {
        match api {
            ApiKey::SaslHandshake | ApiKey::SaslAuthenticate => return Gate::Sasl,
            // Needs nothing, and clients ask it before the handshake.
            ApiKey::ApiVersions => return Gate::Serve(Principal::ANONYMOUS),
            _ => {}
        }
        match &self.principal {
            None => Gate::Close("a request before SASL authentication completed"),
            Some(_) if self.expires_at.is_some_and(|at| now >= at) => {
                Gate::Close("the SASL session expired and the client did not re-authenticate (KIP-368)")
            }
            Some(who) => Gate::Serve(who.clone()),
        }
    }

    /// Answers SaslHandshake or SaslAuthenticate; any other request is a wiring
    /// mistake and closes the connection.
    pub fn answer(&mut self, auth: &Auth, peer: SocketAddr, h: &Header, req: KafkaRequest) -> Answer {
        let v = h.api_version;
        match req {
            KafkaRequest::SaslHandshake(r) => {
                let (response, close) = self.handshake(auth, r);
                Answer { pending: dispatch::ready(dispatch::reply(h, v, &response)), close }
            }
            KafkaRequest::SaslAuthenticate(r) => self.authenticate(auth, peer, h, r),
            _ => Answer {
                pending: dispatch::ready(Reply::Close(format!("{:?} is not a SASL request", h.api_key))),
                close: true,
            },
        }
    }

    /// Exactly the configured mechanisms, less PLAIN where it is not allowed.
    fn offered(&self) -> Vec<&'static str> {
        self.configured.iter().copied().filter(|m| *m != PLAIN || self.plain_offered).collect()
    }

    fn handshake(&mut self, auth: &Auth, req: SaslHandshakeRequest) -> (SaslHandshakeResponse, bool) {
        let offered = self.offered();
        let response = |error: i16| {
            let names = if self.enabled { offered.iter().map(|m| sb(*m)).collect() } else { Vec::new() };
            SaslHandshakeResponse::default().with_error_code(error).with_mechanisms(names)
        };
        // As a Kafka listener without SASL: refused, and the connection goes on.
        if !self.enabled {
            return (response(code::ILLEGAL_SASL_STATE), false);
        }
        if self.exchange.is_some() {
            return (response(code::ILLEGAL_SASL_STATE), true);
        }
        let asked = req.mechanism.as_str();
        let Some(mechanism) = offered.iter().copied().find(|m| *m == asked) else {
            return (response(code::UNSUPPORTED_SASL_MECHANISM), true);
        };
        // KIP-368: a re-authentication keeps the mechanism of the first login.
        if self.mechanism.is_some_and(|m| m != mechanism) {
            return (response(code::ILLEGAL_SASL_STATE), true);
        }
        let Some(session) = auth.sasl_session(mechanism) else {
            return (response(code::UNSUPPORTED_SASL_MECHANISM), true);
        };
        self.exchange = Some(Exchange { mechanism, session, user: None });
        (response(code::NONE), false)
    }

    fn authenticate(
        &mut self,
        auth: &Auth,
        peer: SocketAddr,
        h: &Header,
        req: SaslAuthenticateRequest,
    ) -> Answer {
        let v = h.api_version;
        let refuse = |error: i16, message: &str| {
            SaslAuthenticateResponse::default().with_error_code(error).with_error_message(Some(sb(message)))
        };
        if !self.enabled {
            let response = refuse(code::ILLEGAL_SASL_STATE, "SASL is not enabled on this listener");
            return Answer { pending: dispatch::ready(dispatch::reply(h, v, &response)), close: false };
        }
        let Some(mut exchange) = self.exchange.take() else {
            let response = refuse(code::ILLEGAL_SASL_STATE, "SaslAuthenticate before SaslHandshake");
            return Answer { pending: dispatch::ready(dispatch::reply(h, v, &response)), close: true };
        };
        if exchange.user.is_none() {
            exchange.user = claimed_user(exchange.mechanism, &req.auth_bytes);
        }
        let failed = match exchange.session.step(&req.auth_bytes) {
            Step::Challenge(bytes) => {
                self.exchange = Some(exchange);
                let response = SaslAuthenticateResponse::default().with_auth_bytes(bytes.into());
                return Answer { pending: dispatch::ready(dispatch::reply(h, v, &response)), close: false };
            }
            Step::Done { principal: es_auth::Principal::Key(id), final_bytes } => {
                let renewal = self.principal.is_some();
                match self.logged_in(Principal::key(id), exchange.mechanism) {
                    Ok(lifetime_ms) => {
                        if renewal {
                            tracing::info!(%peer, "kafka: re-authenticated (KIP-368)");
                        }
                        let response = SaslAuthenticateResponse::default()
                            .with_auth_bytes(final_bytes.into())
                            .with_session_lifetime_ms(lifetime_ms);
                        return Answer {
                            pending: dispatch::ready(dispatch::reply(h, v, &response)),
                            close: false,
                        };
                    }
                    Err(why) => why.to_owned(),
                }
            }
            Step::Done { principal: es_auth::Principal::Anonymous, .. } => "no principal".to_owned(),
            Step::Failed(reason) => reason.to_string(),
        };
        tracing::info!(%peer, mechanism = exchange.mechanism, reason = %failed, "kafka: SASL authentication failed");
        let (message, delay_ms) = match auth.record_failure(peer.ip(), exchange.user.as_ref()) {
            AuthFailure::Invalid => {
                (format!("authentication failed with SASL mechanism {}: {failed}", exchange.mechanism), 0)
            }
            AuthFailure::Throttled { ms } => {
                (format!("too many failed logins; retry in {ms} ms"), ms.min(KAFKA_AUTH_FAILURE_DELAY_MS_MAX))
            }
        };
        let reply = dispatch::reply(h, v, &refuse(code::SASL_AUTHENTICATION_FAILED, &message));
        let pending = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(delay_ms)).await;
            reply
        });
        Answer { pending, close: true }
    }

    /// Records a login; the session lifetime to tell the client (0: no limit).
    fn logged_in(&mut self, who: Principal, mechanism: &'static str) -> Result<i64, &'static str> {
        if self.principal.as_ref().is_some_and(|p| *p != who) {
            return Err("a re-authentication must log in as the same key");
        }
        self.principal = Some(who);
        self.mechanism = Some(mechanism);
        self.expires_at =
            (self.lifetime_ms > 0).then(|| Instant::now() + Duration::from_millis(self.lifetime_ms));
        Ok(i64::try_from(self.lifetime_ms).unwrap_or(i64::MAX))
    }
}

/// The key id a client's first SASL message names (PLAIN's authcid, SCRAM's `n=`),
/// best effort: only for charging failures to that id as well as to the address.
fn claimed_user(mechanism: &str, message: &[u8]) -> Option<KeyId> {
    let text = std::str::from_utf8(message).ok()?;
    let name = if mechanism == PLAIN {
        text.split('\0').nth(1)?
    } else {
        text.splitn(3, ',').nth(2)?.split(',').find_map(|a| a.strip_prefix("n="))?
    };
    KeyId::parse(name).ok()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use es_kafka::kafka_protocol::messages::SaslAuthenticateRequest;

    use super::*;
    use crate::auth::{AuthOptions, KafkaSaslOptions};

    /// An auth-on broker state with one key, and that key's (id, secret).
    fn auth(dir: &std::path::Path, kafka: KafkaSaslOptions) -> (Auth, String, String) {
        let admin = es_auth::ApiKey::random(&mut rand::rng()).reveal();
        let options = AuthOptions { enabled: true, bootstrap_key: Some(admin), kafka, ..Default::default() };
        let auth = Auth::open(dir, &options, Arc::new(es_core::SystemClock)).unwrap();
        let made = auth.create_key("app", &[], Default::default()).unwrap();
        let (id, secret) = made.key[3..].split_at(16);
        (auth, id.to_owned(), secret[1..].to_owned())
    }

    fn header(api_key: ApiKey, api_version: i16) -> Header {
        Header { api_key, api_version, correlation_id: 1, client_id: None }
    }

    fn handshake(conn: &mut SaslConn, auth: &Auth, mechanism: &str) -> Answer {
        let req = SaslHandshakeRequest::default().with_mechanism(sb(mechanism));
        conn.answer(
            auth,
            "127.0.0.1:1".parse().unwrap(),
            &header(ApiKey::SaslHandshake, 1),
            KafkaRequest::SaslHandshake(req),
        )
    }

    fn authenticate(conn: &mut SaslConn, auth: &Auth, bytes: String) -> Answer {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(bytes.into_bytes().into());
        let h = header(ApiKey::SaslAuthenticate, 2);
        conn.answer(auth, "127.0.0.1:1".parse().unwrap(), &h, KafkaRequest::SaslAuthenticate(req))
    }

    #[tokio::test]
    async fn only_sasl_and_api_versions_pass_before_login_and_plain_needs_permission() {
        let dir = tempfile::tempdir().unwrap();
        let (auth, id, secret) = auth(dir.path(), KafkaSaslOptions::default());
        let mut conn = SaslConn::new(&auth, false);
        let now = Instant::now();
        assert!(matches!(conn.gate(ApiKey::Metadata, now), Gate::Close(_)));
        assert!(matches!(conn.gate(ApiKey::Produce, now), Gate::Close(_)));
        assert!(matches!(conn.gate(ApiKey::ApiVersions, now), Gate::Serve(p) if p == Principal::ANONYMOUS));
        assert!(matches!(conn.gate(ApiKey::SaslHandshake, now), Gate::Sasl));
        assert_eq!(conn.frame_limits().frame_bytes_max, KAFKA_PRE_AUTH_FRAME_BYTES_MAX);
        assert!(handshake(&mut conn, &auth, "PLAIN").close, "PLAIN is not offered without TLS");
        // Over TLS (or when allowed) PLAIN logs in, and the gate then serves as the key.
        let mut conn = SaslConn::new(&auth, true);
        assert!(!handshake(&mut conn, &auth, "PLAIN").close);
        assert!(!authenticate(&mut conn, &auth, format!("\0{id}\0{secret}")).close);
        let key = Principal::key(KeyId::parse(&id).unwrap());
        assert!(matches!(conn.gate(ApiKey::Metadata, Instant::now()), Gate::Serve(p) if p == key));
        assert_eq!(conn.frame_limits(), FrameLimits::authenticated());
        // KIP-368: past the lifetime, a request closes the connection.
        let later =
            Instant::now() + Duration::from_millis(KafkaSaslOptions::default().session_lifetime_ms + 1);
        assert!(matches!(conn.gate(ApiKey::Metadata, later), Gate::Close(_)));
        assert!(
            matches!(conn.gate(ApiKey::SaslHandshake, later), Gate::Sasl),
            "re-authentication is allowed"
        );
    }

    #[tokio::test]
    async fn failures_close_and_re_authentication_keeps_the_key_and_mechanism() {
        let dir = tempfile::tempdir().unwrap();
        let options = KafkaSaslOptions { allow_plaintext_plain: true, session_lifetime_ms: 0 };
        let (auth, id, secret) = auth(dir.path(), options);
        let mut conn = SaslConn::new(&auth, false);
        assert!(authenticate(&mut conn, &auth, String::new()).close, "authenticate before handshake");
        let mut conn = SaslConn::new(&auth, false);
        assert!(!handshake(&mut conn, &auth, "PLAIN").close);
        assert!(authenticate(&mut conn, &auth, format!("\0{id}\0wrong")).close);
        let mut conn = SaslConn::new(&auth, false);
        handshake(&mut conn, &auth, "PLAIN");
        assert!(!authenticate(&mut conn, &auth, format!("\0{id}\0{secret}")).close);
        assert!(conn.expires_at().is_none(), "lifetime 0: no expiry");
        assert!(handshake(&mut conn, &auth, "SCRAM-SHA-256").close, "re-authentication keeps the mechanism");
        let mut conn = SaslConn::new(&auth, false);
        handshake(&mut conn, &auth, "PLAIN");
        authenticate(&mut conn, &auth, format!("\0{id}\0{secret}"));
        assert!(!handshake(&mut conn, &auth, "PLAIN").close);
        assert!(!authenticate(&mut conn, &auth, format!("\0{id}\0{secret}")).close, "re-authenticated");
    }

    #[test]
    fn the_claimed_user_comes_from_the_first_message() {
        let id = "7a19fb2d099a9557";
        assert_eq!(claimed_user(PLAIN, format!("\0{id}\0secret").as_bytes()).unwrap().as_str(), id);
        assert_eq!(
            claimed_user("SCRAM-SHA-256", format!("n,,n={id},r=abc").as_bytes()).unwrap().as_str(),
            id
        );
        assert!(claimed_user("SCRAM-SHA-256", b"n,,n=someone,r=abc").is_none());
        assert!(claimed_user(PLAIN, b"garbage").is_none());
        assert!(claimed_user(PLAIN, &[0xff, 0, 0]).is_none());
    }
}
