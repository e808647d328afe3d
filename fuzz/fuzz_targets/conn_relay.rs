//! libFuzzer target `conn_relay`: the body is `ftcoll::fuzz::targets::conn_relay`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::conn_relay(data);
});
