//! Every es-broker setting, in one table: its section and key in the config file,
//! its flag, its type, its default and its meaning. The flags, the environment
//! names, `config reference`, `config init` and docs/configuration.md all come from
//! [`SETTINGS`], so they cannot disagree. A new setting is one entry here.

use es_server::limits;

/// What a setting holds. Every source (flag, environment, file, default) goes
/// through the same parse and range check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Bool,
    /// A whole number in `[min, max]`.
    Int {
        min: u64,
        max: u64,
    },
    Text,
    Path,
    /// Repeatable: a TOML array of strings, a repeated flag, or a comma-separated
    /// environment variable.
    List,
}

impl Kind {
    /// The type as `config reference` and wrong-type errors name it.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Bool => "boolean",
            Kind::Int { .. } => "integer",
            Kind::Text => "string",
            Kind::Path => "path",
            Kind::List => "list of strings",
        }
    }
}

/// A setting's value when nothing sets it.
#[derive(Debug, Clone, Copy)]
pub enum Default {
    /// Unset; the text says what unset means.
    Unset(&'static str),
    Bool(bool),
    Int(u64),
    /// Computed once, for defaults owned by another crate's `Default`.
    IntFn(fn() -> u64),
    Text(&'static str),
}

/// One setting. `id()` is `section.key`; the environment name is mechanical.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    pub section: &'static str,
    pub key: &'static str,
    /// The long flag without `--`; `None` for settings never given on the command
    /// line (a secret would show in the process list).
    pub flag: Option<&'static str>,
    pub kind: Kind,
    pub default: Default,
    pub help: &'static str,
    /// The variable this setting was read from before the mechanical names; still
    /// read, below the mechanical one.
    pub legacy_env: Option<&'static str>,
    /// Masked in `config print`.
    pub secret: bool,
}

impl Setting {
    const fn new(section: &'static str, key: &'static str, flag: &'static str, kind: Kind) -> Setting {
        Setting {
            section,
            key,
            flag: Some(flag),
            kind,
            default: Default::Unset("unset"),
            help: "",
            legacy_env: None,
            secret: false,
        }
    }

    const fn default(mut self, default: Default) -> Setting {
        self.default = default;
        self
    }

    const fn help(mut self, help: &'static str) -> Setting {
        self.help = help;
        self
    }

    const fn legacy(mut self, env: &'static str) -> Setting {
        self.legacy_env = Some(env);
        self
    }

    /// `section.key`, as in errors and `config print`.
    pub fn id(&self) -> String {
        format!("{}.{}", self.section, self.key)
    }

    /// `ES_<SECTION>_<KEY>`.
    pub fn env(&self) -> String {
        format!("ES_{}_{}", self.section, self.key).to_ascii_uppercase()
    }

    /// `--flag`, or `-` when there is none.
    pub fn flag_text(&self) -> String {
        self.flag.map_or_else(|| "-".to_owned(), |f| format!("--{f}"))
    }

