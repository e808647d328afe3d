//! Failed launches, for every experiment that starts processes: a child that exits early or
//! never reports its address is reported in one line (its rank, its exit status, its last
//! stderr line) and no child is left running or unreaped.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{Launch, Report};
use crate::runtime::agree::{AgreeBench, AgreeTransport};

/// A stand-in for `ftcoll`: a shell script, under a name of its own (its children can be told
/// from every other process's), that runs `body` with the launcher's arguments.
pub(crate) struct FakeExe {
    pub path: PathBuf,
    /// The process name (`comm`) its processes have.
    pub name: String,
}

impl FakeExe {
    pub(crate) fn new(body: &str) -> FakeExe {
        let dir = crate::experiment::launch::private_dir("ftcoll-fake").expect("a private directory");
        let name = format!("fk{:08x}", dir.as_os_str().len() as u32 ^ fastrand_u32());
        let path = dir.join(&name);
        std::fs::write(
            &path,
            format!("#!/bin/sh\ncase \"$1\" in probe) exit 0;; esac\n{body}\n"),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
        // A thread of this test binary forking while the file was open for writing may hold it
        // until its exec: wait until the script can be executed (ETXTBSY otherwise).
        let deadline = Instant::now() + Duration::from_secs(5);
        while std::process::Command::new(&path).arg("probe").status().is_err() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        FakeExe { path, name }
    }

    /// This process's children (zombies included) running the script.
    pub(crate) fn children(&self) -> Vec<u32> {
        let me = std::process::id();
        let mut out = Vec::new();
        for e in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let comm = &stat[open + 1..close];
            let ppid = stat[close + 1..]
                .split_whitespace()
                .nth(1)
                .and_then(|p| p.parse::<u32>().ok());
            if comm == self.name && ppid == Some(me) {
                out.push(pid);
            }
        }
        out
    }
}

impl Drop for FakeExe {
    fn drop(&mut self) {
        if let Some(d) = self.path.parent() {
            let _ = std::fs::remove_dir_all(d);
        }
    }
}

fn fastrand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish() as u32
}

/// A child that writes two lines on stderr and exits with 3.
pub(crate) const EXITS_EARLY: &str = "echo 'ftcoll: starting' >&2\necho \"ftcoll: boom in $1\" >&2\nexit 3";

/// Asserts `e` is one line naming the exit status and the child's last stderr line, and that
/// no child of `fake` is left (running or unreaped).
pub(crate) fn reported_and_reaped(e: &str, fake: &FakeExe) {
    assert_eq!(e.lines().count(), 1, "one line: {e:?}");
    assert!(e.contains("exit status: 3"), "the exit status: {e}");
    assert!(e.contains("ftcoll: boom in"), "the child's last stderr line: {e}");
    assert_eq!(fake.children(), Vec::<u32>::new(), "children left after: {e}");
}

/// A small UDP agreement benchmark of `n` nodes (also for `launch::agree`'s tests).
pub(crate) fn agree_bench(n: u32) -> AgreeBench {
    AgreeBench {
        n,
        era: crate::protocol::agree::EraConfig::default(),
        transport: AgreeTransport::Udp,
        workers: 1,
        pin: false,
        warmup: 0,
        iterations: 4,
        duration: None,
        kills: vec![],
        stalls: Vec::new(),
        heartbeat: Duration::from_millis(10),
        suspect_after: Duration::from_millis(200),
        op_timeout: Duration::from_secs(5),
        seed: 1,
    }
}

#[test]
fn bench_procs_a_node_that_exits_early_is_reported_in_one_line_and_reaped() {
    use crate::runtime::cluster::{ClusterConfig, PollMode};
    let fake = FakeExe::new(EXITS_EARLY);
    let cfg = ClusterConfig {
        nodes: 3,
        workers: 1,
        poll: PollMode::Adaptive,
        warmup: 0,
        iterations: 2,
        window: 1,
        payload_len: 8,
        tick_ns: 1000,
        job: 1,
        seed: 1,
        op_timeout: Duration::from_secs(2),
        idle: Duration::from_micros(500),
        pin: false,
        give_up_after: None,
    };
    let dir = crate::experiment::launch::private_dir("ftcoll-fake-run").unwrap();
    let e = crate::experiment::launch::bcast::run_parent(&fake.path, &cfg, None, &[], &|_| vec![], &dir)
        .expect_err("the run fails");
    std::fs::remove_dir_all(&dir).ok();
    assert!(e.contains("node "), "{e}");
    reported_and_reaped(&e, &fake);
}

