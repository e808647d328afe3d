//! The `--json` output of every command keeps its keys: each case below runs the binary and
//! compares the set of key paths it prints (`a.b`, arrays as `a[]`, every element merged) with
//! the list recorded in `tests/json_keys.txt`. The list was recorded before the upper floors
//! were restructured, so a refactor that renames, drops or adds a key fails here.
//!
//! Re-record after an intended change of a report (and say so in the commit):
//! `FTCOLL_RECORD_JSON_KEYS=1 cargo test --test json_keys`.

mod common;

use std::collections::BTreeSet;

use common::ftcoll;
use serde_json::Value;

/// (case name, arguments). Small and fast; together they reach every JSON writer.
const CASES: &[(&str, &[&str])] = &[
    (
        "sim-corrected-tree",
        &["sim", "--nodes", "256", "--runs", "5", "--faults", "1%", "--json"],
    ),
    (
        "sim-corrected-gossip",
        &[
            "sim",
            "--algo",
            "corrected-gossip",
            "--nodes",
            "128",
            "--runs",
            "3",
            "--json",
        ],
    ),
    (
        "sim-gossip",
        &["sim", "--algo", "gossip", "--nodes", "128", "--runs", "3", "--json"],
    ),
    (
        "sim-big",
        &[
            "sim", "--algo", "big", "--nodes", "64", "--runs", "3", "--faults", "1", "--json",
        ],
    ),
    (
        "sim-bfb",
        &[
            "sim", "--algo", "bfb", "--nodes", "64", "--runs", "3", "--faults", "1", "--json",
        ],
    ),
    (
        "sim-tree-ack",
        &["sim", "--algo", "tree-ack", "--nodes", "64", "--runs", "3", "--json"],
    ),
    (
        "sim-bmg-build",
        &["sim", "--algo", "bmg-build", "--nodes", "128", "--json"],
    ),
    (
        "sim-dissemination",
        &["sim", "--algo", "dissemination", "--nodes", "32", "--json"],
    ),
    (
        "sim-failure-notices",
        &["sim", "--algo", "failure-notices", "--nodes", "32", "--json"],
    ),
    ("model", &["model", "--nodes", "1024", "--json"]),
    (
        "bench",
        &["bench", "--nodes", "4", "--iterations", "40", "--warmup", "5", "--json"],
    ),
    (
        "bench-kill",
        &[
            "bench",
            "--nodes",
            "6",
            "--iterations",
            "60",
            "--warmup",
            "5",
            "--kill",
            "2@30",
            "--json",
        ],
    ),
    (
        "agree-sim",
        &[
            "agree",
            "--sim",
            "--nodes",
            "16",
            "--runs",
            "3",
            "--agreements",
            "10",
            "--json",
        ],
    ),
    (
        "agree",
        &[
            "agree",
            "--nodes",
            "4",
            "--agreements",
            "60",
            "--warmup",
            "10",
            "--kill",
            "1@30",
            "--json",
        ],
    ),
    ("bootstrap", &["bootstrap", "--nodes", "8", "--json"]),
    (
        "bootstrap-kill",
        &["bootstrap", "--nodes", "8", "--kill", "3", "--json"],
    ),
    ("logp", &["logp", "--reps", "50", "--json"]),
];

const RECORD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/json_keys.txt");

/// Every key path of `v` below `prefix` into `out`.
fn paths(v: &Value, prefix: &str, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                out.insert(p.clone());
                paths(x, &p, out);
            }
        }
        Value::Array(a) => {
            let p = format!("{prefix}[]");
            for x in a {
                paths(x, &p, out);
            }
        }
        _ => {}
    }
}

/// The key paths each case prints, as `case: path` lines.
fn observed() -> Vec<String> {
    let mut lines = Vec::new();
    for (name, args) in CASES {
        let (code, out, err) = ftcoll(args);
        assert_eq!(code, 0, "{name}: ftcoll {args:?} failed: {err}");
        let mut keys = BTreeSet::new();
        // One JSON value (possibly pretty-printed), or one value per line.
        let values: Vec<Value> = match serde_json::from_str(&out) {
            Ok(v) => vec![v],
            Err(_) => out
                .lines()
                .filter(|l| !l.trim().is_empty())
                .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{name}: not JSON ({e}): {l}")))
                .collect(),
        };
        for v in &values {
            paths(v, "", &mut keys);
        }
        let values = values.len();
        assert!(values > 0 && !keys.is_empty(), "{name}: printed no JSON keys: {out}");
        lines.extend(keys.into_iter().map(|k| format!("{name}: {k}")));
    }
    lines
}

#[test]
fn every_commands_json_keys_are_unchanged() {
    let seen = observed();
    if std::env::var_os("FTCOLL_RECORD_JSON_KEYS").is_some() {
        std::fs::write(RECORD, seen.join("\n") + "\n").expect("write tests/json_keys.txt");
        return;
    }
    let want = std::fs::read_to_string(RECORD).expect("read tests/json_keys.txt");
    let want: BTreeSet<&str> = want.lines().filter(|l| !l.is_empty()).collect();
    let seen_set: BTreeSet<&str> = seen.iter().map(String::as_str).collect();
    let missing: Vec<_> = want.difference(&seen_set).collect();
    let added: Vec<_> = seen_set.difference(&want).collect();
    assert!(
        missing.is_empty() && added.is_empty(),
        "JSON keys changed.\nmissing: {missing:#?}\nadded: {added:#?}\n(re-record with FTCOLL_RECORD_JSON_KEYS=1 only for an intended change)"
    );
}
