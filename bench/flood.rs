//! Flood rate held and latency impact (`docs/security.md`): the same authenticated UDP benchmark (8
//! nodes on 2 busy-polling workers, corrected binomial tree with checked correction, rank 7
//! dead from the start) without
//! and with two attackers flooding at full speed (see `ftcoll::experiment::flood`). Prints the
//! datagrams per second the attackers sent, how many the nodes read and dropped by reason,
//! and the coloring latency percentiles of both runs with their ratio.
//!
//! `cargo bench --bench flood` (add `-- --quick` for a shorter run).

use std::time::Duration;

use ftcoll::experiment::algo::{AlgoName, AlgoSpec, resolve_algo};
use ftcoll::experiment::flood::run_flooded;
use ftcoll::model::LogP;
use ftcoll::runtime::cluster::{ClusterConfig, PollMode};
use ftcoll::runtime::kill::parse_kills;
use ftcoll::runtime::{Bench, TransportKind};
use ftcoll::transport::udp::auth::AuthKey;

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iters = if quick { 1000 } else { 5000 };
    let n = 8;
    let model = LogP { l: 2, o: 1 };
    let checked = AlgoSpec {
        correction: Some("checked".into()),
        ..AlgoSpec::new(AlgoName::CorrectedTree)
    };
    let b = Bench {
        algo: resolve_algo(&checked, n, model, 1).expect("algorithm"),
        cluster: ClusterConfig {
            nodes: n,
            workers: 2,
            poll: PollMode::Busy,
            warmup: 100,
            iterations: iters,
            window: 1,
            payload_len: 8,
            tick_ns: 1000,
            job: 0xF100D,
            seed: 5,
            op_timeout: Duration::from_secs(5),
            idle: Duration::from_micros(500),
            pin: false,
            give_up_after: None,
        },
        transport: TransportKind::Udp,
        kills: parse_kills("7", n).expect("kills"),
        model: model.into(),
        loss: 0.0,
        auth: Some(AuthKey::generate().expect("key")),
    };
    let limit = Duration::from_secs(300);
    let calm = run_flooded(&b, 7, false, limit).expect("calm run");
    let hit = run_flooded(&b, 7, true, limit).expect("flooded run");
    let t = &hit.result.transport;
    let sent = hit.sent_foreign + hit.sent_impostor;
    let read = t.foreign + t.bad_mac + t.malformed;
    println!("8 nodes on 2 workers (busy poll), {iters} broadcasts, auth on; attackers: 2 threads, full speed");
    println!(
        "flood sent: {sent} datagrams in {:.2} s = {:.0}/s (foreign address {}, impostor at rank 7's address {})",
        hit.seconds,
        sent as f64 / hit.seconds,
        hit.sent_foreign,
        hit.sent_impostor
    );
    println!(
        "flood read and dropped by the nodes: {read} = {:.0}/s (foreign {} bad-mac {} malformed {}); the rest was dropped by the kernel (full socket buffers) or left unread at the end",
        read as f64 / hit.seconds,
        t.foreign,
        t.bad_mac,
        t.malformed
    );
    println!(
        "operations: calm {} / flooded {} measured, violations {} / {}, timeouts {} / {}",
        calm.result.measured,
        hit.result.measured,
        calm.result.violations,
        hit.result.violations,
        calm.result.timeouts,
        hit.result.timeouts
    );
    println!("{:>12} {:>12} {:>12} {:>8}", "coloring µs", "calm", "flooded", "ratio");
    for q in [50.0, 99.0, 99.9] {
        let c = calm.result.coloring.value_at_quantile(q / 100.0) as f64 / 1e3;
        let f = hit.result.coloring.value_at_quantile(q / 100.0) as f64 / 1e3;
        println!("{:>12} {:>12.1} {:>12.1} {:>8.2}", format!("p{q}"), c, f, f / c);
    }
}
