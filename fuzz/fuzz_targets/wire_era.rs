//! libFuzzer target `wire_era`: the body is `ftcoll::fuzz::targets::wire_era`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_era(data);
});
