//! Cost of packet authentication per datagram (`docs/security.md`): SipHash-2-4 with a 128-bit tag over
//! a datagram's header (48 bytes) and payload, as the UDP transport seals each datagram it
//! sends and verifies each one it receives. Median of batches, ns per datagram.
//!
//! `cargo bench --bench mac_cost` (add `-- --quick` for a shorter run).

use std::hint::black_box;
use std::time::Instant;

use ftcoll::transport::udp::auth::AuthKey;
use ftcoll::transport::udp::{HEADER_LEN, TAG_AT, seal};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// ns per call of `f`, median over `batches` batches of `per` calls.
fn per_call(batches: usize, per: usize, mut f: impl FnMut()) -> f64 {
    let mut v = Vec::with_capacity(batches);
    for _ in 0..batches {
        let t = Instant::now();
        for _ in 0..per {
            f();
        }
        v.push(t.elapsed().as_nanos() as f64 / per as f64);
    }
    median(v)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (batches, per) = if quick { (21, 20_000) } else { (101, 50_000) };
    let key = AuthKey::generate().expect("key");
    println!(
        "MAC: SipHash-2-4, 128-bit tag, over header ({TAG_AT} bytes) + payload; ns per datagram (median of {batches} x {per})"
    );
    println!("{:>8} {:>9} {:>10} {:>10}", "payload", "datagram", "seal", "verify");
    for payload in [8usize, 64, 256, 1200] {
        let mut d = vec![0x5Au8; HEADER_LEN + payload];
        let s = per_call(batches, per, || seal(Some(black_box(&key)), black_box(&mut d)));
        seal(Some(&key), &mut d);
        let v = per_call(batches, per, || {
            let d = black_box(&d);
            assert!(key.verify(&[&d[..TAG_AT], &d[HEADER_LEN..]], &d[TAG_AT..HEADER_LEN]));
        });
        println!("{:>8} {:>9} {:>10.1} {:>10.1}", payload, d.len(), s, v);
    }
}
