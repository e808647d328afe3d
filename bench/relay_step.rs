//! A relay's protocol work between a tree message's receipt and its first forward, without a
//! network or the runtime: a fresh corrected-tree process of rank 1 of 16 (binomial tree,
//! children 3, 5 and 9) is built and started, takes the root's tree message, is asked whether
//! it delivered, finished or has a timer, and chooses its first forward — what a node's pass
//! does per operation on a relay — for each correction. On a core per node the checked
//! correction's relays took 60–130 ns longer from receipt to first forward than without
//! correction (`docs/measurements.md`, "The head on a lent instance (2026-11-27 evening…)");
//! this says how much of that is the protocol's own step.
//!
//! `cargo bench --bench relay_step` (add `-- --quick` for a shorter run).

use std::time::Instant;

use ftcoll::model::LogP;
use ftcoll::protocol::bcast::Start;
use ftcoll::protocol::bcast::corrected_tree::{CorrectedTree, TreeMsg, TreeShared};
use ftcoll::protocol::bcast::correction::Correction;
use ftcoll::protocol::{Action, Ctx, ProtoRng, Protocol};
use ftcoll::topology::{Order, Tree, TreeKind};

const N: u32 = 16;

/// ns per relay step for `corr`, over `iters` steps.
fn measure(corr: Correction, iters: u64) -> Result<f64, String> {
    let logp = LogP { l: 2, o: 1 };
    let tree = Tree::build(TreeKind::Binomial, Order::Interleaved, N, logp)?;
    let shared = TreeShared::new(tree, logp, corr, Start::Synchronized);
    let mut rng = ProtoRng::new(1);
    // The root's tree message to rank 1, as the root's protocol makes it.
    let root_cx = Ctx {
        rank: 0,
        n: N,
        now: 0,
        shared: &shared,
    };
    let mut root = CorrectedTree::<0>::new(&root_cx);
    root.start(&root_cx);
    let msg: TreeMsg<0> = (0..N)
        .find_map(|_| match root.poll_send(&root_cx, &mut rng) {
            Action::Send { to: 1, msg } => Some(msg),
            _ => None,
        })
        .ok_or("the root sends rank 1 nothing")?;
    let cx = Ctx {
        rank: 1,
        n: N,
        now: 5,
        shared: &shared,
    };
    let mut check = 0u64;
    let t = Instant::now();
    for _ in 0..iters {
        let mut p = CorrectedTree::<0>::new(&cx);
        p.start(&cx);
        p.on_message(&cx, 0, &msg);
        check += u64::from(p.delivered()) + u64::from(p.finished(&cx)) + p.next_timer().unwrap_or(0);
        if let Action::Send { to, .. } = p.poll_send(&cx, &mut rng) {
            check += u64::from(to);
        }
        std::hint::black_box(&p);
    }
    let ns = t.elapsed().as_nanos() as f64 / iters as f64;
    // Delivered and forwarded to its first child (rank 3) in every step.
    if check < iters * 4 {
        return Err(format!(
            "a step did not deliver and forward ({check} over {iters} steps)"
        ));
    }
    Ok(ns)
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let (iters, reps) = if quick { (200_000, 2) } else { (2_000_000, 5) };
    println!(
        "a relay's protocol step (rank 1 of {N}, binomial): build, start, tree message, checks, first forward; ns per step"
    );
    println!("{:>5} {:>12} {:>12}", "rep", "none", "checked");
    for rep in 1..=reps {
        let none = measure(Correction::None, iters);
        let checked = measure(Correction::Checked, iters);
        match (none, checked) {
            (Ok(a), Ok(b)) => println!("{rep:>5} {a:>12.1} {b:>12.1}"),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("relay_step: {e}");
                std::process::exit(1);
            }
        }
    }
}
