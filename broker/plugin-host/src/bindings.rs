//! Host bindings generated from the WIT contract in `wit/` (the same files the
//! guest SDK compiles), so host and guests cannot drift apart.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "record-validator",
});
