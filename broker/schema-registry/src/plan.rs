//! Planning writes: each planner validates a request against the current state and
//! returns the records that carry it out plus the answer to give once they are
//! durable. Nothing here changes the state; the broker appends the records, waits
//! for the fsync, then applies them. Writes are serialized by the caller, so a plan
//! is never stale when it is applied.

use crate::checker::{ResolvedReference, ResolvedSchema, SchemaCheckers};
use crate::error::{RegistryError, Result};
use crate::record::{Change, ConfigValue, ModeValue, NextIdValue, SchemaValue};
use crate::state::{Identity, State};
use crate::types::{CompatLevel, Mode, Reference, RegisterRequest, SchemaType, SubjectVersion, VersionSpec};

/// Records to append, and the answer once they are durable (no records: answer now).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan<T> {
    pub changes: Vec<Change>,
    pub answer: T,
}

impl<T> Plan<T> {
    fn read_only(answer: T) -> Plan<T> {
        Plan { changes: Vec::new(), answer }
    }
}

/// The outcome of a registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registered {
    pub id: i32,
    pub version: SubjectVersion,
}

/// The answer of the compatibility routes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompatibilityResult {
    pub is_compatible: bool,
    /// One line per incompatibility, then the level; empty when compatible.
    pub messages: Vec<String>,
}

/// How deep references may nest (a schema referencing one that references
/// another ... ): far beyond real schemas, and it bounds the resolver's stack.
const REFERENCE_DEPTH_MAX: usize = 64;

/// A request's schema, parsed, canonicalized and with its references resolved.
struct Proposed {
    schema_type: SchemaType,
    text: String,
    references: Vec<Reference>,
    /// The referenced schemas' texts, as the checker gets them.
    resolved: Vec<ResolvedReference>,
    canonical: String,
}

impl Proposed {
    /// What the checker compares: the text that will be stored, with its references.
    fn for_checker(&self) -> ResolvedSchema {
        ResolvedSchema { text: self.text.clone(), references: self.resolved.clone() }
    }
}

impl Proposed {
    fn identity(&self) -> Identity {
        (self.schema_type, self.canonical.clone(), self.references.clone())
    }
}

impl State {
    /// Type, canonical form (42201 when invalid) and resolved references (42201 when one is missing).
    fn propose(&self, checkers: &SchemaCheckers, req: &RegisterRequest, normalize: bool) -> Result<Proposed> {
        let schema_type = SchemaType::parse(req.schema_type.as_deref())?;
        if req.schema.trim().is_empty() {
            return Err(RegistryError::InvalidSchema("the schema is empty".into()));
        }
        let references: Vec<Reference> =
            req.references.iter().map(|r| self.resolve_reference(r)).collect::<Result<_>>()?;
        let resolved = self.referenced_schemas(&references)?;
        let schema = ResolvedSchema { text: req.schema.clone(), references: resolved };
        let canonical = checkers.normalize(schema_type, &schema)?;
        let text = if normalize { canonical.clone() } else { schema.text };
        Ok(Proposed { schema_type, text, references, resolved: schema.references, canonical })
    }

    /// The schemas `references` (resolved to version numbers) point at, and
    /// those they reference in turn, each once, dependencies first, as the
    /// checkers get them. A name met twice keeps its first place and the text
    /// of the reference resolved last (a schema's own reference is resolved after
    /// those of the schemas it references). A version that is gone, a cycle or
    /// nesting deeper than `REFERENCE_DEPTH_MAX` is 42201. Public for whoever else
    /// needs a stored schema as the checkers see it (the broker's enforcement
    /// validator gets the same references).
    pub fn referenced_schemas(&self, references: &[Reference]) -> Result<Vec<ResolvedReference>> {
        let mut out = Vec::new();
        let mut done = std::collections::HashSet::new();
        let mut path = Vec::new();
        for r in references {
            self.collect_reference(r, &mut path, &mut done, &mut out)?;
        }
        Ok(out)
    }

