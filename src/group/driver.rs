//! The group's thread: it builds its members' runtime nodes and runs them on the runtime's
//! worker loop ([`run_workers`]), worker 0 leading ([`super::lead`]): requests in, events out.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::agree::Agreements;
use super::lead::{GroupHook, Lead};
use super::shared::Shared;
use super::stream::{Member, Offer, StreamReq};
use super::{Event, Group, GroupBuilder, GroupError};
use crate::protocol::{Protocol, SharedInfo};
use crate::runtime::board::Control;
use crate::runtime::cluster::{ClusterConfig, run_workers, worker_count};
use crate::runtime::node::{Node, NodeParams};
use crate::runtime::{Endpoints, endpoints_bounded};
use crate::wire::WireMessage;
use crate::wire::dispatch::{Dispatch, Visit};

pub(super) use super::stream::Pending;

/// The most members whose ERA messages fit one datagram.
pub(super) const MAX_AGREE_MEMBERS: u32 = crate::runtime::agree::MAX_NODES;

/// What the caller asks of the group's thread.
pub(super) enum Request {
    Broadcast { seq: u64, root: u32, bytes: Vec<u8> },
    Agree { member: u32, value: u64 },
    Kill(u32),
    Stream(StreamReq),
}

/// Everything the thread needs, moved into it.
struct Setup {
    cfg: ClusterConfig,
    eps: Endpoints,
    kills: Vec<crate::runtime::kill::Kill>,
    agreements: Option<Agreements>,
    ctl: Arc<Control>,
    shared: Arc<Shared>,
    requests: mpsc::Receiver<Request>,
    events: mpsc::Sender<Event>,
    ready: mpsc::Sender<Result<usize, String>>,
}

/// Builds the endpoints, starts the thread, and waits until its members are up.
pub(super) fn start(mut b: GroupBuilder) -> Result<Group, GroupError> {
    // (`GroupBuilder::check` refused impossible settings.)
    let n = b.n;
    let job = b.job.unwrap_or_else(|| crate::transport::ids::group(b.seed));
    #[allow(unused_mut)]
    let mut eps = match b.endpoints.take() {
        Some(_) if !b.broadcasts => {
            return Err(GroupError::Setup(
                "broadcast endpoints given to a group without broadcasts".into(),
            ));
        }
        None if !b.broadcasts => Vec::new(),
        Some(eps) if eps.len() != n as usize => {
            return Err(GroupError::Setup(format!("{} endpoints for {n} members", eps.len())));
        }
        Some(eps) => eps,
        None => endpoints_bounded(b.transport, n, job, b.seed, 0.0, b.auth.clone(), Some(b.suspect_after))
            .map_err(GroupError::Setup)?,
    };
    #[cfg(test)]
    if let Some(wrap) = b.wrap.as_mut() {
        eps = eps
            .into_iter()
            .enumerate()
            .map(|(r, (t, d))| (wrap(r as u32, t), d))
            .collect();
    }
    // Agreements run over endpoints of their own (another job id), for groups whose ERA
    // messages fit a datagram (above `MAX_AGREE_MEMBERS`, `Group::agree` says so).
    let agreements = if b.agreements && n <= MAX_AGREE_MEMBERS {
        let job = crate::transport::ids::group_agree(b.seed);
        // Authenticated as the broadcasts are: an agreement message or heartbeat without the
        // job key is dropped and counted, never fed to ERA or the failure detector.
        let eps = endpoints_bounded(b.transport, n, job, b.seed, 0.0, b.auth.clone(), Some(b.suspect_after))
            .map_err(GroupError::Setup)?;
        let a = Agreements::new(eps, n, job, b.heartbeat_period(), b.suspect_after).map_err(GroupError::Setup)?;
        #[cfg(test)]
        let a = a.with_hang(std::mem::take(&mut b.hang_agree));
        Some(a)
    } else {
        None
    };
    let agrees = agreements.is_some();
    let agree_cfg = super::agree_stream::Settings::of(&b);
    let cfg = ClusterConfig {
        nodes: n,
        workers: b.workers,
        poll: b.poll,
        warmup: 0,
        iterations: 0,
        window: b.window,
        payload_len: 0,
        tick_ns: b.tick_ns,
        job,
        seed: b.seed,
        op_timeout: b.op_timeout,
        idle: Duration::from_micros(500),
        pin: b.pin,
        give_up_after: None,
    };
    let workers = worker_count(cfg.pool(), n as usize);
    let ctl = Arc::new(Control::new(n));
    let shared = Arc::new(Shared::new(n, workers, b.broadcasts));
    let (req_tx, req_rx) = mpsc::channel();
    let (ev_tx, ev_rx) = mpsc::channel();
    let (ready_tx, ready_rx) = mpsc::channel();
    let setup = Setup {
        cfg,
        eps,
        kills: std::mem::take(&mut b.kills),
        agreements,
        ctl: ctl.clone(),
        shared: shared.clone(),
        requests: req_rx,
        events: ev_tx,
        ready: ready_tx.clone(),
    };
    let (algo, model) = (b.algo, b.model);
    let thread = std::thread::Builder::new()
        .name("ftcoll-group".into())
        .spawn(move || {
            if let Err(e) = algo.dispatch(n, model, Run(setup)) {
                let _ = ready_tx.send(Err(e));
            }
        })
        .map_err(|e| GroupError::Setup(format!("cannot start the group's thread: {e}")))?;
    let max_payload = match ready_rx.recv() {
        Ok(Ok(max)) => max,
        Ok(Err(e)) => {
            let _ = thread.join();
            return Err(GroupError::Setup(e));
        }
        Err(_) => {
            let _ = thread.join();
            return Err(GroupError::Closed);
        }
    };
    Ok(Group {
        n,
        next_seq: 0,
        agreements: vec![0; n as usize],
        agrees,
        bcasts: b.broadcasts,
        agree_cfg,
        workers,
        max_payload,
        ctl,
        shared,
        requests: Some(req_tx),
        events: ev_rx,
        thread: Some(thread),
    })
}

