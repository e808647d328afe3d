//! Parsing of the compact flag values (`kary:4`, `failproof:1`, `1%`, `5@12`): one-line errors.

use crate::model::Time;
use crate::protocol::bcast::corrected_gossip::Variant;
use crate::protocol::bcast::correction::{Correction, MAX_FAILPROOF_F};
use crate::sim::DeadBefore;
use crate::topology::TreeKind;

fn num<T: std::str::FromStr>(s: &str, what: &str) -> Result<T, String> {
    s.trim().parse().map_err(|_| format!("invalid {what} '{s}'"))
}

fn split(s: &str) -> (&str, Option<&str>) {
    match s.split_once(':') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    }
}

/// `kary:K | binomial | lame:K | optimal`.
pub fn tree(s: &str) -> Result<TreeKind, String> {
    match split(s) {
        ("kary", Some(k)) => match num::<u32>(k, "k-ary order")? {
            0 => Err("kary:K needs K >= 1".into()),
            k => Ok(TreeKind::Kary(k)),
        },
        ("binomial", None) => Ok(TreeKind::Binomial),
        ("lame", Some(k)) => match num::<u32>(k, "Lamé order")? {
            0 => Err("lame:K needs K >= 1".into()),
            k => Ok(TreeKind::Lame(k)),
        },
        ("optimal", None) => Ok(TreeKind::Optimal),
        _ => Err(format!(
            "unknown tree '{s}' (expected kary:K, binomial, lame:K or optimal)"
        )),
    }
}

/// `none | opportunistic:D | optimized:D | checked | failproof:F | delayed[:DELAY]`.
pub fn correction(s: &str) -> Result<Correction, String> {
    let f = |x: &str| -> Result<u32, String> {
        let f = num::<u32>(x, "failure count")?;
        if f > MAX_FAILPROOF_F {
            return Err(format!("failproof:F supports F <= {MAX_FAILPROOF_F}, got {f}"));
        }
        Ok(f)
    };
    match split(s) {
        ("none", None) => Ok(Correction::None),
        ("opportunistic", Some(d)) => Ok(Correction::Opportunistic {
            d: num(d, "correction distance")?,
        }),
        ("optimized", Some(d)) => Ok(Correction::Optimized {
            d: num(d, "correction distance")?,
        }),
        ("checked", None) => Ok(Correction::Checked),
        ("failproof", Some(x)) => Ok(Correction::FailProof { f: f(x)? }),
        ("failproof", None) => Ok(Correction::FailProof { f: 1 }),
        ("delayed", None) => Ok(Correction::Delayed { delay: None }),
        ("delayed", Some(d)) => {
            // Added to event times like L and o: bounded the same way.
            let delay: u64 = num(d, "delay")?;
            if delay > crate::model::LogP::MAX {
                return Err(format!(
                    "delayed:DELAY must be at most {} (got {delay})",
                    crate::model::LogP::MAX
                ));
            }
            Ok(Correction::Delayed { delay: Some(delay) })
        }
        _ => Err(format!(
            "unknown correction '{s}' (expected none, opportunistic:D, optimized:D, checked, failproof:F or delayed[:DELAY])"
        )),
    }
}

/// `ocg | ccg | fcg[:F] | gos`, with OCG's correction time filled in later.
pub fn variant(s: &str) -> Result<Variant, String> {
    match split(s) {
        ("ocg", None) => Ok(Variant::Ocg { c: 0 }),
        ("ccg", None) => Ok(Variant::Ccg),
        ("fcg", None) => Ok(Variant::Fcg { f: 1 }),
        ("fcg", Some(x)) => {
            let f = num::<u32>(x, "failure count")?;
            if f > MAX_FAILPROOF_F {
                return Err(format!("fcg:F supports F <= {MAX_FAILPROOF_F}, got {f}"));
            }
            Ok(Variant::Fcg { f })
        }
        ("gos", None) => Ok(Variant::Gos),
        _ => Err(format!("unknown gossip variant '{s}' (expected ocg, ccg or fcg[:F])")),
    }
}

