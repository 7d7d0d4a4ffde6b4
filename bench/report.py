#!/usr/bin/env python3
"""report.py -- turns the JSON lines of one bench/run.sh run into Markdown
tables (one per workload, ratio of Pomegranate to each reference), the
targets check, and gnuplot PNG plots.

  report.py results.jsonl OUTDIR [--meta meta.json]   -> OUTDIR/report.md, *.png
  report.py fio FIO.json TARGET PHASE PARAM [BENCH] >> results.jsonl
  report.py fsmark FSMARK.out TARGET PARAM  >> results.jsonl
  report.py redis REDIS.csv THREADS         >> results.jsonl
  report.py dist-table results.jsonl          -> the many-MDS table (stdout)
  report.py grow-table results.jsonl          -> adding an MDSL under load (stdout)
  report.py replicas-table results.jsonl      -> slices kept once and three times (stdout)
  report.py blob-table results.jsonl          -> fio on the blob backends (stdout)

Invariants:
 (1) Only numbers of this one run are compared (docs/bench.md "Pitfalls": figures move
     20-50% between runs); a ratio is pomfs / reference of the same row.
 (2) A row that could not be measured ("na") shows "n/a (REASON)", never 0,
     and a target whose numbers are missing is reported "not measured".
"""
import json
import os
import shutil
import subprocess
import sys

POM = "pomfs"
REFS = ["passthrough", "tmpfs", "moosefs"]


def emit(rec):
    print(json.dumps(rec))


def conv_fio(path, target, phase, param, bench="large-files"):
    """One fio --output-format=json result as a result line."""
    try:
        with open(path) as f:
            text = f.read()
        # fio may print warnings before the JSON document.
        d = json.loads(text[text.index("{"):])
        j = d["jobs"][0]
    except (OSError, ValueError, KeyError, IndexError) as e:
        emit({"bench": bench, "target": target, "phase": phase, "param": param,
              "procs": 1, "na": "fio gave no result: %s" % e})
        return
    if j.get("error"):
        err = os.strerror(j["error"])
        na = "EFBIG" if j["error"] == 27 else err
        emit({"bench": bench, "target": target, "phase": phase, "param": param,
              "procs": 1, "na": na})
        return
    side = j["write"] if j["write"]["io_bytes"] else j["read"]
    pct = side["clat_ns"].get("percentile", {})
    secs = side["runtime"] / 1000.0 if side["runtime"] else 0
    emit({"bench": bench, "target": target, "phase": phase, "param": param,
          "procs": 1, "ops": side["total_ios"], "secs": secs, "ops_per_s": side["iops"],
          "p50_us": pct.get("50.000000", 0) / 1000.0, "p99_us": pct.get("99.000000", 0) / 1000.0,
          "MB_s": side["bw_bytes"] / 1e6})


def conv_fsmark(path, target, param):
    """fs_mark's last table row: FSUse% Count Size Files/sec AppOverhead."""
    rate = None
    try:
        with open(path) as f:
            for line in f:
                p = line.split()
                if len(p) >= 5 and p[0].isdigit() and p[1].isdigit():
                    rate = float(p[3])
    except OSError:
        pass
    if rate is None:
        emit({"bench": "fs_mark", "target": target, "phase": "create+write", "param": param,
              "procs": 1, "na": "fs_mark gave no result"})
    else:
        emit({"bench": "fs_mark", "target": target, "phase": "create+write", "param": param,
              "procs": 1, "ops_per_s": rate, "p50_us": 0, "p99_us": 0})


def conv_redis(path, threads, depth="1"):
    """redis-benchmark --csv: test, rps, avg, min, p50, p95, p99, max (ms);
    depth: its -P (joined with bench_kv --depth)."""
    names = {"SET": "put", "GET": "get", "DEL": "delete"}
    param = "value=1000" if int(depth) <= 1 else "value=1000,depth=%d" % int(depth)
    with open(path) as f:
        for line in f:
            p = [x.strip('"') for x in line.strip().split('","')]
            if len(p) < 7 or p[0] == "test":
                continue
            key = p[0].split()[0].upper()
            if key not in names:
                continue
            emit({"bench": "kv", "target": "redis", "phase": names[key], "param": param,
                  "procs": int(threads), "ops_per_s": float(p[1]),
                  "p50_us": float(p[4]) * 1000, "p99_us": float(p[6]) * 1000})


