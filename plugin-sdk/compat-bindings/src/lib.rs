//! The generated bindings of the `schema-compat` world, kept in their own crate
//! because wit-bindgen puts each exported interface's macro (here `lifecycle`'s)
//! at the crate root, where it would collide with the record-validator world's
//! in `es-plugin-sdk`. Not for direct use: `es_plugin_sdk::export_schema_compat!`
//! is the public face.

wit_bindgen::generate!({
    path: "../../wit",
    world: "schema-compat",
    pub_export_macro: true,
    export_macro_name: "__export_schema_compat",
    default_bindings_module: "es_plugin_sdk::__private::compat_bindings",
});
