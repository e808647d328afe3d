//! Garbage and floods on the runtime (`docs/security.md`), loopback only and bounded: while a UDP
//! benchmark runs, one attacker floods rank 1 from outside the job and another floods rank 2
//! from the address of a rank that died at the start (random bytes, truncated, oversized,
//! wrong lengths, forged MACs). Every operation must still complete, consistently, and the
//! drop counters must show the garbage by reason.

use std::time::Duration;

use ftcoll::experiment::algo::{AlgoName, AlgoSpec, resolve_algo};
use ftcoll::model::LogP;
use ftcoll::runtime::cluster::{ClusterConfig, PollMode};
use ftcoll::runtime::flood::run_flooded;
use ftcoll::runtime::kill::parse_kills;
use ftcoll::runtime::{Bench, TransportKind};
use ftcoll::transport::udp::auth::AuthKey;

fn bench(n: u32, iters: u64, kills: &str, auth: Option<AuthKey>) -> Bench {
    let model = LogP { l: 2, o: 1 };
    let checked = AlgoSpec {
        correction: Some("checked".into()),
        ..AlgoSpec::new(AlgoName::CorrectedTree)
    };
    Bench {
        algo: resolve_algo(&checked, n, model, 1).expect("algorithm"),
        cluster: ClusterConfig {
            nodes: n,
            workers: 2,
            poll: PollMode::Adaptive,
            warmup: 10,
            iterations: iters,
            window: 1,
            payload_len: 16,
            tick_ns: 1000,
            job: 0xF100D,
            seed: 3,
            op_timeout: Duration::from_secs(5),
            idle: Duration::from_micros(500),
            pin: false,
            give_up_after: None,
        },
        transport: TransportKind::Udp,
        kills: parse_kills(kills, n).expect("kills"),
        model: model.into(),
        loss: 0.0,
        auth,
    }
}

#[test]
fn a_flooded_authenticated_cluster_completes_every_operation_and_counts_the_garbage() {
    let key = AuthKey::generate().expect("key");
    let b = bench(8, 200, "7", Some(key));
    let r = run_flooded(&b, 7, true, Duration::from_secs(20)).expect("runs");
    let res = &r.result;
    let t = &res.transport;
    eprintln!(
        "flooded: {} + {} datagrams in {:.2} s; {t:?}",
        r.sent_foreign, r.sent_impostor, r.seconds
    );
    assert_eq!(res.measured, 200);
    assert_eq!(res.violations, 0, "{res:?}");
    assert_eq!(res.timeouts, 0);
    assert_eq!(res.dead_nodes, vec![7]);
    assert!(r.sent_foreign > 1000, "the foreign flood ran: {}", r.sent_foreign);
    assert!(t.foreign > 100, "foreign datagrams counted: {t:?}");
    assert!(
        r.sent_impostor > 1000,
        "the impostor got rank 7's port: {}",
        r.sent_impostor
    );
    // Without the key, nothing the impostor sends passes: too short or too long datagrams are
    // malformed, every other one fails the MAC; none reaches the protocol.
    assert!(t.bad_mac > 100 && t.malformed > 10, "{t:?}");
    assert_eq!(t.foreign_job + t.bad_rank, 0, "nothing got past the MAC: {t:?}");
    assert_eq!(
        res.drops.total(),
        0,
        "no garbage reached the wire decoder: {:?}",
        res.drops
    );
}
