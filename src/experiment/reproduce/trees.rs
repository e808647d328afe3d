//! Corrected Trees: Lemma 2, Figure 1b, §4.1, Table 1, §4.3 (resilience, with a trace).

use super::*;

/// CT Lemma 2 and Corollary 1: fault-free synchronized checked correction.
pub(super) fn lemma2(c: &mut Ctx) -> Result<(), String> {
    let p = c.pick(4096, 65536);
    c.line("## CT Lemma 2 and Corollary 1 (fault-free synchronized checked correction)");
    c.line("");
    c.line(&format!(
        "Binomial interleaved tree, P = {p}, one run each (fault-free runs are deterministic)."
    ));
    c.line("");
    c.line("| L | o | paper L_FF_SCC = 4o+L+⌊L/o⌋o | ours | paper M_SCC = 3+⌊L/o⌋ | ours (correction msgs/process) |");
    c.line("|---|---|---|---|---|---|");
    for (l, o) in [(1u64, 1u64), (2, 1), (3, 1), (5, 1), (4, 2), (6, 3), (3, 2), (5, 2)] {
        let s = c.sim(&format!("--nodes {p} --L {l} --o {o} --faults 0 --runs 1"))?;
        let lp = LogP { l, o };
        let corr = s.correction.percentiles().mean;
        let msgs = s.messages_per_process.percentiles().mean - (p - 1) as f64 / p as f64;
        c.line(&format!(
            "| {l} | {o} | {} | {} | {} | {:.3} |",
            l_ff_scc(lp).unwrap_or(0),
            f1(corr),
            m_scc(lp).unwrap_or(0),
            msgs
        ));
    }
    c.line("");
    c.line(
        "Where o divides L ours equals the paper exactly. Where it does not (L=3, o=2; L=5, o=2) ours is one o \
         more and one message more: a process keeps sending while the second neighbour's message has not \
         arrived, i.e. it sends 3 + ⌈L/o⌉ messages; the proof's `n·o ≤ 3o + L` counts a send only if it \
         *ends* before that arrival, which a process cannot know in advance.",
    );
    c.line("");
    Ok(())
}

/// CT Figure 1b: in-order vs interleaved binomial correction time with 1, 2, 5 failures.
pub(super) fn figure1b(c: &mut Ctx) -> Result<(), String> {
    let (p, runs) = c.pick((16384, 300), (65536, 3000));
    c.line("## CT Figure 1b: correction time, in-order vs interleaved binomial tree");
    c.line("");
    c.line(&format!(
        "P = {p}, {runs} runs per cell, synchronized checked correction, L = 2, o = 1. Paper (P = 64K): 8 steps \
         fault-free; interleaved stays at or below 10.5 on average; in-order grows with the number of faults, \
         with a long tail (10%/90% whiskers)."
    ));
    c.line("");
    c.line("| failed | order | mean | p10 | p90 | max |");
    c.line("|---|---|---|---|---|---|");
    for k in [1, 2, 5] {
        for order in ["in-order", "interleaved"] {
            let s = c.sim(&format!(
                "--nodes {p} --order {order} --faults {k} --runs {runs} --seed 11"
            ))?;
            let d = &s.correction;
            c.line(&format!(
                "| {k} | {order} | {:.2} | {} | {} | {} |",
                d.percentiles().mean,
                f1(d.quantile(0.1)),
                f1(d.quantile(0.9)),
                f1(d.percentiles().max)
            ));
        }
    }
    c.line("");
    Ok(())
}

pub(super) const TREES: [&str; 4] = ["binomial", "lame:2", "optimal", "kary:4"];

