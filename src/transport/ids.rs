//! Every id that tells one run from another, derived here and only here.
//!
//! A **job id** travels in every datagram and control message (the UDP header's `job`): a
//! node drops what carries another (two runs on one host, a stale process of an earlier
//! run), counted as `foreign_job`. A **run id** names one launch when no rank 0 hands out a
//! nonce: the processes find their rendezvous files under it ([`crate::transport::run_dir`])
//! and derive the run's **session key** from it. The session key is what the datagrams, the
//! control plane, FENCEs and rendezvous files are sealed with, always
//! [`AuthKey::session`] of a value fresh per launch under the job's long-term key
//! (`FTCOLL_KEY`, `--key-file`), so that nothing recorded in one launch verifies in the next.
//!
//! | experiment | job id | session key from |
//! |---|---|---|
//! | `bench`, threads | [`bench`](fn@bench)`(seed)` | [`fresh_session`] (a nonce drawn by the run) |
//! | the node hop measured before a `bench` run | [`node_hop`]`()` | [`fresh_session`] |
//! | `bench --procs` | [`bench`](fn@bench)`(seed)` | [`fresh_session`], handed to the children in their key file |
//! | `bench --join`, `node --join`, `agree --join` | [`bench`](fn@bench)`(seed)`, [`agree`]`(seed)` | rank 0's nonce ([`run_nonce`]), sent in its challenge |
//! | `node --rendezvous`, `--hostfile`, `--verbs-dir`, `bench --boot` | [`bench`](fn@bench)`(seed)` or `--job` | [`RunId::session_key`] of [`RunId::resolve`] |
//! | `agree --procs`, `stress agree --procs` (node processes are [`crate::group::Member`]s) | a member's ids of `seed + generation` | unauthenticated (loopback, the rendezvous as the data; the specs go over the pipes) |
//! | `bootstrap`, `bootstrap --kill` | [`bootstrap`]`(launcher pid, nodes)` | [`RunId::session_key`] of [`bootstrap_run_id`], under [`fresh_session`] |
//! | `boot-node` (hand-started) | `--job` | [`RunId::session_key`] of [`RunId::resolve`] |
//! | `logp --between` | [`logp_between`]`(port)` | the long-term key |
//! | `logp --rendezvous` | [`LOGP_RENDEZVOUS`] | [`RunId::session_key`] of [`RunId::resolve`] |
//! | a library [`crate::group`] | [`group`]`(seed)`; its agreements [`group_agree`]`(seed)` | the caller's key |
//! | a library [`crate::group::Member`] (a process each) | [`members`]`(seed)`; its broadcasts [`member_broadcasts`]`(seed)`, its streams [`member_stream`]`(seed, k)` | rank 0's nonce, in its table |
//!
//! The job-id families differ in their top 16 bits (`0xF7C0`, `0xA6EE`, `0x6770`, `0x3E3B`, `0x40B0`) where they
//! are built from a seed; the others are small numbers (a pid, a port). Run ids: `--run-id STR`, else the launcher's
//! (`LAUNCHERS`: Slurm `SLURM_JOB_ID`.`SLURM_STEP_ID`, PMIx `PMIX_NAMESPACE` as Open MPI's
//! `mpirun` exports it, older Open MPI `OMPI_MCA_ess_base_jobid`), else, unkeyed only,
//! `default` with a warning.

use crate::wire::hex;
use crate::wire::mac::AuthKey;

/// A broadcast benchmark (`bench`, `node`): every node derives it from the run's seed.
pub fn bench(seed: u64) -> u64 {
    0xF7C0_0000_0000_0000 ^ seed
}

/// A launched agreement run (`agree --join`): control plane and data, from the seed.
pub fn agree(seed: u64) -> u64 {
    0xA6EE_0000_0000_0000 ^ seed
}

/// A library group's broadcasts ([`crate::group`]), from its seed.
pub fn group(seed: u64) -> u64 {
    0x6770_0000_0000_0000 ^ seed
}

/// A library group's agreements (endpoints of their own).
pub fn group_agree(seed: u64) -> u64 {
    group(seed) ^ 0xA6EE
}

/// A library group whose members are processes ([`crate::group::Member`]): rendezvous and
/// agreements, from its seed.
pub fn members(seed: u64) -> u64 {
    0x3E3B_0000_0000_0000 ^ seed
}

/// The broadcast datagrams of that group of processes (on sockets of their own).
pub fn member_broadcasts(seed: u64) -> u64 {
    members(seed) ^ 0xB0CA
}

