//! libFuzzer target `refusal`: the body is `ftcoll::fuzz::targets::refusal`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::refusal(data);
});
