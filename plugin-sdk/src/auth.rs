//! Authenticator plugins: a SASL mechanism as a session per handshake, and the
//! lookups the broker offers while a handshake runs.

use crate::Config;

/// What one step of a handshake decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthStep {
    /// The client proved to be this API key id. The broker accepts it only when
    /// the id names an active key (check with [`broker::key_exists`] to fail early).
    Done(String),
    /// Send these bytes to the client; its answer comes to the next `step`.
    Challenge(Vec<u8>),
    /// Refused. The reason goes to the broker's log, never to the client, which
    /// gets the same error as for a wrong password.
    Failed(String),
}

/// An authentication mechanism (or several): configured once per instance, then
/// asked for one [`AuthSession`] per client handshake.
pub trait Authenticator: Sized + 'static {
    /// Short stable name, e.g. `jwt`.
    const NAME: &'static str;
    /// The plugin's own version.
    const VERSION: &'static str;
    /// One sentence for humans.
    const DESCRIPTION: &'static str;
    /// Configuration keys the plugin understands.
    const CONFIG_KEYS: &'static [&'static str] = &[];
    /// SASL mechanism names implemented, e.g. `OAUTHBEARER`.
    const MECHANISMS: &'static [&'static str];

    /// One handshake's state.
    type Session: AuthSession;

    /// Parses the configuration. An error refuses the plugin.
    fn configure(config: &Config) -> Result<Self, String>;

    /// A new handshake for `mechanism` (one of [`Self::MECHANISMS`]).
    fn start(&self, mechanism: &str) -> Self::Session;
}

/// One handshake with one client. The broker bounds each step (deadline, memory)
/// and the number of steps; after `Done` or `Failed` it calls no more steps.
pub trait AuthSession: 'static {
    /// Takes the client's next message.
    fn step(&mut self, response: &[u8]) -> AuthStep;
}

/// What the broker lets a mechanism look up; answered only during a handshake
/// (outside one, no key exists).
pub mod broker {
    use crate::glue::auth_bindings::es::plugin::auth_host;

    /// A SCRAM credential as RFC 5802 stores it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct ScramCredential {
        pub salt: Vec<u8>,
        pub iterations: u32,
        pub stored_key: Vec<u8>,
        pub server_key: Vec<u8>,
    }

    /// Whether `id` is an active (not revoked) API key.
    pub fn key_exists(id: &str) -> bool {
        auth_host::key_exists(id)
    }

    /// The SCRAM credential of the active key `id` for `mechanism`
    /// (`SCRAM-SHA-256` or `SCRAM-SHA-512`).
    pub fn scram_credential(mechanism: &str, id: &str) -> Option<ScramCredential> {
        auth_host::scram_lookup(mechanism, id).map(|c| ScramCredential {
            salt: c.salt,
            iterations: c.iterations,
            stored_key: c.stored_key,
            server_key: c.server_key,
        })
    }

    /// The broker's clock in milliseconds since the epoch.
    pub fn now_ms() -> i64 {
        auth_host::now_ms()
    }

    /// `len` bytes (at most 1024) from the broker's CSPRNG.
    pub fn random_bytes(len: u32) -> Vec<u8> {
        auth_host::random_bytes(len)
    }
}
