//! A local bench run under attack (`docs/security.md`): while the nodes broadcast over
//! authenticated UDP on 127.0.0.1, one attacker floods rank 1 from outside the job and another
//! floods rank 2 from the address of a rank that died at the start ([`Flood`]). The run is a
//! local one ([`run_on`], a group's stream) on endpoints opened here, so that the attackers
//! know where to aim.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::experiment::bench::local::run_on;
use crate::runtime::cluster::ClusterResult;
use crate::runtime::flood::{Flood, any_loopback};
use crate::runtime::{Bench, TransportKind};
use crate::transport::Transport;
use crate::transport::udp::{UdpConfig, UdpTransport};

/// A benchmark run under attack, and what the attackers sent.
pub struct FloodRun {
    pub result: ClusterResult,
    /// Datagrams sent from an address outside the job (to rank 1).
    pub sent_foreign: u64,
    /// Datagrams sent from the address of the dead-at-start `impostor` rank (to rank 2),
    /// without the key; 0 if it never got the address.
    pub sent_impostor: u64,
    /// Wall time of the run, s.
    pub seconds: f64,
}

/// Runs `b` (UDP) on endpoints of 127.0.0.1 with, when `flood`, two attackers at full speed
/// for the whole run: one from a foreign address at rank 1, and one at rank 2 from the address
/// of `impostor` (a rank `b.kills` kills at the start: its port is free once it died), claiming
/// to be that rank. Bounded: the floods stop when the run ends, and after `limit` at most.
pub fn run_flooded(b: &Bench, impostor: u32, flood: bool, limit: Duration) -> Result<FloodRun, String> {
    if b.transport != TransportKind::Udp || b.cluster.nodes < 4 || impostor < 3 || impostor >= b.cluster.nodes {
        return Err("a flooded run needs UDP, 4 nodes or more and an impostor rank of 3 or more".into());
    }
    let cfg = UdpConfig {
        job: b.cluster.job,
        seed: b.cluster.seed,
        auth: b.auth.clone(),
        ..UdpConfig::default()
    };
    let (addrs, ts) = UdpTransport::bind_ephemeral_local(b.cluster.nodes, cfg)
        .map_err(|e| format!("cannot open UDP sockets on 127.0.0.1: {e}"))?;
    let eps = ts
        .into_iter()
        .map(|t| (Box::new(t) as Box<dyn Transport>, None))
        .collect();
    let job = b.cluster.job;
    let done = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let (result, sent_foreign, sent_impostor) = std::thread::scope(|sc| {
        let foreign = flood.then(|| Flood::start(any_loopback(), addrs[1], job, 1, 1, limit, u64::MAX));
        let done2 = done.clone();
        let imp = sc.spawn(move || {
            if !flood {
                return 0;
            }
            // The impostor's port is free once its node died at the start of the run.
            let end = Instant::now() + limit;
            while !done2.load(Ordering::Relaxed) && Instant::now() < end {
                if let Ok(f) = Flood::start(addrs[impostor as usize], addrs[2], job, impostor, 2, limit, u64::MAX) {
                    while !done2.load(Ordering::Relaxed) && Instant::now() < end {
                        std::thread::sleep(Duration::from_millis(2));
                    }
                    return f.stop();
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            0
        });
        let result = run_on(b, eps, None);
        done.store(true, Ordering::Relaxed);
        let sent_foreign = match foreign {
            Some(Ok(f)) => f.stop(),
            _ => 0,
        };
        (result, sent_foreign, imp.join().unwrap_or(0))
    });
    Ok(FloodRun {
        result: result?,
        sent_foreign,
        sent_impostor,
        seconds: started.elapsed().as_secs_f64(),
    })
}
