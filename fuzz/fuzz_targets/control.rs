//! libFuzzer target `control`: the body is `ftcoll::fuzz::targets::control`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::control(data);
});
