//! The runners of a checked bench spec, and the one entry point [`Checked::run`]: it sets up
//! the run's model and cluster and hands them to the runner the spec picked ([`Runner`]): a
//! local cluster ([`super::local`], a group's stream), one `ftcoll node` process per node
//! started and coordinated by this one, or a launched run (`join`, `boot`), whose rank 0
//! coordinates and reports and whose other ranks each run one node.

use std::time::Duration;

use super::outcome::Hosting;
use super::{BenchEnv, BenchOutcome, Checked, GIVE_UP_AFTER, local};
use crate::experiment::algo::resolve_algo;
use crate::experiment::launch::bcast::coordinate_joined;
use crate::experiment::launch::joined::{BootSpec, JoinedNode, run_joined_node};
use crate::experiment::predict::{BenchModel, shared_o_ns};
use crate::runtime::cluster::{ClusterConfig, ClusterResult, PollMode};
use crate::runtime::control::ParentAgent;
use crate::runtime::join::JobParams;
use crate::runtime::kill::{Kill, KillPoint, format_kills};
use crate::runtime::procs::unix_ns;
use crate::runtime::{Bench, TransportKind};
use crate::transport::udp::auth::{AuthKey, warn_unauthenticated};

/// Which runner a checked spec goes to ([`Checked::runner`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runner {
    /// Every node a thread of this process: a [`Group`](crate::group::Group) on the bench's
    /// workers streaming its operations.
    Local,
    /// One `ftcoll node` process per node, started and coordinated by this one (`procs`).
    Procs,
    /// Rank 0 of a launched run (`join`, `boot`): the coordinator, node 0, and the report.
    Coordinator,
    /// Another rank of a launched run: one node, which prints nothing.
    Node { rank: u32 },
}

impl Runner {
    /// The runner of a spec with `procs` and, for a launched run, this process's rank.
    pub(super) fn pick(procs: bool, join_rank: Option<u32>) -> Runner {
        match join_rank {
            Some(0) => Runner::Coordinator,
            Some(rank) => Runner::Node { rank },
            None if procs => Runner::Procs,
            None => Runner::Local,
        }
    }
}

/// What [`Checked::run`] did.
pub enum Ran {
    /// This process was one node of a launched run; rank 0 reports.
    Node,
    /// The run, measured (before its prediction, [`Checked::prediction`]).
    Measured(Box<BenchOutcome>),
}

impl Checked {
    /// Runs the spec on its runner: for every runner but a launched run's node, sets up o and
    /// L (given, calibrated or measured), resolves the algorithm and runs the cluster.
    /// `progress` hears the operations over so far (a local run).
    pub fn run(&self, env: &BenchEnv, progress: Option<&(dyn Fn(u64) + Sync)>) -> Result<Ran, String> {
        if let Runner::Node { rank } = self.runner {
            run_joined_node(&self.joined_node(rank, self.key(env)?))?;
            return Ok(Ran::Node);
        }
        if let Some(e) = self.refusal() {
            return Err(e);
        }
        let a = &self.spec;
        let kills = &self.kills;
        let cores = std::thread::available_parallelism().map(|p| p.get()).unwrap_or(1);
        // More processes than cores: spinning ones would hold a core the others need, and
        // blocking ones pay a kernel wake-up per hop; yielding ones neither.
        let poll = a.poll.unwrap_or(if a.procs && a.nodes as usize + 1 > cores {
            PollMode::Yield
        } else {
            PollMode::Busy
        });
        let m = self.run_model(env, poll, cores)?;
        let dead = kills.iter().filter(|k| k.point == KillPoint::Start).count() as u32;
        let algo = resolve_algo(&a.alg, a.nodes, m.model.mean_logp(), dead)?;
        let (workers, model_cores) = self.workers(cores);
        let bench = Bench {
            algo: algo.clone(),
            cluster: ClusterConfig {
                nodes: a.nodes,
                workers,
                poll,
                warmup: a.warmup,
                iterations: a.iterations,
                window: a.window,
                payload_len: a.size,
                tick_ns: m.model.unit_ns,
                job: crate::experiment::launch::job::bench(a.seed),
                seed: a.seed,
                op_timeout: Duration::from_millis(a.op_timeout_ms),
                idle: Duration::from_micros(500),
                pin: !a.no_pin,
                give_up_after: Some(GIVE_UP_AFTER),
            },
            transport: a.transport,
            kills: kills.clone(),
            model: m.model.loggp,
            loss: a.loss,
            auth: if a.join.is_none() && a.transport == TransportKind::Udp {
                crate::experiment::launch::job::fresh_session(self.key(env)?)?
            } else {
                None
            },
        };
        if a.join.is_none() && a.transport == TransportKind::Udp && bench.auth.is_none() {
            warn_unauthenticated();
        }
        let res = match self.runner {
            Runner::Local => {
                // What the node-hop calibration's nodes traced is not this run's.
                let _ = crate::runtime::node::trace::take();
                local::run(&bench, progress)?
            }
            Runner::Procs => self.run_procs(env, &bench, &m.model, poll)?,
            Runner::Coordinator => self.run_coordinator(env, &bench, m.o_ns, m.l_ns)?,
            // Ran above, without a model.
            Runner::Node { .. } => return Err("a launched run's node is not measured here".into()),
        };
        let hosting = Hosting {
            workers,
            poll,
            model_cores,
            workers_take_turns: self.workers_take_turns(poll),
            cores,
        };
        Ok(Ran::Measured(Box::new(BenchOutcome::assemble(algo, m, hosting, res))))
    }

