#!/usr/bin/env python3
"""model.py -- extrapolates Pomegranate's aggregate create and lookup rates
to M machines (C cores each, one pom-mds and one pom-mdsl per machine) from
per-operation costs measured on one machine by bench_dist (bench/run.sh
--only dist). The model and what it leaves out: docs/mds-model.md.

  model.py RESULTS.jsonl [options]     costs from a run's dist records
  model.py --c-create 25 --c-lookup 12 ... [options]   costs given by hand

Every measured input can be overridden on the command line; the table is
printed as Markdown for M = 1, 2, 4, 8, 16, 64 (--machines to change).

Invariants:
 (1) Only the measured per-operation costs and the stated parameters enter
     the numbers; nothing is fitted to the measured aggregate rates (those
     carry the 2-core machine's contention, which the model is meant to
     remove).
 (2) Every bound is printed with the resource that sets it, so a reader
     sees which assumption a number rests on.
"""
import argparse
import json
import sys


def load(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    r = json.loads(line)
                except ValueError:
                    continue
                if r.get("bench") == "dist":
                    recs.append(r)
    return recs


def measured(recs):
    """The model inputs from one run's dist records (K = 1 for costs, the
    largest K for what only many MDS show)."""
    ks = sorted({r["mds"] for r in recs})
    if not ks:
        sys.exit("model.py: no dist records in the results")

    def get(k, phase):
        return next((r for r in recs if r["mds"] == k and r["phase"] == phase), None)

    def per_op(k, key, phases):
        """key averaged over the phases, weighted by their operations."""
        rs = [r for r in (get(k, p) for p in phases) if r and r["ops"]]
        n = sum(r["ops"] for r in rs)
        return sum(r[key] * r["ops"] for r in rs) / n if n else 0.0

    k1, kn = ks[0], ks[-1]
    m = {"source_k": ks}
    cr, lk = ("create", "create-dirs"), ("lookup", "lookup-dirs")
    # MDS CPU per create / lookup with one MDS (no forwards, every create
    # one batched request): the cost of the operation itself.
    m["c_create"] = per_op(k1, "mds_cpu_us_per_op", cr)
    m["c_lookup"] = per_op(k1, "mds_cpu_us_per_op", lk)
    m["c_mdsl"] = per_op(k1, "mdsl_cpu_us_per_op", cr)
    m["bytes_create"] = per_op(k1, "bytes_per_op", cr)
    # Forward share and split creates: the largest K.
    main = [r for r in recs if r["mds"] == kn and
            r["phase"] in ("create", "lookup", "create-dirs", "lookup-dirs")]
    req = sum(r["requests"] for r in main)
    m["fwd_frac"] = sum(r["forwards"] for r in main) / req if req else 0.0
    ckn = get(kn, "create-dirs") or get(kn, "create")
    # Requests per create beyond one = creates whose rows sit at two MDS and
    # ran as two requests; measured at K = kn, scaled to M by (1 - 1/M).
    extra = max(0.0, ckn["requests"] / ckn["ops"] - 1.0) if ckn and ckn["ops"] else 0.0
    m["split_cal"] = extra / (1.0 - 1.0 / kn) if kn > 1 else 0.5
    m["split_cal"] = min(m["split_cal"], 1.0)
    # What running a create as two requests adds to the MDS CPU, per split
    # create (K = kn against K = 1).
    p_kn = m["split_cal"] * (1.0 - 1.0 / kn) if kn > 1 else 0.0
    m["c_split"] = max(0.0, (per_op(kn, "mds_cpu_us_per_op", cr) - m["c_create"]) / p_kn) \
        if p_kn > 0 else 5.0
    pc = get(k1, "probe-create-cost")
    m["lat_create_us"] = pc["direct_mean_us"] if pc else 60.0
    pl = get(kn, "probe-lookup-cost")
    p1 = get(k1, "probe-lookup-cost")
    m["lat_direct_us"] = p1["direct_mean_us"] if p1 else 30.0
    m["lat_fwd_extra_us"] = max(0.0, pl["forwarded_us"] - pl["direct_mean_us"]) \
        if pl and pl.get("forwarded_us") else 0.0
    return m


def model(a, M):
    """Rates for M machines; returns a dict of numbers and their bounds."""
    eta = a.eta
    cap_us = a.cores * eta * 1e6  # CPU microseconds per second per machine
    p_split = a.split_cal * (1.0 - 1.0 / M)
    f = a.fwd_frac if M > 1 else 0.0
    # MDS CPU per create: the batched create, plus what a second request
    # costs when the parent's row sits at another MDS (c_split, measured),
    # plus forwards (each costs the forwarding MDS about a lookup: c_fwd).
    c_fwd = a.c_fwd if a.c_fwd is not None else a.c_lookup
    c_cr = a.c_create + p_split * a.c_split + f * c_fwd
    c_lk = a.c_lookup + f * c_fwd
    # One MDS and one MDSL share each machine's cores.
    per_create = c_cr + a.c_mdsl
    r = {}
    r["create_cpu"] = M * cap_us / per_create
    r["create_bw"] = M * a.mdsl_bw * 1e6 / (a.bytes_create * a.copies) \
        if a.bytes_create > 0 else float("inf")
    r["create"] = min(r["create_cpu"], r["create_bw"])
    r["create_by"] = "CPU" if r["create_cpu"] <= r["create_bw"] else "MDSL bandwidth"
    r["lookup"] = M * cap_us / c_lk
    # One directory of N files: S slices spread over min(M, S) MDS; every
    # create also updates the directory's row at ONE MDS (the hot spot).
    S = max(1, int(a.dir_files / (0.75 * a.split_threshold)))
    used = min(M, S)
    r["slices"] = S
    r["dir_lookup"] = used * cap_us / c_lk
    # The hot MDS (owner of the directory's row) per create: the whole
    # batched create when the new row's slice is its own too (1/used of
    # them), else the parent-row update request alone, c_upd (default: half
    # a batched create + the second-request cost), for the split share.
    c_upd = a.c_upd if a.c_upd is not None else a.c_create / 2 + a.c_split
    hot = (a.c_create + a.c_mdsl) / used + (1 - 1.0 / used) * a.split_cal * c_upd \
        + f * c_fwd
    r["dir_create_hot"] = cap_us / hot
    if a.row_hold_us > 0:  # updates of the one row serialized (slice lock)
        r["dir_create_hot"] = min(r["dir_create_hot"], 1e6 / a.row_hold_us)
    r["dir_create"] = min(r["dir_create_hot"], used * cap_us / per_create, r["create_bw"])
    r["dir_create_bound"] = cap_us / (a.split_cal * c_upd)  # M -> infinity
    if a.row_hold_us > 0:
        r["dir_create_bound"] = min(r["dir_create_bound"], 1e6 / a.row_hold_us)
    # Latency seen by a client, and the operations it takes in flight to
    # reach the lookup rate (Little's law): service + RTT, a forward adds
    # one RTT and the forwarder's work.
    svc = max(1.0, a.lat_direct_us - a.loopback_rtt)
    lat_lk = svc + a.rtt + f * (a.rtt + a.lat_fwd_extra_us)
    lat_cr = max(1.0, a.lat_create_us - a.loopback_rtt) + a.rtt * (1 + p_split) + \
        f * (a.rtt + a.lat_fwd_extra_us)
    r["lat_lookup_us"] = lat_lk
    r["lat_create_us"] = lat_cr
    r["inflight_lookup"] = r["lookup"] * lat_lk / 1e6
    return r


def fmt(x):
    if x == float("inf"):
        return "inf"
    if x >= 1e6:
        return "%.2fM" % (x / 1e6)
    if x >= 1e4:
        return "%.0fK" % (x / 1e3)
    return "%.0f" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("results", nargs="?", help="results.jsonl of a bench/run.sh dist run")
    ap.add_argument("--machines", default="1,2,4,8,16,64")
    ap.add_argument("--cores", type=float, default=8, help="cores per machine (C)")
    ap.add_argument("--eta", type=float, default=1.0,
                    help="parallel efficiency of one MDS over C cores (not measured: 1.0 is "
                         "an upper bound)")
    ap.add_argument("--rtt", type=float, default=100.0, help="network round trip, us")
    ap.add_argument("--loopback-rtt", type=float, default=10.0,
                    help="loopback round trip inside the measured latency, us")
    ap.add_argument("--mdsl-bw", type=float, default=500.0,
                    help="MDSL commit bandwidth per machine, MB/s")
    ap.add_argument("--copies", type=int, default=1, help="copies of each commit on MDSL")
    ap.add_argument("--row-hold-us", type=float, default=0,
                    help="time the directory's row (its slice) is held per update, us, when "
                         "updates of one row serialize (not measured; 0: not applied)")
    ap.add_argument("--dir-files", type=float, default=1e6, help="files in the one directory")
    ap.add_argument("--split-threshold", type=float, default=8192,
                    help="rows per slice before it splits (pom-mds default 8192)")
    for k, h in (("c-create", "MDS CPU us per create"), ("c-lookup", "MDS CPU us per lookup"),
                 ("c-mdsl", "MDSL CPU us per create"), ("bytes-create", "bytes committed per create"),
                 ("fwd-frac", "forwarded share of requests"),
                 ("split-cal", "share of creates run as two requests, per (1-1/M)"),
                 ("c-fwd", "MDS CPU us of one forward (default: c-lookup)"),
                 ("c-upd", "MDS CPU us of one parent-row update request "
                           "(default: c-create / 2 + c-split)"),
                 ("c-split", "extra MDS CPU us of a create run as two requests"),
                 ("lat-direct-us", "client latency of a direct lookup, us"),
                 ("lat-fwd-extra-us", "extra latency of a forward on loopback, us"),
                 ("lat-create-us", "client latency of a direct create (one MDS), us")):
        ap.add_argument("--" + k, type=float, default=None, help=h)
    a = ap.parse_args()
    m = measured(load(a.results)) if a.results else {}
    src = {}
    for k in ("c_create", "c_lookup", "c_mdsl", "bytes_create", "fwd_frac", "split_cal",
              "c_split", "lat_direct_us", "lat_fwd_extra_us", "lat_create_us"):
        if getattr(a, k) is None:
            if k not in m:
                sys.exit("model.py: --%s is needed (or a results file)" % k.replace("_", "-"))
            setattr(a, k, m[k])
            src[k] = "measured"
        else:
            src[k] = "given"
    print("Inputs (%s):\n" % ("K = %s of %s" % (m.get("source_k"), a.results)
                              if a.results else "command line"))
    print("| input | value | from |\n|---|---|---|")
    for k, unit in (("c_create", "us MDS CPU"), ("c_lookup", "us MDS CPU"),
                    ("c_mdsl", "us MDSL CPU"), ("bytes_create", "B"),
                    ("fwd_frac", ""), ("split_cal", ""), ("c_split", "us MDS CPU"),
                    ("lat_direct_us", "us"), ("lat_fwd_extra_us", "us"),
                    ("lat_create_us", "us")):
        v = getattr(a, k)
        print("| %s | %s %s | %s |" % (k, ("%.4f" % v) if v < 1 else ("%.1f" % v), unit, src[k]))
    print("| cores C, efficiency | %g, %g | given |" % (a.cores, a.eta))
    print("| RTT | %g us | given |" % a.rtt)
    print("| MDSL bandwidth, copies | %g MB/s, %d | given |" % (a.mdsl_bw, a.copies))
    print("| one directory | %g files, split at %g | given |" % (a.dir_files, a.split_threshold))
    print()
    hdr = ["M", "creates/s (many dirs)", "limited by", "lookups/s (many dirs)",
           "creates/s (1 dir)", "lookups/s (1 dir)", "1-dir create bound (M->inf)",
           "lookup latency us", "create latency us", "lookups in flight needed"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for M in [int(x) for x in a.machines.split(",")]:
        r = model(a, M)
        print("| " + " | ".join([
            str(M), fmt(r["create"]), r["create_by"], fmt(r["lookup"]), fmt(r["dir_create"]),
            fmt(r["dir_lookup"]) + (" (%d slices)" % r["slices"] if M > r["slices"] else ""),
            fmt(r["dir_create_bound"]), "%.0f" % r["lat_lookup_us"],
            "%.0f" % r["lat_create_us"], "%.0f" % r["inflight_lookup"]]) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
