//! Whether a finished run passed: the one place that decides when `bench` and `agree` fail.
//!
//! A run fails when it saw anything the protocols promise cannot happen (Corrected Trees §2.2
//! and Corrected Gossip: every live node delivers exactly once; ERA §2.1: agreement, validity,
//! termination), or when something was lost on the way: a consistency violation, an operation
//! abandoned at its timeout or never run, a message a node could not send or had to drop
//! (deferred-queue overflow, an operation too far ahead), a disagreement, an invalid or missing
//! return, a node's report line that failed its MAC or format (an attack or a bug: the
//! report is missing what it carried), or a live node suspected of having crashed (a false suspicion) that the caller did
//! not accept. The [`Verdict`] lists every reason with its count; the CLI prints the report
//! first and then [`Verdict::line`] as its last line, and exits non-zero.

use crate::experiment::bench::GIVE_UP_AFTER;
use crate::experiment::failure::Failure;
use crate::runtime::agree::AgreeBenchReport;
use crate::runtime::cluster::ClusterResult;
use crate::sim::agree::Violations;

/// What a finished bench run counted that can fail it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BenchCounts {
    /// Measured operations run.
    pub measured: u64,
    /// Measured operations not run (the run stopped after repeated timeouts, or because its
    /// root died).
    pub not_run: u64,
    /// The root whose death stopped the run, and who fenced it if it was falsely suspected.
    pub root_lost: Option<(u32, Option<u32>)>,
    pub violations: u64,
    pub timeouts: u64,
    pub dropped_ops: u64,
    pub deferred_overflow: u64,
    pub too_far: u64,
    /// Live nodes suspected of having crashed.
    pub false_suspicions: u64,
}

impl From<&ClusterResult> for BenchCounts {
    fn from(r: &ClusterResult) -> Self {
        BenchCounts {
            measured: r.measured,
            not_run: r.not_run,
            root_lost: r.root_lost,
            violations: r.violations,
            timeouts: r.timeouts,
            dropped_ops: r.dropped_ops,
            deferred_overflow: r.deferred_overflow,
            too_far: r.too_far,
            false_suspicions: bench_false_suspicions(r),
        }
    }
}

/// The bench's false suspicions: live nodes another one suspected (and fenced). Everything
/// else (the reason, `--allow-false-suspicions`, the exit code) follows from this one value.
fn bench_false_suspicions(r: &ClusterResult) -> u64 {
    r.false_suspicions
}

/// What a finished network agreement run counted that can fail it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AgreeCounts {
    /// Agreements completed.
    pub agreements: u64,
    pub disagreements: u64,
    pub invalid: u64,
    pub unfinished: u64,
    pub false_suspicions: u64,
    /// Report lines from the nodes dropped because they failed their MAC or did not parse
    /// (`bad_report_lines` in the JSON).
    pub bad_report_lines: u64,
}

impl From<&AgreeBenchReport> for AgreeCounts {
    fn from(r: &AgreeBenchReport) -> Self {
        AgreeCounts {
            agreements: r.agreements,
            disagreements: r.disagreements,
            invalid: r.invalid,
            unfinished: r.unfinished,
            false_suspicions: r.false_suspicions,
            bad_report_lines: r.bad_lines,
        }
    }
}

/// Whether a run passed, and if not, every reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The command, as the last line names it (`bench`, `agree`, `agree --sim`).
    pub what: &'static str,
    /// One entry per kind of failure, with its count (`3 violations`); empty: passed.
    pub reasons: Vec<String>,
    /// What the counts are out of (`in 300 operations`).
    pub out_of: String,
    /// Failures the caller accepted (`--allow-false-suspicions`): said, not failed.
    pub accepted: Vec<String>,
}

/// `n thing` with the plural `things` (or `plural` when given) unless `n` is 1; `None` for 0.
fn count(n: u64, one: &str, many: &str) -> Option<String> {
    match n {
        0 => None,
        1 => Some(format!("1 {one}")),
        _ => Some(format!("{n} {many}")),
    }
}

