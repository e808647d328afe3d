//! Scaling (Corrected Gossip Figure 7), the other papers' tables (ERA, BMG, Han–Finkel) and
//! the figures.

use super::*;

/// CG Figure 7a/7b: median latency against N, failure-free and with N/64 failures.
pub(super) fn scaling(c: &mut Ctx) -> Result<(), String> {
    let sizes: &[u32] = if c.quick {
        &[64, 256, 1024, 4096]
    } else {
        &[64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
    };
    let runs = c.pick(100, 1000);
    c.line("## CG Figure 7a/7b: median latency against N (L = 2, O = 1)");
    c.line("");
    c.line(&format!(
        "{runs} runs per point; \"opt\" is the optimal (non-fault-tolerant) tree. Paper: OCG fastest of the \
         fault-tolerant algorithms; FCG beats BIG from 512 nodes fault-free (7a) and from 256 with N/64 failures \
         (7b); opt is omitted under failures (it is not consistent)."
    ));
    for (title, faults) in [("7a: failure-free", None), ("7b: N/64 failures", Some(64u32))] {
        c.line("");
        c.line(&format!("### {title}"));
        c.line("");
        c.line("| N | OCG | CCG | FCG | BIG | BFB | opt |");
        c.line("|---|---|---|---|---|---|---|");
        let mut fcg_beats = Vec::new();
        for &n in sizes {
            let fl = match faults {
                Some(d) => format!("--faults {}", n / d),
                None => "--faults 0".into(),
            };
            let mut line = format!("| {n} |");
            let mut med = Vec::new();
            for args in [
                "--algo corrected-gossip --variant ocg",
                "--algo corrected-gossip --variant ccg",
                "--algo corrected-gossip --variant fcg:1",
                "--algo big",
                "--algo bfb",
            ] {
                let s = c.sim(&format!("{args} --nodes {n} --L 2 --o 1 {fl} --runs {runs} --seed 13"))?;
                let (m, cell) = scaling_cell(&s, args.contains("ocg"));
                med.push(m);
                let _ = write!(line, " {cell} |");
            }
            if faults.is_none() {
                let s = c.sim(&format!(
                    "--tree optimal --correction none --nodes {n} --L 2 --o 1 --faults 0 --runs 1"
                ))?;
                let _ = write!(line, " {} |", f1(s.coloring.percentiles().p50));
            } else {
                line.push_str(" — |");
            }
            if med[2] < med[3] {
                fcg_beats.push(n);
            }
            c.line(&line);
        }
        c.line("");
        c.line(&format!(
            "FCG faster than BIG (median) at N ∈ {fcg_beats:?}. A cell \"k/R runs incomplete\" counts runs \
             that left a live process uncolored: no latency is reported for them."
        ));
    }
    c.line("");
    Ok(())
}

/// A Figure 7 cell: the median latency, or, for a strongly consistent algorithm with a run
/// that left a live process uncolored, that count instead of a number (such a run did not
/// finish: its latency is not a broadcast's latency). OCG is only weakly consistent (CG §IV.E):
/// its median stands, with the runs that missed a node noted. The first value is the median
/// for comparisons (infinite when not reported).
pub(super) fn scaling_cell(s: &Summary, weak: bool) -> (f64, String) {
    let m = s.quiescence.percentiles().p50;
    match (s.uncolored_runs, weak) {
        (0, _) => (m, f1(m)),
        (k, true) => (m, format!("{} ({k}/{} runs missed a node)", f1(m), s.runs)),
        (k, false) => (f64::INFINITY, format!("**{k}/{} runs incomplete**", s.runs)),
    }
}

/// ERA, the BMG overlay and Han–Finkel: their own commands print the tables (the paper's bound
/// is a column of each); they run here as subprocesses of this very binary, so that this file
/// always shows what the documented command prints.
pub(super) fn other_papers(c: &mut Ctx) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the ftcoll executable: {e}"))?;
    let bmg = bmg_claim();
    let sections: [(&str, &str, &str, &str); 6] = [
        (
            "ERA Theorem 5: failure-free agreement latency and messages",
            "Theorem 5: without failures an agreement takes at most 2·⌈log_δ n⌉ message steps on its \
             critical path (one UP wave, one DOWN wave); the `bound` column is that, the measured steps must \
             not exceed it.",
            "agree --sim --nodes 64 --runs 100 --agreements 100",
            "agree --sim --nodes 64 --runs 20 --agreements 20",
        ),
        (
            "ERA under failures (hierarchical bin/bin tree, union of sets)",
            "§3 properties under crashes during agreements: termination, uniform agreement, validity, \
             irrevocability; violations must be 0.",
            "agree --sim --nodes 64 --tree bin/bin:8 --runs 200 --agreements 20 --random-kills 5 --detect-jitter 10 --value union",
            "agree --sim --nodes 64 --tree bin/bin:8 --runs 40 --agreements 10 --random-kills 5 --detect-jitter 10 --value union",
        ),
        (
            "ERA §4: garbage collection keeps memory bounded",
            "§4: decided results are collected by agreeing on ranges of returned ids, so that the stored \
             results stay bounded however many agreements run.",
            "agree --sim --nodes 8 --runs 1 --agreements 1000000",
            "agree --sim --nodes 8 --runs 1 --agreements 100000",
        ),
        (
            "BMG Figures 2 and 3: convergence of tree → ring → BMG",
            &bmg,
            "sim --algo bmg-build",
            "sim --algo bmg-build --runs 1",
        ),
        (
            "BMG Figure 4: random launch trees",
            "Figure 4: random launch trees (degree and depth vary) converge like the regular ones.",
            "sim --algo bmg-build --launch-tree random:4 --runs 5",
            "sim --algo bmg-build --launch-tree random:4 --runs 1",
        ),
        (
            "Han–Finkel Theorems 1–3",
            "Theorem 1: any source, any start round, ⌈log n⌉ rounds for any n; Theorem 2: one failed \
             machine, ⌈log n⌉ + 2 rounds (the paper's n = 10 example needs 6); Theorem 3: every machine \
             reorganizes at the same round. Every source, start round and failed machine is tried.",
            "sim --algo dissemination --nodes 64",
            "sim --algo dissemination --nodes 32",
        ),
    ];
    for (title, claim, full, quick) in sections {
        let args = c.pick(quick, full);
        c.line(&format!("## {title}"));
        c.line("");
        c.line(claim);
        c.line("");
        c.line(&format!("`ftcoll {args}`:"));
        c.line("");
        let out = subrun(&exe, args.split_whitespace().map(String::from).collect(), args)?;
        c.line("```");
        c.line(String::from_utf8_lossy(&out).trim_end());
        c.line("```");
        c.line("");
    }
    Ok(())
}

