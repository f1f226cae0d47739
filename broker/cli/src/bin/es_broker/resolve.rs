//! Turns flags, `ES_*` variables and a TOML file into one value per setting, with
//! where it came from. Precedence: flag > environment > file > default. Every
//! source's text goes through the same [`parse_text`]/[`parse_toml`] and range
//! check, and every problem is collected so `config validate` names them all.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use crate::settings::{Default, Kind, OTHER_ENV, SECTIONS, SETTINGS, Setting};

/// A parsed setting value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Bool(bool),
    Int(u64),
    /// Text and paths.
    Text(String),
    List(Vec<String>),
}

impl fmt::Display for Value {
    /// As TOML, so `config print` output is itself a config file.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(n) => write!(f, "{n}"),
            Value::Text(t) => write!(f, "{}", quote(t)),
            Value::List(items) => {
                let quoted: Vec<String> = items.iter().map(|i| quote(i)).collect();
                write!(f, "[{}]", quoted.join(", "))
            }
        }
    }
}

/// A TOML basic string.
pub fn quote(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Default,
    File(PathBuf),
    Env(String),
    Flag(String),
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Default => write!(f, "default"),
            Source::File(path) => write!(f, "file {}", path.display()),
            Source::Env(name) => write!(f, "env {name}"),
            Source::Flag(flag) => write!(f, "flag {flag}"),
        }
    }
}

/// Why a configuration was refused. Each names the setting as its source spells it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: unknown {what} `{name}`{}", did_you_mean(suggestion))]
    UnknownKey { file: String, what: &'static str, name: String, suggestion: Option<String> },
    #[error("{place}: {value} is not {}", article(expected))]
    WrongType { place: String, value: String, expected: &'static str },
    #[error("{place}: {value}: {reason}")]
    Invalid { place: String, value: String, reason: String },
    #[error("reading the config file {file}: {message}")]
    Unreadable { file: String, message: String },
}

/// "an integer", "a boolean".
fn article(kind: &str) -> String {
    let vowel = kind.starts_with(['a', 'e', 'i', 'o', 'u']);
    format!("{} {kind}", if vowel { "an" } else { "a" })
}

fn did_you_mean(suggestion: &Option<String>) -> String {
    suggestion.as_ref().map_or_else(String::new, |s| format!(" (did you mean `{s}`?)"))
}

/// What resolution reads: flags by setting id, the `ES_*` environment, the file.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    /// Raw flag values by setting id; several for a repeated list flag.
    pub flags: BTreeMap<String, Vec<String>>,
    pub env: BTreeMap<String, String>,
    /// The config file's path and text.
    pub file: Option<(PathBuf, String)>,
}

/// One setting's value in effect (`None`: unset) and its source.
#[derive(Debug, Clone)]
pub struct Entry {
    pub setting: &'static Setting,
    pub value: Option<Value>,
    pub source: Source,
}

/// The configuration in effect: one entry per setting of [`SETTINGS`], in order.
#[derive(Debug, Clone)]
pub struct Effective {
    pub entries: Vec<Entry>,
}

impl Effective {
    fn get(&self, id: &str) -> Option<&Value> {
        let entry = self.entries.iter().find(|e| e.setting.id() == id);
        // A missing id is a typo in this crate, caught by the unit tests that plan
        // the defaults.
        entry.unwrap_or_else(|| panic!("no setting {id}")).value.as_ref()
    }

    pub fn text(&self, id: &str) -> Option<String> {
        match self.get(id) {
            Some(Value::Text(t)) => Some(t.clone()),
            other => expect_kind(id, other, "text"),
        }
    }

    pub fn path(&self, id: &str) -> Option<PathBuf> {
        self.text(id).map(PathBuf::from)
    }

    pub fn flag(&self, id: &str) -> bool {
        match self.get(id) {
            Some(Value::Bool(b)) => *b,
            other => expect_kind(id, other, "bool").unwrap_or(false),
        }
    }