struct Run(Setup);

impl Visit for Run {
    type Out = ();
    fn visit<P>(self, shared: &P::Shared)
    where
        P: Protocol,
        P::Shared: SharedInfo,
        P::Msg: WireMessage,
    {
        drive::<P>(shared, self.0);
    }
}

/// The thread: builds the members and runs them until the caller drops the group.
fn drive<P>(shared: &P::Shared, s: Setup)
where
    P: Protocol,
    P::Shared: SharedInfo,
    P::Msg: WireMessage,
{
    let Setup {
        cfg,
        eps,
        kills,
        agreements,
        ctl,
        shared: sh,
        requests,
        events,
        ready,
    } = s;
    let n = cfg.nodes;
    let max = super::max_payload::<P::Msg>();
    let pending: Pending = Arc::default();
    let offers: Vec<Offer> = (0..n).map(|_| Arc::new(Mutex::new(None))).collect();
    let nodes: Vec<Node<P>> = eps
        .into_iter()
        .enumerate()
        .map(|(r, (t, on_death))| {
            let r = r as u32;
            let member = Member::new(r, max, pending.clone(), events.clone(), offers[r as usize].clone());
            let kill = kills.iter().copied().find(|k| k.rank == r);
            Node::<P>::new(r, n, t, Box::new(member), kill, cfg.seed, on_death)
        })
        .collect();
    let params = NodeParams {
        shared,
        n,
        root: None,
        job: cfg.job,
        tick_ns: cfg.tick_ns,
        epoch: Instant::now(),
    };
    let pool = cfg.pool();
    let mut lead = Some(Lead::new(cfg, requests, pending, offers, kills.clone()));
    // As many workers as members, broadcast nodes or not: an agreements-only group's
    // workers step the members' agreements and agreement streams, member `r` on worker
    // `r % k` as the broadcast nodes.
    let workers = worker_count(pool, n as usize);
    let mut parts = agreements.map(|a| a.split(workers).into_iter());
    let hooks = (0..workers)
        .map(|w| {
            let part = parts.as_mut().and_then(Iterator::next);
            GroupHook::new(w, sh.clone(), events.clone(), lead.take(), part)
        })
        .collect();
    let _ = ready.send(Ok(max));
    drop(ready);
    run_workers(&params, &ctl, pool, nodes, hooks, None);
}
