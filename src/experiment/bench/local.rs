//! A local cluster run: every node a thread of this process, run as a [`Group`] of the
//! bench's nodes on its workers (pinned or not, polling as asked), without agreements,
//! streaming the bench's operations from rank 0 ([`Group::stream`]) with [`Generated`]
//! payloads, checked byte for byte at every receiver. `ftcoll bench`'s local run, its
//! node-hop calibration ([`super::node_hop`]) and the flood tests ([`crate::experiment::flood`])
//! all run here: the library's runtime, measured.

use std::time::Duration;

use crate::group::{Group, GroupError, Stream};
use crate::runtime::cluster::ClusterResult;
use crate::runtime::node::Generated;
use crate::runtime::{Bench, Endpoints, endpoints_bounded};

/// Runs `bench` on endpoints of its transport (UDP: on 127.0.0.1, losing and reordering
/// `bench.loss` of the datagrams, authenticated with `bench.auth`); `progress`, if given,
/// hears the operations over so far about every 100 ms. Errors (a port in use, no sockets)
/// are one line.
pub fn run(bench: &Bench, progress: Option<&(dyn Fn(u64) + Sync)>) -> Result<ClusterResult, String> {
    let c = &bench.cluster;
    let eps = endpoints_bounded(
        bench.transport,
        c.nodes,
        c.job,
        c.seed,
        bench.loss,
        bench.auth.clone(),
        None,
    )?;
    run_on(bench, eps, progress)
}

/// Runs `bench` on endpoints the caller built (one per rank, in rank order), e.g. to know
/// their addresses (the flood tests aim at them) or to wrap them.
pub fn run_on(bench: &Bench, eps: Endpoints, progress: Option<&(dyn Fn(u64) + Sync)>) -> Result<ClusterResult, String> {
    let c = &bench.cluster;
    let one_line = |e: GroupError| match e {
        GroupError::Setup(e) => e,
        e => e.to_string(),
    };
    let mut group = Group::builder(c.nodes)
        .endpoints(eps)
        .algo(bench.algo.clone())
        .transport(bench.transport)
        .loggp(bench.model, Duration::from_nanos(c.tick_ns))
        .window(c.window)
        .op_timeout(c.op_timeout)
        .seed(c.seed)
        .job(c.job)
        .workers(c.workers)
        .pin(c.pin)
        .poll(c.poll)
        .agreements(false)
        .kills(bench.kills.clone())
        .build()
        .map_err(one_line)?;
    let len = c.payload_len;
    group
        .stream(Stream {
            ops: c.iterations,
            warmup: c.warmup,
            window: c.window,
            roots: vec![0],
            give_up_after: c.give_up_after,
            payloads: Box::new(move |_| Box::new(Generated::new(len))),
            progress,
        })
        .map_err(one_line)
}
