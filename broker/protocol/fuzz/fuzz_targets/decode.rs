//! Fuzz target: arbitrary bytes through the frame decoder, both message decoders and
//! the batch decoder. None may panic, and a decoded request must re-encode to the
//! same frame.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut buf = BytesMut::from(data);
    while let Ok(Some(frame)) = es_protocol::decode_frame(&mut buf, 1 << 20) {
        if let Ok(req) = es_protocol::Request::decode(&frame) {
            let mut again = Vec::new();
            req.encode(frame.header.request_id, &mut again);
            let mut again = BytesMut::from(&again[..]);
            let back = es_protocol::decode_frame(&mut again, usize::MAX).unwrap().unwrap();
            assert_eq!(es_protocol::Request::decode(&back).unwrap(), req);
        }
        let _ = es_protocol::Response::decode(&frame);
    }
    if let Ok(view) = es_core::BatchView::parse(data, 1 << 20) {
        let _ = view.validate_records();
        if let Ok(plain) = view.plain_records(1 << 20) {
            for r in plain.iter() {
                if r.is_err() {
                    break;
                }
            }
        }
    }
});
