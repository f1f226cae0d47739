//! Planning writes: each planner validates a request against the current state and
//! returns the records that carry it out plus the answer to give once they are
//! durable. Nothing here changes the state; the broker appends the records, waits
//! for the fsync, then applies them. Writes are serialized by the caller, so a plan
//! is never stale when it is applied.

use crate::checker::{Form, ResolvedReference, ResolvedSchema, SchemaCheckers};
use crate::error::{RegistryError, Result};
use crate::record::{Change, ConfigValue, ModeValue, NextIdValue, SchemaValue};
use crate::state::{CONFLUENT_VERSION, Identity, State, identity, validate_subject};
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
    /// The registry filled something in (the schema from the latest version,
    /// metadata or rules from the config or the latest version): Confluent then
    /// answers the whole schema, not only `{"id"}`.
    pub filled_in: bool,
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
    metadata: Option<serde_json::Value>,
    rule_set: Option<serde_json::Value>,
    /// The schema text came from the latest version (the request had none).
    from_latest: bool,
}

impl Proposed {
    /// What the checker compares: the text that will be stored, with its references.
    fn for_checker(&self) -> ResolvedSchema {
        ResolvedSchema { text: self.text.clone(), references: self.resolved.clone() }
    }
}

impl Proposed {
    fn identity(&self) -> Identity {
        identity(self.schema_type, &self.canonical, &self.references, &self.metadata, &self.rule_set)
    }
}

impl State {
    /// Type, canonical form (42201 when invalid) and resolved references (42201
    /// when one is missing). Without a schema text, `latest` (a registration's
    /// latest live version) lends its schema, as Confluent does; else "Empty schema".
    fn propose(
        &self,
        checkers: &SchemaCheckers,
        req: &RegisterRequest,
        normalize: bool,
        latest: Option<&SubjectVersion>,
    ) -> Result<Proposed> {
        let given = req.schema.as_deref().filter(|s| !s.trim().is_empty());
        let (text, schema_type, references, from_latest) = match (given, latest) {
            (Some(text), _) => (
                text.to_owned(),
                SchemaType::from_request(req.schema_type.as_deref())?,
                req.references.clone(),
                false,
            ),
            (None, Some(l)) => (l.schema.clone(), l.schema_type, l.references.clone(), true),
            (None, None) => return Err(RegistryError::Unprocessable("Empty schema".into())),
        };
        check_metadata(&req.metadata)?;
        let references: Vec<Reference> =
            references.iter().map(|r| self.resolve_reference(r)).collect::<Result<_>>()?;
        let resolved = self.referenced_schemas(&references)?;
        let schema = ResolvedSchema { text, references: resolved };
        let normalized = checkers.normalize(schema_type, &schema)?;
        // As Confluent: with `normalize` the normalized form is stored and
        // compared; else the type's print of the schema as written, when its
        // checker has one (Avro's `Schema.toString`, Protobuf's and JSON's
        // prints), and otherwise (a user's checker) the text as registered,
        // compared by its normalized form.
        let (text, canonical) = if normalize {
            (normalized.clone(), normalized)
        } else {
            match checkers.print(schema_type, &schema, Form::Canonical)? {
                Some(printed) => (printed.clone(), printed),
                None => (schema.text, normalized),
            }
        };
        Ok(Proposed {
            schema_type,
            text,
            references,
            resolved: schema.references,
            canonical,
            metadata: req.metadata.clone(),
            rule_set: req.rule_set.clone(),
            from_latest,
        })
    }