/// The message hops of BMG §4's tree→ring on a binomial launch tree: "each Info message
/// originated at one leaf needs only to go up once …, then is forwarded to the parent that will
/// step down to the next children … and create a Ask_Connect then a B_Connect message, hence 4
/// phases" (Info, Info, Ask_Connect, B_Connect).
pub(super) const BMG_BINOMIAL_RING_HOPS: u64 = 4;

/// The claim above the BMG Figure 2/3 table. The paper's "4 phases" counts the message hops;
/// `sim --algo bmg-build` counts synchronous phases from the start, where phase 1 runs the
/// spontaneous rules (the leaves' first Info is sent then and consumed in phase 2), so its
/// `ring` column is one more (the text said 4 above a table showing 5).
pub(super) fn bmg_claim() -> String {
    format!(
        "Figure 2: tree→ring on binomial launch trees in {h} synchronous phases, counting message hops \
         (Info, Info, Ask_Connect, B_Connect); the `ring` column counts phases from the start, the first \
         of which only runs the leaves' spontaneous rules, so it shows {p} = {h} + 1 at every depth. On \
         binary trees O(log N), plus O(log N) for the BMG; asynchronous convergence ~log² N (binomial) \
         and ~log N (binary). Figure 3: the most messages one process receives.",
        h = BMG_BINOMIAL_RING_HOPS,
        p = BMG_BINOMIAL_RING_HOPS + 1
    )
}