def load(path):
    recs = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    recs.append(json.loads(line))
                except ValueError:
                    pass
    return recs


def fmt_rate(r):
    if r is None:
        return "-"
    if "na" in r:
        return "n/a (%s)" % r["na"]
    v = r.get("ops_per_s", 0)
    if not v and "mds_bytes_per_row" in r:
        return "-"
    return "%.0f" % v if v >= 100 else "%.1f" % v


def fmt_lat(r, k):
    if r is None or "na" in r or not r.get(k):
        return "-"
    return "%.0f" % r[k] if r[k] >= 100 else "%.1f" % r[k]


def ratio(a, b):
    if a is None or b is None or "na" in a or "na" in b or not b.get("ops_per_s"):
        return None
    return a["ops_per_s"] / b["ops_per_s"]


def fmt_ratio(x):
    return "-" if x is None else "%.2fx" % x


def extra_cell(m, phase):
    """MB/s, or for dir-scale: RSS per entry (all / growth), readdir time,
    or the MDS's cache bytes per row."""
    if not m or "na" in m:
        return "-"
    if "MB_s" in m:
        return "%.1f" % m["MB_s"]
    if phase == "ls -f":
        return "readdir %.3f s" % m["secs"]
    if "mds_bytes_per_row" in m:
        return "MDS cache %.1f B/row" % m["mds_bytes_per_row"]
    if "rss_bytes_per_entry" in m:
        g = m.get("rss_growth_per_entry")
        return "RSS %.0f B/entry%s" % (m["rss_bytes_per_entry"],
                                       " (growth %.0f)" % g if g is not None else "")
    return "-"


def tables(recs, targets):
    out = []
    order = []
    for r in recs:
        if r["bench"] not in order:
            order.append(r["bench"])
    for bench in order:
        if bench == "dist":
            out += dist_tables(recs)
            continue
        if bench == "dist-grow":
            out += grow_tables(recs)
            continue
        if bench == "blob-backends":
            out += blob_tables(recs)
            continue
        if bench.startswith("replicas"):
            if bench == next(b for b in order if b.startswith("replicas")):
                out += replicas_tables(recs)
            continue
        rows = {}
        keys = []
        for r in recs:
            if r["bench"] != bench:
                continue
            k = (r["phase"], r.get("param", ""), r.get("procs", 1))
            if k not in rows:
                rows[k] = {}
                keys.append(k)
            rows[k][r["target"]] = r
        main = POM if any(POM in v for v in rows.values()) else None
        if bench == "kv":
            main = "pomegranate"
        refs = [t for t in targets + ["leveldb", "redis"] if t != main and
                any(t in v for v in rows.values())]
        extra = "MB/s" if bench in ("small-files", "large-files") else \
            "memory" if bench == "dir-scale" else None
        out.append("\n### %s\n" % bench)
        hdr = ["phase", "param", "procs"]
        if main:
            hdr += ["%s ops/s" % main, "p50 us", "p99 us"]
            if extra:
                hdr.append(extra)
        for t in refs:
            hdr += ["%s ops/s" % t]
            if main:
                hdr.append("ratio")
        if bench in ("mdtest-easy", "mdtest-hard", "small-files", "kv", "large-files") \
                and refs:
            hdr += ["%s p50/p99 us" % t for t in refs]
        out.append("| " + " | ".join(hdr) + " |")
        out.append("|" + "---|" * len(hdr))
        for k in keys:
            v = rows[k]
            line = [k[0], k[1], str(k[2])]
            m = v.get(main) if main else None
            if main:
                line += [fmt_rate(m), fmt_lat(m, "p50_us"), fmt_lat(m, "p99_us")]
                if extra:
                    line.append(extra_cell(m, k[0]))
            for t in refs:
                line.append(fmt_rate(v.get(t)))
                if main:
                    line.append(fmt_ratio(ratio(m, v.get(t))))
            if bench in ("mdtest-easy", "mdtest-hard", "small-files", "kv", "large-files") \
                    and refs:
                for t in refs:
                    x = v.get(t)
                    line.append("-" if x is None or "na" in x else
                                "%s/%s" % (fmt_lat(x, "p50_us"), fmt_lat(x, "p99_us")))
            out.append("| " + " | ".join(line) + " |")
    return out


