//! libFuzzer target `join_line`: the body is `ftcoll::fuzz::targets::join_line`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::join_line(data);
});
