//! libFuzzer target `wire_watch`: the body is `ftcoll::fuzz::targets::wire_watch`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_watch(data);
});
