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
}

/// One schema id: its text and what makes it the same schema as another.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub schema: String,
    pub schema_type: SchemaType,
    pub references: Vec<Reference>,
    pub canonical: String,
    /// The (subject, version) pairs that hold this id, soft-deleted ones included.
    holders: BTreeSet<(String, i32)>,
}

/// Two registrations are the same schema when these are equal.
pub(crate) type Identity = (SchemaType, String, Vec<Reference>);

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
        self.subjects
            .entry(v.subject.clone())
            .or_default()
            .insert(v.version, Version { id: v.id, deleted: v.deleted });
        let identity = (v.schema_type, v.canonical.clone(), v.references.clone());
        self.by_identity.entry(identity).or_insert(v.id);
        let stored = self.schemas.entry(v.id).or_insert_with(|| Stored {
            schema: v.schema,
            schema_type: v.schema_type,
            references: v.references,
            canonical: v.canonical,
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
            let identity = (stored.schema_type, stored.canonical, stored.references);
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
            deleted: v.deleted,
        }
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

    /// A subject's own config (40408 when it has none, unless `default_to_global`),
    /// or the global one (`subject` None; BACKWARD when never set).
    pub fn config(&self, subject: Option<&str>, default_to_global: bool) -> Result<ConfigValue> {
        if let Some(c) = self.configs.get(&subject.map(str::to_owned)) {
            return Ok(c.clone());
        }
        match subject {
            Some(s) if !default_to_global => Err(RegistryError::SubjectCompatNotConfigured(s.to_owned())),
            _ => Ok(self
                .configs
                .get(&None)
                .cloned()
                .unwrap_or(ConfigValue { compatibility_level: CompatLevel::default(), normalize: None })),
        }
    }

    /// The level that applies to `subject`.
    pub fn effective_level(&self, subject: &str) -> CompatLevel {
        self.config(Some(subject), true).map(|c| c.compatibility_level).unwrap_or_default()
    }

    /// Whether `subject` normalizes schemas by config (its own, else the global one).
    pub fn effective_normalize(&self, subject: &str) -> bool {
        let own = self.configs.get(&Some(subject.to_owned())).and_then(|c| c.normalize);
        own.or_else(|| self.configs.get(&None).and_then(|c| c.normalize)).unwrap_or(false)
    }

    /// A subject's own mode (40409 when it has none, unless `default_to_global`), or
    /// the global one (READWRITE when never set).
    pub fn mode(&self, subject: Option<&str>, default_to_global: bool) -> Result<Mode> {
        if let Some(m) = self.modes.get(&subject.map(str::to_owned)) {
            return Ok(*m);
        }
        match subject {
            Some(s) if !default_to_global => Err(RegistryError::SubjectModeNotConfigured(s.to_owned())),
            _ => Ok(self.modes.get(&None).copied().unwrap_or_default()),
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

pub(crate) fn schema_not_found(id: i32) -> RegistryError {
    RegistryError::SchemaNotFound(format!("Schema {id} not found"))
}
