//! The command line, built from the settings table: one flag per setting (each
//! global, so `config print` and `doctor` take them too), `--config`, and the
//! `config` and `doctor` subcommands.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::{Arg, ArgAction, ArgMatches, Command};

use crate::resolve::Inputs;
use crate::settings::{Kind, SETTINGS, Setting};

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Serve,
    ConfigInit { output: Option<PathBuf> },
    ConfigReference,
    ConfigPrint,
    ConfigValidate,
    Doctor { json: bool },
}

/// The parsed command line: the action, `--config`, and the setting flags.
#[derive(Debug, Clone)]
pub struct CommandLine {
    pub action: Action,
    pub config: Option<PathBuf>,
    pub flags: BTreeMap<String, Vec<String>>,
}

pub fn command() -> Command {
    let config = Arg::new("config")
        .long("config")
        .value_name("FILE")
        .global(true)
        .value_parser(clap::value_parser!(PathBuf))
        .help("A TOML config file (docs/configuration.md); ES_CONFIG names one too. Flags and ES_* variables override it.");
    let mut cmd = Command::new("es-broker")
        .version(env!("CARGO_PKG_VERSION"))
        .about("The es event-streaming broker")
        .arg(config)
        .subcommand(config_command())
        .subcommand(
            Command::new("doctor")
                .about(
                    "Check this machine and data directory before a start: exit 0 ok, 1 warnings, 2 errors",
                )
                .arg(
                    Arg::new("json")
                        .long("json")
                        .action(ArgAction::SetTrue)
                        .help("One JSON object per check"),
                ),
        );
    for setting in SETTINGS {
        if let Some(arg) = setting_arg(setting) {
            cmd = cmd.arg(arg);
        }
    }
    cmd
}

fn config_command() -> Command {
    Command::new("config")
        .about("Write, describe, show or check the configuration")
        .subcommand_required(true)
        .subcommand(
            Command::new("init").about("Write a starter file with every setting at its default").arg(
                Arg::new("output")
                    .long("output")
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(PathBuf))
                    .help("Write here instead of stdout (refuses to overwrite)"),
            ),
        )
        .subcommand(
            Command::new("reference").about("Every setting as a markdown table (docs/configuration.md)"),
        )
        .subcommand(Command::new("print").about("The configuration in effect and where each value came from"))
        .subcommand(
            Command::new("validate").about("Check the configuration; every problem is named, exit 2 if any"),
        )
}

/// A setting's flag: no clap default and no clap env, since resolution owns
/// precedence and parsing (one path for every source).
fn setting_arg(setting: &Setting) -> Option<Arg> {
    let flag = setting.flag?;
    // clap ids are &'static str; the table is built once per process.
    let id: &'static str = Box::leak(setting.id().into_boxed_str());
    let arg = Arg::new(id).long(flag).global(true).help(help(setting)).value_name(value_name(setting));
    let arg = match setting.kind {
        // `--auth` alone is true; `--auth=false` turns a file's true off again.
        Kind::Bool if setting.is_switch() => {
            arg.num_args(0..=1).require_equals(true).default_missing_value("true").value_name("BOOL")
        }
        Kind::List => arg.action(ArgAction::Append),
        Kind::Bool | Kind::Int { .. } | Kind::Text | Kind::Path => arg,
    };
    Some(arg)
}

fn help(setting: &Setting) -> String {
    format!("{} [{}: {}]", setting.help, setting.id(), setting.env())
}

fn value_name(setting: &Setting) -> &'static str {
    match setting.kind {
        Kind::Bool => "BOOL",
        Kind::Int { .. } => "N",
        Kind::Text => "TEXT",
        Kind::Path => "PATH",
        Kind::List => "VALUE",
    }
}

/// Parses the process's arguments (exits on `--help` or a usage error).
pub fn parse() -> CommandLine {
    from_matches(&command().get_matches())
}

pub fn from_matches(matches: &ArgMatches) -> CommandLine {
    let (action, leaf) = action(matches);
    let mut flags = BTreeMap::new();
    for setting in SETTINGS.iter().filter(|s| s.flag.is_some()) {
        let id = setting.id();
        let raw = leaf.get_raw(&id).or_else(|| matches.get_raw(&id));
        if let Some(values) = raw {
            let values: Vec<String> = values.map(|v| v.to_string_lossy().into_owned()).collect();
            flags.insert(id, values);
        }
    }
    let config = leaf.get_one::<PathBuf>("config").or_else(|| matches.get_one("config")).cloned();
    CommandLine { action, config, flags }
}

/// The action and the matches of the deepest subcommand (where global flags land).
fn action(matches: &ArgMatches) -> (Action, &ArgMatches) {
    match matches.subcommand() {
        Some(("config", sub)) => match sub.subcommand() {
            Some(("init", m)) => (Action::ConfigInit { output: m.get_one::<PathBuf>("output").cloned() }, m),
            Some(("reference", m)) => (Action::ConfigReference, m),
            Some(("print", m)) => (Action::ConfigPrint, m),
            Some(("validate", m)) => (Action::ConfigValidate, m),
            // subcommand_required makes clap refuse anything else before this.
            _ => unreachable!("clap requires a config subcommand"),
        },
        Some(("doctor", m)) => (Action::Doctor { json: m.get_flag("json") }, m),
        _ => (Action::Serve, matches),
    }
}

/// The inputs of resolution: these flags, the process's `ES_*` variables, and the
/// file from `--config` or `ES_CONFIG`.
pub fn inputs(line: &CommandLine) -> Result<Inputs, crate::resolve::ConfigError> {
    let env: BTreeMap<String, String> = std::env::vars().filter(|(k, _)| k.starts_with("ES_")).collect();
    let path = line.config.clone().or_else(|| env.get("ES_CONFIG").map(PathBuf::from));
    let file = match path {
        Some(path) => {
            let text =
                std::fs::read_to_string(&path).map_err(|e| crate::resolve::ConfigError::Unreadable {
                    file: path.display().to_string(),
                    message: e.to_string(),
                })?;
            Some((path, text))
        }
        None => None,
    };
    Ok(Inputs { flags: line.flags.clone(), env, file })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> CommandLine {
        from_matches(&command().try_get_matches_from(args).unwrap())
    }

    #[test]
    fn the_command_is_consistent() {
        command().debug_assert();
    }

    #[test]
    fn flags_land_by_setting_id_before_or_after_a_subcommand() {
        let line = parse_args(&[
            "es-broker",
            "--bind",
            "127.0.0.1:1",
            "config",
            "print",
            "--auth",
            "--metrics=false",
        ]);
        assert_eq!(line.action, Action::ConfigPrint);
        assert_eq!(line.flags["http.bind"], ["127.0.0.1:1"]);
        assert_eq!(line.flags["auth.enabled"], ["true"]);
        assert_eq!(line.flags["metrics.enabled"], ["false"]);
        assert!(!line.flags.contains_key("log.data_dir"));
    }

    #[test]
    fn switches_take_an_optional_value_and_lists_repeat() {
        let line = parse_args(&[
            "es-broker",
            "--auth=false",
            "--journal-enabled",
            "false",
            "--tls-principal-rule",
            "cn:a=k",
            "--tls-principal-rule",
            "cn:b=k",
            "doctor",
            "--json",
        ]);
        assert_eq!(line.action, Action::Doctor { json: true });
        assert_eq!(line.flags["auth.enabled"], ["false"]);
        assert_eq!(line.flags["journal.enabled"], ["false"]);
        assert_eq!(line.flags["tls.principal_rules"], ["cn:a=k", "cn:b=k"]);
    }
}
