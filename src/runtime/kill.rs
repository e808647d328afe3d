//! Crash injection for the runtime: which node dies, when, and how.
//!
//! Spec syntax (comma-separated in `--kill`):
//! - `R`: node R is dead from the start (never runs);
//! - `R@I` or `R@I:recv`: node R dies during iteration I on receiving that operation's first
//!   message, before forwarding anything (the worst case for trees);
//! - `R@I:sent=K`: node R dies during iteration I right after sending K messages of it;
//! - `R@I:sigkill`: multi-process mode only: the process of rank R gets a real `SIGKILL` when
//!   iteration I starts.

/// When a node dies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum KillPoint {
    /// Dead before the first iteration.
    Start,
    /// On the first message of iteration `iter`, before acting on it.
    OnReceive { iter: u64 },
    /// After sending `k` messages of iteration `iter`.
    AfterSends { iter: u64, k: u32 },
    /// A real `SIGKILL` of the node's process when iteration `iter` starts (`--procs`).
    SigKill { iter: u64 },
}

/// One crash: node `rank` dies at `point`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Kill {
    pub rank: u32,
    pub point: KillPoint,
}

impl Kill {
    /// The iteration during which this node is faulty (and dead after): `None` for `Start`.
    pub fn iteration(&self) -> Option<u64> {
        match self.point {
            KillPoint::Start => None,
            KillPoint::OnReceive { iter } | KillPoint::AfterSends { iter, .. } | KillPoint::SigKill { iter } => {
                Some(iter)
            }
        }
    }
}

fn num<T: std::str::FromStr>(s: &str, what: &str, spec: &str) -> Result<T, String> {
    s.trim()
        .parse()
        .map_err(|_| format!("invalid {what} in kill spec '{spec}'"))
}

/// Parses a `--kill` list for `n` nodes (the root, rank 0, cannot be killed).
pub fn parse_kills(s: &str, n: u32) -> Result<Vec<Kill>, String> {
    let mut out: Vec<Kill> = Vec::new();
    for raw in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
        // Errors quote the spec escaped: one line, no control characters (found by fuzzing).
        let spec = &raw.escape_debug().to_string();
        let (rank, rest) = match raw.split_once('@') {
            Some((r, rest)) => (num::<u32>(r, "rank", spec)?, Some(rest)),
            None => (num::<u32>(raw, "rank", spec)?, None),
        };
        if rank == 0 {
            return Err(format!("kill spec '{spec}': the root (rank 0) cannot be killed"));
        }
        if rank >= n {
            return Err(format!("kill spec '{spec}': rank {rank} is out of range for {n} nodes"));
        }
        let point = match rest {
            None => KillPoint::Start,
            Some(rest) => {
                let (iter, how) = match rest.split_once(':') {
                    Some((i, how)) => (num::<u64>(i, "iteration", spec)?, how),
                    None => (num::<u64>(rest, "iteration", spec)?, "recv"),
                };
                match how.split_once('=') {
                    None if how == "recv" => KillPoint::OnReceive { iter },
                    None if how == "sigkill" => KillPoint::SigKill { iter },
                    Some(("sent", k)) => KillPoint::AfterSends {
                        iter,
                        k: num(k, "send count", spec)?,
                    },
                    _ => {
                        return Err(format!(
                            "kill spec '{spec}': expected R, R@I, R@I:recv, R@I:sent=K or R@I:sigkill"
                        ));
                    }
                }
            }
        };
        if out.iter().any(|k| k.rank == rank) {
            return Err(format!("kill spec '{spec}': rank {rank} is killed twice"));
        }
        out.push(Kill { rank, point });
    }
    if out.len() as u64 >= u64::from(n) {
        return Err(format!("cannot kill {} of {n} nodes", out.len()));
    }
    Ok(out)
}

