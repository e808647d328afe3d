//! Named model quantities with their paper references, for the CLI to print or serialize.

use std::fmt;

use serde::Serialize;

use super::baselines::{bfb_messages, big_messages, t_bfb, t_big};
use super::chains::check_delta;
use super::corrected_trees::{l_ff_scc, m_scc, scc_loggp};
use super::gossip::GossipCurve;
use super::gossip_tuning::{GossipOptimum, c_for_ocg, t_opt_ccg, t_opt_fcg, t_opt_ocg};
use super::tree_latency::{TreeShape, optimal_latency, tree_latency};
use super::{LogGP, LogP, ModelError};

/// A quantity's value: exact integers (times, counts) or reals (expectations, probabilities).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Value {
    Int(u64),
    Real(f64),
}

impl From<u64> for Value {
    fn from(v: u64) -> Self {
        Self::Int(v)
    }
}

impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Self::Real(v)
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Int(v) => write!(f, "{v}"),
            Self::Real(v) if *v != 0.0 && (v.abs() < 1e-3 || v.abs() >= 1e9) => {
                write!(f, "{v:.4e}")
            }
            Self::Real(v) => write!(f, "{v:.4}"),
        }
    }
}

/// One predicted quantity: name, value (times in LogP units) and where the formula comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Quantity {
    pub name: String,
    pub value: Value,
    /// E.g. "Corrected Trees Lemma 2".
    pub reference: String,
}

/// A titled list of predicted quantities for one configuration.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Prediction {
    pub title: String,
    pub logp: Option<LogP>,
    pub quantities: Vec<Quantity>,
}

impl Prediction {
    /// An empty prediction.
    pub fn new(title: impl Into<String>, logp: Option<LogP>) -> Self {
        Self {
            title: title.into(),
            logp,
            quantities: Vec::new(),
        }
    }

    /// Appends a quantity.
    pub fn push(
        &mut self,
        name: impl Into<String>,
        value: impl Into<Value>,
        reference: impl Into<String>,
    ) -> &mut Self {
        self.quantities.push(Quantity {
            name: name.into(),
            value: value.into(),
            reference: reference.into(),
        });
        self
    }

    /// The quantity called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Quantity> {
        self.quantities.iter().find(|q| q.name == name)
    }

    /// Fault-free Corrected Tree broadcast with synchronized checked correction on `n`
    /// processes: dissemination latency, correction latency and messages. LogGP parameters
    /// (that are not LogP) use [`scc_loggp`], and leave the correction out where it does not
    /// apply (receives that queue).
    pub fn corrected_tree(shape: TreeShape, n: u64, logp: impl Into<LogGP>) -> Result<Self, ModelError> {
        let gp: LogGP = logp.into();
        let dissemination = tree_latency(shape, n, gp)?;
        let (correction, per_process, title, lemma, corollary) = match gp.as_logp() {
            Some(logp) => (
                l_ff_scc(logp)?,
                m_scc(logp)?,
                format!("corrected tree {shape:?}, P = {n}"),
                "Corrected Trees Lemma 2",
                "Corrected Trees Corollary 1",
            ),
            None => {
                let Some((c, m)) = scc_loggp(gp)? else {
                    let mut p = Self::new(format!("corrected tree {shape:?}, P = {n}, {gp}"), None);
                    p.push(
                        "dissemination latency",
                        dissemination,
                        "Corrected Trees §3.2 (LogGP timing)",
                    );
                    return Ok(p);
                };
                (
                    c,
                    m,
                    format!("corrected tree {shape:?}, P = {n}, {gp}"),
                    "Corrected Trees Lemma 2, LogGP form",
                    "Corrected Trees Corollary 1, LogGP form",
                )
            }
        };
        let mut p = Self::new(title, gp.as_logp());
        let timing = match gp.as_logp() {
            Some(_) => "Corrected Trees §3.2 (LogP timing)",
            None => "Corrected Trees §3.2 (LogGP timing)",
        };
        p.push("dissemination latency", dissemination, timing)
            .push("checked correction latency L_FF_SCC", correction, lemma)
            .push(
                "quiescence latency (fault-free)",
                dissemination.saturating_add(correction),
                "Corrected Trees §3.3 + Lemma 2 (correction starts at the dissemination latency)",
            )
            .push("correction messages per process M_SCC", per_process, corollary)
            .push(
                "messages (fault-free)",
                n.saturating_sub(1).saturating_add(n.saturating_mul(per_process)),
                "tree edges P − 1 + P·M_SCC (Corrected Trees Corollary 1)",
            );
        Ok(p)
    }

    /// Corrected Gossip on `n` active of `N` nodes: `T_opt` and predicted latency of OCG,
    /// CCG and FCG (f = 1) for `δ`.
    pub fn corrected_gossip(total: u64, active: u64, delta: f64, logp: LogP) -> Result<Self, ModelError> {
        check_delta(delta)?;
        let mut p = Self::new(format!("corrected gossip, N = {total}, n = {active}"), Some(logp));
        p.push("delta", delta, "Corrected Gossip Claim 2");
        let ocg = t_opt_ocg(delta, total, active, logp)?;
        push_optimum(&mut p, "OCG", &ocg, "eq. (3)", "K̂");
        p.push(
            "C (OCG, with the extra O)",
            c_for_ocg(ocg.bound, logp, true),
            "Corrected Gossip Claim 2",
        );
        let ccg = t_opt_ccg(delta, total, active, logp)?;
        push_optimum(&mut p, "CCG", &ccg, "eq. (4)", "K̂");
        let fcg = t_opt_fcg(delta, total, active, 1, logp)?;
        push_optimum(&mut p, "FCG f=1", &fcg, "eq. (5), Appendix B", "Ĝ_5");
        let mut curve = GossipCurve::new(total, active, logp)?;
        p.push(
            "GOS colored fraction at T_opt (OCG)",
            curve.at_correction_start(ocg.t)? / active as f64,
            "Corrected Gossip Lemma 1",
        );
        Ok(p)
    }

    /// Fault-free baselines on `N` nodes: BFB, BIG and the optimal (non-fault-tolerant) tree.
    pub fn baselines(total: u64, logp: LogP) -> Result<Self, ModelError> {
        let mut p = Self::new(format!("baselines, N = {total}"), Some(logp));
        p.push("T_BFB", t_bfb(total, logp)?, "Corrected Gossip §IV.B.2")
            .push("BFB messages", bfb_messages(total), "Corrected Gossip §IV.B.2")
            .push("T_BIG", t_big(total, logp)?, "Corrected Gossip §IV.B.3")
            .push("BIG messages", big_messages(total), "Corrected Gossip §IV.B.3")
            .push(
                "optimal tree latency",
                optimal_latency(total, logp)?,
                "Corrected Trees §3.2.3 (Corrected Gossip Fig. 7a \"opt\")",
            );
        Ok(p)
    }
}

