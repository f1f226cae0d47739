//! `es-broker config init | reference | print | validate`, and the loading every
//! action shares: flags, `ES_*` and the file, resolved, with stray `ES_*` names
//! warned about.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::flags::{self, CommandLine};
use crate::resolve::{self, ConfigError, Effective, Value};
use crate::settings::{Default, Kind, SECTIONS, SETTINGS, Setting};

/// The configuration in effect, or every problem with it.
pub fn load(line: &CommandLine) -> Result<Effective, Vec<ConfigError>> {
    let inputs = flags::inputs(line).map_err(|e| vec![e])?;
    for (name, nearest) in resolve::stray_env(&inputs.env) {
        let hint = nearest.map_or_else(String::new, |n| format!(" (did you mean {n}?)"));
        eprintln!("es-broker: warning: {name} is not an es-broker setting and is ignored{hint}");
    }
    resolve::resolve(&inputs)
}

/// Prints every error and returns exit code 2.
pub fn report_errors(errors: &[ConfigError]) -> ExitCode {
    for e in errors {
        eprintln!("es-broker: error: {e}");
    }
    eprintln!(
        "es-broker: {} configuration error(s); `es-broker config reference` lists every setting",
        errors.len()
    );
    ExitCode::from(2)
}

/// `config init`: a commented file with every setting at its default; unset ones
/// are commented out. Refuses to overwrite.
pub fn init(output: Option<&Path>) -> ExitCode {
    let text = starter_file();
    let Some(path) = output else {
        print!("{text}");
        return ExitCode::SUCCESS;
    };
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()));
    match written {
        Ok(()) => {
            eprintln!(
                "es-broker: wrote {}; start with `es-broker --config {}`",
                path.display(),
                path.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            eprintln!(
                "es-broker: error: {} exists; not overwriting it (remove it or pick another --output)",
                path.display()
            );
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("es-broker: error: writing {}: {e}", path.display());
            ExitCode::from(2)
        }
    }
}

pub fn starter_file() -> String {
    let mut out = String::from(
        "# es-broker configuration (docs/configuration.md). Every setting is shown at its\n\
         # default; commented-out ones are unset. Flags override ES_* variables, which\n\
         # override this file. Check it with `es-broker config validate --config FILE`.\n",
    );
    for (section, about) in SECTIONS {
        out.push_str(&format!("\n# {about}\n[{section}]\n"));
        for s in SETTINGS.iter().filter(|s| s.section == section) {
            out.push_str(&format!("\n# {}\n# env {}, flag {}\n", s.help, s.env(), s.flag_text()));
            match resolve::default_value(s) {
                Some(v) => out.push_str(&format!("{} = {v}\n", s.key)),
                None => {
                    out.push_str(&format!("# {} = {}   # unset: {}\n", s.key, example(s), unset_meaning(s)))
                }
            }
        }
    }
    out
}

/// A placeholder of the right TOML type for a commented-out setting.
fn example(s: &Setting) -> &'static str {
    match s.kind {
        Kind::Bool => "false",
        Kind::Int { .. } => "0",
        Kind::Text | Kind::Path => "\"\"",
        Kind::List => "[]",
    }
}

fn unset_meaning(s: &Setting) -> &'static str {
    match s.default {
        Default::Unset(meaning) => meaning,
        Default::Bool(_) | Default::Int(_) | Default::IntFn(_) | Default::Text(_) => "",
    }
}

/// `config reference`.
pub fn reference() -> ExitCode {
    print!("{}", reference_table());
    ExitCode::SUCCESS
}

/// Every setting as a markdown table, one per section.
pub fn reference_table() -> String {
    let mut out = String::new();
    for (section, about) in SECTIONS {
        out.push_str(&format!("\n### [{section}]\n\n{}.\n", capitalized(about)));
        let settings: Vec<&Setting> = SETTINGS.iter().filter(|s| s.section == section).collect();
        if settings.is_empty() {
            continue;
        }
        out.push_str("\n| Key | Type | Default | Env | Flag | Meaning |\n|---|---|---|---|---|---|\n");
        for s in settings {
            out.push_str(&format!(
                "| `{}` | {} | {} | `{}` | {} | {}{} |\n",
                s.key,
                type_text(s),
                default_text(s),
                s.env(),
                s.flag.map_or_else(|| "-".to_owned(), |f| format!("`--{f}`")),
                s.help.replace('|', "\\|"),
                s.legacy_env.map_or_else(String::new, |l| format!(" Also read from `{l}`.")),
            ));
        }
    }
    out
}

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}