def dist_tables(recs):
    """The dist workload (bench_dist, K = 1, 2, 4 MDS) side by side: rates
    and their ratio to K = 1, forwards, MDS CPU per operation, load; then
    the per-operation costs docs/mds-model.md takes (bench/model.py)."""
    d = [r for r in recs if r.get("bench") == "dist"]
    ks = sorted({r["mds"] for r in d})
    if not ks:
        return []

    def get(k, phase):
        return next((r for r in d if r["mds"] == k and r["phase"] == phase), None)

    def rate(k, phase):
        r = get(k, phase)
        return r["ops_per_s"] if r else None

    def cell(k, phase):
        v, b = rate(k, phase), rate(ks[0], phase)
        if v is None:
            return ["-", "-"]
        return ["%.0f" % v, "%.2fx" % (v / b) if b else "-"]

    out = ["\n### dist (many MDS on this machine: overhead, not speed-up)\n"]
    hdr = ["MDS", "creates/s (1 dir)", "vs 1", "lookups/s (1 dir)", "vs 1",
           "creates/s (8 dirs)", "vs 1", "lookups/s (8 dirs)", "vs 1", "mkdirs/s (1 dir)",
           "vs 1", "forwards %", "MDS CPU us/create", "MDS CPU us/lookup", "load avg"]
    out += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for k in ks:
        main = [r for r in d if r["mds"] == k and r["phase"] in
                ("create", "lookup", "create-dirs", "lookup-dirs")]
        req = sum(r.get("requests", 0) for r in main)
        fwd = sum(r.get("forwards", 0) for r in main)
        c, lk = get(k, "create"), get(k, "lookup")
        line = [str(k)] + cell(k, "create") + cell(k, "lookup") + cell(k, "create-dirs") + \
            cell(k, "lookup-dirs") + cell(k, "mkdir")
        line += ["%.3f" % (100.0 * fwd / req) if req else "-",
                 "%.1f" % c["mds_cpu_us_per_op"] if c else "-",
                 "%.1f" % lk["mds_cpu_us_per_op"] if lk else "-",
                 "%.2f" % max(r.get("load1", 0) for r in main) if main else "-"]
        out.append("| " + " | ".join(line) + " |")
    out += ["\nPer-operation costs (bench_dist; model inputs, docs/mds-model.md):\n"]
    hdr = ["MDS", "requests/create", "MDS CPU us/create (8 dirs)", "MDSL CPU us/create",
           "bytes/create", "commit mean us", "creates/group", "probe create direct / 1st (fwd share)",
           "probe lookup direct / 1st (fwd share)", "forwarded lookup us"]
    out += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for k in ks:
        c, cd = get(k, "create"), get(k, "create-dirs")
        pc, pl = get(k, "probe-create-cost"), get(k, "probe-lookup-cost")

        def pr(x):
            return "-" if not x else "%.0f / %.0f us (%.2f)" % (
                x["direct_mean_us"], x["first_mean_us"], x["forward_share"])
        line = [str(k),
                "%.2f" % (c["requests"] / c["ops"]) if c and c["ops"] else "-",
                "%.1f" % cd["mds_cpu_us_per_op"] if cd else "-",
                "%.1f" % c["mdsl_cpu_us_per_op"] if c else "-",
                "%.0f" % c["bytes_per_op"] if c else "-",
                "%.0f" % c["commit_mean_us"] if c else "-",
                "%.0f" % (c["ops"] / c["groups"]) if c and c.get("groups") else "-",
                pr(pc), pr(pl),
                "%.0f" % pl["forwarded_us"] if pl and pl.get("forwarded_us") else "-"]
        out.append("| " + " | ".join(line) + " |")
    return out


