//! libFuzzer target `wire_overlay`: the body is `ftcoll::fuzz::targets::wire_overlay`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_overlay(data);
});
