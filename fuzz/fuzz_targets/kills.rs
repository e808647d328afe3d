//! libFuzzer target `kills`: the body is `ftcoll::fuzz::targets::kills`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::kills(data);
});