    /// A stored schema's text in Confluent's `format` (the `format` query
    /// parameter, `Form::for_format`): `serialized` (base64 of the file
    /// descriptor) and `ignore_extensions` for Protobuf, and `resolved` for Avro
    /// (references inlined), ask the type's checker for that form. Any other format, and a form the checker
    /// lacks, gives the text as stored, as Confluent answers formats it does
    /// not know.
    pub fn formatted(
        &self,
        checkers: &SchemaCheckers,
        schema_type: SchemaType,
        text: String,
        references: &[Reference],
        format: &str,
    ) -> Result<String> {
        let Some(form) = Form::for_format(schema_type, format) else { return Ok(text) };
        let schema = ResolvedSchema { text, references: self.referenced_schemas(references)? };
        Ok(checkers.print(schema_type, &schema, form)?.unwrap_or(schema.text))
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

    /// Confluent's "a schema sent with all references resolved": an AVRO schema
    /// without references that is, with its references inlined (`Form::Resolved`),
    /// a version of `subject` that has references, with the same metadata and
    /// rules. The oldest such version, as Confluent's loop over the versions finds
    /// it. A checker without the resolved print matches nothing.
    fn find_resolved(
        &self,
        checkers: &SchemaCheckers,
        subject: &str,
        proposed: &Proposed,
        deleted: bool,
    ) -> Result<Option<i32>> {
        if !proposed.references.is_empty() || proposed.schema_type != SchemaType::Avro {
            return Ok(None);
        }
        let mut inlined: Option<Option<String>> = None;
        for n in self.versions(subject, deleted).unwrap_or_default() {
            let Some(stored) = self.raw_version(subject, n).and_then(|v| self.stored(v.id)) else { continue };
            if stored.references.is_empty()
                || stored.schema_type != SchemaType::Avro
                || (&stored.metadata, &stored.rule_set) != (&proposed.metadata, &proposed.rule_set)
            {
                continue;
            }
            let wanted = match &inlined {
                Some(wanted) => wanted.clone(),
                None => {
                    let printed =
                        checkers.print(SchemaType::Avro, &proposed.for_checker(), Form::Resolved)?;
                    inlined.insert(printed).clone()
                }
            };
            let Some(wanted) = wanted else { return Ok(None) };
            let schema = ResolvedSchema {
                text: stored.schema.clone(),
                references: self.referenced_schemas(&stored.references)?,
            };
            if checkers.print(SchemaType::Avro, &schema, Form::Resolved)?.as_deref() == Some(wanted.as_str())
            {
                return Ok(Some(n));
            }
        }
        Ok(None)
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
        let proposed = self.propose(checkers, req, normalize || self.effective_normalize(subject), None)?;
        let found = self
            .find_same(subject, &proposed, deleted)
            .or_else(|| self.find_ignoring_contract(subject, &proposed, req, deleted));
        let n = match found {
            Some(n) => n,
            None => self
                .find_resolved(checkers, subject, &proposed, deleted)?
                .ok_or_else(|| RegistryError::SchemaNotFound("Schema not found".into()))?,
        };
        Ok(self.subject_version(subject, n))
    }

    /// A lookup without metadata or rules of its own (what serializers send)
    /// finds the newest version with the same schema whatever its data contract,
    /// which the config's default or override metadata may have added.
    fn find_ignoring_contract(
        &self,
        subject: &str,
        proposed: &Proposed,
        req: &RegisterRequest,
        deleted: bool,
    ) -> Option<i32> {
        if req.metadata.is_some() || req.rule_set.is_some() {
            return None;
        }
        self.versions(subject, deleted).ok()?.into_iter().rev().find(|n| {
            let v = self.raw_version(subject, *n).and_then(|v| self.stored(v.id));
            v.is_some_and(|s| {
                (s.schema_type, &s.canonical, &s.references)
                    == (proposed.schema_type, &proposed.canonical, &proposed.references)
            })
        })
    }

    /// `POST /subjects/{s}/versions`, with Confluent's rules: the mode decides
    /// whether an id must (IMPORT) or must not (READWRITE) be given; an explicit
    /// version outside IMPORT must be the next one; the config's default and
    /// override metadata and rules are merged in; the same schema (metadata
    /// included) returns its existing version unless a version is given.
    pub fn plan_register(
        &self,
        checkers: &SchemaCheckers,
        subject: &str,
        req: &RegisterRequest,
        normalize: bool,
    ) -> Result<Plan<Registered>> {
        validate_subject(subject)?;
        let mode = self.effective_mode(subject);
        refuse_by_mode(subject, mode, req.id.is_some())?;
        let latest = self.live_versions(subject).last().map(|n| self.subject_version(subject, *n));
        let mut proposed =
            self.propose(checkers, req, normalize || self.effective_normalize(subject), latest.as_ref())?;
        let next = self.next_version(subject);
        let asked = req.version.filter(|v| *v > 0);
        let mut filled_in = proposed.from_latest;
        if mode != Mode::Import {
            filled_in |= self.merge_contract(subject, &mut proposed, latest.as_ref(), asked.is_some(), next);
        }
        // An explicit version outside IMPORT registers anew even for a schema the
        // subject holds, as Confluent does.
        let reuse = asked.is_none() || mode == Mode::Import;
        if let Some(n) =
            self.find_same(subject, &proposed, false).filter(|n| reuse && asked.is_none_or(|a| a == *n))
        {
            let existing = self.subject_version(subject, n);
            if req.id.is_some_and(|id| id != existing.id) {
                return Err(RegistryError::NotPermitted(format!(
                    "subject '{subject}' already holds this schema as version {n} with id {}",
                    existing.id
                )));
            }
            return Ok(Plan::read_only(Registered { id: existing.id, version: existing, filled_in }));
        }
        if asked.is_none()
            && req.id.is_none()
            && let Some(n) = self.find_resolved(checkers, subject, &proposed, false)?
        {
            let existing = self.subject_version(subject, n);
            return Ok(Plan::read_only(Registered { id: existing.id, version: existing, filled_in }));
        }
        if mode != Mode::Import {
            self.refuse_incompatible(checkers, subject, &proposed)?;
        }
        let version = self.new_version_number(subject, asked, mode, next)?;
        let id = self.id_for(&proposed, req.id)?;
        Ok(self.registration(subject, version, id, proposed, filled_in))
    }

    /// The records of a registration that passed every check, and its answer.
    fn registration(
        &self,
        subject: &str,
        version: i32,
        id: i32,
        p: Proposed,
        filled_in: bool,
    ) -> Plan<Registered> {
        // Every version holding an id serves the same text.
        let schema = self.stored(id).map_or(p.text.clone(), |s| s.schema.clone());
        let value = SchemaValue {
            subject: subject.to_owned(),
            version,
            id,
            schema,
            schema_type: p.schema_type,
            references: p.references,
            canonical: p.canonical,
            metadata: p.metadata,
            rule_set: p.rule_set,
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
            metadata: value.metadata,
            rule_set: value.rule_set,
            deleted: false,
        };
        Plan { changes, answer: Registered { id, version: answer, filled_in } }
    }

    /// Merges the config's default and override metadata and rule sets around
    /// the request's own (or, without them, the latest version's), and records
    /// `confluent:version` when a version was asked for or is already tracked.
    /// True when that changed or filled in anything.
    fn merge_contract(
        &self,
        subject: &str,
        p: &mut Proposed,
        latest: Option<&SubjectVersion>,
        version_asked: bool,
        next: i32,
    ) -> bool {
        let own_metadata = p.metadata.clone().or_else(|| latest.and_then(|l| l.metadata.clone()));
        let own_rules = p.rule_set.clone().or_else(|| latest.and_then(|l| l.rule_set.clone()));
        let default_md = self.config_field(subject, |c| c.default_metadata.clone());
        let override_md = self.config_field(subject, |c| c.override_metadata.clone());
        let default_rules = self.config_field(subject, |c| c.default_rule_set.clone());
        let override_rules = self.config_field(subject, |c| c.override_rule_set.clone());
        let mut metadata = merge_metadata(merge_metadata(default_md, own_metadata), override_md);
        let rule_set = merge_rule_sets(merge_rule_sets(default_rules, own_rules), override_rules);
        let tracked =
            metadata.as_ref().and_then(|m| m.pointer(&format!("/properties/{CONFLUENT_VERSION}"))).is_some();
        if version_asked || tracked {
            let props = serde_json::json!({"properties": {CONFLUENT_VERSION: next.to_string()}});
            metadata = merge_metadata(metadata, Some(props));
        }
        let changed = metadata != p.metadata || rule_set != p.rule_set;
        p.metadata = metadata;
        p.rule_set = rule_set;
        changed || p.metadata.is_some() || p.rule_set.is_some()
    }

    /// 409 when the proposed schema breaks the subject's level against the live
    /// versions of its compatibility group.
    fn refuse_incompatible(
        &self,
        checkers: &SchemaCheckers,
        subject: &str,
        proposed: &Proposed,
    ) -> Result<()> {
        let level = self.effective_level(subject);
        let live = self.in_group(subject, proposed, self.live_versions(subject));
        let incompatibilities = self.incompatibilities(checkers, subject, level, proposed, &live)?;
        if incompatibilities.is_empty() {
            return Ok(());
        }
        Err(RegistryError::Incompatible { subject: subject.to_owned(), details: incompatibilities })
    }

    /// The versions among `candidates` in the proposed schema's compatibility
    /// group: with a `compatibilityGroup` property name in the config, those whose
    /// metadata gives that property the same value; all of them otherwise.
    fn in_group(&self, subject: &str, proposed: &Proposed, candidates: Vec<i32>) -> Vec<i32> {
        let Some(group) = self.config_field(subject, |c| c.compatibility_group.clone()) else {
            return candidates;
        };
        let value = |m: &Option<serde_json::Value>| {
            m.as_ref().and_then(|m| m.get("properties")).and_then(|p| p.get(&group)).cloned()
        };
        let wanted = value(&proposed.metadata);
        candidates
            .into_iter()
            .filter(|n| value(&self.subject_version(subject, *n).metadata) == wanted)
            .collect()
    }

    fn new_version_number(&self, subject: &str, asked: Option<i32>, mode: Mode, next: i32) -> Result<i32> {
        match asked {
            None => Ok(next),
            Some(v) if mode == Mode::Import => {
                if self.raw_version(subject, v).is_some() {
                    return Err(RegistryError::NotPermitted(format!(
                        "version {v} of subject '{subject}' already exists with another schema; overwriting is not permitted"
                    )));
                }
                Ok(v)
            }
            Some(v) if v == next => Ok(v),
            Some(_) => {
                Err(RegistryError::Unprocessable("Version is not one more than previous version".into()))
            }
        }
    }

    /// The id of the proposed schema: the given one (IMPORT; 42205 when it holds
    /// another schema), the one already holding this schema, or a new one.
    fn id_for(&self, proposed: &Proposed, given: Option<i32>) -> Result<i32> {
        match given {
            Some(id) if id < 1 => Err(RegistryError::BadRequest(format!("schema id {id} is not positive"))),
            Some(id) => match self.stored(id) {
                Some(s) if s.identity() != proposed.identity() => Err(RegistryError::NotPermitted(format!(
                    "Overwrite new schema with id {id} is not permitted."
                ))),
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
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let mut messages: Vec<String> = found.into_iter().map(confluent_message).collect();
        let last = *chosen.last().expect("candidates is not empty");
        let old = self.subject_version(subject, last);
        messages.push(format!("{{oldSchemaVersion: {last}}}"));
        messages.push(format!("{{oldSchema: '{}'}}", old.schema));
        messages.push(format!("{{validateFields: 'false', compatibility: '{}'}}", level.as_str()));
        Ok(messages)
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
        let proposed = self.propose(checkers, req, normalize || self.effective_normalize(subject), None)?;
        let level = self.effective_level(subject);
        let candidates = self.in_group(subject, &proposed, candidates);
        let messages = self.incompatibilities(checkers, subject, level, &proposed, &candidates)?;
        Ok(CompatibilityResult { is_compatible: messages.is_empty(), messages })
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
                metadata: v.metadata,
                rule_set: v.rule_set,
                deleted: true,
            }),
        }
    }

