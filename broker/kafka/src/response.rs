//! Response encoding (size prefix, the response header of the right version, the body)
//! and the ApiVersions answer built from the API table, with the KIP-511 fallback.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{Encodable, HeaderVersion};

use crate::apis::{ApiRow, api_row, served};
use crate::error::KafkaWireError;
use crate::limits::FRAME_PREFIX_BYTES;
use crate::request::Header;

/// Kafka's UNSUPPORTED_VERSION error code.
const UNSUPPORTED_VERSION: i16 = 35;

/// Encodes one response frame, size prefix included. The header version comes from the
/// response type: ApiVersions always uses v0 (so a client can read it before knowing
/// what the broker speaks); flexible versions of the rest add a tagged-field section.
pub fn encode_response<R: Encodable + HeaderVersion>(
    header: &Header,
    version: i16,
    response: &R,
) -> Result<Bytes, KafkaWireError> {
    let fault = |reason: String| KafkaWireError::Encode { api_key: header.api_key, version, reason };
    let mut buf = BytesMut::new();
    buf.put_u32(0);
    let response_header = ResponseHeader::default().with_correlation_id(header.correlation_id);
    response_header.encode(&mut buf, R::header_version(version)).map_err(|e| fault(e.to_string()))?;
    response.encode(&mut buf, version).map_err(|e| fault(e.to_string()))?;
    let size = buf.len() - FRAME_PREFIX_BYTES;
    let size = u32::try_from(size).map_err(|_| KafkaWireError::Encode {
        api_key: header.api_key,
        version,
        reason: format!("{size} bytes do not fit a frame"),
    })?;
    buf[..FRAME_PREFIX_BYTES].copy_from_slice(&size.to_be_bytes());
    Ok(buf.freeze())
}

fn entry(row: &ApiRow) -> ApiVersion {
    ApiVersion::default()
        .with_api_key(row.key as i16)
        .with_min_version(row.min)
        .with_max_version(row.advertised_max())
}

/// The ApiVersions answer for a client that asked at `requested`, advertising what the
/// listener serves. Returns the body and the version to encode it at.
pub fn api_versions_response(requested: i16) -> (ApiVersionsResponse, i16) {
    api_versions_response_for(requested, served())
}

/// As `api_versions_response`, advertising `rows`. KIP-511: a client asking at a version
/// newer than es knows gets a v0 body with UNSUPPORTED_VERSION and the ApiVersions range,
/// and retries at the highest version listed.
pub fn api_versions_response_for<'a>(
    requested: i16,
    rows: impl IntoIterator<Item = &'a ApiRow>,
) -> (ApiVersionsResponse, i16) {
    let own = api_row(ApiKey::ApiVersions);
    let supported = own.is_some_and(|r| r.min <= requested && requested <= r.advertised_max());
    if !supported {
        let keys = own.map(entry).into_iter().collect();
        let body = ApiVersionsResponse::default().with_error_code(UNSUPPORTED_VERSION).with_api_keys(keys);
        return (body, 0);
    }
    let keys = rows.into_iter().map(entry).collect();
    (ApiVersionsResponse::default().with_api_keys(keys), requested)
}
