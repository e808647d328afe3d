#!/usr/bin/env python3
"""Summarizes a message trace: `ftcoll bench --trace FILE` (columns op,time_ns,node,event,peer,label)
or `ftcoll sim --trace FILE` (time,node,event,peer,label). For each (node, event, peer, label), in
order of its median time: how many operations had it, and its median, 10th and 90th percentile time
from the operation's start (a sim trace is one run: its times as they are).

usage: bench/trace_summary.py TRACE.csv [MODEL.csv]   (with MODEL.csv: the model's time beside each row)
"""
import collections
import csv
import signal
import statistics
import sys

# A reader that stops early (`| head`) ends the output, not in a traceback.
signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def fail(message):
    """Bad input: one line on stderr, exit code 2."""
    print(message, file=sys.stderr)
    sys.exit(2)


def load(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail(f"trace_summary: cannot read {path}: {e.strerror}")
    except (csv.Error, UnicodeDecodeError) as e:
        fail(f"trace_summary: {path} is not a CSV trace: {e}")
    if not rows:
        fail(f"trace_summary: {path} has no rows")
    time = "time_ns" if "time_ns" in rows[0] else "time"
    if time not in rows[0] or "event" not in rows[0]:
        fail(f"trace_summary: {path} is not a bench or sim trace (no time or event column)")
    by = collections.defaultdict(list)
    for i, r in enumerate(rows, start=2):
        try:
            by[(int(r["node"]), r["event"], int(r["peer"]), r["label"])].append(int(r[time]))
        except (KeyError, TypeError, ValueError):
            fail(f"trace_summary: {path} line {i}: not a trace row")
    ops = len({r["op"] for r in rows}) if "op" in rows[0] else 1
    return by, ops


def main():
    if len(sys.argv) not in (2, 3):
        fail(__doc__.strip().splitlines()[-1])
    by, ops = load(sys.argv[1])
    model = load(sys.argv[2])[0] if len(sys.argv) == 3 else {}
    print(f"{ops} operations")
    head = f"{'node':>4} {'event':>8} {'peer':>4} {'label':>6} {'ops':>6} {'p10':>8} {'p50':>8} {'p90':>8}"
    print(head + (f" {'model':>8}" if model else ""))
    for key, v in sorted(by.items(), key=lambda kv: statistics.median(kv[1])):
        v.sort()
        node, event, peer, label = key
        line = f"{node:>4} {event:>8} {peer:>4} {label:>6} {len(v):>6} {v[len(v) // 10]:>8} {statistics.median(v):>8.0f} {v[9 * len(v) // 10]:>8}"
        if model:
            m = model.get(key)
            line += f" {min(m):>8}" if m else f" {'-':>8}"
        print(line)


main()
