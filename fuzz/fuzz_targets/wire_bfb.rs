//! libFuzzer target `wire_bfb`: the body is `ftcoll::fuzz::targets::wire_bfb`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_bfb(data);
});