    /// The run's workers on a machine of `cores` cores, and the cores the model's nodes share
    /// (`None`: a core per node).
    pub(super) fn workers(&self, cores: usize) -> (usize, Option<u32>) {
        let a = &self.spec;
        match self.runner {
            // Nodes that share cores take turns on them: the model does too (a core does one
            // send or receive at a time).
            Runner::Local => {
                let w = a.workers.unwrap_or(cores).min(a.nodes as usize).max(1);
                (w, (w < a.nodes as usize).then_some(w as u32))
            }
            Runner::Procs => (a.nodes as usize, (a.nodes as usize > cores).then_some(cores as u32)),
            // Launched runs model their hosts with --shared-cores instead.
            Runner::Coordinator | Runner::Node { .. } => (a.nodes as usize, None),
        }
    }

    /// Whether the model's shared cores are workers that step their nodes in turn: a local
    /// run's workers that poll (busy, or adaptive while it spins); ones that yield or sleep
    /// wait on the kernel, which no visit cost describes.
    pub(super) fn workers_take_turns(&self, poll: PollMode) -> bool {
        self.runner == Runner::Local && matches!(poll, PollMode::Busy | PollMode::Adaptive)
    }

    /// The job's key (generated for a local or `procs` run); a `boot` run's session key.
    pub(super) fn key(&self, env: &BenchEnv) -> Result<Option<AuthKey>, String> {
        let key = (env.job_key)(self.spec.join.is_none())?;
        match (self.spec.boot, key) {
            // No rank 0 hands out a nonce before the overlay exists: the run's session key
            // comes from the launch's id (boot datagrams, control plane and data alike).
            (Some(_), Some(k)) => {
                let run = crate::transport::run_dir::RunId::resolve(self.spec.run_id.as_deref(), true, "bench --boot")?;
                Ok(Some(run.session_key(&k)))
            }
            (_, key) => Ok(key),
        }
    }

