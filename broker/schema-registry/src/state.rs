//! The registry's index: built by applying the records of `__es_schemas` in log
//! order, and read by every query. Writes are planned in `plan.rs` and applied here
//! only after their records are durable.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::error::{RegistryError, Result};
use crate::record::{Change, ConfigValue, SchemaValue};
use crate::types::{CompatLevel, Mode, Reference, SchemaById, SchemaType, SubjectVersion, VersionSpec};

/// One version of a subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Version {
    pub id: i32,
    pub deleted: bool,
    /// This version's data-contract metadata and rules: kept per version, since
    /// `confluent:version` differs between versions sharing an id.
    pub metadata: Option<serde_json::Value>,
    pub rule_set: Option<serde_json::Value>,
}

/// One schema id: its text and what makes it the same schema as another.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub schema: String,
    pub schema_type: SchemaType,
    pub references: Vec<Reference>,
    pub canonical: String,
    pub metadata: Option<serde_json::Value>,
    pub rule_set: Option<serde_json::Value>,
    /// The (subject, version) pairs that hold this id, soft-deleted ones included.
    holders: BTreeSet<(String, i32)>,
}

impl Stored {
    pub(crate) fn identity(&self) -> Identity {
        identity(self.schema_type, &self.canonical, &self.references, &self.metadata, &self.rule_set)
    }
}

/// Two registrations are the same schema when these are equal: type, canonical
/// form, references, and (as in Confluent) metadata and rule set, as JSON text;
/// the `confluent:version` property tracks the version, not the schema, and is
/// left out so that registering again stays idempotent.
pub(crate) type Identity = (SchemaType, String, Vec<Reference>, String, String);

/// The metadata property Confluent keeps an explicitly asked version in.
pub(crate) const CONFLUENT_VERSION: &str = "confluent:version";

pub(crate) fn identity(
    schema_type: SchemaType,
    canonical: &str,
    references: &[Reference],
    metadata: &Option<serde_json::Value>,
    rule_set: &Option<serde_json::Value>,
) -> Identity {
    let text = |v: &Option<serde_json::Value>| v.as_ref().map(|v| v.to_string()).unwrap_or_default();
    let mut metadata = metadata.clone();
    if let Some(props) =
        metadata.as_mut().and_then(|m| m.get_mut("properties")).and_then(|p| p.as_object_mut())
    {
        props.remove(CONFLUENT_VERSION);
        if props.is_empty() {
            metadata.as_mut().and_then(|m| m.as_object_mut()).map(|m| m.remove("properties"));
        }
    }
    let metadata = metadata.filter(|m| m.as_object().is_none_or(|o| !o.is_empty()));
    (schema_type, canonical.to_owned(), references.to_vec(), text(&metadata), text(rule_set))
}

/// The subject names Confluent keeps for itself.
const RESERVED_SUBJECTS: [&str; 2] = ["__GLOBAL", "__EMPTY"];

/// 42208 for a subject Confluent refuses: reserved, or with a control character.
pub fn validate_subject(subject: &str) -> Result<()> {
    if RESERVED_SUBJECTS.contains(&subject) || subject.chars().any(char::is_control) {
        return Err(RegistryError::InvalidSubject(subject.to_owned()));
    }
    Ok(())
}

/// The context of a qualified subject name (`:.ctx:name` is in `.ctx`); `.` otherwise.
pub fn context_of(subject: &str) -> &str {
    subject
        .strip_prefix(':')
        .and_then(|rest| rest.split_once(':'))
        .map(|(ctx, _)| ctx)
        .filter(|ctx| ctx.starts_with('.') && ctx.len() > 1)
        .unwrap_or(".")
}

/// The key a context's own config and mode are kept under (Confluent's `:.ctx:`).
fn context_key(subject: &str) -> Option<String> {
    match context_of(subject) {
        "." => None,
        ctx => Some(format!(":{ctx}:")),
    }
}

/// The whole registry in memory.
#[derive(Debug, Default)]
pub struct State {
    pub(crate) subjects: BTreeMap<String, BTreeMap<i32, Version>>,
    pub(crate) schemas: BTreeMap<i32, Stored>,
    pub(crate) by_identity: HashMap<Identity, i32>,
    /// `None` is the global config.
    pub(crate) configs: BTreeMap<Option<String>, ConfigValue>,
    pub(crate) modes: BTreeMap<Option<String>, Mode>,
    /// The smallest id never handed out.
    pub(crate) next_id: i32,
}

impl State {
    pub fn new() -> State {
        State { next_id: 1, ..State::default() }
    }

