//! libFuzzer target `wire_tree`: the body is `ftcoll::fuzz::targets::wire_tree`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::wire_tree(data);
});
