//! What a peer may write into an endpoint's memory over the HCA model: the credit words it was
//! given, and nothing else (the model refuses an RDMA WRITE outside a remote-writable MR as an
//! HCA does: remote access error, both QPs in error, nothing written).

use super::model;
use crate::transport::verbs::VerbsConfig;
use crate::transport::{Delivery, Transport};

fn suspects(ep: &mut crate::transport::verbs::endpoint::VerbsTransport) -> Vec<u32> {
    let mut out = Vec::new();
    ep.poll(std::time::Instant::now(), &mut |d| {
        if let Delivery::Suspect { peer } = d {
            out.push(peer);
        }
    })
    .unwrap();
    out
}

fn word(addr: u64) -> u64 {
    // SAFETY: the address is inside a live endpoint's region, 8-byte aligned.
    u64::from_le(unsafe { std::ptr::read_volatile(addr as *const u64) })
}

#[test]
fn the_credit_word_a_peer_was_given_takes_its_rdma_write() {
    let mut eps = model(2, &VerbsConfig::default());
    let given = eps[0].conn_info(1);
    // A credit value the receiver could have returned (nothing was sent: 0 is the truth).
    assert!(eps[1].write_remote(0, given.credit_addr, given.credit_rkey, 0));
    assert!(suspects(&mut eps[1]).is_empty());
    assert!(suspects(&mut eps[0]).is_empty());
    assert_eq!(eps[0].send(1, b"still connected", std::time::Instant::now()), Ok(()));
}

#[test]
fn an_rdma_write_into_a_receive_ring_is_refused_and_breaks_the_writers_qp() {
    let mut eps = model(3, &VerbsConfig::default());
    let given = eps[0].conn_info(1);
    // Rank 1 aims the rkey it was given at rank 0's receive slot for it (a posted receive,
    // about to be handed to the runtime) instead of at its credit word.
    let slot = eps[0].rx_slot_addr(1, 0);
    assert_eq!(word(slot), 0);
    assert!(eps[1].write_remote(0, slot, given.credit_rkey, 0xdead_beef));
    assert_eq!(word(slot), 0, "the ring must not take a remote write");
    assert_eq!(suspects(&mut eps[1]), vec![0], "the writer's QP failed");
    assert!(eps[1].counters().peer_lost >= 1);
    assert_eq!(
        suspects(&mut eps[0]),
        vec![1],
        "the target's QP to the writer failed too"
    );
    // Rank 2's QPs are untouched.
    let now = std::time::Instant::now();
    assert_eq!(eps[2].send(0, b"fine", now), Ok(()));
    let mut got = Vec::new();
    eps[0]
        .poll(now, &mut |d| {
            if let Delivery::Message { from, bytes } = d {
                got.push((from, bytes.to_vec()));
            }
        })
        .unwrap();
    assert_eq!(got, vec![(2, b"fine".to_vec())]);
}

#[test]
fn a_write_straddling_the_credit_area_or_with_a_guessed_key_is_refused() {
    for case in 0..2 {
        let mut eps = model(2, &VerbsConfig::default());
        let given = eps[0].conn_info(1);
        // The data area starts with the (unused) ring for the endpoint's own rank.
        let data_start = eps[0].rx_slot_addr(0, 0);
        let ring0 = eps[0].rx_slot_addr(1, 0);
        let (addr, rkey) = match case {
            // The last 4 bytes of the credit area and the first 4 of the data area.
            0 => (data_start - 4, given.credit_rkey),
            // The credit word with the key next to the one given (the model's keys count up).
            _ => (given.credit_addr, given.credit_rkey ^ 1),
        };
        assert!(eps[1].write_remote(0, addr, rkey, u64::MAX));
        assert_eq!(suspects(&mut eps[1]), vec![0], "case {case}");
        assert_eq!(word(ring0), 0, "case {case}");
        assert_eq!(word(data_start - 8), 0, "case {case}");
        assert_eq!(word(given.credit_addr), 0, "case {case}");
    }
}