    fn joined_node(&self, rank: u32, auth: Option<AuthKey>) -> JoinedNode<'_> {
        let a = &self.spec;
        JoinedNode {
            auth,
            alg: &a.alg,
            coordinator: a.join.expect("join mode"),
            bind: a.bind,
            rank,
            n: a.nodes,
            job: crate::experiment::launch::job::bench(a.seed),
            seed: a.seed,
            size: a.size,
            poll: a.poll.unwrap_or(PollMode::Busy),
            kills: &self.kills,
            timeout: Duration::from_millis(a.join_timeout_ms.max(1)),
            link_delay: (
                Duration::from_nanos(a.emulate_delay_ns),
                Duration::from_nanos(a.emulate_jitter_ns),
            ),
            boot: a.boot.map(|me| BootSpec {
                me,
                parent: a.boot_parent,
                o_ns: shared_o_ns(a.o_ns.unwrap_or(1), a.nodes, a.shared_cores),
                l_ns: a.l_ns.unwrap_or(1),
            }),
            verbs: a.transport == TransportKind::Verbs,
        }
    }

    /// Rank 0 of a launched run: the coordinator on a thread of its own, node 0 on this one.
    fn run_coordinator(&self, env: &BenchEnv, bench: &Bench, o_ns: u64, l_ns: u64) -> Result<ClusterResult, String> {
        let a = &self.spec;
        let kills = &self.kills;
        let addr = a.join.expect("join mode");
        let root_key = self.key(env)?;
        let mut agent = ParentAgent::bind(addr, bench.cluster.job, a.nodes)
            .map_err(|e| format!("cannot bind the coordinator at {addr}: {e}"))?;
        agent.set_key(root_key.clone());
        let params = JobParams {
            o_ns,
            l_ns,
            epoch_unix_ns: unix_ns(),
            // The run's nonce: the nodes seal the run's datagrams with its session key.
            run: crate::transport::udp::auth::fresh_nonce().map_err(|e| format!("cannot draw the run's nonce: {e}"))?,
        };
        let timeout = Duration::from_millis(a.join_timeout_ms.max(1));
        let (res, node) = std::thread::scope(|sc| {
            let table = a.boot.is_none();
            let cluster = &bench.cluster;
            let coord = sc.spawn(move || coordinate_joined(agent, cluster, kills, params, timeout, table));
            let node = run_joined_node(&self.joined_node(0, root_key));
            (coord.join(), node)
        });
        let res = res.map_err(|_| "the coordinator thread panicked".to_string())??;
        node?;
        Ok(res)
    }

    /// One `ftcoll node` process per node, coordinated by this one.
    fn run_procs(
        &self,
        env: &BenchEnv,
        bench: &Bench,
        model: &BenchModel,
        poll: PollMode,
    ) -> Result<ClusterResult, String> {
        let a = &self.spec;
        let kills = &self.kills;
        let exe = std::env::current_exe().map_err(|e| format!("cannot find the ftcoll executable: {e}"))?;
        let dir = crate::experiment::launch::private_dir("ftcoll-procs")?;
        let key_args = match &bench.auth {
            Some(k) => vec![
                "--key-file".to_string(),
                (env.write_key_file)(&dir, k)?.display().to_string(),
            ],
            None => vec!["--auth".to_string(), "off".to_string()],
        };
        // The children build the same model from the same three numbers.
        let model_args = [
            ("--o-ns", model.mean_o_ns()),
            ("--os-ns", model.os_ns),
            ("--or-ns", model.or_ns),
            ("--L-ns", model.l_ns),
        ];
        let child_poll = (env.poll_name)(poll).to_string();
        let child_args = |r: u32| {
            let mine: Vec<Kill> = kills
                .iter()
                .copied()
                .filter(|k| k.rank == r && !matches!(k.point, KillPoint::SigKill { .. }))
                .collect();
            let mut v = a.child_alg_args.clone();
            for (flag, ns) in model_args {
                v.extend([flag.to_string(), ns.to_string()]);
            }
            v.extend(["--kill".to_string(), format_kills(&mine)]);
            v.extend(["--poll".to_string(), child_poll.clone()]);
            if a.loss > 0.0 {
                v.extend(["--loss".to_string(), a.loss.to_string()]);
            }
            if a.transport == TransportKind::Verbs {
                // QP data goes through a directory beside the hostfile.
                v.extend([
                    "--transport".to_string(),
                    "verbs".to_string(),
                    "--verbs-dir".to_string(),
                ]);
                v.push(dir.join("verbs").display().to_string());
                // The run's id: the name of its private directory, new per run.
                let id = dir.file_name().map(|n| n.to_string_lossy().into_owned());
                v.extend(["--run-id".to_string(), id.unwrap_or_else(|| "procs".into())]);
                v.extend(a.child_verbs_args.iter().cloned());
            }
            v.extend(key_args.iter().cloned());
            v
        };
        let r = crate::experiment::launch::bcast::run_parent(
            &exe,
            &bench.cluster,
            bench.auth.as_ref(),
            kills,
            &child_args,
            &dir,
        );
        let _ = std::fs::remove_dir_all(&dir);
        r
    }
}
