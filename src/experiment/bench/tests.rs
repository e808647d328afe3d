//! The runner a spec picks, checked on the typed spec without running it, and a local run
//! through the one entry point.

use super::*;
use crate::experiment::algo::{AlgoName, AlgoSpec};
use crate::runtime::TransportKind;
use crate::transport::udp::auth::AuthKey;

fn spec(nodes: u32) -> BenchSpec {
    BenchSpec {
        alg: AlgoSpec::new(AlgoName::CorrectedTree),
        nodes,
        transport: TransportKind::Udp,
        workers: None,
        poll: None,
        size: 8,
        iterations: 50,
        warmup: 5,
        kill: None,
        window: 1,
        o_ns: Some(1000),
        l_ns: Some(2000),
        params: None,
        shared_cores: None,
        op_timeout_ms: 1000,
        seed: 1,
        no_pin: true,
        procs: false,
        no_model: true,
        join: None,
        rank: None,
        bind: None,
        emulate_delay_ns: 0,
        emulate_jitter_ns: 0,
        loss: 0.0,
        boot: None,
        boot_parent: None,
        control_port: 47000,
        join_timeout_ms: 1000,
        run_id: None,
        child_alg_args: Vec::new(),
        child_verbs_args: Vec::new(),
    }
}

/// Runs `f` with an environment that configures no device, generates no key and writes no
/// file.
fn with_env<T>(f: impl FnOnce(&BenchEnv) -> T) -> T {
    let configure_verbs = |_| Ok(());
    let job_key = |_| Ok(None::<AuthKey>);
    let write_key_file = |_: &std::path::Path, _: &AuthKey| Err::<std::path::PathBuf, _>("no files".to_string());
    let env = BenchEnv {
        configure_verbs: &configure_verbs,
        job_key: &job_key,
        write_key_file: &write_key_file,
        poll_name: |_| "busy",
    };
    f(&env)
}

/// Checks `s` with an environment that generates no key and starts no process.
fn check(s: &BenchSpec) -> Result<Checked, String> {
    with_env(|env| s.validate(env))
}

#[test]
fn a_spec_picks_local_procs_or_a_launched_runs_coordinator_or_node() {
    let local = check(&spec(4)).unwrap();
    assert_eq!(local.runner(), Runner::Local);
    assert!(local.reports());

    let procs = check(&BenchSpec { procs: true, ..spec(4) }).unwrap();
    assert_eq!(procs.runner(), Runner::Procs);
    assert!(procs.reports());

    let joined = |rank| BenchSpec {
        join: Some("127.0.0.1:9".parse().unwrap()),
        rank: Some(rank),
        ..spec(4)
    };
    let rank0 = check(&joined(0)).unwrap();
    assert_eq!(rank0.runner(), Runner::Coordinator);
    assert!(rank0.reports(), "rank 0 prints the results");
    let rank3 = check(&joined(3)).unwrap();
    assert_eq!(rank3.runner(), Runner::Node { rank: 3 });
    assert!(!rank3.reports(), "another rank prints nothing");

    // A bootstrapped launch is joined at rank 0's IP: its ranks pick the same runners.
    let boot = |rank, parent: Option<&str>| BenchSpec {
        boot: Some("127.0.0.1:9001".parse().unwrap()),
        boot_parent: parent.map(|p| p.parse().unwrap()),
        rank: Some(rank),
        ..spec(4)
    };
    assert_eq!(check(&boot(0, None)).unwrap().runner(), Runner::Coordinator);
    assert_eq!(
        check(&boot(2, Some("127.0.0.1:9000"))).unwrap().runner(),
        Runner::Node { rank: 2 }
    );
}

#[test]
fn each_runner_refuses_what_it_cannot_run_before_anything_runs() {
    // Refused when the run starts, not by `validate`: the caller opens its outputs in
    // between, and an unwritable output is the error a user must see first.
    let refusal = |s: BenchSpec| check(&s).unwrap().refusal();
    let workers = |s: BenchSpec| BenchSpec { workers: Some(2), ..s };
    let e = refusal(workers(BenchSpec { procs: true, ..spec(4) })).unwrap();
    assert!(e.contains("--workers does not apply"), "{e}");
    let joined = |rank| BenchSpec {
        join: Some("127.0.0.1:9".parse().unwrap()),
        rank: Some(rank),
        ..spec(4)
    };
    assert!(
        refusal(workers(joined(0))).is_some(),
        "rank 0 runs one node, on one worker"
    );
    // Another rank never looked at --workers: it still does not.
    assert_eq!(refusal(workers(joined(1))), None);
    assert_eq!(refusal(workers(spec(4))), None, "a local run has workers");
    let sigkill = |s: BenchSpec| BenchSpec {
        kill: Some("2@10:sigkill".into()),
        ..s
    };
    let e = refusal(sigkill(spec(4))).unwrap();
    assert!(e.contains("needs --procs"), "{e}");
    assert_eq!(refusal(sigkill(BenchSpec { procs: true, ..spec(4) })), None);
    // The entry point refuses it.
    let checked = check(&sigkill(BenchSpec {
        transport: TransportKind::Inproc,
        ..spec(4)
    }))
    .unwrap();
    let e = with_env(|env| checked.run(env, None)).err().unwrap();
    assert!(e.contains("needs --procs"), "{e}");
}

#[test]
fn a_local_run_through_the_one_entry_point_measures_every_operation() {
    let s = BenchSpec {
        transport: TransportKind::Inproc,
        kill: Some("none".into()),
        workers: Some(2),
        ..spec(3)
    };
    let checked = check(&s).unwrap();
    let Ran::Measured(out) = with_env(|env| checked.run(env, None)).unwrap() else {
        panic!("a local run is measured");
    };
    assert_eq!((out.res.measured, out.res.violations, out.res.timeouts), (50, 0, 0));
    assert_eq!(out.workers, 2);
    assert_eq!(out.model_cores, Some(2), "3 nodes on 2 workers take turns");
    assert!(out.node_hop.is_none(), "o and L were given");
    assert!(checked.prediction(&out).unwrap().is_none(), "no_model");
}