def grow_tables(recs):
    """bench_dist --add-mdsl-at: one row per window (creates/s, commit-group
    p50/p99, the move counters, the ring-1 phase), the means of the windows
    before, during and after the join, then the summary of the change."""
    g = [r for r in recs if r.get("bench") == "dist-grow"]
    win = [r for r in g if r["phase"] == "window"]
    summ = [r for r in g if r["phase"] == "summary"]
    if not win and not summ:
        return []
    out = ["\n### adding an MDSL under load (%s)\n" % (win or summ)[0].get("param", "")]
    hdr = ["window s", "stage", "creates/s", "groups", "group p50 ms", "group p99 ms",
           "moves", "move MiB", "move loads", "move aborts", "ring 1", "load"]
    out += ["| " + " | ".join(hdr) + " |", "|" + "---|" * len(hdr)]
    for r in win:
        out.append("| " + " | ".join([
            "%.1f-%.1f" % (r["t0_s"], r["t1_s"]), r["stage"], "%.0f" % r["ops_per_s"],
            "%.0f" % r["groups"], "%.2f" % (r["group_p50_us"] / 1000),
            "%.2f" % (r["group_p99_us"] / 1000), "%.0f" % r["moves"],
            "%.1f" % (r["move_bytes"] / 1048576), "%.0f" % r["move_loads"],
            "%.0f" % r["move_aborts"], r["ring1"], "%.2f" % r["load1"]]) + " |")
    out += ["", "| stage | windows | creates/s (mean) | vs before | group p50 ms (median) "
            "| group p99 ms (max) |", "|---|---|---|---|---|---|"]
    base = None
    for st in ("before", "during", "after"):
        w = [r for r in win if r["stage"] == st and r["secs"] > 0]
        if not w:
            out.append("| %s | 0 | - | - | - | - |" % st)
            continue
        rate = sum(r["ops"] for r in w) / sum(r["secs"] for r in w)
        base = rate if st == "before" else base
        p50 = sorted(r["group_p50_us"] for r in w)[len(w) // 2] / 1000
        p99 = max(r["group_p99_us"] for r in w) / 1000
        out.append("| %s | %d | %.0f | %s | %.2f | %.2f |" % (
            st, len(w), rate, "%.2fx" % (rate / base) if base else "-", p50, p99))
    for s in summ:
        ph = ", ".join("%s +%.1f s" % kv for kv in s.get("phases", {}).items())
        out += ["",
                "- new MDSL started at %.1f s; time to STABLE %s; phases seen: %s" % (
                    s["add_at_s"], "%.1f s" % s["to_stable_s"] if s["to_stable_s"] >= 0
                    else "not reached", ph or "-"),
                "- moves %.0f, %.1f MiB moved = %.2f x 1/3 of the %.1f MiB live at the add, "
                "%.2f x 1/3 of the %.1f MiB live at STABLE%s; move loads %.0f, move aborts %.0f" % (
                    s["moves"], s["move_bytes"] / 1048576, s["move_vs_third"],
                    s["live_bytes_at_add"] / 1048576, s["move_vs_third_stable"],
                    s["live_bytes_at_stable"] / 1048576,
                    "" if s["stable_under_load"] else " (after the creates)",
                    s["move_loads"], s["move_aborts"]),
                "- %d files created (%s), all %d looked up after the change with their uuid" % (
                    s["created"], s["stopped"], s["looked_up"])]
        out += ["", "| MDSL | disk MiB: add / STABLE / end | live MiB: add / STABLE / end "
                "| share of live at the end |", "|---|---|---|---|"]
        tot = sum(m["live_after"] for m in s["mdsl"]) or 1
        mib = 1048576.0
        for i, m in enumerate(s["mdsl"]):
            out.append("| mdsl%d%s | %.1f / %.1f / %.1f | %.1f / %.1f / %.1f | %.0f%% |" % (
                i + 1, " (new)" if i == len(s["mdsl"]) - 1 else "", m["du_before"] / mib,
                m["du_stable"] / mib, m["du_after"] / mib, m["live_before"] / mib,
                m["live_stable"] / mib, m["live_after"] / mib, 100.0 * m["live_after"] / tot))
    return out


def replicas_tables(recs):
    """mdtest on 3 MDSL with r = 1 and r = 3 (docs/mdsl-replicas.md): the
    rates side by side with their ratio, then the MDSL record bytes each
    file cost, in all and per replica."""
    rows, keys = {}, []
    for r in recs:
        if r.get("bench") not in ("replicas-easy", "replicas-hard"):
            continue
        k = (r["bench"][len("replicas-"):], r["phase"])
        if k not in rows:
            rows[k] = {}
            keys.append(k)
        rows[k][r["target"]] = r
    if not keys:
        return []
    out = ["\n### MDSL replicas: the same mdtest with r = 1 and r = 3 (3 MDSL, 2 procs)\n",
           "| mdtest | phase | r=1 ops/s | r=3 ops/s | r=3 / r=1 | r=3 p50/p99 us |",
           "|---|---|---|---|---|---|"]
    for k in keys:
        a, b = rows[k].get("r=1"), rows[k].get("r=3")
        out.append("| %s | %s | %s | %s | %s | %s |" % (
            k[0], k[1], fmt_rate(a), fmt_rate(b), fmt_ratio(ratio(b, a)),
            "-" if b is None or "na" in b else
            "%s/%s" % (fmt_lat(b, "p50_us"), fmt_lat(b, "p99_us"))))
    wa = {r["replicas"]: r for r in recs if r.get("bench") == "replicas-bytes"}
    if wa:
        out += ["", "MDSL record bytes appended for files of 3901 B created and kept "
                "(made durable by an fsync of their folder):", "",
                "| replicas | MDSL record bytes | per file | per file and replica "
                "| per replica vs r=1 |", "|---|---|---|---|---|"]
        base = wa.get(1)
        for n in sorted(wa):
            w = wa[n]
            per = w["bytes"] / max(w["files"], 1)
            rel = "-"
            if base and base["bytes"]:
                rel = "%.2fx" % ((w["bytes"] / n) / base["bytes"])
            out.append("| %d | %d | %.0f | %.0f | %s |" % (n, w["bytes"], per, per / n, rel))
    return out


def blob_tables(recs):
    """fio on one cluster's fs with the local backend and with mdsl at 1
    and 3 copies (docs/format-blob.md): MB/s or IOPS side by side, and each
    mdsl column's ratio to local."""
    rows, keys = {}, []
    for r in recs:
        if r.get("bench") != "blob-backends":
            continue
        if r["phase"] not in rows:
            rows[r["phase"]] = {}
            keys.append(r["phase"])
        rows[r["phase"]][r["target"]] = r
    if not keys:
        return []

    def cell(m, phase):
        if m is None:
            return "-"
        if "na" in m:
            return "n/a (%s)" % m["na"]
        return "%.0f IOPS" % m["ops_per_s"] if "rand" in phase else "%.1f MB/s" % m["MB_s"]

    def rel(m, base, phase):
        if not m or not base or "na" in m or "na" in base:
            return "-"
        k = "ops_per_s" if "rand" in phase else "MB_s"
        return "%.2fx" % (m[k] / base[k]) if base.get(k) else "-"
    out = ["\n### Large files on the blob backends (one cluster, 3 MDSL; %s)\n" % (
               next(iter(rows[keys[0]].values())).get("param", "")),
           "| fio | local | mdsl c=1 | vs local | mdsl c=3 | vs local | mdsl c=3 p50/p99 us |",
           "|---|---|---|---|---|---|---|"]
    for ph in keys:
        v = rows[ph]
        lo, m1, m3 = v.get("local"), v.get("mdsl c=1"), v.get("mdsl c=3")
        out.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            ph, cell(lo, ph), cell(m1, ph), rel(m1, lo, ph), cell(m3, ph), rel(m3, lo, ph),
            "-" if not m3 or "na" in m3 else "%s/%s" % (fmt_lat(m3, "p50_us"),
                                                         fmt_lat(m3, "p99_us"))))
    return out


