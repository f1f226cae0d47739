//! Fuzz target: arbitrary bytes split into frames and decoded as Kafka requests. Nothing
//! may panic or abort (an allocation sized from a wire count would abort), and the
//! header of any frame that decodes must decode alone to the same header.
#![no_main]

use bytes::BytesMut;
use es_kafka::{FrameLimits, decode_header, decode_request, split_frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The input as one frame body, as the listener hands it over after framing.
    let whole = bytes::Bytes::copy_from_slice(data);
    if let Ok(decoded) = decode_request(whole.clone()) {
        assert_eq!(decode_header(&whole).unwrap().0, decoded.header);
    }
    // The input as a byte stream of size-prefixed frames under the pre-auth cap.
    let mut stream = BytesMut::from(data);
    while let Ok(Some(frame)) = split_frame(&mut stream, FrameLimits::pre_auth()) {
        let _ = decode_request(frame);
    }
});
