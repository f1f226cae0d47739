//! Host bindings generated from the WIT contract in `wit/` (the same files the
//! guest SDK compiles), so host and guests cannot drift apart. One module per
//! world; the `host` import is generated once, in `validator`, and shared, so one
//! linker and one `host::Host` impl serve every world.

pub(crate) mod validator {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "record-validator",
    });
}

pub(crate) mod compat {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "schema-compat",
        with: {
            "es:plugin/host": crate::bindings::validator::es::plugin::host,
        },
    });
}

pub(crate) mod auth {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "authenticator",
        with: {
            "es:plugin/host": crate::bindings::validator::es::plugin::host,
        },
    });
}