def find(recs, bench, target, phase, procs=None, param=None):
    best = None
    for r in recs:
        if r["bench"] == bench and r["target"] == target and r["phase"] == phase and \
                (procs is None or r.get("procs") == procs) and \
                (param is None or r.get("param", "").startswith(param)):
            best = r
    return best


def target_check(recs):
    out = ["\n### Targets, ratios within this run\n",
           "| target | measured | goal | verdict |", "|---|---|---|---|"]

    def row(name, val, goal, fmt="%.2fx"):
        """goal: ">= 0.6x" or "<= 200 B"."""
        if val is None:
            out.append("| %s | not measured | %s | - |" % (name, goal))
            return
        op, num = goal.split()[:2]
        lim = float(num.rstrip("x"))
        ok = val >= lim if op == ">=" else val <= lim
        out.append("| %s | %s | %s | %s |" % (name, fmt % val, goal, "met" if ok else "MISSED"))

    for ph in ("file create", "file stat", "file remove"):
        for p in (1, 2):
            row("mdtest-easy %s, %d proc" % (ph, p),
                ratio(find(recs, "mdtest-easy", POM, ph, p),
                      find(recs, "mdtest-easy", "passthrough", ph, p)), ">= 0.6x")
    for p in (1, 2):
        row("mdtest-hard write (file create), %d proc" % p,
            ratio(find(recs, "mdtest-hard", POM, "file create", p),
                  find(recs, "mdtest-hard", "passthrough", "file create", p)), ">= 0.6x")
    for ph in ("seq write 1M", "seq read 1M"):
        a = find(recs, "large-files", POM, ph)
        b = find(recs, "large-files", "passthrough", ph)
        if a is not None and "na" in a:
            out.append("| large-file %s | n/a (%s) | >= 0.8x | MISSED |" % (ph, a["na"]))
        else:
            row("large-file %s" % ph, ratio(a, b), ">= 0.8x")
    ds = [r for r in recs if r["bench"] == "dir-scale" and r["target"] == POM and
          r["phase"] == "create" and "na" not in r]
    if ds:
        def n(r):
            return int(r["param"].split("=")[1])
        small = min(ds, key=lambda r: abs(n(r) - 10000))
        big = max(ds, key=n)
        out.append("| create rate at %d vs at %d entries | %.2fx | >= 0.8x | %s |" % (
            n(big), n(small), big["ops_per_s"] / small["ops_per_s"],
            "met" if big["ops_per_s"] >= 0.8 * small["ops_per_s"] else "MISSED"))
        mem = [r for r in ds if "rss_bytes_per_entry" in r]
        if mem:
            row("pom-mds RSS / entries at %d entries (upper bound)" % n(mem[-1]),
                mem[-1]["rss_bytes_per_entry"], "<= 200 B", "%.0f B")
            if "rss_growth_per_entry" in mem[-1]:
                row("pom-mds RSS growth / entries created (lower bound)",
                    mem[-1]["rss_growth_per_entry"], "<= 200 B", "%.0f B")
    cache = [r for r in recs if r.get("phase") == "mds cache"]
    if cache:
        row("pom-mds cache bytes per cached row (%s)" % cache[-1]["param"],
            cache[-1]["mds_bytes_per_row"], "<= 200 B", "%.1f B")
    for ph in ("put", "get", "delete"):
        for r in recs:
            if r["bench"] == "kv" and r["target"] == "pomegranate" and r["phase"] == ph:
                same = [x for x in recs if x["bench"] == "kv" and x["target"] == "redis" and
                        x["phase"] == ph and x.get("procs") == r["procs"] and
                        x.get("param") == r.get("param")]
                depth = r.get("param", "").partition("depth=")[2]
                if depth:
                    row("KV %s, 1 client, pipelined %s deep vs Redis -P %s" % (ph, depth, depth),
                        ratio(r, same[-1] if same else None), ">= 1.0x")
                else:
                    row("KV %s, %d clients vs Redis" % (ph, r["procs"]),
                        ratio(r, same[-1] if same else None), ">= 0.8x")
    return out