    fn collect_reference(
        &self,
        r: &Reference,
        path: &mut Vec<(String, i32)>,
        done: &mut std::collections::HashSet<(String, i32)>,
        out: &mut Vec<ResolvedReference>,
    ) -> Result<()> {
        let key = (r.subject.clone(), r.version);
        if path.contains(&key) {
            let cycle: Vec<String> =
                path.iter().chain([&key]).map(|(s, v)| format!("subject '{s}' version {v}")).collect();
            return Err(RegistryError::InvalidSchema(format!(
                "circular schema references: {}",
                cycle.join(" -> ")
            )));
        }
        if path.len() >= REFERENCE_DEPTH_MAX {
            return Err(RegistryError::InvalidSchema(format!(
                "schema references nest more than {REFERENCE_DEPTH_MAX} levels deep (at reference '{}' to subject '{}' version {})",
                r.name, r.subject, r.version
            )));
        }
        let stored =
            self.raw_version(&r.subject, r.version).and_then(|v| self.stored(v.id)).ok_or_else(|| {
                RegistryError::InvalidSchema(format!(
                    "reference '{}' points at subject '{}' version {}, which does not exist",
                    r.name, r.subject, r.version
                ))
            })?;
        if done.insert(key.clone()) {
            path.push(key);
            for nested in &stored.references {
                self.collect_reference(nested, path, done, out)?;
            }
            path.pop();
        }
        match out.iter_mut().find(|o| o.name == r.name) {
            Some(seen) => seen.text = stored.schema.clone(),
            None => out.push(ResolvedReference { name: r.name.clone(), text: stored.schema.clone() }),
        }
        Ok(())
    }

    fn resolve_reference(&self, r: &Reference) -> Result<Reference> {
        let spec = if r.version == -1 {
            Some(VersionSpec::Latest)
        } else {
            VersionSpec::parse(&r.version.to_string()).ok()
        };
        let version = spec.and_then(|spec| self.resolve(&r.subject, spec, false).ok()).ok_or_else(|| {
            RegistryError::InvalidSchema(format!(
                "reference '{}' points at subject '{}' version {}, which does not exist; register it first",
                r.name, r.subject, r.version
            ))
        })?;
        Ok(Reference { name: r.name.clone(), subject: r.subject.clone(), version })
    }

    /// A live version of `subject` holding the same schema.
    fn find_same(&self, subject: &str, proposed: &Proposed, deleted: bool) -> Option<i32> {
        let id = *self.by_identity.get(&proposed.identity())?;
        self.versions(subject, deleted)
            .ok()?
            .into_iter()
            .rev()
            .find(|n| self.raw_version(subject, *n).is_some_and(|v| v.id == id))
    }

    /// `POST /subjects/{s}`: the version of `subject` holding this schema.
    pub fn lookup(
        &self,
        checkers: &SchemaCheckers,
        subject: &str,
        req: &RegisterRequest,
        normalize: bool,
        deleted: bool,
    ) -> Result<SubjectVersion> {
        self.versions(subject, deleted)?;
        let proposed = self.propose(checkers, req, normalize || self.effective_normalize(subject))?;
        let n = self
            .find_same(subject, &proposed, deleted)
            .ok_or_else(|| RegistryError::SchemaNotFound("Schema not found".into()))?;
        Ok(self.subject_version(subject, n))
    }

