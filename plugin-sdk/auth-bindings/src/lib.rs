//! The generated bindings of the `authenticator` world, kept in their own crate
//! for the reason `es-plugin-sdk-compat-bindings` is: wit-bindgen puts each
//! exported interface's macro at the crate root, so two worlds exporting
//! `lifecycle` cannot share one crate. Not for direct use:
//! `es_plugin_sdk::export_authenticator!` is the public face.

wit_bindgen::generate!({
    path: "../../wit",
    world: "authenticator",
    pub_export_macro: true,
    export_macro_name: "__export_authenticator",
    default_bindings_module: "es_plugin_sdk::__private::auth_bindings",
});
