//! A plugin's configuration: the binding's string pairs with typed accessors.

use std::str::FromStr;

/// Key/value configuration handed to `configure`. Later pairs win over earlier ones.
#[derive(Debug, Clone, Default)]
pub struct Config {
    pairs: Vec<(String, String)>,
}

impl Config {
    pub fn new(pairs: Vec<(String, String)>) -> Self {
        Self { pairs }
    }

    /// The value of `key`, if set.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// The value of `key`, or an error naming it.
    pub fn require(&self, key: &str) -> Result<&str, String> {
        self.get(key).ok_or_else(|| format!("missing config key `{key}`"))
    }

    /// Parses `key` with `FromStr`; `None` when unset.
    pub fn parse<T: FromStr>(&self, key: &str) -> Result<Option<T>, String>
    where
        T::Err: std::fmt::Display,
    {
        self.get(key).map(|v| v.parse::<T>().map_err(|e| format!("config key `{key}`: {e}"))).transpose()
    }

    /// A boolean key (`true`/`false`, case-insensitive); `default` when unset.
    pub fn flag(&self, key: &str, default: bool) -> Result<bool, String> {
        match self.get(key).map(str::to_ascii_lowercase).as_deref() {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(other) => Err(format!("config key `{key}`: expected true or false, got `{other}`")),
        }
    }

    /// A comma-separated list, trimmed, without empty items; empty when unset.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.get(key)
            .map(|v| v.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default()
    }

    /// Refuses keys outside `known`, so a typo fails loudly at bind time.
    pub fn reject_unknown(&self, known: &[&str]) -> Result<(), String> {
        match self.pairs.iter().find(|(k, _)| !known.contains(&k.as_str())) {
            Some((k, _)) => Err(format!("unknown config key `{k}` (known: {})", known.join(", "))),
            None => Ok(()),
        }
    }
}