    /// Applies one durable record.
    pub fn apply(&mut self, change: Change) {
        match change {
            Change::Schema { subject, version, value } => {
                self.remove_version(&subject, version);
                if let Some(v) = value {
                    self.insert_version(v);
                }
            }
            Change::Config { subject, value: Some(v) } => {
                self.configs.insert(subject, v);
            }
            Change::Config { subject, value: None } => {
                self.configs.remove(&subject);
            }
            Change::Mode { subject, value: Some(v) } => {
                self.modes.insert(subject, v.mode);
            }
            Change::Mode { subject, value: None } => {
                self.modes.remove(&subject);
            }
            Change::NextId(v) => self.next_id = self.next_id.max(v.next_id),
        }
    }

    fn insert_version(&mut self, v: SchemaValue) {
        self.next_id = self.next_id.max(v.id.saturating_add(1));
        self.subjects.entry(v.subject.clone()).or_default().insert(
            v.version,
            Version {
                id: v.id,
                deleted: v.deleted,
                metadata: v.metadata.clone(),
                rule_set: v.rule_set.clone(),
            },
        );
        let identity = identity(v.schema_type, &v.canonical, &v.references, &v.metadata, &v.rule_set);
        self.by_identity.entry(identity).or_insert(v.id);
        let stored = self.schemas.entry(v.id).or_insert_with(|| Stored {
            schema: v.schema,
            schema_type: v.schema_type,
            references: v.references,
            canonical: v.canonical,
            metadata: v.metadata,
            rule_set: v.rule_set,
            holders: BTreeSet::new(),
        });
        stored.holders.insert((v.subject, v.version));
    }

    fn remove_version(&mut self, subject: &str, version: i32) {
        let Some(versions) = self.subjects.get_mut(subject) else { return };
        let Some(old) = versions.remove(&version) else { return };
        if versions.is_empty() {
            self.subjects.remove(subject);
        }
        let Some(stored) = self.schemas.get_mut(&old.id) else { return };
        stored.holders.remove(&(subject.to_owned(), version));
        if stored.holders.is_empty() {
            let stored = self.schemas.remove(&old.id).expect("present above");
            let identity = stored.identity();
            if self.by_identity.get(&identity) == Some(&old.id) {
                self.by_identity.remove(&identity);
            }
        }
    }

    /// Subjects with a live version (with `deleted`, also those whose versions are
    /// all soft-deleted; with `deleted_only`, only those), filtered by prefix.
    pub fn subjects(&self, deleted: bool, deleted_only: bool, prefix: &str) -> Vec<String> {
        self.subjects
            .iter()
            .filter(|(s, _)| s.starts_with(prefix))
            .filter(|(_, versions)| {
                let live = versions.values().any(|v| !v.deleted);
                if deleted_only { !live } else { live || deleted }
            })
            .map(|(s, _)| s.clone())
            .collect()
    }

    /// The versions of `subject` (soft-deleted ones only with `deleted`); 40401 when none.
    pub fn versions(&self, subject: &str, deleted: bool) -> Result<Vec<i32>> {
        let versions: Vec<i32> = self
            .subjects
            .get(subject)
            .into_iter()
            .flatten()
            .filter(|(_, v)| deleted || !v.deleted)
            .map(|(n, _)| *n)
            .collect();
        if versions.is_empty() {
            return Err(RegistryError::SubjectNotFound(subject.to_owned()));
        }
        Ok(versions)
    }

    /// Resolves a version selector to a number: 40401 without the subject, 40402
    /// without the version (a soft-deleted one counts only with `deleted`).
    pub fn resolve(&self, subject: &str, spec: VersionSpec, deleted: bool) -> Result<i32> {
        let versions = self.versions(subject, deleted)?;
        match spec {
            VersionSpec::Latest => Ok(*versions.last().expect("versions() is never empty")),
            VersionSpec::Number(n) if versions.contains(&n) => Ok(n),
            VersionSpec::Number(n) => {
                Err(RegistryError::VersionNotFound { subject: subject.to_owned(), version: n.to_string() })
            }
        }
    }

    /// One version with its schema.
    pub fn version(&self, subject: &str, spec: VersionSpec, deleted: bool) -> Result<SubjectVersion> {
        let n = self.resolve(subject, spec, deleted)?;
        Ok(self.subject_version(subject, n))
    }