    pub fn int(&self, id: &str) -> Option<u64> {
        match self.get(id) {
            Some(Value::Int(n)) => Some(*n),
            other => expect_kind(id, other, "int"),
        }
    }

    pub fn list(&self, id: &str) -> Vec<String> {
        match self.get(id) {
            Some(Value::List(items)) => items.clone(),
            other => expect_kind(id, other, "list").unwrap_or_default(),
        }
    }

    /// Where `id`'s value came from.
    pub fn source(&self, id: &str) -> Source {
        self.entries.iter().find(|e| e.setting.id() == id).map_or(Source::Default, |e| e.source.clone())
    }
}

/// Unset is fine for any kind; a value of another kind is a bug in this crate.
fn expect_kind<T>(id: &str, found: Option<&Value>, wanted: &str) -> Option<T> {
    match found {
        None => None,
        Some(v) => panic!("setting {id} holds {v:?}, read as {wanted}"),
    }
}

/// The configuration from `inputs`, or every problem found.
pub fn resolve(inputs: &Inputs) -> Result<Effective, Vec<ConfigError>> {
    let mut errors = Vec::new();
    let file = match &inputs.file {
        Some((path, text)) => file_values(path, text, &mut errors),
        None => BTreeMap::new(),
    };
    let mut entries = Vec::new();
    for setting in SETTINGS {
        match entry(setting, inputs, &file) {
            Ok(e) => entries.push(e),
            Err(e) => errors.push(e),
        }
    }
    if errors.is_empty() { Ok(Effective { entries }) } else { Err(errors) }
}

/// One setting: the first source that has it, parsed.
fn entry(
    setting: &'static Setting,
    inputs: &Inputs,
    file: &BTreeMap<String, (Value, PathBuf)>,
) -> Result<Entry, ConfigError> {
    let id = setting.id();
    let found = |value, source| Ok(Entry { setting, value: Some(value), source });
    if let (Some(flag), Some(raw)) = (setting.flag, inputs.flags.get(&id)) {
        let place = format!("--{flag}");
        let value = match setting.kind {
            Kind::List => Value::List(raw.clone()),
            _ => parse_text(setting, &place, raw.last().map_or("", String::as_str))?,
        };
        return found(value, Source::Flag(place));
    }
    let names = std::iter::once(setting.env()).chain(setting.legacy_env.map(String::from));
    for name in names {
        if let Some(raw) = inputs.env.get(&name) {
            let value = parse_text(setting, &name, raw)?;
            return found(value, Source::Env(name));
        }
    }
    if let Some((value, path)) = file.get(&id) {
        return found(value.clone(), Source::File(path.clone()));
    }
    Ok(Entry { setting, value: default_value(setting), source: Source::Default })
}

/// The default as a value (`None` for unset).
pub fn default_value(setting: &Setting) -> Option<Value> {
    match setting.default {
        Default::Unset(_) => None,
        Default::Bool(b) => Some(Value::Bool(b)),
        Default::Int(n) => Some(Value::Int(n)),
        Default::IntFn(f) => Some(Value::Int(f())),
        Default::Text(t) => Some(Value::Text(t.to_owned())),
    }
}

/// A flag's or variable's text as the setting's kind; `place` names the source.
pub fn parse_text(setting: &Setting, place: &str, raw: &str) -> Result<Value, ConfigError> {
    let wrong = || ConfigError::WrongType {
        place: place.to_owned(),
        value: quote(raw),
        expected: setting.kind.name(),
    };
    let value = match setting.kind {
        Kind::Bool => match raw.trim() {
            "true" | "1" | "yes" | "on" => Value::Bool(true),
            "false" | "0" | "no" | "off" => Value::Bool(false),
            _ => return Err(wrong()),
        },
        Kind::Int { .. } => Value::Int(raw.trim().parse().map_err(|_| wrong())?),
        Kind::Text | Kind::Path => Value::Text(raw.to_owned()),
        Kind::List => {
            Value::List(raw.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect())
        }
    };
    check(setting, place, value)
}

