//! libFuzzer target `wire_small`: the body is `ftcoll::fuzz::targets::wire_small`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_small(data);
});