/// `N` (a count), `X%` (percent) or `0.X` (fraction).
pub fn dead(s: &str) -> Result<DeadBefore, String> {
    let s = s.trim();
    if let Some(p) = s.strip_suffix('%') {
        let v: f64 = num(p, "fault percentage")?;
        if !(0.0..100.0).contains(&v) {
            return Err(format!("fault percentage must be in [0, 100), got {s}"));
        }
        return Ok(DeadBefore::Fraction(v / 100.0));
    }
    if s.contains('.') {
        let v: f64 = num(s, "fault fraction")?;
        if !(0.0..1.0).contains(&v) {
            return Err(format!("fault fraction must be in [0, 1), got {s}"));
        }
        return Ok(DeadBefore::Fraction(v));
    }
    Ok(DeadBefore::Count(num(s, "fault count")?))
}

/// A comma-separated list of ranks, each once (an empty list is no list: `--dead ""` would
/// have overridden `--faults` with nobody dead).
pub fn ranks(s: &str) -> Result<Vec<u32>, String> {
    let v: Vec<u32> = s
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| num(x, "rank"))
        .collect::<Result<_, _>>()?;
    once_each(v.iter().copied(), "--dead")?;
    Ok(v)
}

/// A comma-separated list of `RANK@TIME`, each rank once.
pub fn kills(s: &str) -> Result<Vec<(u32, Time)>, String> {
    let v: Vec<(u32, Time)> = s
        .split(',')
        .filter(|x| !x.trim().is_empty())
        .map(|x| {
            let (r, t) = x
                .split_once('@')
                .ok_or_else(|| format!("invalid kill '{x}' (expected RANK@TIME)"))?;
            Ok((num(r, "rank")?, num(t, "time")?))
        })
        .collect::<Result<_, String>>()?;
    once_each(v.iter().map(|k| k.0), "--kill")?;
    Ok(v)
}

/// Errors if `ranks` is empty or names a rank twice (`flag`: the list's).
fn once_each(ranks: impl Iterator<Item = u32>, flag: &str) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for r in ranks {
        if !seen.insert(r) {
            return Err(format!("rank {r} is listed twice in {flag}"));
        }
    }
    if seen.is_empty() {
        return Err(format!("{flag} lists no rank"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_forms() {
        assert_eq!(tree("kary:4"), Ok(TreeKind::Kary(4)));
        assert_eq!(tree("lame:2"), Ok(TreeKind::Lame(2)));
        assert!(tree("kary").is_err() && tree("kary:0").is_err() && tree("fib").is_err());
        assert_eq!(correction("opportunistic:4"), Ok(Correction::Opportunistic { d: 4 }));
        assert_eq!(correction("failproof:2"), Ok(Correction::FailProof { f: 2 }));
        assert!(correction("failproof:99").is_err());
        assert_eq!(correction("delayed"), Ok(Correction::Delayed { delay: None }));
        assert_eq!(dead("1%"), Ok(DeadBefore::Fraction(0.01)));
        assert_eq!(dead("3"), Ok(DeadBefore::Count(3)));
        assert_eq!(ranks("3, 1"), Ok(vec![3, 1]));
        assert!(ranks("").is_err() && ranks(",").is_err() && ranks("1,1").is_err());
        assert_eq!(kills("1@5,2@0"), Ok(vec![(1, 5), (2, 0)]));
        assert!(
            kills("").is_err()
                && kills("1@5,1@6")
                    .unwrap_err()
                    .contains("rank 1 is listed twice in --kill")
        );
        assert!(dead("100%").is_err() && dead("1.5").is_err() && dead("x").is_err());
        assert_eq!(kills("3@10,4@0"), Ok(vec![(3, 10), (4, 0)]));
        assert!(kills("3").is_err());
        assert_eq!(variant("fcg:2"), Ok(Variant::Fcg { f: 2 }));
    }
}