    /// `POST /subjects/{s}/versions`.
    pub fn plan_register(
        &self,
        checkers: &SchemaCheckers,
        subject: &str,
        req: &RegisterRequest,
        normalize: bool,
    ) -> Result<Plan<Registered>> {
        let mode = self.effective_mode(subject);
        refuse_read_only(subject, mode)?;
        if req.id.is_some() && mode != Mode::Import {
            return Err(RegistryError::NotPermitted(format!(
                "subject '{subject}' is not in IMPORT mode: a schema id may be given only when importing"
            )));
        }
        let proposed = self.propose(checkers, req, normalize || self.effective_normalize(subject))?;
        if let Some(n) = self.find_same(subject, &proposed, false) {
            let existing = self.subject_version(subject, n);
            if req.id.is_some_and(|id| id != existing.id) {
                return Err(RegistryError::NotPermitted(format!(
                    "subject '{subject}' already holds this schema as version {n} with id {}",
                    existing.id
                )));
            }
            return Ok(Plan::read_only(Registered { id: existing.id, version: existing }));
        }
        let version = self.new_version_number(subject, req.version, mode)?;
        if mode != Mode::Import {
            let level = self.effective_level(subject);
            let live = self.live_versions(subject);
            let incompatibilities = self.incompatibilities(checkers, subject, level, &proposed, &live)?;
            if !incompatibilities.is_empty() {
                return Err(RegistryError::Incompatible {
                    subject: subject.to_owned(),
                    details: incompatibilities,
                });
            }
        }
        let id = self.id_for(&proposed, req.id)?;
        // Every version holding an id serves the same text.
        let schema = self.stored(id).map_or(proposed.text.clone(), |s| s.schema.clone());
        let value = SchemaValue {
            subject: subject.to_owned(),
            version,
            id,
            schema,
            schema_type: proposed.schema_type,
            references: proposed.references,
            canonical: proposed.canonical,
            deleted: false,
        };
        let mut changes =
            vec![Change::Schema { subject: subject.to_owned(), version, value: Some(value.clone()) }];
        if id >= self.next_id {
            changes.push(Change::NextId(NextIdValue { next_id: id + 1 }));
        }
        let answer = SubjectVersion {
            subject: value.subject,
            version,
            id,
            schema: value.schema,
            schema_type: value.schema_type,
            references: value.references,
            deleted: false,
        };
        Ok(Plan { changes, answer: Registered { id, version: answer } })
    }

    fn new_version_number(&self, subject: &str, given: Option<i32>, mode: Mode) -> Result<i32> {
        let next = self.next_version(subject);
        match given {
            None => Ok(next),
            Some(v) if v < 1 => Err(RegistryError::InvalidVersion(v.to_string())),
            Some(v) if mode == Mode::Import => {
                if self.raw_version(subject, v).is_some() {
                    return Err(RegistryError::NotPermitted(format!(
                        "version {v} of subject '{subject}' already exists with another schema; overwriting is not permitted"
                    )));
                }
                Ok(v)
            }
            Some(v) if v == next => Ok(v),
            Some(v) => Err(RegistryError::NotPermitted(format!(
                "version {v} may not be given for subject '{subject}': the next version is {next} (other versions only in IMPORT mode)"
            ))),
        }
    }

    /// The id of the proposed schema: the given one (IMPORT; 42205 when it holds
    /// another schema), the one already holding this schema, or a new one.
    fn id_for(&self, proposed: &Proposed, given: Option<i32>) -> Result<i32> {
        match given {
            Some(id) if id < 1 => Err(RegistryError::BadRequest(format!("schema id {id} is not positive"))),
            Some(id) => match self.stored(id) {
                Some(s)
                    if (s.schema_type, s.canonical.clone(), s.references.clone()) != proposed.identity() =>
                {
                    Err(RegistryError::NotPermitted(format!(
                        "schema id {id} is already used by a different schema; overwriting it is not permitted"
                    )))
                }
                _ => Ok(id),
            },
            None => Ok(self.by_identity.get(&proposed.identity()).copied().unwrap_or(self.next_id)),
        }
    }

    /// Runs the checker against the versions the level selects: the latest of
    /// `candidates` for plain levels, all of them for transitive ones.
    fn incompatibilities(
        &self,
        checkers: &SchemaCheckers,
        subject: &str,
        level: CompatLevel,
        proposed: &Proposed,
        candidates: &[i32],
    ) -> Result<Vec<String>> {
        if level == CompatLevel::None || candidates.is_empty() {
            return Ok(Vec::new());
        }
        let chosen = if level.is_transitive() { candidates } else { &candidates[candidates.len() - 1..] };
        let mut existing = Vec::new();
        for n in chosen {
            let v = self.subject_version(subject, *n);
            if v.schema_type != proposed.schema_type {
                return Ok(vec![format!(
                    "Incompatible schema type: version {n} of subject '{subject}' is {}, the new schema is {}",
                    v.schema_type, proposed.schema_type
                )]);
            }
            let references = self.referenced_schemas(&v.references)?;
            existing.push(ResolvedSchema { text: v.schema, references });
        }
        let found = checkers.check(proposed.schema_type, level, &proposed.for_checker(), &existing)?;
        Ok(found
            .into_iter()
            .map(|i| if i.path.is_empty() { i.message } else { format!("{}: {}", i.path, i.message) })
            .collect())
    }

