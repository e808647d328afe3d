//! libFuzzer target `udp_datagram`: the body is `ftcoll::fuzz::targets::udp_datagram`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    ftcoll::fuzz::targets::udp_datagram(data);
});