/// Renders kills back into `--kill` syntax.
pub fn format_kills(kills: &[Kill]) -> String {
    let one = |k: &Kill| match k.point {
        KillPoint::Start => format!("{}", k.rank),
        KillPoint::OnReceive { iter } => format!("{}@{iter}:recv", k.rank),
        KillPoint::AfterSends { iter, k: n } => format!("{}@{iter}:sent={n}", k.rank),
        KillPoint::SigKill { iter } => format!("{}@{iter}:sigkill", k.rank),
    };
    if kills.is_empty() {
        "none".into()
    } else {
        kills.iter().map(one).collect::<Vec<_>>().join(",")
    }
}

/// A stretch of a run's measured operations between crashes: operations `ops` (counted from
/// the run's first, warmup included, as `--kill R@I` counts), with `dead` the nodes dead for
/// all of it (dead from the start, or crashed in an operation before `ops.start`).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Segment {
    pub ops: std::ops::Range<u64>,
    pub dead: Vec<u32>,
}

/// The measured operations `first..end` split where a crash starts: a node crashed in
/// operation I is alive in the segment before I and dead from the one starting at I on (the
/// operation it dies in is the first of a segment). One segment without crashes inside the
/// window; none when the window is empty.
pub fn segments(kills: &[Kill], first: u64, end: u64) -> Vec<Segment> {
    let mut cuts: Vec<(u64, u32)> = kills.iter().filter_map(|k| Some((k.iteration()?, k.rank))).collect();
    cuts.sort_unstable();
    let mut dead: Vec<u32> = kills
        .iter()
        .filter(|k| k.point == KillPoint::Start)
        .map(|k| k.rank)
        .collect();
    let mut out = Vec::new();
    let mut at = first;
    for &(iter, rank) in &cuts {
        if iter > at && at < end {
            out.push(Segment {
                ops: at..iter.min(end),
                dead: dead.clone(),
            });
            at = iter.min(end);
        }
        dead.push(rank);
    }
    if at < end {
        out.push(Segment { ops: at..end, dead });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form() {
        let k = parse_kills("3, 4@10, 5@2:recv, 6@7:sent=2, 7@1:sigkill", 8).unwrap();
        assert_eq!(k[4].point, KillPoint::SigKill { iter: 1 });
        assert_eq!(
            k[0],
            Kill {
                rank: 3,
                point: KillPoint::Start
            }
        );
        assert_eq!(k[1].point, KillPoint::OnReceive { iter: 10 });
        assert_eq!(k[2].point, KillPoint::OnReceive { iter: 2 });
        assert_eq!(k[3].point, KillPoint::AfterSends { iter: 7, k: 2 });
        assert_eq!(k[3].iteration(), Some(7));
    }

    /// The default bench's kill splits its measured operations in two; a kill in the warmup
    /// or at the first measured operation kills for all of them; one after the window none.
    #[test]
    fn crashes_split_the_measured_operations() {
        let seg = |spec: &str| segments(&parse_kills(spec, 8).unwrap(), 1000, 11_000);
        let s = |ops: std::ops::Range<u64>, dead: &[u32]| Segment {
            ops,
            dead: dead.to_vec(),
        };
        assert_eq!(seg(""), [s(1000..11_000, &[])]);
        assert_eq!(seg("1@6000"), [s(1000..6000, &[]), s(6000..11_000, &[1])]);
        assert_eq!(
            seg("3, 1@6000:sent=1, 2@9000"),
            [s(1000..6000, &[3]), s(6000..9000, &[3, 1]), s(9000..11_000, &[3, 1, 2])]
        );
        assert_eq!(seg("1@500, 2@1000"), [s(1000..11_000, &[1, 2])]);
        assert_eq!(seg("1@11000"), [s(1000..11_000, &[])]);
        assert_eq!(seg("1@7000, 2@7000"), [s(1000..7000, &[]), s(7000..11_000, &[1, 2])]);
        assert!(segments(&[], 5, 5).is_empty());
    }

    #[test]
    fn rejects_bad_specs() {
        for bad in ["0", "8", "x", "3@", "3@x", "3@1:boom", "3@1:sent=x", "3,3@4"] {
            assert!(parse_kills(bad, 8).is_err(), "{bad}");
        }
    }
}
