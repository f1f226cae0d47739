//! Java Avro's `Schema.toString`, rule by rule (the expected texts follow
//! Apache Avro 1.11's `toJson` methods, which Confluent 7.9 runs).

use super::{Form, print};

fn canonical(text: &str) -> String {
    print(text, [], Form::Canonical).unwrap()
}

#[test]
fn attributes_come_in_avros_order_whatever_the_order_written() {
    let written = r#"{"fields": [{"type": "string", "name": "a", "doc": "the a"}],
        "namespace": "com.acme", "name": "User", "type": "record", "doc": "a user"}"#;
    let expected = r#"{"type":"record","name":"User","namespace":"com.acme","doc":"a user","fields":[{"name":"a","type":"string","doc":"the a"}]}"#;
    assert_eq!(canonical(written), expected);
    assert_eq!(canonical(expected), expected, "the print prints itself");
}

#[test]
fn names_are_short_in_their_own_namespace_and_full_elsewhere() {
    let written = r#"{"type":"record","name":"Outer","namespace":"com.acme","fields":[
        {"name":"same","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}},
        {"name":"again","type":"Inner"},
        {"name":"full","type":"com.acme.Inner"},
        {"name":"other","type":{"type":"enum","name":"org.other.Color","symbols":["RED","GREEN"],"default":"RED"}},
        {"name":"otherAgain","type":"org.other.Color"},
        {"name":"none","type":{"type":"fixed","name":"Hash","namespace":"","size":16}},
        {"name":"deeper","type":{"type":"record","name":"Deep","namespace":"org.other",
            "fields":[{"name":"c","type":"Color"},{"name":"i","type":"com.acme.Inner"},{"name":"h","type":"Hash"}]}}
    ]}"#;
    let expected = concat!(
        r#"{"type":"record","name":"Outer","namespace":"com.acme","fields":["#,
        r#"{"name":"same","type":{"type":"record","name":"Inner","fields":[{"name":"x","type":"int"}]}},"#,
        r#"{"name":"again","type":"Inner"},{"name":"full","type":"Inner"},"#,
        r#"{"name":"other","type":{"type":"enum","name":"Color","namespace":"org.other","symbols":["RED","GREEN"],"default":"RED"}},"#,
        r#"{"name":"otherAgain","type":"org.other.Color"},"#,
        r#"{"name":"none","type":{"type":"fixed","name":"Hash","namespace":"","size":16}},"#,
        r#"{"name":"deeper","type":{"type":"record","name":"Deep","namespace":"org.other","fields":["#,
        r#"{"name":"c","type":"Color"},{"name":"i","type":"com.acme.Inner"},{"name":"h","type":"Hash"}]}}]}"#
    );
    assert_eq!(canonical(written), expected);
}

#[test]
fn a_dotted_name_carries_its_namespace() {
    assert_eq!(
        canonical(r#"{"type":"record","name":"com.acme.User","namespace":"ignored","fields":[]}"#),
        r#"{"type":"record","name":"User","namespace":"com.acme","fields":[]}"#
    );
}

#[test]
fn a_short_name_that_is_a_type_name_is_printed_full() {
    let written = r#"{"type":"record","name":"R","namespace":"a","fields":[
        {"name":"x","type":{"type":"fixed","name":"map","size":1}},{"name":"y","type":"map"}]}"#;
    assert_eq!(
        canonical(written),
        r#"{"type":"record","name":"R","namespace":"a","fields":[{"name":"x","type":{"type":"fixed","name":"map","size":1}},{"name":"y","type":"a.map"}]}"#
    );
}

#[test]
fn field_attributes_defaults_aliases_and_properties() {
    let written = r#"{"type":"record","name":"R","x-rec":true,"aliases":["Old","org.x.Older","Old"],"fields":[
        {"aliases":["old_a","old_a"],"order":"DESCENDING","default":"x","doc":"d","type":"string","name":"a","x-custom":{"k":[1,2.50]}},
        {"name":"n","type":["null","long"],"default":null},
        {"name":"b","type":"bytes","default":"\u00ff"},
        {"name":"f","type":"double","default":"1.5"},
        {"name":"g","type":"float","default":1e10},
        {"name":"h","type":"double","default":-0.0001},
        {"name":"o","type":"int","order":"ascending","default":-0},
        {"name":"i","type":"string","order":"ignore","doc":7}
    ]}"#;
    let expected = concat!(
        r#"{"type":"record","name":"R","fields":["#,
        r#"{"name":"a","type":"string","doc":"d","default":"x","order":"descending","aliases":["old_a"],"x-custom":{"k":[1,2.5]}},"#,
        r#"{"name":"n","type":["null","long"],"default":null},"#,
        "{\"name\":\"b\",\"type\":\"bytes\",\"default\":\"\u{ff}\"},",
        r#"{"name":"f","type":"double","default":1.5},"#,
        r#"{"name":"g","type":"float","default":1.0E10},"#,
        r#"{"name":"h","type":"double","default":-1.0E-4},"#,
        r#"{"name":"o","type":"int","default":0},"#,
        r#"{"name":"i","type":"string","order":"ignore"}"#,
        r#"],"x-rec":true,"aliases":["Old","org.x.Older"]}"#
    );
    assert_eq!(canonical(written), expected);
}