    /// `POST /compatibility/subjects/{s}/versions[/{v}]`: `version` None checks
    /// against the versions the subject's level selects (compatible when there are
    /// none); a number against that version only; `latest` like a registration.
    pub fn check_compatibility(
        &self,
        checkers: &SchemaCheckers,
        subject: &str,
        version: Option<VersionSpec>,
        req: &RegisterRequest,
        normalize: bool,
    ) -> Result<CompatibilityResult> {
        let candidates = match version {
            None => self.live_versions(subject),
            Some(VersionSpec::Latest) => self.versions(subject, false)?,
            Some(spec) => vec![self.resolve(subject, spec, false)?],
        };
        let proposed = self.propose(checkers, req, normalize || self.effective_normalize(subject))?;
        let level = self.effective_level(subject);
        let mut messages = self.incompatibilities(checkers, subject, level, &proposed, &candidates)?;
        let is_compatible = messages.is_empty();
        if !is_compatible {
            if let Some(latest) = candidates.last() {
                messages.push(format!("{{oldSchemaVersion: {latest}}}"));
            }
            messages.push(format!("{{compatibility: '{}'}}", level.as_str()));
        }
        Ok(CompatibilityResult { is_compatible, messages })
    }

    /// `DELETE /subjects/{s}`: soft (every live version marked deleted) or, after
    /// that, `permanent` (tombstones, and the subject's config and mode go too).
    pub fn plan_delete_subject(&self, subject: &str, permanent: bool) -> Result<Plan<Vec<i32>>> {
        refuse_read_only(subject, self.effective_mode(subject))?;
        let all = self.versions(subject, true)?;
        let live = self.live_versions(subject);
        let mut changes = Vec::new();
        if permanent {
            if !live.is_empty() {
                return Err(RegistryError::SubjectNotSoftDeleted(subject.to_owned()));
            }
            for n in &all {
                changes.push(Change::Schema { subject: subject.to_owned(), version: *n, value: None });
            }
            if self.configs.contains_key(&Some(subject.to_owned())) {
                changes.push(Change::Config { subject: Some(subject.to_owned()), value: None });
            }
            if self.modes.contains_key(&Some(subject.to_owned())) {
                changes.push(Change::Mode { subject: Some(subject.to_owned()), value: None });
            }
            return Ok(Plan { changes, answer: all });
        }
        if live.is_empty() {
            return Err(RegistryError::SubjectSoftDeleted(subject.to_owned()));
        }
        for n in &live {
            self.refuse_referenced(subject, *n)?;
            changes.push(self.soft_deleted(subject, *n));
        }
        Ok(Plan { changes, answer: live })
    }

    /// `DELETE /subjects/{s}/versions/{v}`: soft, or `permanent` after a soft delete.
    pub fn plan_delete_version(
        &self,
        subject: &str,
        spec: VersionSpec,
        permanent: bool,
    ) -> Result<Plan<i32>> {
        refuse_read_only(subject, self.effective_mode(subject))?;
        let n = match spec {
            // `latest` is the newest live version; a permanent delete may name a soft-deleted one.
            VersionSpec::Latest => self.resolve(subject, spec, permanent)?,
            VersionSpec::Number(n) => {
                self.versions(subject, true)?;
                if self.raw_version(subject, n).is_none() {
                    return Err(RegistryError::VersionNotFound {
                        subject: subject.to_owned(),
                        version: n.to_string(),
                    });
                }
                n
            }
        };
        let deleted = self.raw_version(subject, n).expect("resolved above").deleted;
        if permanent {
            if !deleted {
                return Err(RegistryError::VersionNotSoftDeleted { subject: subject.to_owned(), version: n });
            }
            self.refuse_referenced(subject, n)?;
            let change = Change::Schema { subject: subject.to_owned(), version: n, value: None };
            return Ok(Plan { changes: vec![change], answer: n });
        }
        if deleted {
            return Err(RegistryError::VersionSoftDeleted { subject: subject.to_owned(), version: n });
        }
        self.refuse_referenced(subject, n)?;
        Ok(Plan { changes: vec![self.soft_deleted(subject, n)], answer: n })
    }