def plots(recs, outdir):
    if not shutil.which("gnuplot"):
        return ["\n(gnuplot not found: no plots)"]
    made = []
    # Create rate against directory size, one line per target.
    ds = {}
    for r in recs:
        if r["bench"] == "dir-scale" and r["phase"] == "create" and "na" not in r:
            ds.setdefault(r["target"], []).append((int(r["param"].split("=")[1]),
                                                   r["ops_per_s"]))
    th = {}
    for r in recs:
        if r["bench"] == "mdtest-easy" and r["phase"] in ("file create", "file remove") and \
                "na" not in r:
            th.setdefault((r["target"], r["phase"]), []).append((r["procs"], r["ops_per_s"]))
    for name, series, xl, logx in (("dirscale", ds, "entries in the directory", True),
                                   ("threads", th, "processes (mdtest-easy)", False)):
        if not series:
            continue
        cmds = ["set terminal png size 900,540", "set output '%s/%s.png'" % (outdir, name),
                "set xlabel '%s'" % xl, "set ylabel 'ops/s (log scale)'",
                "set logscale y", "set key outside right", "set grid"]
        if logx:
            cmds.append("set logscale x")
        else:
            cmds.append("set xtics 1")
        plot = []
        for i, (key, pts) in enumerate(sorted(series.items())):
            label = key if isinstance(key, str) else "%s %s" % key
            dat = "%s/%s.%d.dat" % (outdir, name, i)
            with open(dat, "w") as f:
                for x, y in sorted(pts):
                    f.write("%d %f\n" % (x, y))
            plot.append("'%s' using 1:2 with linespoints title '%s'" % (dat, label))
        cmds.append("plot " + ", ".join(plot))
        gp = "%s/%s.gp" % (outdir, name)
        with open(gp, "w") as f:
            f.write("\n".join(cmds) + "\n")
        if subprocess.run(["gnuplot", gp]).returncode == 0:
            made.append("%s/%s.png" % (outdir, name))
    return ["\nPlots: " + (", ".join(made) if made else "none")]


