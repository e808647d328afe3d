//! libFuzzer target `wire_corr`: the body is `ftcoll::fuzz::targets::wire_corr`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_corr(data);
});