/// The agreement stream of that group of processes whose starting agreement has id `k` (the
/// same at every member; on sockets of their own, each stream its own job, so that a
/// straggler datagram of the last one is dropped).
pub fn member_stream(seed: u64, k: u64) -> u64 {
    members(seed) ^ 0x57EA ^ (k.wrapping_mul(0x9E37_79B9) << 16 & 0x0000_FFFF_FFFF_0000)
}

/// A bootstrap on this machine: the launching process's id and the node count (two
/// bootstraps at once differ by their launcher).
pub fn bootstrap(launcher_pid: u32, nodes: u32) -> u64 {
    u64::from(launcher_pid) << 20 | u64::from(nodes)
}

/// The node-hop measurement before a bench run (`experiment::bench::node_hop`): a 2-node run of its
/// own, on ports of its own, which no datagram of the measured run may reach.
pub fn node_hop() -> u64 {
    0x40B0_0000_0000_0000
}

/// `logp --rendezvous` (rank 0 measuring every other process of a launched run).
pub const LOGP_RENDEZVOUS: u64 = 0x10_6f_5e;

/// `logp --between` on `port` (two hosts measuring one link).
pub fn logp_between(port: u16) -> u64 {
    0x106f_0000 ^ u64::from(port)
}

/// A fresh nonce naming one launch (rank 0's, sent to the nodes in its challenge).
pub fn run_nonce() -> Result<[u8; 16], String> {
    crate::transport::udp::auth::fresh_nonce().map_err(|e| format!("cannot draw the run's nonce: {e}"))
}

/// The key a run seals with when it hands the key to its processes itself: the session key of
/// a fresh nonce under the job's long-term key, so that nothing recorded in one run (job ids
/// are derived from seeds, sequence numbers restart at 0) verifies in the next with the same
/// `FTCOLL_KEY` or `--key-file`. `None` without a key.
pub fn fresh_session(long_term: Option<AuthKey>) -> Result<Option<AuthKey>, String> {
    long_term.map(|k| run_nonce().map(|n| k.session(&n))).transpose()
}

/// A bootstrap's run id, new per launch (`bootstrap-PID-NONCE`): every node seals with the
/// session key derived from it ([`RunId::session_key`]).
pub fn bootstrap_run_id() -> Result<String, String> {
    let nonce = crate::transport::udp::auth::fresh_nonce().map_err(|e| format!("cannot draw the run's id: {e}"))?;
    Ok(format!("bootstrap-{}-{}", std::process::id(), hex::encode(&nonce)))
}

/// The longest run id accepted, bytes.
pub const RUN_ID_MAX: usize = 256;

/// Launcher variables naming one launch, by precedence: each entry's variables, all set,
/// joined by '.'.
const LAUNCHERS: &[(&[&str], &str)] = &[
    (&["SLURM_JOB_ID", "SLURM_STEP_ID"], "Slurm"),
    (&["PMIX_NAMESPACE"], "PMIx"),
    (&["OMPI_MCA_ess_base_jobid"], "Open MPI"),
];

/// The identity of one launch, shared by all its processes and by no other launch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunId {
    id: String,
    /// Where it came from: `--run-id`, a launcher's name, or `default`.
    source: &'static str,
}

impl RunId {
    /// An explicit id (`--run-id`): 1 to [`RUN_ID_MAX`] bytes, no control characters.
    pub fn new(id: &str) -> Result<RunId, String> {
        if id.is_empty() || id.len() > RUN_ID_MAX {
            return Err(format!("--run-id must be 1 to {RUN_ID_MAX} bytes, got {}", id.len()));
        }
        if id.chars().any(char::is_control) {
            return Err("--run-id must not contain control characters".into());
        }
        Ok(RunId {
            id: id.to_string(),
            source: "--run-id",
        })
    }

    /// The id the launcher gives this process, if any (`LAUNCHERS`).
    pub fn from_env() -> Option<RunId> {
        LAUNCHERS.iter().find_map(|(vars, source)| {
            let parts: Vec<String> = vars
                .iter()
                .map(|v| std::env::var(v).ok().filter(|s| !s.trim().is_empty()))
                .collect::<Option<_>>()?;
            let id = format!("{}:{}", source, parts.join("."));
            (id.len() <= RUN_ID_MAX && !id.chars().any(char::is_control)).then_some(RunId { id, source })
        })
    }

    /// The id of an unkeyed run that has none: files of an earlier such run may be read.
    pub fn default_unkeyed() -> RunId {
        RunId {
            id: "default".into(),
            source: "default",
        }
    }

