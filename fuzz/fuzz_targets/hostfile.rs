//! libFuzzer target `hostfile`: the body is `ftcoll::fuzz::targets::hostfile`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::hostfile(data);
});