/// CT §4.1: messages per process and latency against P.
pub(super) fn section41(c: &mut Ctx) -> Result<(), String> {
    let sizes: &[u32] = if c.quick {
        &[1024, 4096, 16384]
    } else {
        &[1024, 4096, 16384, 65536]
    };
    c.line("## CT §4.1 (Figures 6 and 7): fault-free messages per process and quiescence latency against P");
    c.line("");
    c.line(
        "Paper: with synchronized checked correction every tree sends 5 correction messages per process \
         (6 in all, minus the root's missing tree message), independent of P; correction lasts 8 steps; tree \
         broadcast with acknowledgments sends 2; optimized opportunistic correction (d = 4, overlapped) sends \
         at most as many as checked; checked Corrected Gossip sends far more.",
    );
    c.line("");
    let mut head = String::from("| algorithm |");
    let mut rule = String::from("|---|");
    for p in sizes {
        let _ = write!(head, " P={p} msgs | P={p} latency |");
        rule.push_str("---|---|");
    }
    c.line(&head);
    c.line(&rule);
    let mut rows: Vec<(String, String)> = Vec::new();
    for t in TREES {
        rows.push((
            format!("{t}, checked (sync)"),
            format!("--tree {t} --correction checked"),
        ));
        rows.push((
            format!("{t}, optimized:4 (overlapped)"),
            format!("--tree {t} --correction optimized:4 --start overlapped"),
        ));
    }
    rows.push(("binomial, tree + acks".into(), "--algo tree-ack".into()));
    rows.push((
        "corrected gossip CCG (model T)".into(),
        "--algo corrected-gossip --variant ccg".into(),
    ));
    for (name, args) in rows {
        let mut line = format!("| {name} |");
        for p in sizes {
            let runs = if args.contains("gossip") { c.pick(30, 200) } else { 1 };
            let s = c.sim(&format!("{args} --nodes {p} --faults 0 --runs {runs}"))?;
            let _ = write!(
                line,
                " {:.3} | {} |",
                s.messages_per_process.percentiles().mean,
                f1(s.quiescence.percentiles().mean)
            );
        }
        c.line(&line);
    }
    c.line("");
    Ok(())
}

/// CT Table 1: g_max and L_SCC percentiles against the fault rate, all trees merged.
pub(super) fn table1(c: &mut Ctx) -> Result<(), String> {
    let (p, runs) = c.pick((16384, 150), (65536, 2500));
    let paper = [
        ("0.01%", [1, 2, 3], [10, 12, 14]),
        ("0.1%", [2, 3, 6], [12, 13, 16]),
        ("1%", [5, 7, 19], [16, 19, 32]),
        ("2%", [8, 11, 35], [19, 24, 56]),
        ("4%", [13, 20, 55], [26, 34, 86]),
    ];
    c.line("## CT Table 1: cost of correction under faults (all tree types merged)");
    c.line("");
    c.line(&format!(
        "Synchronized checked correction, L = 2, o = 1, trees {}, P = {p}, {runs} runs per tree and rate \
         (paper: 64K processes, 10^5 runs per broadcast type). Cells: paper / ours.",
        TREES.join(", ")
    ));
    c.line("");
    c.line("| F | g_max 99% | g_max 99.9% | g_max max | L_SCC 99% | L_SCC 99.9% | L_SCC max |");
    c.line("|---|---|---|---|---|---|---|");
    for (rate, g, l) in paper {
        let mut all: Option<Summary> = None;
        for t in TREES {
            let s = c.sim(&format!(
                "--nodes {p} --tree {t} --faults {rate} --runs {runs} --seed 7"
            ))?;
            match &mut all {
                None => all = Some(s),
                Some(a) => a.merge(&s),
            }
        }
        let s = all.expect("four trees");
        let q = |d: &crate::sim::stats::Dist, i: usize| match i {
            0 => d.quantile(0.99),
            1 => d.quantile(0.999),
            _ => d.percentiles().max,
        };
        let mut line = format!("| {rate} |");
        for (i, paper) in g.iter().enumerate() {
            let _ = write!(line, " {paper} / {} |", q(&s.gmax, i));
        }
        for (i, paper) in l.iter().enumerate() {
            let _ = write!(line, " {paper} / {} |", q(&s.correction, i));
        }
        c.line(&line);
    }
    c.line("");
    c.line(
        "Fault-free the paper has g_max = 0 and L_SCC = 8; ours likewise (Lemma 2 table). Maxima depend on the \
         number of runs (ours are fewer), so they are expected to be at or below the paper's.",
    );
    c.line("");
    Ok(())
}