fn type_text(s: &Setting) -> String {
    match s.kind {
        Kind::Int { min, max } if max == u64::MAX => format!("integer ≥ {min}"),
        Kind::Int { min, max } => format!("integer {min}..={max}"),
        Kind::Bool | Kind::Text | Kind::Path | Kind::List => s.kind.name().to_owned(),
    }
}

fn default_text(s: &Setting) -> String {
    match resolve::default_value(s) {
        Some(v) => format!("`{v}`"),
        None => format!("unset ({})", unset_meaning(s)),
    }
}

/// `config print`: the value in effect of every setting and its source, as TOML
/// (secrets masked).
pub fn print(line: &CommandLine) -> ExitCode {
    match load(line) {
        Ok(cfg) => {
            print!("{}", printed(&cfg));
            ExitCode::SUCCESS
        }
        Err(errors) => report_errors(&errors),
    }
}

pub fn printed(cfg: &Effective) -> String {
    let mut out = String::new();
    for (section, _) in SECTIONS {
        let entries: Vec<_> = cfg.entries.iter().filter(|e| e.setting.section == section).collect();
        if entries.is_empty() {
            continue;
        }
        out.push_str(&format!("[{section}]\n"));
        for e in entries {
            let source = e.source.to_string();
            match &e.value {
                Some(_) if e.setting.secret => out.push_str(&format!(
                    "{} = {}   # {source}\n",
                    e.setting.key,
                    Value::Text("<redacted>".into())
                )),
                Some(v) => out.push_str(&format!("{} = {v}   # {source}\n", e.setting.key)),
                None => out.push_str(&format!(
                    "# {} unset: {}   # {source}\n",
                    e.setting.key,
                    unset_meaning(e.setting)
                )),
            }
        }
        out.push('\n');
    }
    out
}

/// `config validate`: the same checks as a start (types, ranges, unknown keys,
/// unsafe listeners, TLS files), all reported; exit 0 or 2.
pub fn validate(line: &CommandLine) -> ExitCode {
    let cfg = match load(line) {
        Ok(cfg) => cfg,
        Err(errors) => return report_errors(&errors),
    };
    match crate::plan(&cfg) {
        Ok(_) => {
            println!("configuration ok");
            ExitCode::SUCCESS
        }
        Err(errors) => {
            for e in &errors {
                eprintln!("es-broker: error: {e}");
            }
            eprintln!("es-broker: {} configuration error(s)", errors.len());
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::{Inputs, resolve};

    #[test]
    fn the_starter_file_resolves_to_the_defaults() {
        let inputs = Inputs { file: Some(("es.toml".into(), starter_file())), ..Inputs::default() };
        let cfg = resolve(&inputs).unwrap();
        for e in &cfg.entries {
            assert_eq!(e.value, resolve::default_value(e.setting), "{}", e.setting.id());
            let from_file = e.value.is_some();
            assert_eq!(matches!(e.source, resolve::Source::File(_)), from_file, "{}", e.setting.id());
        }
    }

    #[test]
    fn print_masks_secrets_and_names_sources() {
        let mut inputs = Inputs::default();
        inputs.env.insert("ES_AUTH_BOOTSTRAP_KEY".into(), "es_super_secret".into());
        inputs.flags.insert("http.bind".into(), vec!["127.0.0.1:1".into()]);
        let text = printed(&resolve(&inputs).unwrap());
        assert!(!text.contains("es_super_secret"), "{text}");
        assert!(text.contains("bootstrap_key = \"<redacted>\"   # env ES_AUTH_BOOTSTRAP_KEY"), "{text}");
        assert!(text.contains("bind = \"127.0.0.1:1\"   # flag --bind"), "{text}");
        assert!(text.contains("data_dir = \"./data\"   # default"), "{text}");
    }

    #[test]
    fn the_reference_lists_every_setting() {
        let table = reference_table();
        for s in SETTINGS {
            assert!(table.contains(&format!("| `{}` |", s.key)) && table.contains(&s.env()), "{}", s.id());
        }
    }
}