impl Verdict {
    /// A bench run: fails on violations, timeouts, operations not run, unsent or dropped
    /// messages, and false suspicions unless `allow_false_suspicions`.
    pub fn bench(c: &BenchCounts, allow_false_suspicions: bool) -> Verdict {
        // A root fenced after a false suspicion ends the run (the operations left have no
        // root): when the caller allowed false suspicions, that end is theirs too.
        let not_run = count(c.not_run, "operation not run", "operations not run")
            .map(|s| format!("{s} ({})", stop_reason(c.root_lost)));
        let fenced_root = matches!(c.root_lost, Some((_, Some(_))));
        let (not_run, not_run_accepted) = if allow_false_suspicions && fenced_root {
            (None, not_run)
        } else {
            (not_run, None)
        };
        let mut reasons: Vec<String> = [
            count(c.violations, "violation", "violations"),
            count(c.timeouts, "timeout", "timeouts"),
            not_run,
            count(
                c.dropped_ops,
                "operation with unsent messages",
                "operations with unsent messages",
            ),
            count(
                c.deferred_overflow,
                "message dropped at a full deferred queue",
                "messages dropped at a full deferred queue",
            ),
            count(
                c.too_far,
                "message dropped too far ahead",
                "messages dropped too far ahead",
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        let mut accepted = false_suspicions(c.false_suspicions, allow_false_suspicions, &mut reasons);
        accepted.extend(not_run_accepted);
        Verdict {
            what: "bench",
            reasons,
            out_of: format!("in {} operations", c.measured + c.not_run),
            accepted,
        }
    }

    /// A network agreement run: fails on disagreements, invalid values, live nodes that did not
    /// return every agreement, report lines dropped as forged or malformed, and false
    /// suspicions unless `allow_false_suspicions`.
    pub fn agree(c: &AgreeCounts, allow_false_suspicions: bool) -> Verdict {
        let mut reasons: Vec<String> = [
            count(c.disagreements, "disagreement", "disagreements"),
            count(c.invalid, "invalid value", "invalid values"),
            count(
                c.unfinished,
                "live node unfinished (timed out)",
                "live nodes unfinished (timed out)",
            ),
            count(
                c.bad_report_lines,
                "report line dropped (bad MAC or malformed)",
                "report lines dropped (bad MAC or malformed)",
            ),
        ]
        .into_iter()
        .flatten()
        .collect();
        let accepted = false_suspicions(c.false_suspicions, allow_false_suspicions, &mut reasons);
        Verdict {
            what: "agree",
            reasons,
            out_of: format!("in {} agreements", c.agreements),
            accepted,
        }
    }

    /// Simulated agreements (`agree --sim`): fails on any violation of §2.1's properties.
    pub fn agree_sim(v: &Violations, runs: u64) -> Verdict {
        let reasons = [
            ("agreement", v.agreement),
            ("participation", v.participation),
            ("validity", v.validity),
            ("irrevocability", v.irrevocability),
            ("failed-set", v.failed_set),
            ("termination", v.termination),
        ]
        .into_iter()
        .filter(|&(_, n)| n > 0)
        .map(|(p, n)| format!("{n} {p} violation{}", if n == 1 { "" } else { "s" }))
        .collect();
        Verdict {
            what: "agree --sim",
            reasons,
            out_of: format!("in {runs} runs"),
            accepted: Vec::new(),
        }
    }

    /// A stress run (`stress agree`): fails on disagreements, invalid values, unfinished nodes
    /// and shrink mismatches (its false suspicions are made real and tolerated like crashes).
    pub fn stress(t: &crate::experiment::stress::Totals) -> Verdict {
        Verdict {
            what: "stress agree",
            reasons: count(
                t.bad,
                "disagreement, invalid value or unfinished node",
                "disagreements, invalid values or unfinished nodes",
            )
            .into_iter()
            .collect(),
            out_of: format!("in {} agreements", t.agreements),
            accepted: Vec::new(),
        }
    }

    pub fn passed(&self) -> bool {
        self.reasons.is_empty()
    }

    /// The one line that says why the run failed: `bench failed: 3 violations, 2 timeouts in
    /// 300 operations` (`None` when it passed).
    pub fn line(&self) -> Option<String> {
        (!self.passed()).then(|| format!("{} failed: {} {}", self.what, self.reasons.join(", "), self.out_of))
    }

    /// A note on what was accepted instead of failing (`None` when nothing was).
    pub fn accepted_note(&self) -> Option<String> {
        (!self.accepted.is_empty()).then(|| {
            format!(
                "{} accepted {} {} (allowed by the caller)",
                self.what,
                self.accepted.join(", "),
                self.out_of
            )
        })
    }

    /// `Err(Failure::Failed)` with [`Verdict::line`] when the run failed.
    pub fn into_result(self) -> Result<(), Failure> {
        match self.line() {
            Some(l) => Err(Failure::Failed(l)),
            None => Ok(()),
        }
    }
}

/// Why a bench stopped before its last operation: its root died (fenced after a false
/// suspicion, or killed), or operations kept timing out.
pub fn stop_reason(root_lost: Option<(u32, Option<u32>)>) -> String {
    match root_lost {
        Some((r, Some(by))) => {
            format!("stopped at once: the root, rank {r}, was fenced by rank {by} after a false suspicion")
        }
        Some((r, None)) => format!("stopped at once: the root, rank {r}, died"),
        None => format!("stopped after {GIVE_UP_AFTER} timeouts in a row"),
    }
}

/// False suspicions are a reason the run failed, or, when the caller allowed them, accepted
/// (returned, to be warned about).
fn false_suspicions(n: u64, allowed: bool, reasons: &mut Vec<String>) -> Vec<String> {
    match count(n, "false suspicion", "false suspicions") {
        Some(s) if allowed => vec![s],
        Some(s) => {
            reasons.push(s);
            Vec::new()
        }
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clean(measured: u64) -> BenchCounts {
        BenchCounts {
            measured,
            ..BenchCounts::default()
        }
    }

    #[test]
    fn a_clean_bench_passes() {
        let v = Verdict::bench(&clean(300), false);
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.line(), None);
        assert_eq!(v.accepted_note(), None);
        assert!(v.into_result().is_ok());
    }

    /// Sets one count of a clean run.
    type Set = fn(&mut BenchCounts);

    #[test]
    fn every_bench_failure_fails_alone_and_is_named() {
        let cases: [(Set, &str); 7] = [
            (|c| c.violations = 3, "3 violations"),
            (|c| c.timeouts = 1, "1 timeout"),
            (|c| c.not_run = 5, "5 operations not run"),
            (|c| c.dropped_ops = 2, "2 operations with unsent messages"),
            (
                |c| c.deferred_overflow = 4,
                "4 messages dropped at a full deferred queue",
            ),
            (|c| c.too_far = 1, "1 message dropped too far ahead"),
            (|c| c.false_suspicions = 2, "2 false suspicions"),
        ];
        for (set, name) in cases {
            let mut c = clean(300);
            set(&mut c);
            let v = Verdict::bench(&c, false);
            assert!(!v.passed(), "{name}");
            let line = v.line().unwrap();
            assert!(line.starts_with("bench failed: "), "{line}");
            assert!(line.contains(name), "{name}: {line}");
            assert_eq!(line.lines().count(), 1, "{line}");
            assert!(matches!(v.into_result(), Err(Failure::Failed(l)) if l == line));
        }
    }

    #[test]
    fn reasons_are_listed_together_out_of_the_planned_operations() {
        let c = BenchCounts {
            measured: 295,
            not_run: 5,
            violations: 3,
            timeouts: 2,
            ..BenchCounts::default()
        };
        let line = Verdict::bench(&c, false).line().unwrap();
        assert_eq!(
            line,
            format!(
                "bench failed: 3 violations, 2 timeouts, 5 operations not run (stopped after {GIVE_UP_AFTER} timeouts in a row) in 300 operations"
            )
        );
    }

    #[test]
    fn a_fenced_root_is_named_as_the_reason_the_run_stopped() {
        let c = BenchCounts {
            measured: 40,
            not_run: 260,
            root_lost: Some((0, Some(3))),
            false_suspicions: 1,
            ..BenchCounts::default()
        };
        let v = Verdict::bench(&c, false);
        assert_eq!(
            v.line().unwrap(),
            "bench failed: 260 operations not run (stopped at once: the root, rank 0, was fenced by rank 3 after a false suspicion), 1 false suspicion in 300 operations"
        );
        // Allowed false suspicions: the fenced root's end of the run is said, not failed
        // (the load test's "handled by the semantics and counted"); a timeout still fails.
        let v = Verdict::bench(&c, true);
        assert!(v.passed(), "{v:?}");
        assert_eq!(
            v.accepted,
            vec![
                "1 false suspicion".to_string(),
                "260 operations not run (stopped at once: the root, rank 0, was fenced by rank 3 after a false suspicion)".to_string()
            ]
        );
        assert!(!Verdict::bench(&BenchCounts { timeouts: 1, ..c }, true).passed());
        let killed = BenchCounts {
            root_lost: Some((0, None)),
            false_suspicions: 0,
            ..c
        };
        assert!(
            Verdict::bench(&killed, false)
                .line()
                .unwrap()
                .contains("(stopped at once: the root, rank 0, died)")
        );
    }

    #[test]
    fn allowed_false_suspicions_are_said_not_failed() {
        let c = BenchCounts {
            false_suspicions: 4,
            ..clean(100)
        };
        let v = Verdict::bench(&c, true);
        assert!(v.passed(), "{v:?}");
        assert!(v.accepted_note().unwrap().contains("4 false suspicions"));
        // Allowing them forgives nothing else.
        let v = Verdict::bench(&BenchCounts { timeouts: 1, ..c }, true);
        assert_eq!(v.reasons, vec!["1 timeout".to_string()]);
    }

    #[test]
    fn agreement_failures_are_named() {
        let ok = AgreeCounts {
            agreements: 120,
            ..AgreeCounts::default()
        };
        assert!(Verdict::agree(&ok, false).passed());
        let bad = AgreeCounts {
            disagreements: 1,
            invalid: 2,
            unfinished: 3,
            false_suspicions: 4,
            ..ok
        };
        let line = Verdict::agree(&bad, false).line().unwrap();
        assert_eq!(
            line,
            "agree failed: 1 disagreement, 2 invalid values, 3 live nodes unfinished (timed out), 4 false suspicions in 120 agreements"
        );
        let v = Verdict::agree(&bad, true);
        assert_eq!(v.reasons.len(), 3, "{v:?}");
        assert!(v.accepted_note().unwrap().contains("4 false suspicions"));
        let v = Verdict::agree(
            &AgreeCounts {
                false_suspicions: 1,
                ..ok
            },
            false,
        );
        assert_eq!(v.line().unwrap(), "agree failed: 1 false suspicion in 120 agreements");
    }

    #[test]
    fn a_report_line_that_failed_its_mac_fails_the_agreement_run() {
        let c = AgreeCounts {
            agreements: 50,
            bad_report_lines: 1,
            ..AgreeCounts::default()
        };
        let v = Verdict::agree(&c, true);
        assert_eq!(
            v.line().unwrap(),
            "agree failed: 1 report line dropped (bad MAC or malformed) in 50 agreements"
        );
        // Allowing false suspicions forgives nothing of this.
        assert!(v.accepted.is_empty());
        let v = Verdict::agree(
            &AgreeCounts {
                bad_report_lines: 3,
                ..c
            },
            false,
        );
        assert!(v.line().unwrap().contains("3 report lines dropped"), "{v:?}");
    }

    #[test]
    fn simulated_property_violations_fail() {
        assert!(Verdict::agree_sim(&Violations::default(), 10).passed());
        let v = Violations {
            termination: 2,
            validity: 1,
            ..Violations::default()
        };
        assert_eq!(
            Verdict::agree_sim(&v, 10).line().unwrap(),
            "agree --sim failed: 1 validity violation, 2 termination violations in 10 runs"
        );
    }

    #[test]
    fn a_cluster_result_maps_onto_the_counts() {
        let mut r = ClusterResult::empty();
        (r.measured, r.violations, r.timeouts, r.not_run) = (10, 1, 2, 3);
        (r.dropped_ops, r.deferred_overflow, r.too_far) = (4, 5, 6);
        r.false_suspicions = 7;
        r.root_lost = Some((0, Some(2)));
        let c = BenchCounts::from(&r);
        assert_eq!(
            c,
            BenchCounts {
                measured: 10,
                not_run: 3,
                root_lost: Some((0, Some(2))),
                violations: 1,
                timeouts: 2,
                dropped_ops: 4,
                deferred_overflow: 5,
                too_far: 6,
                false_suspicions: 7,
            }
        );
    }
}