fn push_optimum(p: &mut Prediction, algo: &str, opt: &GossipOptimum, eq: &str, bound: &str) {
    let reference = format!("Corrected Gossip {eq}");
    p.push(format!("T_opt ({algo})"), opt.t, reference.clone())
        .push(format!("{bound} at T_opt ({algo})"), opt.bound, reference.clone())
        .push(format!("latency ({algo})"), opt.latency, reference)
        .push(
            format!("T with margin ({algo})"),
            opt.recommended_t,
            "Corrected Gossip §III.B Discussion (+O)",
        );
}

impl fmt::Display for Prediction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.title)?;
        if let Some(logp) = self.logp {
            write!(f, " (L = {}, o = {})", logp.l, logp.o)?;
        }
        writeln!(f)?;
        let width = self
            .quantities
            .iter()
            .map(|q| q.name.chars().count())
            .max()
            .unwrap_or(0);
        for q in &self.quantities {
            let pad = width - q.name.chars().count();
            writeln!(f, "  {}{} = {}  [{}]", q.name, " ".repeat(pad), q.value, q.reference)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::DEFAULT_DELTA;
    use super::*;

    #[test]
    fn tree_prediction() {
        let p = Prediction::corrected_tree(TreeShape::Binomial, 8, LogP::default()).unwrap();
        assert_eq!(
            p.get("checked correction latency L_FF_SCC").unwrap().value,
            Value::Int(8)
        );
        assert_eq!(p.get("dissemination latency").unwrap().value, Value::Int(12));
        assert_eq!(p.get("messages (fault-free)").unwrap().value, Value::Int(7 + 40));
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains("\"reference\":\"Corrected Trees Lemma 2\""), "{json}");
        assert!(json.contains("\"value\":8,"), "{json}");
        assert!(p.to_string().contains("Corrected Trees Corollary 1"));
    }

    #[test]
    fn gossip_and_baselines() {
        let logp = LogP { l: 1, o: 1 };
        let p = Prediction::corrected_gossip(1024, 1024, DEFAULT_DELTA, logp).unwrap();
        assert_eq!(p.get("T_opt (OCG)").unwrap().value, Value::Int(23));
        // Ties {24, 26} broken on the T + O actually run (gossip_tuning).
        assert_eq!(p.get("T_opt (CCG)").unwrap().value, Value::Int(24));
        assert!(Prediction::corrected_gossip(10, 10, 2.0, logp).is_err());
        let b = Prediction::baselines(4096, LogP::default()).unwrap();
        assert_eq!(b.get("T_BFB").unwrap().value, Value::Int(96));
        serde_json::to_string(&b).unwrap();
        assert!(!b.to_string().is_empty());
    }
}