    pub(crate) fn subject_version(&self, subject: &str, n: i32) -> SubjectVersion {
        let v = &self.subjects[subject][&n];
        let stored = &self.schemas[&v.id];
        SubjectVersion {
            subject: subject.to_owned(),
            version: n,
            id: v.id,
            schema: stored.schema.clone(),
            schema_type: stored.schema_type,
            references: stored.references.clone(),
            metadata: v.metadata.clone(),
            rule_set: v.rule_set.clone(),
            deleted: v.deleted,
        }
    }

    /// `GET /schemas`: every version of the subjects starting with `prefix`
    /// (soft-deleted ones with `deleted`; only each subject's latest with
    /// `latest_only`), by subject then version, `offset` skipped and at most
    /// `limit` (all when `None`) returned.
    pub fn all_schemas(
        &self,
        prefix: &str,
        deleted: bool,
        latest_only: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> Vec<SubjectVersion> {
        let mut out = Vec::new();
        for (subject, versions) in self.subjects.iter().filter(|(s, _)| s.starts_with(prefix)) {
            let chosen: Vec<i32> =
                versions.iter().filter(|(_, v)| deleted || !v.deleted).map(|(n, _)| *n).collect();
            let chosen = if latest_only { &chosen[chosen.len().saturating_sub(1)..] } else { &chosen[..] };
            out.extend(chosen.iter().map(|n| self.subject_version(subject, *n)));
        }
        out.into_iter().skip(offset).take(limit.unwrap_or(usize::MAX)).collect()
    }

    /// The contexts that hold a subject, `.` (the default context) always first.
    pub fn contexts(&self) -> Vec<String> {
        let mut out = vec![".".to_owned()];
        for subject in self.subjects.keys() {
            let ctx = context_of(subject);
            if !out.iter().any(|c| c == ctx) {
                out.push(ctx.to_owned());
            }
        }
        out
    }

    /// Whether context `ctx` (`.ctx`, or `.` for the default one) may be deleted:
    /// no subject is in it, soft-deleted ones included, as Confluent 8.1 decides.
    /// es keeps no record of a context beyond its subjects, so there is nothing
    /// to remove; a context's own config and mode stay, as Confluent's do.
    pub fn check_context_empty(&self, ctx: &str) -> Result<()> {
        if self.subjects.keys().any(|s| context_of(s) == ctx) {
            return Err(RegistryError::ContextNotEmpty(ctx.to_owned()));
        }
        Ok(())
    }

    /// The subject `subject` stands for: its config's `alias` when it has one.
    pub fn resolve_alias(&self, subject: &str) -> String {
        self.configs
            .get(&Some(subject.to_owned()))
            .and_then(|c| c.alias.clone())
            .unwrap_or_else(|| subject.to_owned())
    }

    /// The latest live version of `subject` whose metadata properties hold every
    /// `(key, value)` pair (`GET /subjects/{s}/metadata`); 40401 / 40403.
    pub fn version_by_metadata(&self, subject: &str, wanted: &[(String, String)]) -> Result<SubjectVersion> {
        let versions = self.versions(subject, false)?;
        versions
            .iter()
            .rev()
            .map(|n| self.subject_version(subject, *n))
            .find(|v| {
                let props = v.metadata.as_ref().and_then(|m| m.get("properties"));
                wanted
                    .iter()
                    .all(|(k, want)| props.and_then(|p| p.get(k)).and_then(|x| x.as_str()) == Some(want))
            })
            .ok_or_else(|| RegistryError::SchemaNotFound("Schema not found".into()))
    }

    pub(crate) fn stored(&self, id: i32) -> Option<&Stored> {
        self.schemas.get(&id)
    }

    /// A schema by id; soft-deleted versions still serve their id, so records
    /// written with it stay readable.
    pub fn schema_by_id(&self, id: i32) -> Result<SchemaById> {
        let stored = self.schemas.get(&id).ok_or_else(|| schema_not_found(id))?;
        Ok(SchemaById {
            schema: stored.schema.clone(),
            schema_type: stored.schema_type,
            references: stored.references.clone(),
            metadata: stored.metadata.clone(),
            rule_set: stored.rule_set.clone(),
        })
    }

    /// The (subject, version) pairs holding `id`; 40403 when there are none.
    pub fn id_versions(&self, id: i32, deleted: bool) -> Result<Vec<(String, i32)>> {
        let stored = self.schemas.get(&id).ok_or_else(|| schema_not_found(id))?;
        let pairs: Vec<(String, i32)> =
            stored.holders.iter().filter(|(s, n)| deleted || !self.subjects[s][n].deleted).cloned().collect();
        if pairs.is_empty() {
            return Err(schema_not_found(id));
        }
        Ok(pairs)
    }

    /// Ids of live schemas that reference `subject` version `n`.
    pub fn referenced_by(&self, subject: &str, n: i32) -> Vec<i32> {
        self.schemas
            .iter()
            .filter(|(_, s)| s.references.iter().any(|r| r.subject == subject && r.version == n))
            .filter(|(_, s)| s.holders.iter().any(|(hs, hn)| !self.subjects[hs][hn].deleted))
            .map(|(id, _)| *id)
            .collect()
    }

    /// A subject's own config (40408 when it has none, unless `default_to_global`:
    /// then its context's, else the global one), or the global one (`subject`
    /// None; BACKWARD when never set).
    pub fn config(&self, subject: Option<&str>, default_to_global: bool) -> Result<ConfigValue> {
        if let Some(c) = self.configs.get(&subject.map(str::to_owned)) {
            return Ok(c.clone());
        }
        match subject {
            Some(s) if !default_to_global => Err(RegistryError::SubjectCompatNotConfigured(s.to_owned())),
            Some(s) => Ok(self.config_chain(s).into_iter().next().cloned().unwrap_or_else(global_default)),
            None => Ok(self.configs.get(&None).cloned().unwrap_or_else(global_default)),
        }
    }

    /// The configs that apply to `subject`, nearest first: its own, its context's, the global one.
    fn config_chain(&self, subject: &str) -> Vec<&ConfigValue> {
        [Some(subject.to_owned()), context_key(subject), None]
            .iter()
            .enumerate()
            .filter(|(i, k)| *i == 2 || k.is_some())
            .filter_map(|(_, k)| self.configs.get(k))
            .collect()
    }

    /// The first value `field` has along `subject`'s config chain.
    pub(crate) fn config_field<T>(
        &self,
        subject: &str,
        field: impl Fn(&ConfigValue) -> Option<T>,
    ) -> Option<T> {
        self.config_chain(subject).into_iter().find_map(field)
    }

    /// The level that applies to `subject`.
    pub fn effective_level(&self, subject: &str) -> CompatLevel {
        self.config_field(subject, |c| c.compatibility_level).unwrap_or_default()
    }

    /// Whether `subject` normalizes schemas by config (its own, its context's, the global one).
    pub fn effective_normalize(&self, subject: &str) -> bool {
        self.config_field(subject, |c| c.normalize).unwrap_or(false)
    }

    /// A subject's own mode (40409 when it has none, unless `default_to_global`:
    /// then its context's, else the global one), or the global one (READWRITE
    /// when never set).
    pub fn mode(&self, subject: Option<&str>, default_to_global: bool) -> Result<Mode> {
        if let Some(m) = self.modes.get(&subject.map(str::to_owned)) {
            return Ok(*m);
        }
        match subject {
            Some(s) if !default_to_global => Err(RegistryError::SubjectModeNotConfigured(s.to_owned())),
            Some(s) => Ok(context_key(s)
                .and_then(|k| self.modes.get(&Some(k)).copied())
                .or_else(|| self.modes.get(&None).copied())
                .unwrap_or_default()),
            None => Ok(self.modes.get(&None).copied().unwrap_or_default()),
        }
    }

    /// The mode in force for `subject`: READONLY_OVERRIDE globally beats any subject mode.
    pub fn effective_mode(&self, subject: &str) -> Mode {
        let global = self.mode(None, true).unwrap_or_default();
        if global == Mode::ReadOnlyOverride {
            return Mode::ReadOnly;
        }
        match self.mode(Some(subject), true).unwrap_or_default() {
            Mode::ReadOnlyOverride => Mode::ReadOnly,
            m => m,
        }
    }

    /// The live versions of `subject`, oldest first.
    pub(crate) fn live_versions(&self, subject: &str) -> Vec<i32> {
        self.versions(subject, false).unwrap_or_default()
    }

    /// The next version number of `subject` (after every version, soft-deleted included).
    pub(crate) fn next_version(&self, subject: &str) -> i32 {
        self.subjects.get(subject).and_then(|v| v.keys().next_back().copied()).unwrap_or(0) + 1
    }

    pub(crate) fn has_subject(&self, subject: &str) -> bool {
        self.subjects.contains_key(subject)
    }

    pub(crate) fn raw_version(&self, subject: &str, n: i32) -> Option<&Version> {
        self.subjects.get(subject)?.get(&n)
    }
}

fn global_default() -> ConfigValue {
    ConfigValue::level(CompatLevel::default())
}

pub(crate) fn schema_not_found(id: i32) -> RegistryError {
    RegistryError::SchemaNotFound(format!("Schema {id} not found"))
}