#[test]
fn enums_fixed_arrays_maps_unions_and_logical_types() {
    let written = r#"{"type":"record","name":"L","namespace":"n","fields":[
        {"name":"d","type":{"logicalType":"decimal","type":"bytes","precision":9,"scale":2}},
        {"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}},
        {"name":"u","type":{"type":"string","logicalType":"uuid","name":"dropped","doc":"dropped"}},
        {"name":"p","type":{"type":"int"}},
        {"name":"arr","type":{"items":{"type":"map","values":"int","x":1},"type":"array"}},
        {"name":"fx","type":{"size":12,"type":"fixed","name":"F","logicalType":"duration","aliases":["G"],"doc":"twelve"}},
        {"name":"e","type":{"symbols":["A","B"],"x":"y","type":"enum","name":"E","default":"B","doc":"an enum","aliases":["m.E0"]}},
        {"name":"un","type":["null",{"type":"string"},"F",{"type":"E","ignored":1}]}
    ]}"#;
    let expected = concat!(
        r#"{"type":"record","name":"L","namespace":"n","fields":["#,
        r#"{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},"#,
        r#"{"name":"t","type":{"type":"long","logicalType":"timestamp-millis"}},"#,
        r#"{"name":"u","type":{"type":"string","logicalType":"uuid"}},"#,
        r#"{"name":"p","type":"int"},"#,
        r#"{"name":"arr","type":{"type":"array","items":{"type":"map","values":"int","x":1}}},"#,
        r#"{"name":"fx","type":{"type":"fixed","name":"F","doc":"twelve","size":12,"logicalType":"duration","aliases":["G"]}},"#,
        r#"{"name":"e","type":{"type":"enum","name":"E","doc":"an enum","symbols":["A","B"],"default":"B","x":"y","aliases":["m.E0"]}},"#,
        r#"{"name":"un","type":["null","string","F","E"]}]}"#
    );
    assert_eq!(canonical(written), expected);
}

#[test]
fn errors_primitives_and_unions_at_the_top() {
    assert_eq!(
        canonical(r#"{"type":"error","name":"E","fields":[]}"#),
        r#"{"type":"error","name":"E","fields":[]}"#
    );
    assert_eq!(canonical(r#" "string" "#), r#""string""#);
    assert_eq!(canonical(r#"{"type": "int"}"#), r#""int""#);
    assert_eq!(canonical(r#"["null", {"type": "string"}]"#), r#"["null","string"]"#);
}

#[test]
fn a_recursive_record_names_itself() {
    assert_eq!(
        canonical(r#"{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}"#),
        r#"{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}"#
    );
}

#[test]
fn strings_are_escaped_as_jackson_escapes_them() {
    let written = r#"{"type":"record","name":"R","doc":"q\" \\ \n\t\u0001 é \/ \ud83d\ude00","fields":[]}"#;
    assert_eq!(
        canonical(written),
        "{\"type\":\"record\",\"name\":\"R\",\"doc\":\"q\\\" \\\\ \\n\\t\\u0001 é / 😀\",\"fields\":[]}"
    );
}

#[test]
fn a_repeated_key_keeps_its_first_place_and_last_value() {
    assert_eq!(
        canonical(r#"{"type":"record","name":"R","x":1,"y":2,"x":3,"fields":[]}"#),
        r#"{"type":"record","name":"R","fields":[],"x":3,"y":2}"#
    );
}

const ADDRESS: &str =
    r#"{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"city","type":"string"}]}"#;

#[test]
fn canonical_names_referenced_types_and_resolved_inlines_them_once() {
    let user = r#"{"type":"record","name":"User","namespace":"com.acme","fields":[
        {"name":"home","type":"Address"},{"name":"work","type":"com.acme.Address"}]}"#;
    assert_eq!(
        print(user, [ADDRESS], Form::Canonical).unwrap(),
        r#"{"type":"record","name":"User","namespace":"com.acme","fields":[{"name":"home","type":"Address"},{"name":"work","type":"Address"}]}"#
    );
    assert_eq!(
        print(user, [ADDRESS], Form::Resolved).unwrap(),
        concat!(
            r#"{"type":"record","name":"User","namespace":"com.acme","fields":["#,
            r#"{"name":"home","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}},"#,
            r#"{"name":"work","type":"Address"}]}"#
        )
    );
    let elsewhere = r#"{"type":"record","name":"Order","namespace":"org.shop","fields":[{"name":"to","type":"com.acme.Address"}]}"#;
    assert_eq!(
        print(elsewhere, [ADDRESS], Form::Resolved).unwrap(),
        r#"{"type":"record","name":"Order","namespace":"org.shop","fields":[{"name":"to","type":{"type":"record","name":"Address","namespace":"com.acme","fields":[{"name":"city","type":"string"}]}}]}"#
    );
}

#[test]
fn a_type_nested_in_a_reference_is_inlined_even_in_the_canonical_print() {
    // Java's canonical print knows only each referenced schema's own type.
    let with_nested = r#"{"type":"record","name":"Address","namespace":"com.acme","fields":[
        {"name":"country","type":{"type":"enum","name":"Country","symbols":["FR","NL"]}}]}"#;
    let user =
        r#"{"type":"record","name":"User","namespace":"com.acme","fields":[{"name":"c","type":"Country"}]}"#;
    assert_eq!(
        print(user, [with_nested], Form::Canonical).unwrap(),
        r#"{"type":"record","name":"User","namespace":"com.acme","fields":[{"name":"c","type":{"type":"enum","name":"Country","symbols":["FR","NL"]}}]}"#
    );
}

#[test]
fn a_name_defined_twice_or_never_is_refused() {
    assert!(print(r#""com.acme.Missing""#, [], Form::Canonical).is_err());
    assert!(print(ADDRESS, [ADDRESS], Form::Canonical).unwrap_err().contains("redefine"));
}
