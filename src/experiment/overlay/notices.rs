//! `ftcoll sim --algo failure-notices`: rounds until every survivor knows of a death, the
//! notice spread by Han–Finkel's `Disseminate` over the members without the dead process
//! ([`crate::sim::notices`]): with no further failure (Theorem 1's bound), and with one more
//! process failing at any round of the spread (Theorem 2's bound), as a table or `--json`.

use serde::Serialize;
use serde_json::json;

use crate::experiment::overlay::OverlaySpec;
use crate::protocol::overlay::han_finkel::run_len;
use crate::protocol::{ProtoRng, Rank};
use crate::sim::notices::{NoticeRun, spread};
use crate::topology::binomial_graph::neighbors;

/// Largest `--nodes` (a spread costs about `n log n` notice copies).
pub const MAX_NOTICE_NODES: u32 = 4096;

/// One table row.
#[derive(Clone, Debug, Serialize)]
struct Row {
    n: u32,
    /// Machines of a notice's pattern (`n - 1`) and `⌈log m⌉`.
    m: u32,
    log_m: u32,
    /// Worst rounds over every detector, no further failure (bound `⌈log m⌉`).
    no_fault: Option<u64>,
    /// Worst rounds over the (detector, failing process, failure round) tried (bound
    /// `⌈log m⌉ + 2`).
    one_fault: Option<u64>,
    tried: u64,
    /// Every BMG neighbour of the dead process detecting at a random round 0–3, one more
    /// random failure: worst rounds from the first detection over the runs.
    neighbours: Option<u64>,
    /// Messages of one whole spread from one detector (every holder forwarding for the
    /// span), per process.
    messages_per_node: f64,
}

fn worst(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    a.zip(b).map(|(x, y)| x.max(y))
}

/// Runs `ftcoll sim --algo failure-notices`.
pub fn run(a: &OverlaySpec, sizes: &[u32]) -> Result<(), String> {
    if a.nodes > MAX_NOTICE_NODES {
        return Err(format!(
            "--algo failure-notices takes --nodes up to {MAX_NOTICE_NODES} (got {})",
            a.nodes
        ));
    }
    let mut rows = Vec::new();
    for &n in sizes.iter().filter(|&&n| n >= 3) {
        let m = n - 1;
        let l = run_len(m);
        let span = u64::from(l) + 2;
        let mut rng = ProtoRng::new(ProtoRng::run_seed(a.seed, u64::from(n)));
        let dead: Rank = 0;
        let one = |det: Rank, fails: Vec<(Rank, u64)>| NoticeRun {
            n,
            dead: vec![dead],
            detections: vec![(det, dead, 0)],
            fails,
            delays: None,
        };
        let mut no_fault = Some(0);
        for det in 1..n {
            no_fault = worst(no_fault, spread(&one(det, vec![]), 4 * span).rounds);
        }
        let messages = spread(&one(1, vec![]), 4 * span).messages;
        // Every (detector, failing process, round) up to 33 processes, else --runs random ones.
        let triples: Vec<(Rank, Rank, u64)> = if n <= 33 {
            (1..n)
                .flat_map(|d| {
                    (1..n)
                        .filter(move |&f| f != d)
                        .flat_map(move |f| (0..=span).map(move |t| (d, f, t)))
                })
                .collect()
        } else {
            (0..a.runs)
                .map(|_| {
                    let d = 1 + rng.below(m);
                    let f = loop {
                        let f = 1 + rng.below(m);
                        if f != d {
                            break f;
                        }
                    };
                    (d, f, u64::from(rng.below(span as u32 + 1)))
                })
                .collect()
        };
        let mut one_fault = Some(0);
        for &(d, f, t) in &triples {
            one_fault = worst(one_fault, spread(&one(d, vec![(f, t)]), 4 * span).rounds);
        }
        let mut around = Some(0);
        let nb = neighbors(dead, n);
        for _ in 0..a.runs.clamp(1, 64) {
            let mut detections: Vec<(Rank, Rank, u64)> =
                nb.iter().map(|&p| (p, dead, u64::from(rng.below(4)))).collect();
            detections[0].2 = 0;
            let f = 1 + rng.below(m);
            let run = NoticeRun {
                n,
                dead: vec![dead],
                detections: detections.into_iter().filter(|x| x.0 != f).collect(),
                fails: vec![(f, u64::from(rng.below(span as u32)))],
                delays: None,
            };
            if run.detections.is_empty() {
                continue;
            }
            around = worst(around, spread(&run, 8 * span).rounds);
        }
        rows.push(Row {
            n,
            m,
            log_m: l,
            no_fault,
            one_fault,
            tried: triples.len() as u64,
            neighbours: around,
            messages_per_node: messages as f64 / f64::from(n),
        });
    }
    if a.json {
        println!("{}", json!({"algo": "failure-notices", "seed": a.seed, "rows": rows}));
        return Ok(());
    }
    let opt = |x: Option<u64>| x.map_or("never".to_string(), |x| x.to_string());
    let mut s =
        String::from("ftcoll sim: failure notices (Han–Finkel Disseminate over the members without the dead one,\n");
    s += "m = n - 1 machines, forwarded ⌈log m⌉ + 2 rounds), synchronous rounds; rounds until every survivor\n";
    s += "knew: one detector, no further failure (every detector; Theorem 1 bound ⌈log m⌉); one detector and\n";
    s += "one more process failing at some round of the spread (every case for n <= 33, else --runs random\n";
    s += "ones; Theorem 2 bound ⌈log m⌉ + 2); every BMG neighbour detecting at a random round 0-3 and one\n";
    s += "more random failure (rounds from the first detection)\n\n";
    s += &format!(
        "{:>6}{:>9}{:>10}{:>8}{:>10}{:>8}{:>9}{:>12}{:>11}\n",
        "n", "⌈log m⌉", "no fault", "bound", "1 fault", "bound", "tried", "neighbours", "msgs/node"
    );
    for r in &rows {
        s += &format!(
            "{:>6}{:>9}{:>10}{:>8}{:>10}{:>8}{:>9}{:>12}{:>11.1}\n",
            r.n,
            r.log_m,
            opt(r.no_fault),
            r.log_m,
            opt(r.one_fault),
            r.log_m + 2,
            r.tried,
            opt(r.neighbours),
            r.messages_per_node
        );
    }
    print!("{s}");
    Ok(())
}