/// The papers' latency and correction figures as images, drawn by `ftcoll plot` next to the
/// generated file (`figures/` beside it) and embedded.
pub(super) fn figures(c: &mut Ctx, out: &std::path::Path) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find the ftcoll executable: {e}"))?;
    let base = out
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let dir = base.join("figures");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let nodes = c.pick("256,1024,4096", "1024,4096,16384,65536");
    let figs: [(&str, &str, String); 3] = [
        (
            "repro-scaling",
            "Coloring latency against P (CT Figures 6/7, CG Figure 7a), L = 2, o = 1, 1 % dead",
            format!(
                "plot scaling --nodes {nodes} --runs {} --algos corrected-tree;corrected-tree --tree optimal;corrected-gossip;big",
                c.pick(10, 50)
            ),
        ),
        (
            "repro-messages",
            "Messages per process against P (CT §4.1, CG Figure 7b)",
            format!(
                "plot messages --nodes {nodes} --runs {} --algos corrected-tree;corrected-gossip;big;gossip",
                c.pick(3, 10)
            ),
        ),
        (
            "repro-correction",
            "Correction latency against the fault rate (CT Table 1, §4.3)",
            format!(
                "plot correction --nodes {} --runs {} --faults 0.01%,0.1%,0.5%,1%,2%,4% --algos corrected-tree --correction checked;corrected-tree --correction failproof:1;corrected-tree --correction optimized:4 --start overlapped",
                c.pick(4096, 16384),
                c.pick(20, 100)
            ),
        ),
    ];
    c.line("## Figures");
    c.line("");
    for (name, title, args) in figs {
        let svg = dir.join(format!("{name}.svg"));
        // `--algos` takes one argument with spaces: split off the flag, keep its value whole.
        let (head, algos) = args.split_once("--algos ").expect("every figure names its algorithms");
        let mut argv: Vec<String> = head.split_whitespace().map(String::from).collect();
        argv.extend([
            "--algos".into(),
            algos.into(),
            "--out".into(),
            svg.display().to_string(),
        ]);
        subrun(&exe, argv, &args)?;
        c.line(&format!("### {title}"));
        c.line("");
        c.line(&format!("`ftcoll {head}--algos \"{algos}\" --out figures/{name}.svg`:"));
        c.line("");
        c.line(&format!("![{title}](figures/{name}.svg)"));
        c.line("");
    }
    Ok(())
}

/// The stdout of `exe ARGS` (a sub-run of this very binary, started by the one launcher,
/// [`crate::experiment::launch::spawn::Launch::output`]) when it succeeded; else one line
/// naming `ftcoll {shown}`, its exit status and its last stderr line. Its stderr is not shown
/// otherwise.
pub(super) fn subrun(exe: &std::path::Path, args: Vec<String>, shown: &str) -> Result<Vec<u8>, String> {
    use crate::experiment::launch::spawn::{Launch, Report};
    let mut l = Launch::new(exe, Report::Nothing, std::time::Duration::ZERO);
    l.pass_stderr = false;
    l.output(&args, shown)
}

#[cfg(test)]
mod tests {
    use crate::experiment::launch::spawn::tests::{EXITS_EARLY, FakeExe, reported_and_reaped};

    #[test]
    fn a_sub_run_that_fails_is_one_line_with_its_status_and_last_error() {
        let fake = FakeExe::new(EXITS_EARLY);
        let args = vec!["sim".into(), "--nodes".into(), "8".into()];
        let e = super::subrun(&fake.path, args, "sim --nodes 8").unwrap_err();
        assert!(e.starts_with("`ftcoll sim --nodes 8` failed"), "{e}");
        reported_and_reaped(&e, &fake);
    }
}
