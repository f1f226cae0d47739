//! Decompression bombs: small inputs that claim, or really expand to, far more than the
//! budget are refused with `TooLarge`, quickly, and without allocating what they claim.
//!
//! Allocation is measured by a counting global allocator, which needs `unsafe` (the
//! `GlobalAlloc` trait is unsafe to implement); it lives in this test binary only.
//! It sees Rust allocations, not zstd's C-side ones (its window is bounded by
//! `window_log_max`, tested below through the decoder's refusal).
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::io::Write;
use std::time::{Duration, Instant};

use es_core::compression::{Compression, CompressionError, compress, decompress};

const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

thread_local! {
    // Per thread, so tests running in parallel do not see each other's allocations.
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

struct Counting;

// SAFETY: every call is forwarded to the system allocator unchanged; the counters are
// const-initialised thread-locals without destructors, so touching them never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        grew(new_size);
        shrank(layout.size());
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn grew(n: usize) {
    let _ = LIVE.try_with(|live| {
        live.set(live.get() + n);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(live.get())));
    });
}

fn shrank(n: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(n)));
}

/// Runs `f` and returns its result with the most bytes it had allocated at once.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let base = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(base));
    let out = f();
    (out, PEAK.with(Cell::get) - base)
}

/// Decompresses with a 1 MiB budget and checks the refusal, its time and its memory.
fn assert_refused(c: Compression, what: &str, input: &[u8]) {
    let started = Instant::now();
    let (r, peak) = peak_of(|| decompress(c, input, MIB).map(|out| out.len()));
    assert_eq!(r, Err(CompressionError::TooLarge { max: MIB }), "{c} {what}");
    assert!(started.elapsed() < Duration::from_secs(2), "{c} {what} was slow");
    // The budget, read_to_end's doubling past it, and a decoder's block buffers.
    assert!(peak < 4 * MIB, "{c} {what} allocated {peak} bytes");
}

/// A zstd frame of `blocks` RLE blocks of 128 KiB each: 4 bytes per block.
fn zstd_rle_bomb(blocks: usize, window_log: u8) -> Vec<u8> {
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, (window_log - 10) << 3]; // no content size
    for i in 0..blocks {
        let last = u32::from(i + 1 == blocks);
        let header = (128 * 1024) << 3 | 1 << 1 | last; // size, RLE type, last flag
        frame.extend_from_slice(&header.to_le_bytes()[..3]);
        frame.push(b'A');
    }
    frame
}

/// A zstd frame declaring `size` bytes of content, then one RLE block of 1 byte.
fn zstd_claiming(size: u64) -> Vec<u8> {
    let mut frame = vec![0x28, 0xB5, 0x2F, 0xFD, 0xE0]; // 8-byte content size, single segment
    frame.extend_from_slice(&size.to_le_bytes());
    frame.extend_from_slice(&[0x0B, 0, 0, b'A']);
    frame
}

/// A raw snappy block of 1000 zeros whose length header claims `len`.
fn snappy_raw_claiming(len: usize) -> Vec<u8> {
    let mut block = snap::raw::Encoder::new().compress_vec(&[0; 1000]).unwrap();
    let header_len = block.iter().position(|b| b & 0x80 == 0).unwrap() + 1;
    let mut claim = Vec::new();
    let mut v = len;
    while v >= 0x80 {
        claim.push((v as u8) | 0x80);
        v >>= 7;
    }
    claim.push(v as u8);
    block.splice(..header_len, claim);
    block
}

fn xerial_claiming(len: usize) -> Vec<u8> {
    let mut packed = compress(Compression::Snappy, &[]).unwrap();
    let block = snappy_raw_claiming(len);
    packed.extend_from_slice(&(block.len() as u32).to_be_bytes());
    packed.extend(block);
    packed
}

/// An LZ4 frame of 1000 zeros whose header claims `size` bytes (its header checksum
/// is left stale: the claim must be refused before anything looks further).
fn lz4_claiming(size: u64) -> Vec<u8> {
    let info = lz4_flex::frame::FrameInfo::new().content_size(Some(1000));
    let mut enc = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
    enc.write_all(&[0; 1000]).unwrap();
    let mut frame = enc.finish().unwrap();
    frame[6..14].copy_from_slice(&size.to_le_bytes());
    frame
}

#[test]
fn claimed_sizes_above_the_budget_are_refused_unallocated() {
    assert_refused(Compression::Zstd, "content size 1 GiB", &zstd_claiming(GIB as u64));
    assert_refused(Compression::Snappy, "raw length 1 GiB", &snappy_raw_claiming(GIB));
    assert_refused(Compression::Snappy, "xerial block of 1 GiB", &xerial_claiming(GIB));
    assert_refused(Compression::Lz4, "content size 1 GiB", &lz4_claiming(GIB as u64));
}

#[test]
fn real_expansion_past_the_budget_stops_at_the_budget() {
    let zstd = zstd_rle_bomb(GIB / (128 * 1024), 23);
    assert_eq!(zstd.len(), 6 + 4 * 8192, "1 GiB from 32 KiB");
    assert_refused(Compression::Zstd, "32 KiB of RLE blocks", &zstd);
    for (c, plain) in
        [(Compression::Gzip, 64 * MIB), (Compression::Snappy, 8 * MIB), (Compression::Lz4, 64 * MIB)]
    {
        let packed = compress(c, &vec![0; plain]).unwrap();
        assert!(packed.len() < plain / 20, "{c}: {} bytes", packed.len());
        assert_refused(c, &format!("{plain} zeros in {} bytes", packed.len()), &packed);
    }
}

#[test]
fn snappy_claims_beyond_any_expansion_are_corrupt() {
    // Within the budget, but 1000 bytes cannot expand to 1 MiB: refused unallocated.
    let (r, peak) = peak_of(|| decompress(Compression::Snappy, &snappy_raw_claiming(MIB), 2 * MIB));
    assert!(matches!(r, Err(CompressionError::Corrupt { .. })), "{r:?}");
    assert!(peak < 64 * 1024, "allocated {peak} bytes");
}

#[test]
fn zstd_frames_demanding_a_huge_window_are_refused() {
    let ok = zstd_rle_bomb(1, 23);
    assert!(decompress(Compression::Zstd, &ok, 256 * 1024).unwrap() == vec![b'A'; 128 * 1024]);
    // 2 GiB, and 256 MiB: above zstd's default limit and above a 64 MiB budget's.
    for window_log in [31, 28] {
        let r = decompress(Compression::Zstd, &zstd_rle_bomb(1, window_log), 64 * MIB);
        assert!(matches!(r, Err(CompressionError::Corrupt { .. })), "window 2^{window_log}: {r:?}");
    }
    // 32 MiB: fine for a 64 MiB budget, refused for a 1 MiB one (its cap is 8 MiB).
    assert!(decompress(Compression::Zstd, &zstd_rle_bomb(1, 25), 64 * MIB).is_ok());
    let r = decompress(Compression::Zstd, &zstd_rle_bomb(1, 25), MIB);
    assert!(matches!(r, Err(CompressionError::Corrupt { .. })), "{r:?}");
}