    fn refuse_referenced(&self, subject: &str, n: i32) -> Result<()> {
        let ids = self.referenced_by(subject, n);
        if ids.is_empty() {
            return Ok(());
        }
        Err(RegistryError::ReferenceExists(format!(
            "One or more references exist to the schema {{subject={subject}, version={n}}}: schema ids {ids:?}; delete those first"
        )))
    }

    fn soft_deleted(&self, subject: &str, n: i32) -> Change {
        let v = self.subject_version(subject, n);
        let stored = self.stored(v.id).expect("a version's id is stored");
        Change::Schema {
            subject: subject.to_owned(),
            version: n,
            value: Some(SchemaValue {
                subject: subject.to_owned(),
                version: n,
                id: v.id,
                schema: v.schema,
                schema_type: v.schema_type,
                references: v.references,
                canonical: stored.canonical.clone(),
                deleted: true,
            }),
        }
    }

    /// `PUT /config[/{s}]`.
    pub fn plan_set_config(&self, subject: Option<&str>, value: ConfigValue) -> Plan<ConfigValue> {
        let change = Change::Config { subject: subject.map(str::to_owned), value: Some(value.clone()) };
        Plan { changes: vec![change], answer: value }
    }

    /// `DELETE /config[/{s}]`: answers the config that was removed (global: back to BACKWARD).
    pub fn plan_delete_config(&self, subject: Option<&str>) -> Result<Plan<ConfigValue>> {
        let key = subject.map(str::to_owned);
        match (self.configs.get(&key), subject) {
            (Some(old), _) => {
                Ok(Plan { changes: vec![Change::Config { subject: key, value: None }], answer: old.clone() })
            }
            (None, None) => Ok(Plan::read_only(self.config(None, true)?)),
            (None, Some(s)) if !self.has_subject(s) => Err(RegistryError::SubjectNotFound(s.to_owned())),
            (None, Some(s)) => Err(RegistryError::SubjectCompatNotConfigured(s.to_owned())),
        }
    }

    /// `PUT /mode[/{s}]`: IMPORT only on an empty subject (registry, for the global
    /// mode) unless `force`.
    pub fn plan_set_mode(&self, subject: Option<&str>, mode: Mode, force: bool) -> Result<Plan<Mode>> {
        if mode == Mode::Import && !force {
            let busy = match subject {
                Some(s) => self.has_subject(s),
                None => !self.subjects.is_empty(),
            };
            if busy {
                let what = subject.map_or("the registry".to_owned(), |s| format!("subject '{s}'"));
                return Err(RegistryError::NotPermitted(format!(
                    "Cannot import since found existing subjects: {what} is not empty (set force=true to import anyway)"
                )));
            }
        }
        let change = Change::Mode { subject: subject.map(str::to_owned), value: Some(ModeValue { mode }) };
        Ok(Plan { changes: vec![change], answer: mode })
    }

    /// `DELETE /mode[/{s}]`: answers the mode that was removed.
    pub fn plan_delete_mode(&self, subject: Option<&str>) -> Result<Plan<Mode>> {
        let key = subject.map(str::to_owned);
        match (self.modes.get(&key), subject) {
            (Some(old), _) => {
                Ok(Plan { changes: vec![Change::Mode { subject: key, value: None }], answer: *old })
            }
            (None, None) => Ok(Plan::read_only(Mode::default())),
            (None, Some(s)) if !self.has_subject(s) => Err(RegistryError::SubjectNotFound(s.to_owned())),
            (None, Some(s)) => Err(RegistryError::SubjectModeNotConfigured(s.to_owned())),
        }
    }
}

fn refuse_read_only(subject: &str, mode: Mode) -> Result<()> {
    if matches!(mode, Mode::ReadOnly | Mode::ReadOnlyOverride) {
        return Err(RegistryError::NotPermitted(format!("Subject {subject} is in read-only mode")));
    }
    Ok(())
}