/// A TOML value as the setting's kind: TOML types must match (a port is `9092`,
/// not `"9092"`).
pub fn parse_toml(setting: &Setting, place: &str, item: &toml_edit::Value) -> Result<Value, ConfigError> {
    let wrong = || ConfigError::WrongType {
        place: place.to_owned(),
        value: item.to_string_lossy(),
        expected: setting.kind.name(),
    };
    let value = match setting.kind {
        Kind::Bool => Value::Bool(item.as_bool().ok_or_else(wrong)?),
        Kind::Int { .. } => {
            let n = item.as_integer().ok_or_else(wrong)?;
            Value::Int(u64::try_from(n).map_err(|_| ConfigError::Invalid {
                place: place.to_owned(),
                value: n.to_string(),
                reason: "must not be negative".into(),
            })?)
        }
        Kind::Text | Kind::Path => Value::Text(item.as_str().ok_or_else(wrong)?.to_owned()),
        Kind::List => {
            let array = item.as_array().ok_or_else(wrong)?;
            let items: Option<Vec<String>> = array.iter().map(|v| v.as_str().map(String::from)).collect();
            Value::List(items.ok_or_else(wrong)?)
        }
    };
    check(setting, place, value)
}

/// The checks every source shares: ranges and non-empty paths.
fn check(setting: &Setting, place: &str, value: Value) -> Result<Value, ConfigError> {
    let invalid =
        |reason: String| ConfigError::Invalid { place: place.to_owned(), value: value.to_string(), reason };
    match (&setting.kind, &value) {
        (Kind::Int { min, max }, Value::Int(n)) if n < min || n > max => {
            Err(invalid(format!("must be between {min} and {max}")))
        }
        (Kind::Path, Value::Text(t)) if t.trim().is_empty() => Err(invalid("must not be empty".into())),
        _ => Ok(value),
    }
}

/// Displays a TOML value without its decoration, for error messages.
trait Lossy {
    fn to_string_lossy(&self) -> String;
}

impl Lossy for toml_edit::Value {
    fn to_string_lossy(&self) -> String {
        match self {
            toml_edit::Value::String(s) => quote(s.value()),
            toml_edit::Value::Integer(n) => n.value().to_string(),
            toml_edit::Value::Float(x) => x.value().to_string(),
            toml_edit::Value::Boolean(b) => b.value().to_string(),
            toml_edit::Value::Datetime(d) => d.value().to_string(),
            toml_edit::Value::Array(_) => "an array".into(),
            toml_edit::Value::InlineTable(_) => "a table".into(),
        }
    }
}

/// Every setting the file sets, by id, parsed; problems go to `errors`.
fn file_values(
    path: &std::path::Path,
    text: &str,
    errors: &mut Vec<ConfigError>,
) -> BTreeMap<String, (Value, PathBuf)> {
    let file = path.display().to_string();
    let mut out = BTreeMap::new();
    let doc = match toml_edit::Document::parse(text) {
        Ok(doc) => doc,
        Err(e) => {
            let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            let at = line.map_or_else(String::new, |l| format!("line {l}: "));
            errors.push(ConfigError::Syntax { file, message: format!("{at}{}", e.message().trim()) });
            return out;
        }
    };
    for (section, item) in doc.as_table().iter() {
        if !SECTIONS.iter().any(|(name, _)| *name == section) {
            let names = SECTIONS.iter().map(|(n, _)| (*n).to_owned());
            let suggestion = nearest(section, names);
            errors.push(ConfigError::UnknownKey {
                file: file.clone(),
                what: "section",
                name: section.into(),
                suggestion,
            });
            continue;
        }
        let Some(table) = item.as_table_like() else {
            let place = format!("{file}: {section}");
            errors.push(ConfigError::WrongType {
                place,
                value: "a value".into(),
                expected: "table ([section])",
            });
            continue;
        };
        for (key, item) in table.iter() {
            let id = format!("{section}.{key}");
            let Some(setting) = crate::settings::find(&id) else {
                let suggestion = nearest(&id, SETTINGS.iter().map(Setting::id));
                errors.push(ConfigError::UnknownKey {
                    file: file.clone(),
                    what: "setting",
                    name: id,
                    suggestion,
                });
                continue;
            };
            let place = format!("{file}: {id}");
            let Some(value) = item.as_value() else {
                errors.push(ConfigError::WrongType {
                    place,
                    value: "a table".into(),
                    expected: setting.kind.name(),
                });
                continue;
            };
            match parse_toml(setting, &place, value) {
                Ok(v) => {
                    out.insert(id, (v, path.to_owned()));
                }
                Err(e) => errors.push(e),
            }
        }
    }
    out
}

