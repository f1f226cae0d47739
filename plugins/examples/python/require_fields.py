"""The `require-fields` example validator for es, in Python.

Each record's value must be a JSON object holding every configured field; with
`key.required=true` the record must also have a key. Tombstones (null values) are
not checked. Built into a WebAssembly component of the `record-validator` world of
`wit/` by `plugins/examples/build.sh` with componentize-py.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.exports.lifecycle import PluginInfo
from wit_world.exports.validator import Action, BatchInfo, Violation
from wit_world.imports import host

CONFIG_KEYS = ["fields", "key.required", "action"]
ACTIONS = {"reject": Action.REJECT, "dead-letter": Action.DEAD_LETTER, "warn": Action.WARN}

# Set once per instance by `configure`, before any `validate` call.
fields = []
key_required = False
action = Action.REJECT


class Lifecycle(exports.Lifecycle):
    def info(self) -> PluginInfo:
        return PluginInfo(
            name="require-fields",
            version="0.1.0",
            description="Values must be JSON objects holding the configured fields (Python).",
            config_keys=CONFIG_KEYS,
        )

    def configure(self, config) -> None:
        global fields, key_required, action
        values = dict(config)
        unknown = sorted(set(values) - set(CONFIG_KEYS))
        if unknown:
            raise Err(f"unknown config key {unknown[0]!r}; known: {', '.join(CONFIG_KEYS)}")
        wanted = [f.strip() for f in values.get("fields", "").split(",") if f.strip()]
        if not wanted:
            raise Err("'fields' must name at least one field (comma-separated)")
        flag = values.get("key.required", "false")
        if flag not in ("true", "false"):
            raise Err(f"'key.required' must be true or false, not {flag!r}")
        name = values.get("action", "reject")
        if name not in ACTIONS:
            raise Err(f"'action' must be reject, dead-letter or warn, not {name!r}")
        fields, key_required, action = wanted, flag == "true", ACTIONS[name]
        host.log(host.LogLevel.DEBUG, f"requiring fields {', '.join(fields)}")


class Validator(exports.Validator):
    def validate(self, batch: BatchInfo, data: bytes, records, headers, timestamps):
        """`records` holds six numbers per record (key offset, key length, value
        offset, value length, first header, header count; a length of -1 is null),
        all offsets into `data`; `headers` four per header; `timestamps` one per
        record."""
        out = []
        for index in range(len(timestamps)):
            broken = check(data, records[6 * index : 6 * index + 6])
            if broken is not None:
                out.append(Violation(index=index, action=action, code=broken[0], reason=broken[1]))
        return out


def check(data, words):
    """The first rule the record with these six words breaks, as (code, reason), or None."""
    _key_offset, key_len, value_offset, value_len, _first_header, _header_count = words
    if key_required and key_len < 0:
        return ("key-required", "the record has no key")
    if value_len < 0:
        return None
    try:
        value = json.loads(data[value_offset : value_offset + value_len])
    except ValueError as e:
        return ("value-not-json", str(e))
    if not isinstance(value, dict):
        return ("value-not-object", f"value is a JSON {type(value).__name__}, not an object")
    for field in fields:
        if field not in value:
            return ("field-missing", f"field {field!r} is missing")
    return None