def main():
    a = sys.argv[1:]
    if a and a[0] == "fio":
        return conv_fio(*a[1:6])
    if a and a[0] == "fsmark":
        return conv_fsmark(*a[1:4])
    if a and a[0] == "redis":
        return conv_redis(*a[1:4])
    if a and a[0] == "dist-table" and len(a) >= 2:
        print("\n".join(dist_tables(load(a[1]))))
        return 0
    if a and a[0] == "grow-table" and len(a) >= 2:
        print("\n".join(grow_tables(load(a[1]))))
        return 0
    if a and a[0] == "blob-table" and len(a) >= 2:
        print("\n".join(blob_tables(load(a[1]))))
        return 0
    if a and a[0] == "replicas-table" and len(a) >= 2:
        print("\n".join(replicas_tables(load(a[1]))))
        return 0
    if len(a) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    recs = load(a[0])
    os.makedirs(a[1], exist_ok=True)
    meta = {}
    if len(a) >= 4 and a[2] == "--meta":
        with open(a[3]) as f:
            meta = json.load(f)
    targets = [POM] + [t for t in REFS if any(r["target"] == t for r in recs)]
    out = ["## Benchmark results", ""]
    for k, v in meta.items():
        out.append("- %s: %s" % (k, v))
    out += tables(recs, targets)
    # a dist-only (or grow-only) run has no targets
    if any(r.get("bench") not in ("dist", "dist-grow", "blob-backends") and
           not r.get("bench", "").startswith("replicas") for r in recs):
        out += target_check(recs)
    out += plots(recs, a[1])
    text = "\n".join(out) + "\n"
    with open(os.path.join(a[1], "report.md"), "w") as f:
        f.write(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main() or 0)
