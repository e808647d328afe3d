//! `ftcoll agree`'s local run: every node a thread of this process, run as an
//! agreements-only [`Group`] of the run's nodes on its workers (pinned or not, polling
//! busily) over its transport, running the run's closed loop of agreements
//! ([`Group::agree_stream`]): the library's runtime, measured.

use crate::group::{AgreeStream, Group, GroupError};
use crate::runtime::TransportKind;
use std::time::Duration;

use crate::experiment::agree_predict::model_cores;
use crate::runtime::agree::{
    AgreeBench, AgreeBenchReport, AgreeTransport, DEDICATED_HEARTBEAT, shared_heartbeat, validate,
};
use crate::runtime::cluster::PollMode;

/// The heartbeat period of a run not given one: [`DEDICATED_HEARTBEAT`] when every node has a
/// core of its own (a `--join` run's nodes each have a host), else [`shared_heartbeat`] of the
/// nodes per core, as the model's processor sharing counts the cores ([`model_cores`]: a
/// thread run's workers, or the host's cores for a `--procs` run, when fewer than its nodes).
pub fn default_heartbeat(b: &AgreeBench, procs: bool, joined: bool, host_cores: usize) -> Duration {
    match model_cores(b, procs, host_cores) {
        Some(cores) if !joined => shared_heartbeat(b.n.div_ceil(cores.max(1))),
        _ => DEDICATED_HEARTBEAT,
    }
}

/// Runs `b` (a `--duration` run for its time, else `warmup + iterations` agreements).
/// Errors (bad flags, a port in use, no sockets) are one line.
pub fn run(b: &AgreeBench) -> Result<AgreeBenchReport, String> {
    validate(b)?;
    let one_line = |e: GroupError| match e {
        GroupError::Setup(e) | GroupError::BadStream(e) => e,
        e => e.to_string(),
    };
    let mut group = Group::builder(b.n)
        .broadcasts(false)
        .agreements(false)
        .transport(match b.transport {
            AgreeTransport::Inproc => TransportKind::Inproc,
            AgreeTransport::Udp => TransportKind::Udp,
            AgreeTransport::Verbs => TransportKind::Verbs,
        })
        .workers(b.workers)
        .pin(b.pin)
        .poll(PollMode::Busy)
        .seed(b.seed)
        .failure_detector(b.heartbeat, b.suspect_after)
        .build()
        .map_err(one_line)?;
    group.agree_stream(stream_of(b)).map_err(one_line)
}

/// The stream of agreements `b` describes (the threads' run, and each node process's).
pub(crate) fn stream_of(b: &AgreeBench) -> AgreeStream {
    AgreeStream {
        agreements: b.iterations,
        warmup: b.warmup,
        duration: b.duration,
        kills: b.kills.clone(),
        stalls: b.stalls.clone(),
        era: b.era,
        op_timeout: b.op_timeout,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::protocol::agree::EraConfig;

    /// A `--duration` run whose last survivor decides alone (every agreement returns as soon as
    /// it is entered) still stops at its deadline. It ran forever: the step that looped over
    /// those instant returns compared the deadline with the clock read when the step began.
    #[test]
    fn a_lone_survivor_stops_at_the_deadline() {
        let b = AgreeBench {
            n: 2,
            era: EraConfig::default(),
            transport: AgreeTransport::Inproc,
            workers: 1,
            pin: false,
            warmup: 0,
            iterations: 0,
            duration: Some(Duration::from_millis(300)),
            kills: vec![(1, 5)],
            stalls: Vec::new(),
            heartbeat: Duration::from_micros(200),
            suspect_after: Duration::from_millis(5),
            op_timeout: Duration::from_secs(5),
            seed: 3,
        };
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(run(&b)).ok());
        let r = rx
            .recv_timeout(Duration::from_secs(60))
            .expect("the run stops after its 300 ms (it never did)")
            .expect("runs");
        assert_eq!((r.unfinished, r.disagreements), (0, 0));
        assert!(r.agreements > 5, "the survivor went on alone: {}", r.agreements);
    }
    /// Without `--heartbeat-us` a run whose nodes each have a core probes a waiting neighbour
    /// every 50 µs, and one whose nodes share cores that times less often per node on a core
    /// (where a heartbeat takes a neighbour's time); a `--join` run's nodes each have a host.
    #[test]
    fn the_default_heartbeat_is_shortest_where_every_node_has_a_core_and_scales_with_sharing() {
        let b = |n, workers| AgreeBench {
            n,
            era: EraConfig::default(),
            transport: AgreeTransport::Udp,
            workers,
            pin: true,
            warmup: 0,
            iterations: 1,
            duration: None,
            kills: Vec::new(),
            stalls: Vec::new(),
            heartbeat: DEDICATED_HEARTBEAT,
            suspect_after: Duration::from_millis(100),
            op_timeout: Duration::from_secs(5),
            seed: 3,
        };
        let us = |d: Duration| d.as_micros();
        assert_eq!(us(default_heartbeat(&b(8, 8), false, false, 16)), 50);
        // Four nodes per worker, then per core: a core heartbeats as one dedicated node does.
        assert_eq!(us(default_heartbeat(&b(8, 2), false, false, 16)), 200);
        assert_eq!(us(default_heartbeat(&b(8, 8), false, false, 2)), 200);
        assert_eq!(us(default_heartbeat(&b(16, 1), false, false, 2)), 800);
        assert_eq!(us(default_heartbeat(&b(9, 2), false, false, 2)), 250);
        assert_eq!(us(default_heartbeat(&b(8, 1), true, false, 16)), 50);
        assert_eq!(us(default_heartbeat(&b(8, 1), true, false, 4)), 100);
        assert_eq!(us(default_heartbeat(&b(8, 1), false, true, 2)), 50);
    }
}