/// A 95 % Wilson score interval for a proportion `k / n`.
pub(super) fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n, z) = (k as f64, n as f64, 1.96f64);
    let p = k / n;
    let den = 1.0 + z * z / n;
    let mid = (p + z * z / (2.0 * n)) / den;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / den;
    ((mid - half).max(0.0), (mid + half).min(1.0))
}

/// A rate per 10^5 runs, compactly.
pub(super) fn per1e5(x: f64) -> String {
    let v = x * 1e5;
    if v == 0.0 {
        "0".into()
    } else if v < 10.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.0}")
    }
}

/// CT §4.3: optimized overlapped opportunistic correction (d = 4) under faults: how often a run
/// leaves live processes uncolored, next to the paper's figures, with the sampling error, and a
/// trace of one such run that says who stayed uncolored and why.
pub(super) fn section43(c: &mut Ctx) -> Result<(), String> {
    let (p, runs) = c.pick((16384, 150), (65536, 2500));
    let rates = ["0.1%", "1%", "2%", "4%"];
    // The paper's incomplete runs per 10^5 runs, as a range, where it gives one (see the text).
    let paper: [(&str, Option<(f64, f64)>); 4] = [
        ("0", Some((0.0, 0.0))),
        ("≈ 1", Some((1.0, 1.0))),
        ("≤ 65 (\"two\")", Some((0.0, 65.0))),
        ("585–650 (\"three\")", Some((585.0, 650.0))),
    ];
    c.line("## CT §4.3: opportunistic correction (d = 4) under faults");
    c.line("");
    c.line(&format!(
        "Optimized opportunistic correction with the overlapped start, d = 4, L = 2, o = 1, interleaved trees {}, \
         P = {p}, {runs} runs per tree and rate (seed 5), i.e. {} runs per rate. The paper (P = 64K, \"10^5 \
         broadcasts of every type\", 0.01 %–4 % faults) says: \"With less than 1% of failed processes, Corrected \
         Trees with opportunistic correction colored all the processes […]. A single unreached process appeared \
         approximately every 10^5 simulations with 1% of failed processes, two with 2% failed processes and three \
         with 4% failed processes. The total number of not fully coloring broadcast operations was around 2,600 \
         out of two million simulations. More than 90% of the simulations with uncolored processes came at 4% \
         failure rate leaving a single uncolored process.\" Two million simulations are 4 trees × 5 rates × 10^5, \
         so at 4 % between 0.9 · 2 600 ≈ 2 340 and 2 600 of 4·10^5 runs (585–650 per 10^5) were incomplete, most \
         with one uncolored process, and at 2 % at most 260 (≤ 65 per 10^5). \"Two\" and \"three\" read either as uncolored processes per 10^5 runs, which \
         contradicts the 2 600, or as the most processes one run left uncolored (our \"most in one run\").",
        TREES.join(", "),
        runs * TREES.len() as u64
    ));
    c.line("");
    c.line(
        "| F | runs | incomplete runs | by tree | per 10^5 runs (95 % interval) | paper per 10^5 | paper within sampling error | uncolored processes | runs leaving one | most in one run |",
    );
    c.line("|---|---|---|---|---|---|---|---|---|---|");
    for (rate, (paper, range)) in rates.iter().zip(paper) {
        let mut all: Option<Summary> = None;
        let mut by_tree = Vec::new();
        for t in TREES {
            let s = c.sim(&format!(
                "--nodes {p} --tree {t} --correction optimized:4 --start overlapped --faults {rate} --runs {runs} --seed 5"
            ))?;
            if s.aborted_runs > 0 {
                return Err(format!("§4.3: {} aborted runs ({t}, {rate})", s.aborted_runs));
            }
            by_tree.push(s.uncolored_runs.to_string());
            match &mut all {
                None => all = Some(s),
                Some(a) => a.merge(&s),
            }
        }
        let s = all.expect("four trees");
        let (lo, hi) = wilson(s.uncolored_runs, s.runs);
        let within = match range {
            Some((a, b)) => verdict(a <= hi * 1e5 && b >= lo * 1e5),
            None => "—",
        };
        c.line(&format!(
            "| {rate} | {} | {} | {} | {} ({}–{}) | {paper} | {within} | {} | {} | {} |",
            s.runs,
            s.uncolored_runs,
            by_tree.join(" / "),
            per1e5(s.uncolored_runs as f64 / s.runs as f64),
            per1e5(lo),
            per1e5(hi),
            s.uncolored_nodes,
            s.single_uncolored_runs,
            s.max_uncolored
        ));
    }
    c.line("");
    c.line(
        "\"By tree\" lists the incomplete runs per tree in the order above; the interval is the 95 % Wilson \
         interval of the incomplete-run rate, and the paper is within sampling error where its range meets it. \
         The run count keeps this section to minutes (the full mode's 10^4 runs per rate at 64K take about ten \
         on two cores): enough to resolve the 4 % figure, not the 1 % one (about one incomplete run in 10^5), \
         whose interval stays wide. Where the paper is outside our interval, the trace below shows what leaves a \
         process uncolored here.",
    );
    c.line("");
    section43_trace(c, p)
}

