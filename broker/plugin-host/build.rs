//! Builds the guest workspace (`plugins/`: the SDK, the built-in plugins and the
//! test fixtures) for wasm32-wasip2 and copies the components into OUT_DIR, where
//! `src/builtin.rs` embeds the built-in ones with `include_bytes!`.
//!
//! The nested cargo gets its own target directory (`<target>/es-plugins`), so it
//! never waits on the lock of the build that runs this script, and a clean
//! environment, so host-only flags (RUSTFLAGS, clippy's wrapper) do not leak into
//! the guest build.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Components copied to OUT_DIR: the built-in plugins, then test fixtures (which
/// tests load from disk through `ES_GUEST_WASM_DIR`; they are not embedded).
const COMPONENTS: &[&str] = &[
    "es_plugin_rules",
    "es_plugin_json_schema",
    "es_plugin_avro",
    "es_plugin_schema_registry",
    "es_plugin_avro_compat",
    "es_plugin_jsonschema_compat",
    "es_plugin_protobuf_compat",
    "es_fixture_hostile",
    "es_fixture_fs_reader",
    "es_fixture_hostile_compat",
    "es_fixture_hostile_auth",
    "es_example_jwt",
];

/// Variables that would change or break the nested wasm build.
const SCRUBBED_ENV: &[&str] = &[
    "RUSTFLAGS",
    "CARGO_ENCODED_RUSTFLAGS",
    "CARGO_BUILD_RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_ENCODED_RUSTDOCFLAGS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "CARGO_BUILD_TARGET",
    "CARGO_BUILD_TARGET_DIR",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
];

fn main() {
    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let root = manifest_dir.join("../..");
    for dir in ["plugins", "plugin-sdk", "wit"] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
    }
    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let target_dir = guest_target_dir(&out_dir);
    build_guests(&root.join("plugins"), &target_dir);
    let built = target_dir.join("wasm32-wasip2/release");
    for name in COMPONENTS {
        let file = format!("{name}.wasm");
        std::fs::copy(built.join(&file), out_dir.join(&file))
            .unwrap_or_else(|e| panic!("copy {} to OUT_DIR: {e}", built.join(&file).display()));
    }
    println!("cargo:rustc-env=ES_GUEST_WASM_DIR={}", out_dir.display());
}

fn build_guests(workspace: &Path, target_dir: &Path) {
    let cargo = env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut cmd = Command::new(cargo);
    for var in SCRUBBED_ENV {
        cmd.env_remove(var);
    }
    // Cargo's profile overrides for the host build must not reshape the guests.
    for (key, _) in env::vars().filter(|(k, _)| k.starts_with("CARGO_PROFILE_")) {
        cmd.env_remove(key);
    }
    // Set after the scrub: an inherited CARGO_TARGET_DIR (CI sets one) would point
    // the nested build at the outer build's directory and its lock.
    cmd.current_dir(workspace)
        .args(["build", "--release", "--locked", "--workspace", "--target", "wasm32-wasip2"])
        .env("CARGO_TARGET_DIR", target_dir)
        // Cargo reads a build script's stdout for directives: keep the nested
        // build's chatter on stderr.
        .stdout(std::io::stderr());
    let status = cmd.status().unwrap_or_else(|e| panic!("cannot run cargo for the plugin guests: {e}"));
    assert!(
        status.success(),
        "building the wasm32-wasip2 plugins failed ({status}); is the target installed? \
         `rustup target add wasm32-wasip2`"
    );
}

/// `<target>/es-plugins`, found from OUT_DIR (`<target>/[<triple>/]release/build/<pkg>-<hash>/out`)
/// so repeated builds and `cargo clippy` share one guest build.
fn guest_target_dir(out_dir: &Path) -> PathBuf {
    let target = out_dir
        .ancestors()
        .find(|p| p.file_name().is_some_and(|n| n == "build"))
        .and_then(Path::parent)
        .and_then(Path::parent)
        .expect("OUT_DIR is inside cargo's target directory");
    target.join("es-plugins")
}