    /// `PUT /config[/{s}]`: stores `update` over the current config and answers
    /// `update` alone, as Confluent echoes what was set. A read-only subject's
    /// config cannot change (42205).
    pub fn plan_set_config(&self, subject: Option<&str>, update: ConfigValue) -> Result<Plan<ConfigValue>> {
        if let Some(s) = subject {
            validate_subject(s)?;
            refuse_read_only(s, self.effective_mode(s))?;
        }
        let current = self.configs.get(&subject.map(str::to_owned)).cloned().unwrap_or_default();
        let value = current.updated(&update);
        let change = Change::Config { subject: subject.map(str::to_owned), value: Some(value) };
        Ok(Plan { changes: vec![change], answer: update })
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

/// One incompatibility in Confluent's shape,
/// `{errorType:'CODE', description:'...', additionalInfo:'...'}`: the checkers'
/// messages start with Confluent's difference name (`TYPE_MISMATCH: ...`); the
/// description is the rest, capitalized as Confluent's are, and the additional
/// information is where in the schema it is.
fn confluent_message(i: crate::checker::Incompatibility) -> String {
    let (code, text) = match i.message.split_once(": ") {
        Some((code, text))
            if !code.is_empty() && code.chars().all(|c| c.is_ascii_uppercase() || c == '_') =>
        {
            (code.to_owned(), text.to_owned())
        }
        _ => ("INCOMPATIBLE".to_owned(), i.message.clone()),
    };
    let mut chars = text.chars();
    let description: String =
        chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default();
    format!("{{errorType:'{code}', description:'{description}', additionalInfo:'{}'}}", i.path)
}

/// Confluent's register-mode rule: read-only refuses; an id needs IMPORT, and
/// without one the subject must be READWRITE.
fn refuse_by_mode(subject: &str, mode: Mode, id_given: bool) -> Result<()> {
    refuse_read_only(subject, mode)?;
    match (id_given, mode) {
        (true, Mode::Import) | (false, Mode::ReadWrite) => Ok(()),
        (true, _) => Err(RegistryError::NotPermitted(format!("Subject {subject} is not in import mode"))),
        (false, _) => {
            Err(RegistryError::NotPermitted(format!("Subject {subject} is not in read-write mode")))
        }
    }
}

/// `metadata.properties` values are strings (Confluent's `Map<String, String>`).
fn check_metadata(metadata: &Option<serde_json::Value>) -> Result<()> {
    let props = metadata.as_ref().and_then(|m| m.get("properties"));
    let bad = props.and_then(|p| p.as_object()).and_then(|p| p.iter().find(|(_, v)| !v.is_string()));
    match bad {
        Some((k, _)) => Err(RegistryError::BadRequest(format!("metadata property '{k}' is not a string"))),
        None => Ok(()),
    }
}

/// Confluent's metadata merge: `tags` and `properties` key by key (`new` wins),
/// `sensitive` the union; either side may be absent.
fn merge_metadata(
    old: Option<serde_json::Value>,
    new: Option<serde_json::Value>,
) -> Option<serde_json::Value> {
    let (Some(old), Some(new)) = (&old, &new) else { return new.or(old) };
    let mut out = serde_json::Map::new();
    for key in ["tags", "properties"] {
        let mut merged = old.get(key).and_then(|v| v.as_object()).cloned().unwrap_or_default();
        if let Some(n) = new.get(key).and_then(|v| v.as_object()) {
            merged.extend(n.clone());
        }
        if !merged.is_empty() {
            out.insert(key.to_owned(), merged.into());
        }
    }
    let mut sensitive: Vec<serde_json::Value> = Vec::new();
    for v in [old, new].iter().filter_map(|m| m.get("sensitive")?.as_array()).flatten() {
        if !sensitive.contains(v) {
            sensitive.push(v.clone());
        }
    }
    if !sensitive.is_empty() {
        out.insert("sensitive".to_owned(), sensitive.into());
    }
    Some(out.into())
}

/// Confluent's rule-set merge: each of `migrationRules`, `domainRules` and
/// `encodingRules` keeps the old rules not named in `new`, then `new`'s.
pub(crate) fn merge_rule_sets(
    old: Option<serde_json::Value>,
    new: Option<serde_json::Value>,
) -> Option<serde_json::Value> {
    let (Some(old), Some(new)) = (&old, &new) else { return new.or(old) };
    let mut out = serde_json::Map::new();
    for key in ["migrationRules", "domainRules", "encodingRules"] {
        let rules =
            |m: &serde_json::Value| m.get(key).and_then(|v| v.as_array()).cloned().unwrap_or_default();
        let fresh = rules(new);
        let named = |r: &serde_json::Value| fresh.iter().any(|f| f.get("name") == r.get("name"));
        let mut merged: Vec<serde_json::Value> = rules(old).into_iter().filter(|r| !named(r)).collect();
        merged.extend(fresh.iter().cloned());
        if !merged.is_empty() {
            out.insert(key.to_owned(), merged.into());
        }
    }
    Some(out.into())
}

fn refuse_read_only(subject: &str, mode: Mode) -> Result<()> {
    if matches!(mode, Mode::ReadOnly | Mode::ReadOnlyOverride) {
        return Err(RegistryError::NotPermitted(format!("Subject {subject} is in read-only mode")));
    }
    Ok(())
}
