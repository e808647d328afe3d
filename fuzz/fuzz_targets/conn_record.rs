//! libFuzzer target `conn_record`: the body is `ftcoll::fuzz::targets::conn_record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::conn_record(data);
});
