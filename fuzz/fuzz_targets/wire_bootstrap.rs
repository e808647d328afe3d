//! libFuzzer target `wire_bootstrap`: the body is `ftcoll::fuzz::targets::wire_bootstrap`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_bootstrap(data);
});
