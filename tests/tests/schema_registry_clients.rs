//! Confluent's Python client (confluent-kafka's SchemaRegistryClient and its Avro,
//! JSON Schema and Protobuf serializers) against the real es-broker: register, read
//! by id, test compatibility, set config, and records serialized, produced and
//! consumed over HTTP, then deserialized. The script is tests/python/
//! schema_registry_client.py; the venv comes from `es_tests::python`.

use std::time::Duration;

use es_tests::broker::Broker;
use es_tests::python::run_script;

const SCRIPT_TIMEOUT: Duration = Duration::from_secs(120);

fn client_round_trip(format: &str) {
    // Prepare the venv before the broker starts, so a first install does not eat the script's time.
    es_tests::python::python();
    let dir = tempfile::tempdir().unwrap();
    let b = Broker::start(dir.path());
    let (ok, output) = run_script("schema_registry_client.py", &[&b.url, format], SCRIPT_TIMEOUT);
    assert!(ok, "the Python client failed for {format}:\n{output}\nbroker stderr:\n{}", b.stderr());
    assert!(output.contains(&format!("{format}: ok")), "{output}");
}

#[test]
fn python_client_avro() {
    client_round_trip("avro");
}

#[test]
fn python_client_json_schema() {
    client_round_trip("json");
}

#[test]
fn python_client_protobuf() {
    client_round_trip("protobuf");
}
