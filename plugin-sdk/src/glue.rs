//! The private bridge between the generated bindings and the public traits.

use std::any::Any;
use std::cell::RefCell;

use crate::{Action, Batch, Config, Level, RecordValidator, Violation};

/// The generated bindings. Public only so the export macros can name them.
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

use bindings::es::plugin::host;
use bindings::exports::es::plugin::{lifecycle, validator};

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
    let plugin = T::configure(&Config::new(config))?;
    STATE.with(|s| *s.borrow_mut() = Some(Box::new(plugin)));
    Ok(())
}

pub fn validate<T: RecordValidator>(batch: validator::Batch) -> Vec<validator::Violation> {
    let mut out = Vec::new();
    STATE.with(|s| {
        let state = s.borrow();
        // The host always configures an instance first; trapping here turns a host
        // bug into a typed error on the broker side instead of a silent pass.
        let plugin = state.as_ref().and_then(|p| p.downcast_ref::<T>()).expect("validate before configure");
        plugin.validate(&Batch::new(&batch), &mut out);
    });
    out.into_iter().map(to_wit).collect()
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
