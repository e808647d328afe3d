//! libFuzzer target `wire_header`: the body is `ftcoll::fuzz::targets::wire_header`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_header(data);
});
