// The `require-fields` example validator for es, in JavaScript.
//
// Each record's value must be a JSON object holding every configured field; with
// `key.required=true` the record must also have a key. Tombstones (null values) are
// not checked. Built into a WebAssembly component of the `record-validator` world of
// `wit/` by `plugins/examples/build.sh` with componentize-js.

import { log } from "es:plugin/host@0.1.0";

const CONFIG_KEYS = ["fields", "key.required", "action"];
const ACTIONS = ["reject", "dead-letter", "warn"];

// Set once per instance by `configure`, before any `validate` call.
let fields = [];
let keyRequired = false;
let action = "reject";

// `fatal` makes invalid UTF-8 an error, so such a value is reported as not JSON.
const utf8 = new TextDecoder("utf-8", { fatal: true });

// The `lifecycle` interface. Throwing a string from `configure` returns it as the
// `err` of its `result<_, string>`.
export const lifecycle = {
  info() {
    return {
      name: "require-fields",
      version: "0.1.0",
      description: "Values must be JSON objects holding the configured fields (JavaScript).",
      configKeys: CONFIG_KEYS,
    };
  },

  configure(config) {
    const values = new Map(config);
    const unknown = [...values.keys()].filter((k) => !CONFIG_KEYS.includes(k)).sort();
    if (unknown.length > 0) {
      throw `unknown config key '${unknown[0]}'; known: ${CONFIG_KEYS.join(", ")}`;
    }
    const wanted = (values.get("fields") ?? "").split(",").map((f) => f.trim()).filter((f) => f !== "");
    if (wanted.length === 0) {
      throw "'fields' must name at least one field (comma-separated)";
    }
    const flag = values.get("key.required") ?? "false";
    if (flag !== "true" && flag !== "false") {
      throw `'key.required' must be true or false, not '${flag}'`;
    }
    const name = values.get("action") ?? "reject";
    if (!ACTIONS.includes(name)) {
      throw `'action' must be reject, dead-letter or warn, not '${name}'`;
    }
    fields = wanted;
    keyRequired = flag === "true";
    action = name;
    log("debug", `requiring fields ${fields.join(", ")}`);
  },
};

// The `validator` interface. `data` is one Uint8Array holding every key, value
// and header; `records` holds six numbers per record (key offset, key length,
// value offset, value length, first header, header count; a length of -1 is
// null), `headers` four per header, `timestamps` one per record.
export const validator = {
  validate(batch, data, records, headers, timestamps) {
    const out = [];
    for (let index = 0; index < timestamps.length; index++) {
      const broken = check(data, records, 6 * index);
      if (broken !== null) {
        out.push({ index, action, code: broken[0], reason: broken[1] });
      }
    }
    return out;
  },
};

// The first rule the record whose words start at `w` breaks, as [code, reason],
// or null.
function check(data, records, w) {
  const keyLen = records[w + 1];
  const valueOffset = records[w + 2];
  const valueLen = records[w + 3];
  if (keyRequired && keyLen < 0) {
    return ["key-required", "the record has no key"];
  }
  if (valueLen < 0) {
    return null;
  }
  let value;
  try {
    value = JSON.parse(utf8.decode(data.subarray(valueOffset, valueOffset + valueLen)));
  } catch (e) {
    return ["value-not-json", String(e)];
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) {
    const kind = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
    return ["value-not-object", `value is a JSON ${kind}, not an object`];
  }
  for (const field of fields) {
    if (!Object.hasOwn(value, field)) {
      return ["field-missing", `field '${field}' is missing`];
    }
  }
  return null;
}
