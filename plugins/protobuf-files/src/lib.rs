//! What es's two Protobuf guests share (the `protobuf-compat` checker and the
//! `schema-registry` enforcement validator): telling a registered schema's two
//! forms apart (`.proto` text, or base64 of a `FileDescriptorProto` as
//! confluent-kafka's Python serializer registers it), decoding the second, and
//! serving a schema's imports from its references and the well-known types.

use std::cell::RefCell;
use std::collections::HashMap;

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use prost::Message;
use prost_types::FileDescriptorProto;
use protox::file::{File, FileResolver, GoogleFileResolver};

/// `.proto` text always holds a character outside the base64 alphabet (a space,
/// `;`, `{` or `"`), so a schema made of base64 characters only is a descriptor.
pub fn looks_like_base64(input: &str) -> bool {
    let trimmed = input.trim();
    !trimmed.is_empty()
        && trimmed.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'-' | b'_' | b'\n' | b'\r')
        })
}

/// Decodes a base64 (standard or URL-safe, padded or not) `FileDescriptorProto`,
/// named `default_name` when it has no name and without source positions (they
/// refer to a text the registry never saw). The error says which step failed.
pub fn decode_descriptor(input: &str, default_name: &str) -> Result<FileDescriptorProto, String> {
    let compact: String = input.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    let config = GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
    let standard = GeneralPurpose::new(&base64::alphabet::STANDARD, config);
    let url_safe = GeneralPurpose::new(&base64::alphabet::URL_SAFE, config);
    let bytes = standard
        .decode(&compact)
        .or_else(|_| url_safe.decode(&compact))
        .map_err(|e| format!("base64: {e}"))?;
    let mut descriptor =
        FileDescriptorProto::decode(bytes.as_slice()).map_err(|e| format!("protobuf decoding: {e}"))?;
    if descriptor.name().is_empty() {
        descriptor.name = Some(default_name.to_owned());
    }
    descriptor.source_code_info = None;
    Ok(descriptor)
}

/// Serves the schema under its own name, its references under theirs and the
/// well-known types under theirs. Nothing else can be imported.
pub struct Resolver {
    pub name: String,
    pub file: File,
    pub imports: HashMap<String, File>,
}

impl FileResolver for Resolver {
    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        if name == self.name {
            return Ok(self.file.clone());
        }
        if let Some(file) = self.imports.get(name) {
            return Ok(file.clone());
        }
        // A warm instance reads many schemas: parse each well-known file once.
        WELL_KNOWN.with(|cache| {
            if let Some(file) = cache.borrow().get(name) {
                return Ok(file.clone());
            }
            let file = GoogleFileResolver::new().open_file(name)?;
            cache.borrow_mut().insert(name.to_owned(), file.clone());
            Ok(file)
        })
    }
}

thread_local! {
    // Wasm guests are single-threaded; one cache per instance.
    static WELL_KNOWN: RefCell<HashMap<String, File>> = RefCell::new(HashMap::new());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proto_text_and_base64_are_told_apart() {
        assert!(!looks_like_base64("syntax = \"proto3\"; message A {}"));
        assert!(!looks_like_base64("  "));
        let descriptor = FileDescriptorProto { package: Some("p".into()), ..Default::default() };
        let encoded = base64::engine::general_purpose::STANDARD.encode(descriptor.encode_to_vec());
        assert!(looks_like_base64(&encoded));
        let decoded = decode_descriptor(&encoded, "schema.proto").unwrap();
        assert_eq!((decoded.name(), decoded.package()), ("schema.proto", "p"));
        assert!(decode_descriptor("!!!", "x").unwrap_err().starts_with("base64: "));
        assert!(decode_descriptor("AAAA", "x").unwrap_err().starts_with("protobuf decoding: "));
    }
}
