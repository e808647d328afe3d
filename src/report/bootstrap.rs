//! What `ftcoll bootstrap --kill` prints: the detection, spread and repair times after the
//! kill, as a table or one JSON object.

use serde_json::json;

use crate::experiment::bootstrap_kill::KillOutcome;

/// Prints `o`: one JSON object with `json`, else the table.
pub fn print_kill(o: &KillOutcome, json: bool) {
    let ring: Vec<String> = o.ring.iter().map(|r| r.to_string()).collect();
    let killed: Vec<String> = o.killed.iter().map(|r| r.to_string()).collect();
    if json {
        println!(
            "{}",
            json!({
                "nodes": o.nodes,
                "killed": o.killed,
                "boot_ms": o.boot_ms,
                "detect_ms": o.detect_ms,
                "detected_by": o.detected_by,
                "detectors": o.detectors,
                "spread_ms": o.spread_ms,
                "notice_rounds": o.notice_rounds,
                "notice_span": o.notice_span,
                "repair_ms": o.repair_ms,
                "total_ms": o.total_ms,
                "survivors": o.reports,
                "legitimate": o.reports,
                "ring": o.ring,
            })
        );
        return;
    }
    println!(
        "ftcoll bootstrap --kill: {} node processes booted from their parents' addresses only (last table",
        o.nodes
    );
    println!(
        "{:.1} ms after the first launch), then SIGKILL of rank(s) {}.",
        o.boot_ms,
        killed.join(",")
    );
    println!("detect: first suspicion after the kill; spread: from it until every survivor knew every death");
    println!("(failure notices, Han–Finkel over the survivors' ring); repair: from then until every survivor's");
    println!("Succ/Pred/CW/CCW were the legitimate BMG over the survivors (Algorithms 1, 2 on the mended tree)\n");
    println!(
        "{:>6}{:>8}{:>11}{:>11}{:>11}{:>14}{:>11}{:>11}{:>12}",
        "nodes", "killed", "detect ms", "by", "spread ms", "rounds/span", "repair ms", "total ms", "legitimate"
    );
    println!(
        "{:>6}{:>8}{:>11.1}{:>11}{:>11.1}{:>14}{:>11.1}{:>11.1}{:>12}",
        o.nodes,
        killed.join(","),
        o.detect_ms,
        o.detected_by,
        o.spread_ms,
        format!("{}/{}", o.notice_rounds, o.notice_span),
        o.repair_ms,
        o.total_ms,
        format!("{}/{}", o.reports, o.survivors)
    );
    println!("\nrepaired ring (every survivor checked its own state, and this process checked the reports):");
    println!("{}", ring.join(" "));
}
