//! `ftcoll model`: the papers' analytic predictions for the same flags as `ftcoll sim`.

use crate::cli::flags::SimArgs;
use crate::experiment::algo::Algo;
use crate::experiment::defaults::shape;
use crate::experiment::sim::Setup;
use crate::model::{DEFAULT_DELTA, Prediction, bfb_messages, big_messages, l_scc_bounds, t_bfb, t_big, tree_latency};

/// Builds the predictions for a setup.
pub fn predict(setup: &Setup) -> Result<Vec<Prediction>, String> {
    let ex = &setup.experiment;
    // LogGP: the tree forms take it as it is; the others have a LogP form only and get the
    // LogP with the same hop and send slot.
    let (n, gp) = (u64::from(ex.n), ex.logp);
    let logp = gp.counting_logp();
    let e = |e: crate::model::ModelError| format!("model: {e}");
    let mut out = Vec::new();
    match &setup.algo {
        Algo::CorrectedTree { tree, .. } => {
            let mut p = Prediction::corrected_tree(shape(*tree), n, gp).map_err(e)?;
            // LogGP: Lemma 3's steps of o are send slots around the LogGP form of Lemma 2
            // (none where that form does not apply).
            let loggp_ff = match gp.as_logp() {
                Some(_) => None,
                None => Some(crate::model::scc_loggp(gp).map_err(e)?),
            };
            for g in [1u64, 2, 5, 10] {
                let (lo, hi) = match loggp_ff {
                    None => l_scc_bounds(g, logp).map_err(e)?,
                    Some(None) => continue,
                    Some(Some((ff, _))) => (ff + g * gp.slot(), ff + (2 * g + 1) * gp.slot()),
                };
                p.push(format!("L_SCC lower bound, g_max = {g}"), lo, "Corrected Trees Lemma 3")
                    .push(format!("L_SCC upper bound, g_max = {g}"), hi, "Corrected Trees Lemma 3");
            }
            out.push(p);
        }
        Algo::TreeAck { tree, .. } => {
            let d = tree_latency(shape(*tree), n, gp).map_err(e)?;
            let mut p = Prediction::new(format!("tree with acknowledgments, P = {n}"), Some(logp));
            p.push("dissemination latency", d, "Corrected Trees §3.2 (LogP timing)")
                .push(
                    "messages per process",
                    2.0 * (n - 1) as f64 / n as f64,
                    "Corrected Trees Figure 6",
                );
            out.push(p);
        }
        Algo::CorrectedGossip { variant, t } => {
            let active = ex.n - dead_count(setup);
            let mut p = Prediction::corrected_gossip(n, active.into(), DEFAULT_DELTA, logp).map_err(e)?;
            p.push("T used by `ftcoll sim` for these flags", *t, "ftcoll defaults (README)");
            if let crate::protocol::bcast::corrected_gossip::Variant::Ocg { c } = variant {
                p.push("C used by `ftcoll sim` (OCG)", *c, "Corrected Gossip Claim 2 (+O)");
            }
            out.push(p);
        }
        Algo::Big | Algo::Bfb => {
            let mut p = Prediction::new(format!("baselines, N = {n}"), Some(logp));
            if setup.algo == Algo::Big {
                p.push("T_BIG", t_big(n, logp).map_err(e)?, "Corrected Gossip §IV.B.3")
                    .push("BIG messages", big_messages(n), "Corrected Gossip §IV.B.3");
            } else {
                p.push("T_BFB", t_bfb(n, logp).map_err(e)?, "Corrected Gossip §IV.B.2")
                    .push("BFB messages", bfb_messages(n), "Corrected Gossip §IV.B.2");
            }
            out.push(p);
        }
    }
    Ok(out)
}

fn dead_count(setup: &Setup) -> u32 {
    use crate::sim::{DeadBefore, Faults};
    let ex = &setup.experiment;
    match &ex.faults.before {
        DeadBefore::Count(c) => *c,
        DeadBefore::Fraction(f) => Faults::fraction_count(*f, ex.n),
        DeadBefore::List(l) => l.len() as u32,
    }
}

/// Runs `ftcoll model`.
pub fn run(a: &SimArgs) -> Result<(), String> {
    // The closed forms take the algorithm, the size, LogP/LogGP and the dead count; a flag of
    // the simulator's runs would be silently ignored.
    for (given, flag) in [
        (a.cores.is_some(), "--cores"),
        (a.core_visit.is_some(), "--core-visit"),
        (a.core_work.is_some(), "--core-work"),
        (a.core_local_work.is_some(), "--core-local-work"),
        (a.core_local_receive.is_some(), "--core-local-receive"),
        (a.core_poll_per_source.is_some(), "--core-poll-per-source"),
        (a.known_dead, "--known-dead"),
        (a.loggp.noise.is_some(), "--noise"),
        (a.receives.is_some(), "--receives"),
        (a.online_faults > 0, "--online-faults"),
        (a.kill.is_some(), "--kill"),
        (a.trace.is_some(), "--trace"),
        (a.threads.is_some(), "--threads"),
        (a.max_events.is_some(), "--max-events"),
        (a.allow_aborts, "--allow-aborts"),
        (a.detect_delay.is_some(), "--detect-delay"),
    ] {
        if given {
            return Err(format!(
                "{flag} applies to `ftcoll sim` runs, not to the closed forms of `ftcoll model`"
            ));
        }
    }
    let setup = a.setup()?;
    let preds = predict(&setup)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&preds).map_err(|e| e.to_string())?);
        return Ok(());
    }
    println!("ftcoll model: {}", setup.algo.describe());
    for p in &preds {
        println!("\n{}", p.title);
        for q in &p.quantities {
            println!("  {:<46} {:>14}   {}", q.name, q.value.to_string(), q.reference);
        }
    }
    Ok(())
}
