//! A group of processes: this program starts itself four times (one process per member, as a
//! launcher such as `mpirun` or Slurm would start them). Every member broadcasts a greeting to
//! the others (each broadcast is collective: all members call it, naming its root), and the
//! members agree on the AND of their values. Then member 3's process exits without leaving the
//! group (its sockets closed by the kernel, as a crash would close them), and the other three
//! agree again, on the AND of their own values and on member 3 having failed, and member 1
//! broadcasts to the two others left.
//!
//! Run with `cargo run --example member`; it exits non-zero if any member saw another outcome
//! than the one above. It starts its members as a launcher would, with the rank and size in
//! Open MPI's environment variables, which `MemberSpec::from_launcher` reads (so does
//! `mpirun -n 4 target/release/examples/member --at HOST:PORT`, or Slurm's `srun`). One
//! member by hand (each in its own shell, in any order):
//! `cargo run --example member -- --rank R --nodes N --at 127.0.0.1:7800`. Started either way
//! without `--check`, no member exits early and each prints what it agreed.

use std::collections::VecDeque;
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

/// One member: a broadcast from every member, two agreements and a broadcast from member 1.
/// With `check` (the self-started run) member [`LEAVES`] exits after the first agreement
/// without leaving, and every result is checked.
fn member(spec: MemberSpec, check: bool) -> Result<(), GroupError> {
    let wrong = |what: String| Err(GroupError::Setup(what));
    let (rank, n) = (spec.rank, spec.n);
    let mut m = Member::join(spec)?;
    println!("member {rank} of {n}: joined");
    // Events come in one stream: what arrives while waiting for another kind waits here.
    let mut later = VecDeque::new();
    let greetings = broadcasts(&mut m, &mut later, &(0..n).collect::<Vec<_>>())?;
    for (root, bytes) in &greetings {
        println!("member {rank}: from member {root}: {}", String::from_utf8_lossy(bytes));
    }
    let expect: Vec<_> = (0..n).map(|r| (r, greeting(r))).collect();
    if check && greetings != expect {
        return wrong(format!("the greetings were {greetings:?}"));
    }
    let (value, failed) = agree(&mut m, &mut later, !(1u64 << rank))?;
    println!("member {rank}: agreement 0 = {value:#x}, failed {failed:?}");
    let all = (0..n).fold(u64::MAX, |v, r| v & !(1u64 << r));
    if check && (value, failed.as_slice()) != (all, &[][..]) {
        return wrong(format!("agreement 0 gave {value:#x}, failed {failed:?}"));
    }
    if check && rank == LEAVES {
        // Out without a word: the kernel closes this process's sockets, as a crash's.
        std::process::exit(0);
    }
    let (value, failed) = agree(&mut m, &mut later, !(1u64 << (8 + rank)))?;
    println!("member {rank}: agreement 1 = {value:#x}, failed {failed:?}");
    let live = (0..n).filter(|&r| r != LEAVES);
    let expect = (live.fold(u64::MAX, |v, r| v & !(1u64 << (8 + r))), vec![LEAVES]);
    if check && (value, failed.clone()) != expect {
        return wrong(format!(
            "agreement 1 gave {value:#x}, failed {failed:?}; expected {:#x}, failed {:?}",
            expect.0, expect.1
        ));
    }
    let last = broadcasts(&mut m, &mut later, &[1])?;
    for (root, bytes) in &last {
        let text = String::from_utf8_lossy(bytes);
        println!("member {rank}: after member {LEAVES} left, from member {root}: {text}");
    }
    if check && last != [(1, greeting(1))] {
        return wrong(format!("the last broadcast gave {last:?}"));
    }
    Ok(())
}

/// What member `r` broadcasts.
fn greeting(r: u32) -> Vec<u8> {
    format!("hello from member {r}").into_bytes()
}

/// The next event: one put aside in `later` first, else the member's next, waiting 30 s.
fn next(m: &mut Member, later: &mut VecDeque<Event>) -> Option<Event> {
    later.pop_front().or_else(|| m.next_event(Duration::from_secs(30)))
}

/// Calls one broadcast per root in `roots` (this member's greeting where it is the root) and
/// waits until each is over here: what it delivered, `(root, bytes)` in operation order.
/// Agreements' returns that come meanwhile go to `later`.
fn broadcasts(m: &mut Member, later: &mut VecDeque<Event>, roots: &[u32]) -> Result<Vec<(u32, Vec<u8>)>, GroupError> {
    let seqs: Vec<u64> = roots
        .iter()
        .map(|&r| m.broadcast(r, &greeting(m.rank())))
        .collect::<Result<_, _>>()?;
    let mut got = std::collections::BTreeMap::new();
    let mut over = 0;
    let mut aside = Vec::new();
    while over < seqs.len() {
        match next(m, later) {
            Some(Event::Delivered { seq, root, bytes, .. }) => {
                got.insert(seq, (root, bytes));
            }
            Some(Event::Completed { seq, timed_out, .. }) if seqs.contains(&seq) => {
                if timed_out {
                    println!("member {}: broadcast {seq} timed out here", m.rank());
                }
                over += 1;
            }
            Some(Event::Failed { rank }) => println!("member {}: member {rank} failed", m.rank()),
            Some(e) => aside.push(e),
            None => return Err(GroupError::Setup("a broadcast was not over in 30 s".into())),
        }
    }
    later.extend(aside);
    Ok(got.into_values().collect())
}

/// Enters an agreement with `value` and waits for its return; broadcasts' events that come
/// meanwhile go to `later`.
fn agree(m: &mut Member, later: &mut VecDeque<Event>, value: u64) -> Result<(u64, Vec<u32>), GroupError> {
    let id = m.agree(value)?;
    let mut aside = Vec::new();
    loop {
        match next(m, later) {
            Some(Event::Agreed {
                id: i, value, failed, ..
            }) if i == id => {
                later.extend(aside);
                return Ok((value, failed));
            }
            Some(Event::Failed { rank }) => println!("member {}: member {rank} failed", m.rank()),
            Some(e) => aside.push(e),
            None => {
                return Err(match m.fenced_by() {
                    Some(by) => GroupError::Fenced { rank: m.rank(), by },
                    None => GroupError::Setup(format!("agreement {id} did not return in 30 s")),
                });
            }
        }
    }
}