#[test]
fn agree_procs_a_node_that_exits_early_is_reported_in_one_line_and_reaped() {
    let fake = FakeExe::new(EXITS_EARLY);
    let e = crate::experiment::launch::agree::run(&agree_bench(3), &fake.path)
        .err()
        .expect("the run fails");
    reported_and_reaped(&e, &fake);
}

#[test]
fn stress_procs_a_node_that_exits_early_is_reported_in_one_line_and_reaped() {
    let fake = FakeExe::new(EXITS_EARLY);
    let e = crate::experiment::launch::agree::stress(&agree_bench(3), &fake.path, &mut |_| vec![], &mut |_| true)
        .expect_err("the run fails");
    reported_and_reaped(&e, &fake);
}

fn boot_launch(timeout_s: u64) -> crate::experiment::launch::boot::BootLaunch {
    use crate::experiment::launch::boot::{BootLaunch, Detector};
    BootLaunch {
        tick_us: 1000,
        timeout_s,
        detector: Detector {
            heartbeat_ms: 10,
            suspect_ms: 100,
        },
    }
}

#[test]
fn bootstrap_a_node_that_exits_early_is_reported_in_one_line_and_reaped() {
    let fake = FakeExe::new(EXITS_EARLY);
    let e = crate::experiment::launch::boot::launch_with(&fake.path, &boot_launch(5), 4, true)
        .err()
        .expect("the launch fails");
    assert!(e.starts_with("node 0 exited"), "{e}");
    reported_and_reaped(&e, &fake);
}

/// Runs `f` on a thread of its own; `None` if it has not returned within `within` (it hangs).
fn within<T: Send + 'static>(within: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(within).ok()
}

/// A node that never says its address (and never exits by itself).
const HANGS: &str = "while :; do sleep 0.2; done";

#[test]
fn bootstrap_a_node_that_never_reports_its_address_fails_within_the_timeout_and_is_reaped() {
    let fake = FakeExe::new(HANGS);
    let path = fake.path.clone();
    let e = within(Duration::from_secs(30), move || {
        crate::experiment::launch::boot::launch_with(&path, &boot_launch(1), 3, false).err()
    })
    .expect("the launch gives up at its timeout instead of hanging")
    .expect("the launch fails");
    assert_eq!(e.lines().count(), 1, "{e}");
    assert!(e.contains("0 of 1 node") && e.contains("node 0 did not"), "{e}");
    assert_eq!(fake.children(), Vec::<u32>::new(), "children left after: {e}");
}

#[test]
fn a_pipe_launch_whose_child_never_reports_fails_in_one_line_and_leaves_no_child() {
    let fake = FakeExe::new(HANGS);
    let launch = Launch::new(&fake.path, Report::Pipe("bound"), Duration::from_millis(300));
    let mut procs = launch.start(vec![vec![]; 3]).expect("started");
    assert_eq!(fake.children().len(), 3);
    let started = Instant::now();
    let e = procs.addresses(&[0, 1, 2]).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(
        e,
        "only 0 of 3 nodes reported their address within 300ms (node 0 did not)"
    );
    drop(procs);
    assert_eq!(fake.children(), Vec::<u32>::new());
}

#[test]
fn reported_addresses_come_back_in_slot_order_and_other_lines_stay_for_recv() {
    let fake = FakeExe::new("echo \"hello $1\"\necho \"bound 127.0.0.1:$1\"\nexec cat");
    let mut launch = Launch::new(&fake.path, Report::Pipe("bound"), Duration::from_secs(10));
    launch.stdin = true;
    let mut procs = launch
        .start((0..3).map(|r| vec![(4000 + r).to_string()]).collect())
        .expect("started");
    let a = procs.addresses(&[2, 0, 1]).expect("all report");
    assert_eq!(a.iter().map(|a| a.port()).collect::<Vec<_>>(), vec![4002, 4000, 4001]);
    let mut hello = Vec::new();
    while hello.len() < 3 {
        let (slot, line) = procs.recv(Duration::from_secs(5)).expect("a line");
        assert_eq!(line, Some(format!("hello {}", 4000 + slot)));
        hello.push(slot);
    }
    // Commands go to stdin (`cat` echoes them); closing it ends the child.
    procs.send(1, "go");
    assert_eq!(procs.recv(Duration::from_secs(5)), Some((1, Some("go".into()))));
    procs.close_inputs();
    procs.stop(Duration::from_secs(5), &mut || {});
    for s in 0..3 {
        assert!(procs.wait(s).unwrap().is_some_and(|st| st.success()));
    }
}
