//! libFuzzer target `join`: the body is `ftcoll::fuzz::targets::join`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::join(data);
});
