//! The private bridge between the generated bindings and the public traits.

use std::any::Any;
use std::cell::RefCell;

use crate::auth::{AuthSession, AuthStep, Authenticator};
use crate::{
    Action, Batch, CompatLevel, Config, Incompatibility, Level, RecordValidator, SchemaCompat, Violation,
};

/// The generated bindings of the record-validator world. Public only so the
/// export macros can name them.
#[doc(hidden)]
pub mod bindings {
    wit_bindgen::generate!({
        path: "../wit",
        world: "record-validator",
        pub_export_macro: true,
        export_macro_name: "__export_record_validator",
        default_bindings_module: "es_plugin_sdk::__private::bindings",
    });
}

/// The generated bindings of the schema-compat world, from their own crate (see
/// its docs for why).
#[doc(hidden)]
pub use es_plugin_sdk_compat_bindings as compat_bindings;

/// The generated bindings of the authenticator world, from their own crate.
#[doc(hidden)]
pub use es_plugin_sdk_auth_bindings as auth_bindings;

use auth_bindings::exports::es::plugin::{auth, lifecycle as auth_lifecycle};
use bindings::es::plugin::host;
use bindings::exports::es::plugin::{lifecycle, validator};
use compat_bindings::exports::es::plugin::{compat, lifecycle as compat_lifecycle};

thread_local! {
    // The configured plugin. Wasm guests are single-threaded and the host calls
    // `configure` before anything else, so one slot per instance is enough; it is
    // type-erased because a static cannot be generic over the plugin type.
    static STATE: RefCell<Option<Box<dyn Any>>> = const { RefCell::new(None) };
}

pub fn info<T: RecordValidator>() -> lifecycle::PluginInfo {
    lifecycle::PluginInfo {
        name: T::NAME.to_owned(),
        version: T::VERSION.to_owned(),
        description: T::DESCRIPTION.to_owned(),
        config_keys: T::CONFIG_KEYS.iter().map(|k| (*k).to_owned()).collect(),
    }
}

pub fn configure<T: RecordValidator>(config: Vec<(String, String)>) -> Result<(), String> {
    store(T::configure(&Config::new(config))?);
    Ok(())
}

pub fn validate<T: RecordValidator>(
    info: validator::BatchInfo,
    data: Vec<u8>,
    records: Vec<i32>,
    headers: Vec<i32>,
    timestamps: Vec<i64>,
) -> Vec<validator::Violation> {
    let mut out = Vec::new();
    let batch = Batch::new(&info, &data, &records, &headers, &timestamps);
    with_configured(|plugin: &T| plugin.validate(&batch, &mut out));
    out.into_iter().map(to_wit).collect()
}

fn store<T: 'static>(plugin: T) {
    STATE.with(|s| *s.borrow_mut() = Some(Box::new(plugin)));
}

/// Runs `f` on the configured plugin. The host always configures an instance
/// first; trapping otherwise turns a host bug into a typed error on the broker
/// side instead of a silent pass.
fn with_configured<T: 'static, R>(f: impl FnOnce(&T) -> R) -> R {
    STATE.with(|s| {
        let state = s.borrow();
        let plugin = state.as_ref().and_then(|p| p.downcast_ref::<T>()).expect("called before configure");
        f(plugin)
    })
}

pub fn compat_info<T: SchemaCompat>() -> compat_lifecycle::PluginInfo {
    compat_lifecycle::PluginInfo {
        name: T::NAME.to_owned(),
        version: T::VERSION.to_owned(),
        description: T::DESCRIPTION.to_owned(),
        config_keys: T::CONFIG_KEYS.iter().map(|k| (*k).to_owned()).collect(),
    }
}

pub fn compat_configure<T: SchemaCompat>(config: Vec<(String, String)>) -> Result<(), String> {
    store(T::configure(&Config::new(config))?);
    Ok(())
}

pub fn compat_supports<T: SchemaCompat>() -> Vec<String> {
    T::SUPPORTS.iter().map(|t| (*t).to_owned()).collect()
}

/// Moves a schema out of the bindings (the texts are not copied).
fn from_wit(schema: compat::Schema) -> crate::Schema {
    let references =
        schema.references.into_iter().map(|r| crate::Reference::from_parts(r.name, r.text)).collect();
    crate::Schema::from_parts(schema.text, references)
}

pub fn compat_normalize<T: SchemaCompat>(schema: compat::Schema) -> Result<String, String> {
    let schema = from_wit(schema);
    with_configured(|plugin: &T| plugin.normalize(&schema))
}

pub fn compat_check<T: SchemaCompat>(
    level: compat::Level,
    proposed: compat::Schema,
    existing: Vec<compat::Schema>,
) -> Vec<compat::Incompatibility> {
    let level = match level {
        compat::Level::Backward => CompatLevel::Backward,
        compat::Level::BackwardTransitive => CompatLevel::BackwardTransitive,
        compat::Level::Forward => CompatLevel::Forward,
        compat::Level::ForwardTransitive => CompatLevel::ForwardTransitive,
        compat::Level::Full => CompatLevel::Full,
        compat::Level::FullTransitive => CompatLevel::FullTransitive,
        compat::Level::None => CompatLevel::None,
    };
    let proposed = from_wit(proposed);
    let existing: Vec<crate::Schema> = existing.into_iter().map(from_wit).collect();
    let mut out: Vec<Incompatibility> = Vec::new();
    with_configured(|plugin: &T| plugin.check(level, &proposed, &existing, &mut out));
    out.into_iter().map(|i| compat::Incompatibility { path: i.path, message: i.message }).collect()
}

pub fn auth_info<T: Authenticator>() -> auth_lifecycle::PluginInfo {
    auth_lifecycle::PluginInfo {
        name: T::NAME.to_owned(),
        version: T::VERSION.to_owned(),
        description: T::DESCRIPTION.to_owned(),
        config_keys: T::CONFIG_KEYS.iter().map(|k| (*k).to_owned()).collect(),
    }
}

pub fn auth_configure<T: Authenticator>(config: Vec<(String, String)>) -> Result<(), String> {
    store(T::configure(&Config::new(config))?);
    Ok(())
}

pub fn auth_mechanisms<T: Authenticator>() -> Vec<String> {
    T::MECHANISMS.iter().map(|m| (*m).to_owned()).collect()
}

/// A new session of the configured plugin.
pub fn auth_start<T: Authenticator>(mechanism: &str) -> T::Session {
    with_configured(|plugin: &T| plugin.start(mechanism))
}

pub fn auth_step<S: AuthSession>(session: &mut S, response: &[u8]) -> auth::StepResult {
    match session.step(response) {
        AuthStep::Done(principal) => auth::StepResult::Done(principal),
        AuthStep::Challenge(bytes) => auth::StepResult::Challenge(bytes),
        AuthStep::Failed(reason) => auth::StepResult::Failed(reason),
    }
}

fn to_wit(v: Violation) -> validator::Violation {
    let action = match v.action {
        Action::Reject => validator::Action::Reject,
        Action::DeadLetter => validator::Action::DeadLetter,
        Action::Warn => validator::Action::Warn,
    };
    validator::Violation { index: v.index, action, code: v.code, reason: v.reason }
}

pub fn log(level: Level, message: &str) {
    let level = match level {
        Level::Trace => host::LogLevel::Trace,
        Level::Debug => host::LogLevel::Debug,
        Level::Info => host::LogLevel::Info,
        Level::Warn => host::LogLevel::Warn,
        Level::Error => host::LogLevel::Error,
    };
    host::log(level, message);
}