    /// A boolean that defaults to false is a switch: `--auth` alone turns it on.
    pub fn is_switch(&self) -> bool {
        matches!((self.kind, self.default), (Kind::Bool, Default::Bool(false)))
    }
}

/// The sections, in file order, with what each holds. Sections without settings
/// yet are listed so a file that names them gets a clear answer.
pub const SECTIONS: [(&str, &str); 12] = [
    ("log", "where the data lives and how often housekeeping runs"),
    ("journal", "the group-commit journal"),
    ("cold", "the cold tier: a directory (log.cold_dir) or an S3-compatible bucket"),
    ("http", "the HTTP API listener"),
    ("binary", "the binary-protocol listener"),
    ("kafka", "the Kafka listener"),
    ("auth", "API keys, SASL and quotas"),
    ("tls", "TLS shared by every listener (a listener's own tls_* keys win)"),
    ("metrics", "Prometheus metrics"),
    ("plugins", "Wasm plugins"),
    ("schema_registry", "no settings yet: the registry is always on"),
    ("cluster", "replication: a Raft group per partition over authenticated peer links (docs/cluster.md)"),
];

const PORT: Kind = Kind::Int { min: 1, max: u16::MAX as u64 };
const COUNT: Kind = Kind::Int { min: 0, max: u64::MAX };
const POSITIVE: Kind = Kind::Int { min: 1, max: u64::MAX };

fn rebalance_delay_default() -> u64 {
    es_server::KafkaGroupConfig::default().initial_rebalance_delay_ms
}

/// Every setting, grouped by section in [`SECTIONS`] order.
pub const SETTINGS: &[Setting] = &[
    Setting::new("log", "data_dir", "data-dir", Kind::Path)
        .default(Default::Text("./data"))
        .help("Where topics and their logs live.")
        .legacy("ES_DATA_DIR"),
    Setting::new("log", "cold_dir", "cold-dir", Kind::Path)
        .default(Default::Unset("no cold tier"))
        .help("Directory for the cold tier (topics with cold.tier.enable=true)."),
    Setting::new("log", "housekeeping_interval_ms", "housekeeping-interval-ms", POSITIVE)
        .default(Default::Int(limits::HOUSEKEEPING_INTERVAL_MS_DEFAULT))
        .help("How often retention, tiering and compaction run, in milliseconds."),
    Setting::new("journal", "enabled", "journal-enabled", Kind::Bool).default(Default::Bool(true)).help(
        "One journal fdatasync per flush round for all partitions; false syncs every dirty segment \
         instead (slower with many partitions).",
    ),
    Setting::new("journal", "dir", "journal-dir", Kind::Path)
        .default(Default::Unset("DATA_DIR/partitions/journal"))
        .help("Where the journal lives, e.g. another disk."),
    Setting::new("cold", "backend", "cold-backend", Kind::Text)
        .default(Default::Text("dir"))
        .help("Where the cold tier keeps expired segments: dir (log.cold_dir; no cold tier when unset) or s3 (cold.bucket)."),
    Setting::new("cold", "bucket", "cold-bucket", Kind::Text)
        .default(Default::Unset("none; required with cold.backend = s3"))
        .help("The S3 bucket of the cold tier (it must exist)."),
    Setting::new("cold", "prefix", "cold-prefix", Kind::Text)
        .default(Default::Text("es"))
        .help("Key prefix of every object this broker writes; one broker per prefix."),
    Setting::new("cold", "endpoint", "cold-endpoint", Kind::Text)
        .default(Default::Unset("AWS S3 in cold.region"))
        .help("An S3-compatible endpoint URL (MinIO, R2, moto_server...)."),
    Setting::new("cold", "region", "cold-region", Kind::Text)
        .default(Default::Text("us-east-1"))
        .help("The bucket's region (signing needs one with any endpoint)."),
    Setting::new("cold", "path_style", "cold-path-style", Kind::Bool)
        .default(Default::Bool(false))
        .help("Path-style requests (endpoint/bucket/key), as MinIO and moto want; false: virtual-hosted (bucket.endpoint)."),
    Setting::new("cold", "allow_http", "cold-allow-http", Kind::Bool)
        .default(Default::Bool(false))
        .help("Allow a plain http:// endpoint (a local test store); objects then cross the network unencrypted."),
    Setting {
        flag: None,
        secret: true,
        ..Setting::new("cold", "access_key_id", "", Kind::Text)
            .default(Default::Unset("AWS_ACCESS_KEY_ID and the standard AWS variables"))
            .help("The S3 access key id. Never a flag; with it, cold.secret_access_key (or its _file) is needed.")
    },
    Setting {
        flag: None,
        secret: true,
        ..Setting::new("cold", "secret_access_key", "", Kind::Text)
            .default(Default::Unset("AWS_SECRET_ACCESS_KEY"))
            .help("The S3 secret key. Never a flag (flags show in the process list); prefer secret_access_key_file.")
    },
    Setting::new("cold", "secret_access_key_file", "cold-secret-access-key-file", Kind::Path)
        .default(Default::Unset("none"))
        .help("A file holding the S3 secret key."),
    Setting::new("cold", "part_size_bytes", "cold-part-size-bytes", Kind::Int {
        min: es_core::limits::COLD_PART_BYTES_MIN,
        max: 5 * 1024 * 1024 * 1024,
    })
    .default(Default::Int(es_core::limits::COLD_PART_BYTES_DEFAULT))
    .help("Part size of S3 multipart uploads; smaller segments go up in one PUT. Times S3's 10000-part limit it must cover the largest segment."),
    Setting::new("cold", "cache_bytes", "cold-cache-bytes", POSITIVE)
        .default(Default::Int(es_core::limits::COLD_CACHE_BYTES_DEFAULT))
        .help("Bytes of cold segments fetched back for reads kept on local disk, all partitions together."),
    Setting::new("cold", "retention_ms", "cold-retention-ms", COUNT)
        .default(Default::Int(0))
        .help("Delete cold segments whose newest record is older than this; 0 keeps them forever. Shorter than a cold topic's retention.ms is refused."),
    Setting::new("cold", "retention_bytes", "cold-retention-bytes", COUNT)
        .default(Default::Int(0))
        .help("Keep each partition's cold data below this many bytes, oldest deleted first; 0: unbounded."),
    Setting::new("cold", "op_timeout_ms", "cold-op-timeout-ms", Kind::Int { min: 100, max: 600_000 })
        .default(Default::Int(es_core::limits::COLD_OP_TIMEOUT_SECS_DEFAULT * 1000))
        .help("The longest one cold-store request may take, retries included; a slower store fails the upload, which retries with backoff."),
    Setting::new("http", "bind", "bind", Kind::Text)
        .default(Default::Text("127.0.0.1:9000"))
        .help("Address for the HTTP API; port 0 picks a free port. A non-loopback address needs auth.")
        .legacy("ES_BIND"),
    Setting::new("http", "max_request_bytes", "max-request-bytes", POSITIVE)
        .default(Default::Int(limits::REQUEST_BYTES_MAX_DEFAULT as u64))
        .help("Largest HTTP request body in bytes."),
    Setting::new("http", "max_in_flight_requests", "max-in-flight-requests", Kind::Int { min: 1, max: 1_000_000 })
        .default(Default::Int(limits::IN_FLIGHT_REQUESTS_MAX_DEFAULT as u64))
        .help("Requests served at once (long polls included); more get 503 overloaded."),
    Setting::new("http", "tls_cert_file", "http-tls-cert", Kind::Path)
        .default(Default::Unset("tls.cert_file applies"))
        .help("Certificate chain (PEM) for the HTTP listener only."),
    Setting::new("http", "tls_key_file", "http-tls-key", Kind::Path)
        .default(Default::Unset("tls.key_file applies"))
        .help("Private key (PEM) for the HTTP listener only."),
    Setting::new("http", "tls_client_ca_file", "http-tls-client-ca", Kind::Path)
        .default(Default::Unset("tls.client_ca_file applies"))
        .help("Client CA (mTLS) for the HTTP listener only."),
    Setting::new("http", "max_connections_per_address", "http-max-connections-per-address", POSITIVE)
        .default(Default::Int(limits::CONNECTIONS_PER_ADDRESS_MAX_DEFAULT as u64))
        .help("Connections open at once from one client address; more are refused at accept."),
    Setting::new("http", "idle_timeout_ms", "http-idle-timeout-ms", COUNT)
        .default(Default::Int(limits::IDLE_TIMEOUT_MS_DEFAULT))
        .help("A connection the client sends nothing on for this long is closed (between requests on HTTP); 0: never."),
    Setting::new("http", "max_connections", "http-max-connections", POSITIVE)
        .default(Default::Int(limits::HTTP_CONNECTIONS_MAX_DEFAULT as u64))
        .help("HTTP connections open at once; more are refused at accept."),
    Setting::new("http", "header_read_timeout_ms", "http-header-read-timeout-ms", COUNT)
        .default(Default::Int(limits::HTTP_HEADER_READ_TIMEOUT_MS_DEFAULT))
        .help("How long a client that has begun a request may take to send all its headers; 0: no limit."),
    Setting::new("binary", "bind", "bind-binary", Kind::Text)
        .default(Default::Text("127.0.0.1:9001"))
        .help("Address for the binary protocol; port 0 picks a free port. A non-loopback address needs auth.")
        .legacy("ES_BIND_BINARY"),
    Setting::new("binary", "tls_cert_file", "binary-tls-cert", Kind::Path)
        .default(Default::Unset("tls.cert_file applies"))
        .help("Certificate chain (PEM) for the binary listener only."),
    Setting::new("binary", "tls_key_file", "binary-tls-key", Kind::Path)
        .default(Default::Unset("tls.key_file applies"))
        .help("Private key (PEM) for the binary listener only."),
    Setting::new("binary", "tls_client_ca_file", "binary-tls-client-ca", Kind::Path)
        .default(Default::Unset("tls.client_ca_file applies"))
        .help("Client CA (mTLS) for the binary listener only."),
    Setting::new("binary", "max_connections_per_address", "binary-max-connections-per-address", POSITIVE)
        .default(Default::Int(limits::CONNECTIONS_PER_ADDRESS_MAX_DEFAULT as u64))
        .help("Connections open at once from one client address; more are refused at accept."),
    Setting::new("binary", "idle_timeout_ms", "binary-idle-timeout-ms", COUNT)
        .default(Default::Int(limits::IDLE_TIMEOUT_MS_DEFAULT))
        .help("A connection the client sends nothing on for this long is closed (between requests on HTTP); 0: never."),
    Setting::new("binary", "auth_timeout_ms", "binary-auth-timeout-ms", POSITIVE)
        .default(Default::Int(limits::AUTH_TIMEOUT_MS_DEFAULT))
        .help("With auth on, a connection that has not authenticated (Authenticate) this long after it opened is closed."),
    Setting::new("kafka", "bind", "bind-kafka", Kind::Text)
        .default(Default::Text("127.0.0.1:9092"))
        .help("Address for the Kafka wire protocol; port 0 picks a free port. A non-loopback address needs auth.")
        .legacy("ES_BIND_KAFKA"),
    Setting::new("kafka", "advertised_host", "kafka-advertised-host", Kind::Text)
        .default(Default::Unset("the bound address"))
        .help("The host Kafka clients are told to connect to (Metadata, FindCoordinator). Never 0.0.0.0."),
    Setting::new("kafka", "advertised_port", "kafka-advertised-port", PORT)
        .default(Default::Unset("the bound port"))
        .help("The port Kafka clients are told to connect to."),
    Setting::new("kafka", "group_initial_rebalance_delay_ms", "group-initial-rebalance-delay-ms", COUNT)
        .default(Default::IntFn(rebalance_delay_default))
        .help("How long a new Kafka group's join barrier waits for more members (group.initial.rebalance.delay.ms)."),
    Setting::new("kafka", "allow_plaintext_plain", "kafka-allow-plaintext-plain", Kind::Bool)
        .default(Default::Bool(false))
        .help("Offer SASL PLAIN on a Kafka listener without TLS (PLAIN sends the secret itself)."),
    Setting::new("kafka", "tls_cert_file", "kafka-tls-cert", Kind::Path)
        .default(Default::Unset("tls.cert_file applies"))
        .help("Certificate chain (PEM) for the Kafka listener only."),
    Setting::new("kafka", "tls_key_file", "kafka-tls-key", Kind::Path)
        .default(Default::Unset("tls.key_file applies"))
        .help("Private key (PEM) for the Kafka listener only."),
    Setting::new("kafka", "tls_client_ca_file", "kafka-tls-client-ca", Kind::Path)
        .default(Default::Unset("tls.client_ca_file applies"))
        .help("Client CA (mTLS) for the Kafka listener only."),
    Setting::new("kafka", "max_connections_per_address", "kafka-max-connections-per-address", POSITIVE)
        .default(Default::Int(limits::CONNECTIONS_PER_ADDRESS_MAX_DEFAULT as u64))
        .help("Connections open at once from one client address; more are refused at accept."),
    Setting::new("kafka", "idle_timeout_ms", "kafka-idle-timeout-ms", COUNT)
        .default(Default::Int(limits::IDLE_TIMEOUT_MS_DEFAULT))
        .help("A connection the client sends nothing on for this long is closed (between requests on HTTP); 0: never."),
    Setting::new("kafka", "auth_timeout_ms", "kafka-auth-timeout-ms", POSITIVE)
        .default(Default::Int(limits::AUTH_TIMEOUT_MS_DEFAULT))
        .help("With auth on, a connection that has not finished its SASL login this long after it opened is closed."),
    Setting::new("auth", "enabled", "auth", Kind::Bool)
        .default(Default::Bool(false))
        .help("Require an API key on every request and authorize it by its grants; the first start needs a bootstrap key."),
    Setting {
        flag: None,
        secret: true,
        ..Setting::new("auth", "bootstrap_key", "", Kind::Text)
            .default(Default::Unset("none"))
            .help("The first admin key, read only while no key exists. Never a flag (flags show in the process list); prefer bootstrap_key_file.")
    },
    Setting::new("auth", "bootstrap_key_file", "auth-bootstrap-key-file", Kind::Path)
        .default(Default::Unset("none"))
        .help("A file holding the first admin key; read only while no key exists. `es key generate` makes one."),
    Setting::new("auth", "pepper_file", "auth-pepper-file", Kind::Path)
        .default(Default::Unset("DATA_DIR/auth-pepper, created on first start"))
        .help("The secret mixed into every stored key hash (64 hex digits). Keep it out of backups of the data directory. Required in a cluster with auth: the same file on every node."),
    Setting::new("auth", "kafka_session_lifetime_ms", "kafka-session-lifetime-ms", COUNT)
        .default(Default::Int(limits::KAFKA_SESSION_LIFETIME_MS_DEFAULT))
        .help("How long a Kafka SASL login lasts before the client must re-authenticate (KIP-368); 0: no limit."),
    Setting::new("auth", "mechanisms", "auth-mechanisms", Kind::List)
        .default(Default::Unset("the built-ins, SCRAM-SHA-512 first"))
        .help("SASL mechanisms offered, in order: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, or NAME:plugin for a mechanism of an uploaded authenticator plugin, e.g. SCRAM-SHA-512,PLAIN,OAUTHBEARER:jwt. PLAIN still needs TLS or kafka.allow_plaintext_plain."),
    Setting::new("auth", "quota_produce_bytes_per_s", "quota-produce-bytes-per-s", COUNT)
        .default(Default::Unset("unlimited"))
        .help("Default produce quota of every key, in bytes per second.")
        .legacy("ES_QUOTA_PRODUCE_BYTES_PER_S"),
    Setting::new("auth", "quota_fetch_bytes_per_s", "quota-fetch-bytes-per-s", COUNT)
        .default(Default::Unset("unlimited"))
        .help("Default fetch quota of every key, in bytes per second.")
        .legacy("ES_QUOTA_FETCH_BYTES_PER_S"),
    Setting::new("auth", "requests_per_s_per_key", "requests-per-s-per-key", POSITIVE)
        .default(Default::Unset("unlimited"))
        .help("Requests per second each key may make (every listener); past it a client is slowed: Kafka and binary stop reading its connection, HTTP answers 429."),
    Setting::new("auth", "requests_per_s_per_address", "requests-per-s-per-address", POSITIVE)
        .default(Default::Unset("unlimited"))
        .help("Requests per second each client address may make, as requests_per_s_per_key."),
    Setting::new("tls", "cert_file", "tls-cert", Kind::Path)
        .default(Default::Unset("plaintext"))
        .help("TLS certificate chain (PEM) for every listener; with key_file, every listener speaks TLS 1.2/1.3 only."),
    Setting::new("tls", "key_file", "tls-key", Kind::Path)
        .default(Default::Unset("plaintext"))
        .help("TLS private key (PEM) for every listener."),
    Setting::new("tls", "client_ca_file", "tls-client-ca", Kind::Path)
        .default(Default::Unset("no client certificates"))
        .help("CA certificates (PEM) whose client certificates every TLS listener requires (mTLS)."),
    Setting::new("tls", "principal_rules", "tls-principal-rule", Kind::List)
        .default(Default::Unset("none"))
        .help("Maps a verified client certificate to an API key: `cn:NAME=KEYID`, `san:dns:NAME=KEYID` or `san:uri:URI=KEYID`; first match wins."),
    Setting::new("metrics", "enabled", "metrics", Kind::Bool)
        .default(Default::Bool(true))
        .help("Keep Prometheus metrics and serve GET /metrics; false skips every hot-path counter and /metrics answers 404.")
        .legacy("ES_METRICS"),
    Setting::new("metrics", "kafka_compat", "metrics-kafka-compat", Kind::Bool)
        .default(Default::Bool(false))
        .help("Also expose Kafka's JMX-exporter names on /metrics (kafka_server_brokertopicmetrics_*)."),
    Setting::new("plugins", "cache_dir", "plugin-cache-dir", Kind::Path)
        .default(Default::Unset("DATA_DIR/plugins/cache"))
        .help("Where compiled plugins are cached; brokers of one build may share it. Keep it writable only by the broker's user.")
        .legacy("ES_PLUGIN_CACHE_DIR"),
    Setting::new("cluster", "node_id", "node-id", Kind::Int { min: 1, max: 1023 })
        .default(Default::Unset("a single node, no cluster"))
        .help("This node's id in the cluster (1 to 1023); set together with cluster.peers and cluster.secret_file."),
    Setting::new("cluster", "peers", "cluster-peers", Kind::List)
        .default(Default::Unset("none"))
        .help("Every node's peer address as ID=HOST:PORT, this node's included, e.g. 1=127.0.0.1:9190,2=127.0.0.1:9290,3=127.0.0.1:9390; this node listens for its peers on its own entry."),
    Setting::new("cluster", "secret_file", "cluster-secret-file", Kind::Path)
        .default(Default::Unset("none"))
        .help("A file holding the secret the nodes share (at least 16 bytes; `es key generate > FILE` makes one). Peers prove it without sending it."),
    Setting::new("cluster", "join", "cluster-join", Kind::Bool)
        .default(Default::Bool(false))
        .help("This node joins a running cluster: it forms no partition of its own and waits for `es cluster add-node` (asked of any member). Harmless to keep once it joined."),
    Setting::new("cluster", "rack", "cluster-rack", Kind::Text)
        .default(Default::Unset("none"))
        .help("This node's rack or zone (Kafka's broker.rack), listed in Metadata. A Kafka consumer that sets client.rack is sent to read from an in-sync replica in its own rack when the partition's leader is elsewhere (follower fetching, KIP-392). Set on every node, it also spreads each partition's replicas over the racks (docs/cluster.md, \"Racks\")."),
    Setting::new("cluster", "metadata_segment_bytes", "cluster-metadata-segment-bytes", Kind::Int { min: 4096, max: 1 << 30 })
        .default(Default::Int(8 * 1024 * 1024))
        .help("Segment size of the replicated metadata log (__es_cluster_metadata), in bytes; its retention removes whole segments."),
    Setting::new("cluster", "metadata_retention_bytes", "cluster-metadata-retention-bytes", COUNT)
        .default(Default::Int(100 * 1024 * 1024))
        .help("How many bytes of applied metadata commands each node keeps before older segments go (as KRaft's metadata.max.retention.bytes); a node that needs what went is sent the registry as it stands. 0 keeps every command."),
    Setting::new("cluster", "heartbeat_ms", "cluster-heartbeat-ms", Kind::Int { min: 10, max: 60_000 })
        .default(Default::Int(300))
        .help("How often a Raft leader heartbeats its followers, in milliseconds."),
    Setting::new("cluster", "election_timeout_ms", "cluster-election-timeout-ms", Kind::Int { min: 50, max: 600_000 })
        .default(Default::Int(1500))
        .help("The shortest election timeout in milliseconds (each node picks one between this and twice this); more than 3 heartbeats."),
    Setting::new("cluster", "quiesce_after_ms", "cluster-quiesce-after-ms", Kind::Int { min: 0, max: 86_400_000 })
        .default(Default::Int(2000))
        .help("How long a partition's Raft group must sit idle (nothing written, every replica caught up) before it stops heartbeating until the next write; a ping per node pair stands in for its heartbeats. 0 keeps every group heartbeating."),
    Setting::new("cluster", "leader_balance_ms", "cluster-leader-balance-ms", Kind::Int { min: 0, max: 86_400_000 })
        .default(Default::Int(30_000))
        .help("How often, in milliseconds, each node checks whether it leads more than its share of the partitions and hands one to the in-sync node that leads the fewest (as Kafka's auto.leader.rebalance.enable); 0 turns balancing off."),
];

/// `ES_*` variables that are not settings but are read by es-broker or by the
/// other es binaries, so an operator's shell holding them is not warned about.
pub const OTHER_ENV: &[&str] = &[
    "ES_CONFIG",
    "ES_LOG",
    "ES_BROKER",
    "ES_BROKER_BINARY",
    "ES_API_KEY",
    "ES_TLS_CA",
    "ES_TLS_CERT",
    "ES_TLS_KEY",
    "ES_BIN",
    "ES_BROKER_BIN",
    "ES_FAILPOINT",
    "ES_TOOLS_BIN",
];

/// The setting named `section.key`.
pub fn find(id: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.id() == id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ids_flags_and_env_names_are_unique_and_sections_known() {
        let ids: BTreeSet<String> = SETTINGS.iter().map(Setting::id).collect();
        assert_eq!(ids.len(), SETTINGS.len());
        let flags: Vec<&str> = SETTINGS.iter().filter_map(|s| s.flag).collect();
        assert_eq!(flags.iter().collect::<BTreeSet<_>>().len(), flags.len());
        let envs: BTreeSet<String> = SETTINGS
            .iter()
            .map(Setting::env)
            .chain(SETTINGS.iter().filter_map(|s| s.legacy_env.map(String::from)))
            .collect();
        assert_eq!(envs.len(), SETTINGS.len() + SETTINGS.iter().filter(|s| s.legacy_env.is_some()).count());
        for s in SETTINGS {
            assert!(SECTIONS.iter().any(|(name, _)| *name == s.section), "{}", s.id());
            assert!(!s.help.is_empty(), "{} has no help", s.id());
        }
        assert_eq!(find("auth.enabled").map(Setting::env).as_deref(), Some("ES_AUTH_ENABLED"));
    }

    #[test]
    fn settings_are_grouped_in_section_order() {
        let order = |s: &Setting| SECTIONS.iter().position(|(n, _)| *n == s.section).unwrap();
        assert!(SETTINGS.windows(2).all(|w| order(&w[0]) <= order(&w[1])));
    }
}
