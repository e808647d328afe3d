//! A group of processes: this program starts itself four times (one process per member, as a
//! launcher such as `mpirun` or Slurm would start them), the members agree on the AND of their
//! values, then member 3's process exits without leaving the group (its sockets closed by the
//! kernel, as a crash would close them), and the other three agree again: on the AND of their
//! own values and on member 3 having failed.
//!
//! Run with `cargo run --example member`; it exits non-zero if any member saw another outcome
//! than the one above. It starts its members as a launcher would, with the rank and size in
//! Open MPI's environment variables, which `MemberSpec::from_launcher` reads (so does
//! `mpirun -n 4 target/release/examples/member --at HOST:PORT`, or Slurm's `srun`). One
//! member by hand (each in its own shell, in any order):
//! `cargo run --example member -- --rank R --nodes N --at 127.0.0.1:7800`. Started either way
//! without `--check`, no member exits early and each prints what it agreed.

use std::process::{Command, ExitCode};
use std::time::Duration;

use ftcoll::group::{Event, GroupError, Member, MemberSpec};

/// The member that exits after the first agreement, in the self-started run.
const LEAVES: u32 = 3;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| args.iter().position(|a| a == name).and_then(|i| args.get(i + 1));
    let parsed = (|| -> Result<Option<(MemberSpec, bool)>, String> {
        let Some(at) = flag("--at") else { return Ok(None) };
        let at = at
            .parse()
            .map_err(|_| "--at: not an address like 127.0.0.1:7800".to_string())?;
        let num = |s: &String, what: &str| s.parse::<u32>().map_err(|_| format!("{what}: not a number: {s:?}"));
        let spec = match flag("--rank") {
            Some(rank) => {
                let nodes = flag("--nodes").ok_or("--nodes N is needed with --rank")?;
                MemberSpec::new(num(rank, "--rank")?, num(nodes, "--nodes")?, at)
            }
            None => MemberSpec::from_launcher(at).map_err(|e| e.to_string())?,
        };
        Ok(Some((spec, args.iter().any(|a| a == "--check"))))
    })();
    let result = match parsed {
        Ok(Some((spec, check))) => member(spec, check).map_err(|e| e.to_string()),
        Ok(None) => launch(),
        Err(e) => Err(e),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("member: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Starts four members of a group as processes of this program, as `mpirun` would (rank and
/// size in Open MPI's environment variables), and waits for them.
fn launch() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))?
        .port();
    let at = format!("127.0.0.1:{port}");
    let n = 4u32;
    let children: Vec<_> = (0..n)
        .map(|r| {
            let mut c = Command::new(&exe);
            c.args(["--at", &at, "--check"])
                .env("OMPI_COMM_WORLD_RANK", r.to_string())
                .env("OMPI_COMM_WORLD_SIZE", n.to_string());
            // Started inside a Slurm or PMI job, this program's own rank would come first.
            for v in ["SLURM_PROCID", "SLURM_NTASKS", "PMI_RANK", "PMI_SIZE"] {
                c.env_remove(v);
            }
            c.spawn().map_err(|e| format!("cannot start member {r}: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let mut failed = Vec::new();
    for (r, mut c) in children.into_iter().enumerate() {
        match c.wait() {
            Ok(s) if s.success() => {}
            Ok(s) => failed.push(format!("member {r}: {s}")),
            Err(e) => failed.push(format!("member {r}: {e}")),
        }
    }
    if failed.is_empty() {
        println!("every member saw what it should");
        Ok(())
    } else {
        Err(failed.join("; "))
    }
}

/// One member: two agreements. With `check` (the self-started run) member [`LEAVES`] exits
/// after the first without leaving, and every result is checked.
fn member(spec: MemberSpec, check: bool) -> Result<(), GroupError> {
    let wrong = |what: String| Err(GroupError::Setup(what));
    let (rank, n) = (spec.rank, spec.n);
    let mut m = Member::join(spec)?;
    println!("member {rank} of {n}: joined");
    let (value, failed) = agree(&mut m, !(1u64 << rank))?;
    println!("member {rank}: agreement 0 = {value:#x}, failed {failed:?}");
    let all = (0..n).fold(u64::MAX, |v, r| v & !(1u64 << r));
    if check && (value, failed.as_slice()) != (all, &[][..]) {
        return wrong(format!("agreement 0 gave {value:#x}, failed {failed:?}"));
    }
    if check && rank == LEAVES {
        // Out without a word: the kernel closes this process's sockets, as a crash's.
        std::process::exit(0);
    }
    let (value, failed) = agree(&mut m, !(1u64 << (8 + rank)))?;
    println!("member {rank}: agreement 1 = {value:#x}, failed {failed:?}");
    let live = (0..n).filter(|&r| r != LEAVES);
    let expect = (live.fold(u64::MAX, |v, r| v & !(1u64 << (8 + r))), vec![LEAVES]);
    if check && (value, failed.clone()) != expect {
        return wrong(format!(
            "agreement 1 gave {value:#x}, failed {failed:?}; expected {:#x}, failed {:?}",
            expect.0, expect.1
        ));
    }
    Ok(())
}

/// Enters an agreement with `value` and waits for its return.
fn agree(m: &mut Member, value: u64) -> Result<(u64, Vec<u32>), GroupError> {
    let id = m.agree(value)?;
    loop {
        match m.next_event(Duration::from_secs(30)) {
            Some(Event::Agreed {
                id: i, value, failed, ..
            }) if i == id => return Ok((value, failed)),
            Some(Event::Failed { rank }) => println!("member {}: member {rank} failed", m.rank()),
            Some(_) => {}
            None => {
                return Err(match m.fenced_by() {
                    Some(by) => GroupError::Fenced { rank: m.rank(), by },
                    None => GroupError::Setup(format!("agreement {id} did not return in 30 s")),
                });
            }
        }
    }
}
