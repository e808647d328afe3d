use super::*;

#[test]
fn a_keyed_job_boots_and_a_foreign_key_is_shut_out() {
    use crate::wire::mac::AuthKey;
    let same = boot_keyed(4, 0, |_| Some(AuthKey::from_bytes([3; 16])), Duration::from_secs(20));
    assert!(same.iter().all(|r| r.is_ok()), "{same:?}");
    // Rank 3 holds another key: nobody accepts its datagrams nor it theirs.
    let mixed = boot_keyed(
        4,
        0,
        |r| Some(AuthKey::from_bytes([if r == 3 { 4 } else { 3 }; 16])),
        Duration::from_millis(400),
    );
    assert!(mixed[3].as_ref().is_err_and(|e| e.contains("timed out")), "{mixed:?}");
}

/// Boots `n` nodes as threads on loopback, each dropping every `drop_every`-th datagram.
fn boot_threads(n: u32, drop_every: u32) -> Vec<BootReport> {
    boot_keyed(n, drop_every, |_| None, Duration::from_secs(20))
        .into_iter()
        .map(|r| r.unwrap())
        .collect()
}

/// The same with a key per rank and a timeout; returns each node's outcome.
fn boot_keyed(
    n: u32,
    drop_every: u32,
    key: impl Fn(u32) -> Option<crate::wire::mac::AuthKey>,
    timeout: Duration,
) -> Vec<Result<BootReport, String>> {
    let (addrs, reps) = loopback_threads(
        n,
        |c| {
            c.timeout = timeout;
            c.drop_every = drop_every;
            c.key = key(c.rank);
        },
        boot,
    );
    let want: Vec<String> = addrs.iter().map(|a| a.to_string()).collect();
    for rep in reps.iter().flatten() {
        assert_eq!(rep.table, want, "n={n} rank {}", rep.rank);
        assert!(rep.ring_us > 0 && rep.bmg_us >= rep.ring_us && rep.gather_us >= rep.bmg_us);
        assert!(rep.table_us > 0 && rep.sent > 0 && rep.dropped == 0, "{rep:?}");
    }
    reps
}

#[test]
fn threads_on_loopback_boot_from_their_parents_addresses_only() {
    for n in [2u32, 5, 8, 13] {
        let reps = boot_threads(n, 0);
        assert!(reps.iter().all(|r| r.injected_losses == 0));
    }
}

#[test]
fn lost_datagrams_are_repaired() {
    // Every 5th datagram of every node is lost: the overlay's refreshes and the
    // all-gather's re-sends still complete every table.
    let reps = boot_threads(12, 5);
    assert!(reps.iter().map(|r| r.injected_losses).sum::<u64>() > 12);
}
