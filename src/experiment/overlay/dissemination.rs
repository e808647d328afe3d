//! `sim --algo dissemination`: Han–Finkel all-gather rounds (Theorems 1–3), one failure and
//! the reorganization; a table or `--json`.

use serde::Serialize;
use serde_json::json;

use crate::experiment::overlay::OverlaySpec;
use crate::experiment::overlay::bmg::fmt_opt;
use crate::protocol::ProtoRng;
use crate::protocol::overlay::han_finkel::{Tolerance, run_len};
use crate::sim::dissemination::{all_gather, reorganize};

/// Largest `--nodes` for `--algo bmg-build` (memory: about 1 KB per simulated process).
pub const MAX_BMG_NODES: u32 = 1 << 22;

/// Largest `--nodes` for `--algo dissemination` (an all-gather costs `n^2 log n` item copies).
pub const MAX_DISSEMINATION_NODES: u32 = 2048;

/// One table row of `dissemination`.
#[derive(Clone, Debug, Serialize)]
struct DissRow {
    n: u32,
    log_n: u32,
    /// Worst rounds over every start round, no failure (Theorem 1: <= log_n).
    rounds_no_fault: Option<u64>,
    /// Worst rounds over every start round and the failed machines tried (Theorem 2:
    /// <= log_n + 2).
    rounds_one_fault: Option<u64>,
    failed_tried: u32,
    max_items: usize,
    /// Reorganize: rounds from the failure to the reorganization, and whether all agreed.
    reorganize_after: u64,
    reorganize_agreed: bool,
}

pub fn sizes(max: u32) -> Vec<u32> {
    let mut v = Vec::new();
    let mut p = 2u32;
    while p <= max {
        for n in [p, p + 1, p + p / 2] {
            if n <= max && n >= 2 && !v.contains(&n) {
                v.push(n);
            }
        }
        p = p.saturating_mul(2);
        if p == u32::MAX {
            break;
        }
    }
    if !v.contains(&max) {
        v.push(max);
    }
    v.sort_unstable();
    v
}

pub fn dissemination(a: &OverlaySpec) -> Result<(), String> {
    if a.nodes > MAX_DISSEMINATION_NODES {
        return Err(format!(
            "--algo dissemination takes --nodes up to {MAX_DISSEMINATION_NODES} (got {})",
            a.nodes
        ));
    }
    let mut rows = Vec::new();
    for n in sizes(a.nodes) {
        let l = run_len(n);
        let mut rng = ProtoRng::new(ProtoRng::run_seed(a.seed, u64::from(n)));
        let all = n <= 64 || u64::from(n) <= a.runs;
        let failed: Vec<usize> = if all {
            (0..n as usize).collect()
        } else {
            (0..a.runs).map(|_| rng.below(n) as usize).collect()
        };
        let mut no_fault = Some(0);
        let mut one_fault = Some(0);
        let mut max_items = 0;
        for start in 0..u64::from(l) {
            let g = all_gather(n, start, None, Tolerance::None);
            max_items = max_items.max(g.max_items);
            no_fault = no_fault.zip(g.rounds).map(|(x, y)| x.max(y));
            if n >= 3 {
                for &f in &failed {
                    let g = all_gather(n, start, Some(f), Tolerance::OneFault);
                    one_fault = one_fault.zip(g.rounds).map(|(x, y)| x.max(y));
                }
            }
        }
        let (after, agreed) = if n >= 3 {
            let f = failed[0];
            let r = reorganize(n, f, 2 * u64::from(l));
            (r.rounds_after_failure, r.agreed && r.gather_after.is_some())
        } else {
            (0, false)
        };
        rows.push(DissRow {
            n,
            log_n: l,
            rounds_no_fault: no_fault,
            rounds_one_fault: if n >= 3 { one_fault } else { None },
            failed_tried: if n >= 3 { failed.len() as u32 } else { 0 },
            max_items,
            reorganize_after: after,
            reorganize_agreed: agreed,
        });
    }
    if a.json {
        println!("{}", json!({"algo": "dissemination", "seed": a.seed, "rows": rows}));
        return Ok(());
    }
    let mut s = String::from(
        "ftcoll sim: dissemination (Han–Finkel), all-gather from every machine, every start round of a run\n",
    );
    s += "rounds until every item reached every live machine: no failure (Theorem 1 bound ⌈log n⌉),\n";
    s += "one failed machine (Theorem 2 bound ⌈log n⌉+2; every machine tried for n <= 64 or n <= --runs, else --runs random ones);\n";
    s += "Reorganize: rounds from the failure to the common reorganization (Theorem 3)\n\n";
    s += &format!(
        "{:>6}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>11}{:>10}\n",
        "n", "⌈log n⌉", "no fault", "bound", "1 fault", "bound", "failed", "items/msg", "reorg"
    );
    for r in &rows {
        s += &format!(
            "{:>6}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>11}{:>10}\n",
            r.n,
            r.log_n,
            fmt_opt(r.rounds_no_fault.map(|x| x as f64)),
            r.log_n,
            fmt_opt(r.rounds_one_fault.map(|x| x as f64)),
            if r.n >= 3 {
                (r.log_n + 2).to_string()
            } else {
                "-".into()
            },
            r.failed_tried,
            r.max_items,
            if r.n < 3 {
                "-".to_string()
            } else if r.reorganize_agreed {
                format!("{} ok", r.reorganize_after)
            } else {
                format!("{} FAIL", r.reorganize_after)
            },
        );
    }
    print!("{s}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::overlay::bmg::shapes;

    #[test]
    fn sizes_cover_the_worst_cases() {
        assert_eq!(sizes(10), [2, 3, 4, 5, 6, 8, 9, 10]);
        assert_eq!(sizes(2), [2]);
        assert!(shapes("binary,random:3").is_ok());
        assert!(shapes("random:0").is_err());
        assert!(shapes("ternary").is_err());
    }
}