/// `ES_*` variables that are neither settings nor known to es, each with the
/// nearest setting's variable: typos are reported, never read.
pub fn stray_env(env: &BTreeMap<String, String>) -> Vec<(String, Option<String>)> {
    let known = |name: &str| {
        OTHER_ENV.contains(&name) || SETTINGS.iter().any(|s| s.env() == name || s.legacy_env == Some(name))
    };
    env.keys()
        .filter(|name| name.starts_with("ES_") && !known(name))
        .map(|name| (name.clone(), nearest(name, SETTINGS.iter().map(Setting::env))))
        .collect()
}

/// The candidate closest to `name` by edit distance, if close enough to be a typo.
pub fn nearest(name: &str, candidates: impl Iterator<Item = String>) -> Option<String> {
    let best = candidates.map(|c| (distance(name, &c), c)).min_by_key(|(d, _)| *d)?;
    let allowed = (name.chars().count() / 3).max(2);
    (best.0 <= allowed).then_some(best.1)
}

/// Levenshtein distance over characters, with one row of memory.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(diagonal + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(flags: &[(&str, &str)], env: &[(&str, &str)], file: Option<&str>) -> Inputs {
        let mut out = Inputs::default();
        for (id, v) in flags {
            out.flags.entry((*id).to_owned()).or_default().push((*v).to_owned());
        }
        out.env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        out.file = file.map(|t| (PathBuf::from("es.toml"), t.to_owned()));
        out
    }

    #[test]
    fn flag_beats_env_beats_file_beats_default() {
        let file =
            "[http]\nbind = \"127.0.0.1:1\"\n[log]\ndata_dir = \"/file\"\n[metrics]\nenabled = false\n";
        let env = [("ES_HTTP_BIND", "127.0.0.1:2"), ("ES_LOG_DATA_DIR", "/env")];
        let cfg = resolve(&inputs(&[("http.bind", "127.0.0.1:3")], &env, Some(file))).unwrap();
        assert_eq!(cfg.text("http.bind").as_deref(), Some("127.0.0.1:3"));
        assert_eq!(cfg.source("http.bind"), Source::Flag("--bind".into()));
        assert_eq!(cfg.text("log.data_dir").as_deref(), Some("/env"));
        assert_eq!(cfg.source("log.data_dir"), Source::Env("ES_LOG_DATA_DIR".into()));
        assert!(!cfg.flag("metrics.enabled"));
        assert_eq!(cfg.source("metrics.enabled"), Source::File("es.toml".into()));
        assert_eq!(cfg.text("kafka.bind").as_deref(), Some("127.0.0.1:9092"));
        assert_eq!(cfg.source("kafka.bind"), Source::Default);
        assert_eq!(cfg.int("auth.quota_fetch_bytes_per_s"), None);
    }

    #[test]
    fn the_mechanical_name_beats_the_legacy_one() {
        let env = [("ES_DATA_DIR", "/old"), ("ES_LOG_DATA_DIR", "/new"), ("ES_PLUGIN_CACHE_DIR", "/cache")];
        let cfg = resolve(&inputs(&[], &env, None)).unwrap();
        assert_eq!(cfg.text("log.data_dir").as_deref(), Some("/new"));
        assert_eq!(cfg.source("plugins.cache_dir"), Source::Env("ES_PLUGIN_CACHE_DIR".into()));
    }

    #[test]
    fn unknown_keys_and_sections_suggest_the_nearest() {
        let file = "[http]\nbnid = \"x\"\n[metric]\nenabled = true\n";
        let errors = resolve(&inputs(&[], &[], Some(file))).unwrap_err();
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            text,
            [
                "es.toml: unknown setting `http.bnid` (did you mean `http.bind`?)",
                "es.toml: unknown section `metric` (did you mean `metrics`?)",
            ]
        );
    }

    #[test]
    fn wrong_types_and_ranges_name_key_value_and_expectation_every_one() {
        let file = "[kafka]\nadvertised_port = \"9092\"\n[http]\nmax_in_flight_requests = 0\n[journal]\nenabled = 1\n";
        let errors = resolve(&inputs(&[], &[("ES_AUTH_ENABLED", "maybe")], Some(file))).unwrap_err();
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert!(
            text.contains(&"es.toml: kafka.advertised_port: \"9092\" is not an integer".into()),
            "{text:?}"
        );
        assert!(
            text.contains(&"es.toml: http.max_in_flight_requests: 0: must be between 1 and 1000000".into()),
            "{text:?}"
        );
        assert!(text.contains(&"es.toml: journal.enabled: 1 is not a boolean".into()), "{text:?}");
        assert!(text.contains(&"ES_AUTH_ENABLED: \"maybe\" is not a boolean".into()), "{text:?}");
        assert_eq!(text.len(), 4, "{text:?}");
    }

    #[test]
    fn flags_and_env_share_the_range_check() {
        let bad_flag = resolve(&inputs(&[("kafka.advertised_port", "0")], &[], None)).unwrap_err();
        assert_eq!(bad_flag[0].to_string(), "--kafka-advertised-port: 0: must be between 1 and 65535");
        let bad_env = resolve(&inputs(&[], &[("ES_KAFKA_ADVERTISED_PORT", "70000")], None)).unwrap_err();
        assert_eq!(bad_env[0].to_string(), "ES_KAFKA_ADVERTISED_PORT: 70000: must be between 1 and 65535");
    }

    #[test]
    fn a_syntax_error_names_the_line() {
        let errors = resolve(&inputs(&[], &[], Some("[log]\ndata_dir = \n"))).unwrap_err();
        assert!(errors[0].to_string().starts_with("es.toml: line 2: "), "{errors:?}");
    }

    #[test]
    fn lists_come_from_arrays_repeated_flags_or_commas() {
        let file = "[tls]\nprincipal_rules = [\"cn:a=k1\", \"cn:b=k2\"]\n";
        let cfg = resolve(&inputs(&[], &[], Some(file))).unwrap();
        assert_eq!(cfg.list("tls.principal_rules"), ["cn:a=k1", "cn:b=k2"]);
        let cfg = resolve(&inputs(&[], &[("ES_TLS_PRINCIPAL_RULES", "cn:a=k1, cn:b=k2")], None)).unwrap();
        assert_eq!(cfg.list("tls.principal_rules"), ["cn:a=k1", "cn:b=k2"]);
    }

    #[test]
    fn stray_variables_are_reported_with_the_nearest_name() {
        let env: BTreeMap<String, String> =
            [("ES_AUTH_ENABLD", "1"), ("ES_BROKER", "x"), ("ES_HTTP_BIND", "y"), ("ES_DATA_DIR", "z")]
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
        assert_eq!(stray_env(&env), [("ES_AUTH_ENABLD".to_owned(), Some("ES_AUTH_ENABLED".to_owned()))]);
    }

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("bind", "bind"), 0);
        assert_eq!(distance("bnid", "bind"), 2);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(nearest("zzzzzzzz", ["http.bind".to_owned()].into_iter()), None);
    }
}