/// One incomplete run of §4.3's experiment (binomial tree, 4 %), explained.
pub(super) fn section43_trace(c: &mut Ctx, p: u32) -> Result<(), String> {
    use crate::model::Time;
    use crate::protocol::bcast::corrected_tree::{CorrectedTree, TreeShared};
    use crate::protocol::{ProtoRng, Protocol};
    use crate::sim::Engine;

    let d = 4u32;
    let args = format!("--nodes {p} --tree binomial --correction optimized:4 --start overlapped --faults 4% --seed 5");
    let setup = c.setup(&args)?;
    let ex = &setup.experiment;
    let crate::protocol::bcast::algo::Algo::CorrectedTree {
        tree,
        order,
        correction,
        start,
    } = setup.algo
    else {
        return Err("§4.3 trace: not a corrected tree".into());
    };
    let shared = TreeShared::new(
        crate::topology::Tree::build(tree, order, p, ex.logp)?,
        ex.logp,
        correction,
        start,
    );
    let mut eng = Engine::<CorrectedTree<0>>::new(p, ex.logp);
    let Some(run) = (0..20_000u64).find(|&i| {
        eng.run(&shared, &ex.faults, ProtoRng::run_seed(ex.seed, i), ex.max_events)
            .uncolored_live
            > 0
    }) else {
        c.line("No incomplete run among the first 20 000 of the binomial tree at 4 %: nothing to trace.");
        c.line("");
        return Ok(());
    };
    let alive = |r: u32| eng.death_time(r) == Time::MAX;
    let state = |r: u32| {
        let node = eng.node(r);
        if !alive(r) {
            "dead"
        } else if node.colored_by_dissemination() {
            "participant"
        } else if node.delivered() {
            "c-node"
        } else {
            "uncolored"
        }
    };
    let uncolored: Vec<u32> = (0..p).filter(|&r| state(r) == "uncolored").collect();
    let dead = (0..p).filter(|&r| !alive(r)).count();
    let x = uncolored[0];
    let t = &shared.tree;
    let dead_ancestor = |r: u32| {
        let mut a = r;
        while let Some(q) = t.parent(a) {
            if !alive(q) {
                return Some(q);
            }
            a = q;
        }
        None
    };
    c.line(&format!(
        "**Trace.** Run {run} (counting from 0) of `ftcoll sim {args} --runs {}`, the first incomplete run of the \
         binomial row at 4 % ({dead} dead), leaves {} live process(es) uncolored: {:?}. Take rank {x} (depth {}, \
         below dead rank {}). Its ring neighbourhood (\"colored\": when, in this run; \"dead ancestor\": the \
         nearest one, if any):",
        run + 1,
        uncolored.len(),
        &uncolored[..uncolored.len().min(12)],
        t.depth(x),
        dead_ancestor(x).map_or("none".to_string(), |q| q.to_string())
    ));
    c.line("");
    c.line("| rank | offset | state | parent | dead ancestor | colored |");
    c.line("|---|---|---|---|---|---|");
    let w = d as i64 + 3;
    let at = |off: i64| ((i64::from(x) + off).rem_euclid(i64::from(p))) as u32;
    for off in -w..=w {
        let r = at(off);
        let par = t.parent(r).map_or("—".to_string(), |q| q.to_string());
        let col = eng.delivered_at(r);
        let col = if alive(r) && col != Time::MAX {
            col.to_string()
        } else {
            "—".to_string()
        };
        c.line(&format!(
            "| {r} | {off:+} | {} | {par} | {} | {col} |",
            state(r),
            dead_ancestor(r).map_or("—".to_string(), |q| q.to_string())
        ));
    }
    c.line("");
    let nearest = |dir: i64| (1..i64::from(p)).find(|&k| state(at(dir * k)) == "participant");
    let (left, right) = (nearest(-1), nearest(1));
    let near_cnodes: Vec<u32> = (1..=i64::from(d))
        .flat_map(|k| [at(-k), at(k)])
        .filter(|&r| state(r) == "c-node")
        .collect();
    let early = near_cnodes.iter().filter(|&&r| dead_ancestor(r).is_none()).count();
    c.line(&format!(
        "Why: the nearest participants are at distance {} (left) and {} (right), beyond d = {d}, so no correction \
         message is addressed to rank {x}, and its tree message never comes (dead ancestor). {} of the processes \
         within {d} of it are c-nodes, colored by correction: {} below a dead ancestor, and {early} early-corrected \
         (no dead ancestor: their tree message was on its way and a correction message came first, §3.3). A \
         c-node forwards the tree to its children but sends no correction message (§3.1: \"processes that become \
         colored during correction do not send any messages\"). No message is lost; what leaves rank {x} \
         uncolored is who may correct.",
        left.map_or("—".into(), |k| k.to_string()),
        right.map_or("—".into(), |k| k.to_string()),
        near_cnodes.len(),
        near_cnodes.len() - early
    ));
    c.line("");
    c.line(&format!(
        "Had those c-nodes corrected, rank {x} would have been reached{}. The authors' public simulator does let \
         them: in TUD-OS/flogsim, the version of `lib/phase/registered_collectives.cpp` that registers \
         `optimized_opportunistic_corrected_*_bcast` builds each with `forward_unexpected_message()`, under \
         which a process reached by correction before the tree forwards the tree and then enters the correction \
         phase and sends its d messages each way (`lib/phase/tree.cpp`, `DONE_FORWARD`); its skip rule \
         (`lib/phase/correction.cpp`) also acts on messages from the left, the symmetric form that issue 14 \
         showed can skip a process nobody covers. We follow the papers' text (§3.1, §3.3) and have not re-run \
         flogsim, so whether these two choices account for the paper's figures exactly is open; the \
         incomplete runs here come from neighbourhoods like the one above.",
        if near_cnodes.is_empty() {
            " only through a longer chain (no c-node lies within d of it)"
        } else {
            ": a c-node within d of it would have sent to it"
        }
    ));
    c.line("");
    Ok(())
}
