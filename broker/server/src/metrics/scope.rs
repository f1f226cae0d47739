//! What one scrape may show, decided through the one authorization table: topic
//! series need the topic's `describe`, group series the group's, a key's own
//! series are its own, and everything broker-wide (latencies, the log, process,
//! other keys) needs cluster `describe`. With auth off every scrape sees all.

use std::sync::Arc;

use crate::auth::Auth;
use crate::service::Principal;
use crate::service::authz;

/// The caller of one scrape and what it may describe.
pub struct Scope {
    auth: Arc<Auth>,
    principal: Principal,
    broker: bool,
}

impl Scope {
    pub fn new(auth: Arc<Auth>, principal: Principal) -> Scope {
        let broker = authz::may_describe_broker(&auth, &principal);
        Scope { auth, principal, broker }
    }

    /// Broker-wide series: request latencies, the log, plugins' engine, process.
    pub fn broker(&self) -> bool {
        self.broker
    }

    pub fn topic(&self, name: &str) -> bool {
        self.broker || authz::may_describe_topic(&self.auth, &self.principal, name)
    }

    pub fn group(&self, name: &str) -> bool {
        self.broker || authz::may_describe_group(&self.auth, &self.principal, name)
    }

    /// A key's series: its own, or any with cluster `describe`.
    pub fn key(&self, id: &str) -> bool {
        self.broker || self.principal.key.as_ref().is_some_and(|k| k.as_str() == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::AuthOptions;

    #[test]
    fn grants_decide_what_a_scrape_shows() {
        let dir = tempfile::tempdir().unwrap();
        let admin = es_auth::ApiKey::random(&mut rand::rng()).reveal();
        let options = AuthOptions { enabled: true, bootstrap_key: Some(admin), ..Default::default() };
        let auth = Arc::new(Auth::open(dir.path(), &options, Arc::new(es_core::SystemClock)).unwrap());
        let made = auth.create_key("a", &["topic:prefixed:a.:read".into()], Default::default()).unwrap();
        let id = es_auth::KeyId::parse(&made.view.id).unwrap();
        let scope = Scope::new(auth.clone(), Principal::key(id.clone()));
        assert!(scope.topic("a.orders") && !scope.topic("b.orders"));
        assert!(!scope.broker() && !scope.group("g"));
        assert!(scope.key(id.as_str()) && !scope.key("ffffffffffffffff"));
        let open = Scope::new(auth, Principal::ANONYMOUS);
        assert!(!open.topic("a.orders"), "anonymous sees nothing with auth on");
        let off = tempfile::tempdir().unwrap();
        let auth = Arc::new(
            Auth::open(off.path(), &AuthOptions::default(), Arc::new(es_core::SystemClock)).unwrap(),
        );
        let all = Scope::new(auth, Principal::ANONYMOUS);
        assert!(all.broker() && all.topic("x") && all.group("g"));
    }
}