    /// `explicit`, else the launcher's; a keyed run without either is an error (it cannot
    /// tell its files and datagrams from an earlier run's), an unkeyed one gets
    /// [`RunId::default_unkeyed`] and a warning on stderr. `what` names the command.
    pub fn resolve(explicit: Option<&str>, keyed: bool, what: &str) -> Result<RunId, String> {
        if let Some(s) = explicit {
            return RunId::new(s);
        }
        if let Some(r) = RunId::from_env() {
            return Ok(r);
        }
        if keyed {
            return Err(format!(
                "a keyed {what} needs a run id: give --run-id STR (the same on every process of this launch, new for each launch), or start it under Slurm (SLURM_JOB_ID, SLURM_STEP_ID) or Open MPI (PMIX_NAMESPACE)"
            ));
        }
        eprintln!(
            "ftcoll: warning: {what} has no run id (--run-id, or a launcher's SLURM_JOB_ID/PMIX_NAMESPACE): files an earlier run left in run-default/ may be read"
        );
        Ok(RunId::default_unkeyed())
    }

    /// The id.
    pub fn as_str(&self) -> &str {
        &self.id
    }

    /// Where the id came from.
    pub fn source(&self) -> &'static str {
        self.source
    }

    /// The name of the run's directory: `run-` and the id with every byte but
    /// `[A-Za-z0-9._-]` replaced by `_`; when anything was replaced or cut (at 64 bytes),
    /// 16 hex digits of a hash of the whole id follow, so distinct ids get distinct names.
    pub fn dir_name(&self) -> String {
        let clean: String = self
            .id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                    c
                } else {
                    '_'
                }
            })
            .take(64)
            .collect();
        if clean == self.id && !clean.starts_with('.') {
            format!("run-{clean}")
        } else {
            let h = AuthKey::from_bytes([0; 16]).tag(&[b"ftcoll run dir", self.id.as_bytes()]);
            format!("run-{clean}-{}", hex::encode(&h[..8]))
        }
    }

    /// The run's session key under the long-term `key`: `key.session(MAC(key, "ftcoll run id"
    /// ‖ id))`. Every process of the run derives the same; another run id gives another key,
    /// so a datagram, FENCE or file sealed in one launch fails its MAC in the next.
    pub fn session_key(&self, key: &AuthKey) -> AuthKey {
        key.session(&key.tag(&[b"ftcoll run id", self.id.as_bytes()]))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    /// The ids the experiments use for the seeds, pids, ports and generations they are run
    /// with (default seeds and sweeps, a machine's pids, every port) fall in families that do
    /// not meet: no id of one experiment kind is also another's.
    #[test]
    fn the_job_id_families_do_not_meet_for_the_inputs_they_are_run_with() {
        let mut owner: HashMap<u64, &str> = HashMap::new();
        let mut put = |id: u64, kind: &'static str| {
            if let Some(k) = owner.insert(id, kind) {
                assert_eq!(k, kind, "job id {id:#x} of both {k} and {kind}");
            }
        };
        for seed in 0..4096u64 {
            put(super::bench(seed), "bench");
            put(super::agree(seed), "agree");
            put(super::group(seed), "group");
            put(super::group_agree(seed), "group agreements");
        }
        for pid in (1..4_194_304u32).step_by(997) {
            for nodes in [2, 3, 64, 1000, 65_535] {
                put(super::bootstrap(pid, nodes), "bootstrap");
            }
        }
        for port in 0..=u16::MAX {
            put(super::logp_between(port), "logp --between");
        }
        put(super::LOGP_RENDEZVOUS, "logp --rendezvous");
    }

    #[test]
    fn fresh_sessions_differ_and_need_a_key() {
        let k = AuthKey::from_bytes([3; 16]);
        let (a, b) = (
            super::fresh_session(Some(k.clone())).unwrap().unwrap(),
            super::fresh_session(Some(k.clone())).unwrap().unwrap(),
        );
        assert_ne!(a, b);
        assert_ne!(a, k);
        assert_eq!(super::fresh_session(None), Ok(None));
        let (x, y) = (super::bootstrap_run_id().unwrap(), super::bootstrap_run_id().unwrap());
        assert_ne!(x, y);
        assert!(x.starts_with(&format!("bootstrap-{}-", std::process::id())), "{x}");
        assert!(RunId::new(&x).is_ok(), "a valid run id: {x}");
    }

    use super::{AuthKey, RunId};
}
