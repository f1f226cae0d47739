"""Confluent's own Python client against the es schema registry.

Usage: python schema_registry_client.py BROKER_URL FORMAT   (FORMAT: avro, json, protobuf)

Registers a schema with SchemaRegistryClient, reads it back by id, tests
compatibility, sets the subject's config, then serializes records with the
format's serializer, produces them over the broker's HTTP API (base64 values),
consumes them back over HTTP and deserializes them with the matching
deserializer. Exits non-zero with the failing step on any mismatch.
"""

import base64
import json
import sys
import urllib.error
import urllib.request

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.serialization import MessageField, SerializationContext

TIMEOUT_S = 30


def http(url, method="GET", body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            return resp.status, json.loads(resp.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def round_trip(broker, topic, serialize, deserialize, records):
    """Serializes, produces over HTTP to a topic that enforces its registered
    schemas (the built-in schema-registry validator), consumes over HTTP,
    deserializes."""
    status, body = http(f"{broker}/topics", "POST", {"name": topic, "partitions": 1})
    assert status == 201, (status, body)
    status, body = http(f"{broker}/topics/{topic}/validators", "PUT",
                        {"validators": [{"plugin": "schema-registry"}]})
    assert status == 200, (status, body)
    ctx = SerializationContext(topic, MessageField.VALUE)
    payloads = [serialize(r, ctx) for r in records]
    for p in payloads:
        assert p[0] == 0, f"magic byte 0 expected, got {p[:5]!r}"
    batch = [{"value": base64.b64encode(p).decode()} for p in payloads]
    status, body = http(f"{broker}/topics/{topic}/records", "POST", {"encoding": "base64", "records": batch})
    assert status == 200, (status, body)
    status, body = http(f"{broker}/topics/{topic}/partitions/0/records?offset=0&encoding=base64")
    assert status == 200, (status, body)
    got = [deserialize(base64.b64decode(r["value"]), ctx) for r in body["records"]]
    assert len(got) == len(records), (len(got), len(records))
    return payloads, got


def avro(broker, client):
    subject = "py-avro-value"
    v1 = json.dumps({"type": "record", "name": "User", "namespace": "py",
                     "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
    schema_id = client.register_schema(subject, Schema(v1, "AVRO"))
    assert client.register_schema("py-avro-other", Schema(v1, "AVRO")) == schema_id, "same schema, same id"
    fetched = client.get_schema(schema_id)
    assert fetched.schema_type == "AVRO", fetched.schema_type
    assert json.loads(fetched.schema_str)["name"] == "User", fetched.schema_str
    latest = client.get_latest_version(subject)
    assert (latest.schema_id, latest.version) == (schema_id, 1), latest
    assert client.get_version(subject, 1).schema_id == schema_id
    assert client.lookup_schema(subject, Schema(v1, "AVRO")).version == 1
    assert subject in client.get_subjects()

    ok = json.dumps({"type": "record", "name": "User", "namespace": "py",
                     "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                                {"name": "email", "type": "string", "default": ""}]})
    bad = json.dumps({"type": "record", "name": "User", "namespace": "py",
                      "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                                 {"name": "email", "type": "string"}]})
    assert client.test_compatibility(subject, Schema(ok, "AVRO")) is True
    assert client.test_compatibility(subject, Schema(bad, "AVRO")) is False
    assert client.test_compatibility_all_versions(subject, Schema(bad, "AVRO")) is False
    assert client.set_compatibility(subject, "FORWARD")["compatibility"] == "FORWARD"
    assert client.get_compatibility(subject) == "FORWARD"
    assert client.test_compatibility(subject, Schema(bad, "AVRO")) is True
    assert client.set_compatibility(level="BACKWARD")["compatibility"] == "BACKWARD"

    from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
    serializer = AvroSerializer(client, v1)
    deserializer = AvroDeserializer(client)
    records = [{"name": "ada", "age": 36}, {"name": "alan", "age": 41}]
    payloads, got = round_trip(broker, "py-avro", serializer, deserializer, records)
    assert int.from_bytes(payloads[0][1:5], "big") == schema_id
    assert got == records, got


def json_schema(broker, client):
    subject = "py-json-value"
    schema = json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
        "properties": {"id": {"type": "integer"}, "item": {"type": "string"}},
        "required": ["id"]})
    schema_id = client.register_schema(subject, Schema(schema, "JSON"))
    fetched = client.get_schema(schema_id)
    assert fetched.schema_type == "JSON", fetched.schema_type
    # A new optional property is not backward compatible for an open content model
    # (old writers may have put anything under that name; Confluent and Karapace
    # agree), so the compatible change is widening id from integer to number.
    widened = json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
        "properties": {"id": {"type": "number"}, "item": {"type": "string"}},
        "required": ["id"]})
    assert client.test_compatibility(subject, Schema(widened, "JSON")) is True
    retyped = json.dumps({
        "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
        "properties": {"id": {"type": "string"}, "item": {"type": "string"}},
        "required": ["id"]})
    assert client.test_compatibility(subject, Schema(retyped, "JSON")) is False

    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    serializer = JSONSerializer(schema, client)
    deserializer = JSONDeserializer(None, schema_registry_client=client)
    records = [{"id": 1, "item": "book"}, {"id": 2}]
    payloads, got = round_trip(broker, "py-json", serializer, deserializer, records)
    assert int.from_bytes(payloads[0][1:5], "big") == schema_id
    assert got == records, got


def protobuf(broker, client):
    from google.protobuf import descriptor_pb2, descriptor_pool
    from google.protobuf.message_factory import GetMessageClass

    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    # A message type built at run time, as protoc would generate it.
    fdp = descriptor_pb2.FileDescriptorProto(name="py/reading.proto", package="py", syntax="proto3")
    msg = fdp.message_type.add(name="Reading")
    msg.field.add(name="sensor", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    msg.field.add(name="value", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_DOUBLE,
                  label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    Reading = GetMessageClass(pool.FindMessageTypeByName("py.Reading"))

    serializer = ProtobufSerializer(Reading, client, {"use.deprecated.format": False})
    deserializer = ProtobufDeserializer(Reading, {"use.deprecated.format": False}, client)
    records = [Reading(sensor="t1", value=21.5), Reading(sensor="t2", value=-3.0)]
    payloads, got = round_trip(broker, "py-proto", serializer, deserializer, records)
    schema_id = int.from_bytes(payloads[0][1:5], "big")
    assert client.get_schema(schema_id).schema_type == "PROTOBUF"
    assert client.get_latest_version("py-proto-value").schema_id == schema_id
    assert got == records, got
    # The topic enforces its schema: the header and indexes of a good record
    # followed by bytes that are not a Reading are refused.
    bad = base64.b64encode(payloads[0][:6] + b"\x0a\x05t1").decode()
    status, body = http(f"{broker}/topics/py-proto/records", "POST",
                        {"encoding": "base64", "records": [{"value": bad}]})
    assert status == 422, (status, body)
    assert body["error"]["violations"][0]["code"] == "protobuf-decode", body
    text = "syntax = \"proto3\";\npackage py;\n\nmessage Reading {\n  string sensor = 1;\n  double value = 2;\n  string unit = 3;\n}\n"
    assert client.test_compatibility("py-proto-value", Schema(text, "PROTOBUF")) is True


def main():
    broker, fmt = sys.argv[1], sys.argv[2]
    client = SchemaRegistryClient({"url": f"{broker}/registry", "timeout": TIMEOUT_S})
    {"avro": avro, "json": json_schema, "protobuf": protobuf}[fmt](broker, client)
    print(f"{fmt}: ok")


if __name__ == "__main__":
    main()
