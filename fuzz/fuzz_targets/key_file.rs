//! libFuzzer target `key_file`: the body is `ftcoll::fuzz::targets::key_file`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::key_file(data);
});
