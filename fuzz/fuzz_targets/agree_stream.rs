//! libFuzzer target `agree_stream`: the body is `ftcoll::fuzz::targets::agree_stream`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::agree_stream(data);
});
