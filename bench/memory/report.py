"""The memory fill test's arithmetic and its report.md (docs/memory_bench.md).

Pure functions of the raw results bench/memory/run.py collects: each
fill_bench JSON object (one per server and value size), the servers' idle
RSS, and the engine's own metadata figure when the Furrballs server printed
one. Nothing here starts a process or reads a clock, so report_test.py checks
every figure on hand-made inputs.
"""

MIB = 1 << 20

# Issue 13, goal 1: RSS <= 1.05 x budget + 24 MiB at every fill level.
RSS_BOUND_FACTOR = 1.05
RSS_BOUND_SLACK = 24 * MIB
# Goal 3: Furrballs' keys per MiB of RSS over memcached's, per value size.
KEYS_PER_MIB_GOALS = {64: 1.3, 1024: 1.0}
# Goal 4: live data / budget at steady state, and the hit-ratio gap.
SMALL_LIVE_GOAL = 0.80
SMALL_HIT_GAP = 0.05
SYSTEMS = ["furrballs", "redis", "memcached"]
# The small-budget check compares Furrballs with memcached only (goal 4).
SMALL_SYSTEMS = ["furrballs", "memcached"]


def rss_bound(budget_bytes):
    return RSS_BOUND_FACTOR * budget_bytes + RSS_BOUND_SLACK


def last_batch_samples(result):
    """The fill's samples taken during its last budget-sized batch."""
    return [s for s in result["samples"]
            if s["inserted"] > result["inserted"] - result["batch_keys"]]


def fill_figures(result, idle_rss_bytes, metadata_bytes=None, start_page_bytes=None):
    """What the report says about one fill: a dict of figures.

    result: fill_bench's JSON object. idle_rss_bytes: the server's VmRSS
    right after it started. metadata_bytes: the engine's start-up metadata
    figure (Furrballs only), or None. start_page_bytes: its value pages at
    start-up; the pages it has in service after the fill are fewer by what
    its key table's growth took, which counts as metadata too.
    """
    budget = result["budget_bytes"]
    item = result["key_bytes"] + result["value_bytes"]
    after = result["after_fill"]
    resident = after["resident"]
    rss = after["rss_bytes"]
    user = resident * item
    # Every RSS seen during and after the fill (-1: not sampled).
    seen = [s["rss_bytes"] for s in result["samples"]] + [rss]
    seen = [r for r in seen if r >= 0]
    last_batch = [s["resident"] for s in last_batch_samples(result)]
    rb = result["read_back"]
    if (metadata_bytes is not None and start_page_bytes is not None
            and after.get("memory_limit_bytes", -1) >= 0):
        metadata_bytes += max(0, start_page_bytes - after["memory_limit_bytes"])
    return {
        "budget_bytes": budget,
        "value_bytes": result["value_bytes"],
        "resident": resident,
        "inserted": result["inserted"],
        "failed_sets": result["failed_sets"],
        "fill_end": result["fill_end"],
        "batches": result["batches"],
        "rss_bytes": rss,
        "idle_rss_bytes": idle_rss_bytes,
        "user_bytes": user,
        "user_per_rss": user / rss if rss > 0 else None,
        "keys_per_mib": resident / (rss / MIB) if rss > 0 else None,
        # What the server holds beyond its idle footprint and the user bytes,
        # per resident key. Negative when the idle footprint already holds
        # memory the data then uses (Furrballs pre-faults its pages).
        "overhead_per_key": (rss - idle_rss_bytes - user) / resident
        if resident > 0 and rss >= 0 and idle_rss_bytes >= 0 else None,
        # Everything but the user bytes, per resident key.
        "rss_overhead_per_key": (rss - user) / resident
        if resident > 0 and rss >= 0 else None,
        # Furrballs' count moves as it evicts whole pages: the range over the
        # last batch says how much the final figure could have differed.
        "resident_last_batch": (min(last_batch), max(last_batch)) if last_batch else None,
        "engine_metadata_per_key": metadata_bytes / resident
        if metadata_bytes is not None and resident > 0 else None,
        "max_rss_over_budget": max(seen) / budget if seen else None,
        "rss_bound_held": all(r <= rss_bound(budget) for r in seen) if seen else None,
        "read_back": rb,
        "read_back_ok": rb["wrong"] == 0 and rb["failed"] == 0,
    }


def overhead_for_goal(figures):
    """The per-key metadata figure goal 3's aim is judged on, or None.

    The engine's own figure when it printed one; else the RSS-based overhead
    over idle, unless that is negative (the idle footprint already held the
    memory, so the formula cannot isolate metadata).
    """
    if figures["engine_metadata_per_key"] is not None:
        return figures["engine_metadata_per_key"]
    o = figures["overhead_per_key"]
    return o if o is not None and o >= 0 else None


def keys_per_mib_ratios(by_system, value_bytes):
    """Furrballs' keys per MiB of RSS over each peer's, and the goal check.

    by_system: system name -> fill_figures (missing systems are skipped).
    Returns {"memcached": r, "redis": r, "goal": g, "goal_met": bool or None}.
    """
    out = {"goal": KEYS_PER_MIB_GOALS.get(value_bytes), "goal_met": None}
    fb = by_system.get("furrballs", {}).get("keys_per_mib")
    for peer in ["memcached", "redis"]:
        theirs = by_system.get(peer, {}).get("keys_per_mib")
        out[peer] = fb / theirs if fb and theirs else None
    if out["goal"] is not None and out["memcached"] is not None:
        out["goal_met"] = out["memcached"] >= out["goal"]
    return out


def small_figures(furrballs, memcached, furrballs_error=None):
    """Goal 4 at one small budget from the two fill_bench results (either None).

    Furrballs' live data / budget after the Set-heavy fill (its Stats
    live_bytes) and after the cache-aside load, the two hit ratios and
    whether both goals hold. A Furrballs that did not run at this budget
    (furrballs_error) meets neither goal.
    """
    out = {"live_after_fill": None, "live_range": None, "live_after_reads": None,
           "hit_furrballs": None, "hit_memcached": None,
           "live_goal_met": None, "hit_goal_met": None,
           "furrballs_error": furrballs_error}
    if furrballs_error:
        out["live_goal_met"] = out["hit_goal_met"] = False
    if furrballs is not None:
        budget = furrballs["budget_bytes"]
        # Steady state: the samples of the last batch, whose count no longer
        # grows but moves as whole pages are evicted.
        live = [s["live_bytes"] / budget for s in last_batch_samples(furrballs)
                if s.get("live_bytes", -1) >= 0]
        if live:
            out["live_after_fill"] = sum(live) / len(live)
            out["live_range"] = (min(live), max(live))
            out["live_goal_met"] = out["live_after_fill"] >= SMALL_LIVE_GOAL
        ca = furrballs.get("cache_aside")
        if ca is not None:
            out["hit_furrballs"] = ca["hit_ratio"]
            if ca["after"]["live_bytes"] >= 0:
                out["live_after_reads"] = ca["after"]["live_bytes"] / budget
    if memcached is not None and memcached.get("cache_aside") is not None:
        out["hit_memcached"] = memcached["cache_aside"]["hit_ratio"]
    if out["hit_furrballs"] is not None and out["hit_memcached"] is not None:
        out["hit_goal_met"] = out["hit_furrballs"] >= out["hit_memcached"] - SMALL_HIT_GAP
    return out


def failures(results):
    """Reasons the run failed: wrong or failed read-backs, bad cache-aside
    values. results: list of (label, fill_bench JSON)."""
    out = []
    for label, r in results:
        rb = r["read_back"]
        if rb["wrong"]:
            out.append("%s: %d wrong value(s) in the read-back" % (label, rb["wrong"]))
        if rb["failed"]:
            out.append("%s: %d failed read(s) in the read-back" % (label, rb["failed"]))
        ca = r.get("cache_aside")
        if ca and ca["bad_values"]:
            out.append("%s: %d wrong value(s) in the cache-aside reads" % (label, ca["bad_values"]))
    return out


# --- Markdown ---------------------------------------------------------------

def _mib(b):
    return "—" if b is None or b < 0 else "%.1f" % (b / MIB)


def _num(x, fmt="%d"):
    return "—" if x is None else fmt % x


def _yes(b):
    return "—" if b is None else ("yes" if b else "**no**")


def _thousands(x):
    return "—" if x is None else "{:,}".format(int(round(x)))


def fill_table(value_bytes, by_system, errors, systems=SYSTEMS):
    """Rows of the per-server table for one value size."""
    lines = [
        "| %d B values | %s |" % (value_bytes, " | ".join(systems)),
        "|---|" + "---|" * len(systems),
    ]

    def row(name, fn):
        cells = []
        for s in systems:
            if s in errors:
                cells.append("did not run")
            elif s in by_system:
                cells.append(fn(by_system[s]))
            else:
                cells.append("—")
        lines.append("| %s | %s |" % (name, " | ".join(cells)))

    row("keys resident", lambda f: _thousands(f["resident"]))
    row("keys resident over the last batch, min–max",
        lambda f: "—" if f["resident_last_batch"] is None else "%s–%s" % (
            _thousands(f["resident_last_batch"][0]), _thousands(f["resident_last_batch"][1])))
    row("keys inserted (batches, end)",
        lambda f: "%s (%d, %s)" % (_thousands(f["inserted"]), f["batches"], f["fill_end"]))
    row("RSS, MiB", lambda f: _mib(f["rss_bytes"]))
    row("idle RSS at start, MiB", lambda f: _mib(f["idle_rss_bytes"]))
    row("user bytes (keys + values) / RSS", lambda f: _num(f["user_per_rss"], "%.2f"))
    row("keys per MiB of RSS", lambda f: _thousands(f["keys_per_mib"]))
    row("overhead per key, B: (RSS − idle − user bytes) / keys",
        lambda f: _num(f["overhead_per_key"], "%.0f"))
    row("overhead per key, B: (RSS − user bytes) / keys",
        lambda f: _num(f["rss_overhead_per_key"], "%.0f"))
    row("engine's metadata / keys, B",
        lambda f: _num(f["engine_metadata_per_key"], "%.0f"))
    row("max RSS / budget while filling", lambda f: _num(f["max_rss_over_budget"], "%.2f"))
    row("RSS ≤ 1.05 × budget + 24 MiB at every sample", lambda f: _yes(f["rss_bound_held"]))
    row("read-back: hits / misses / wrong",
        lambda f: "%d / %d / %d" % (f["read_back"]["hits"], f["read_back"]["misses"],
                                    f["read_back"]["wrong"]))
    row("failed sets", lambda f: "%d" % f["failed_sets"])
    return lines


def ratio_table(ratios_by_value):
    lines = ["| value | Furrballs / memcached | Furrballs / Redis | goal (vs memcached) | met |",
             "|---|---|---|---|---|"]
    for v in sorted(ratios_by_value):
        r = ratios_by_value[v]
        lines.append("| %d B | %s | %s | %s | %s |" % (
            v, _num(r["memcached"], "%.2f"), _num(r["redis"], "%.2f"),
            "≥ %.1f×" % r["goal"] if r["goal"] is not None else "—",
            _yes(r["goal_met"])))
    return lines


def small_table(small_by_budget):
    lines = ["| budget | Furrballs live data / budget over the fill's last batch, mean "
             "(min–max) | ... after the reads "
             "| hit ratio Furrballs | hit ratio memcached | ≥ 80% live | hit within 5 points |",
             "|---|---|---|---|---|---|---|"]
    for mb in sorted(small_by_budget):
        s = small_by_budget[mb]
        absent = "did not run" if s["furrballs_error"] else None

        def pct(x):
            return absent or _num(None if x is None else 100 * x, "%.1f%%")

        steady = pct(s["live_after_fill"])
        if s["live_range"] is not None and not absent:
            steady += " (%s–%s)" % (pct(s["live_range"][0]), pct(s["live_range"][1]))
        lines.append("| %d MiB | %s | %s | %s | %s | %s | %s |" % (
            mb, steady, pct(s["live_after_reads"]),
            absent or _num(s["hit_furrballs"], "%.4f"), _num(s["hit_memcached"], "%.4f"),
            _yes(s["live_goal_met"]), _yes(s["hit_goal_met"])))
    return lines


IDLE_GOAL_BYTES = 16 * MIB  # goal 2: idle RSS with --memory_mb=256
OVERHEAD_AIM_BYTES = 16     # goal 3's aim for metadata bytes per key


def _fills_by_value(raw):
    """value_bytes -> (system -> fill_figures, system -> error)."""
    out = {}
    for f in raw["fills"]:
        figures, errors = out.setdefault(f["value_bytes"], ({}, {}))
        if f.get("error"):
            errors[f["system"]] = f["error"]
        else:
            figures[f["system"]] = fill_figures(f["result"], f["idle_rss_bytes"],
                                                f.get("metadata_bytes"),
                                                f.get("start_page_bytes"))
    return out


def _header(raw, title):
    run = raw.get("run", {})
    lines = ["# %s" % title, ""]
    if run:
        lines += ["Run finished %s, %.1f minutes, by `%s`." % (
            run.get("finished", "?"), run.get("seconds", 0) / 60, run.get("command", "?")), ""]
    lines += ["## Machine and versions", ""]
    lines += ["- %s: %s" % (k, v) for k, v in raw["facts"].items()]
    if run.get("load_average"):
        lines.append("- load average (1/5/15 min) at start: %s; at end: %s" %
                     tuple(run["load_average"]))
    lines += ["", "The machine is shared with other engineers' builds; RSS and key counts "
              "do not depend on that, the fill's duration does.", ""]
    return lines


def _first_argv(raw):
    """(system, argv) of the first server of each system the run started."""
    seen = {}
    for rec in raw["fills"] + raw["idle"]:
        if rec.get("argv") and rec["system"] not in seen:
            seen[rec["system"]] = rec["argv"]
    return [(s, seen[s]) for s in SYSTEMS if s in seen]


def _settings(raw, extra=()):
    """The settings section; `extra` lines go before the pointer to the method."""
    cfg = raw["config"]
    return [
        "## Settings", "",
        "- Servers, all on 127.0.0.1, each started fresh for every fill (value size "
        "and budget), all with the same budget; the first fill's command lines:",
    ] + ["  - %s: `%s`" % (s, " ".join(argv)) for s, argv in _first_argv(raw)] + [
        "- Furrballs' extra flags (`--furrballs_flags`): `%s`." % (
            cfg["furrballs_flags"] or "none, its defaults"),
        "- Keys: %d bytes, distinct (`user` + zero-padded number); every value "
        "carries its key's number in its first 8 bytes." % cfg["key_bytes"],
        "- Fill (`//bench/memory:fill_bench`, %d threads, %d operations per request "
        "batch): batches of budget / (key + value) inserts; after each quarter batch "
        "the server's RSS (VmRSS) and resident key count (Redis DBSIZE, memcached "
        "curr_items, Furrballs Stats live_keys over all nodes) are sampled; the fill "
        "stops when a whole batch grew the resident count by less than %.1f%% "
        "(at most %d batches, %d s)." % (
            cfg["threads"], cfg["depth"], 100 * cfg["min_growth"], cfg["max_batches"],
            cfg["max_seconds"]),
        "- Read-back: %d distinct keys drawn from the last max(resident, sample) keys "
        "inserted (the ones an LRU would keep); a hit whose value carries another "
        "key's number or has another length is a wrong value and fails the run." %
        cfg["sample_keys"],
        "- Idle RSS: VmRSS right after the server accepts connections, no data.",
        "- Overhead per key: (RSS − idle RSS − resident × (key + value bytes)) / "
        "resident, and (RSS − resident × (key + value bytes)) / resident, for every "
        "server. The first is negative when the idle footprint already held memory "
        "the data then used (Furrballs pre-faults its value pages and tables). "
        "\"Engine's metadata\" is the figure Furrballs prints at start-up (`metadata "
        "N MiB`, rounded down to MiB) plus the value-page bytes its key table's "
        "growth took out of service since (start-up pages less the Stats' "
        "memory_limit_bytes after the fill), over the resident keys; its Stats RPC "
        "has no metadata figure.",
    ] + list(extra) + ["- Method: docs/memory_bench.md.", ""]


def render_fill(raw):
    cfg = raw["config"]
    lines = _header(raw, "Memory fill test: Furrballs vs Redis vs memcached, %d MiB budget"
                    % cfg["budget_mb"])
    lines += _settings(raw)
    by_value = _fills_by_value(raw)
    ratios = {v: keys_per_mib_ratios(figs, v) for v, (figs, _) in by_value.items()}

    lines += ["## Goals of issue 13 measured here", ""]
    goal_lines = []
    for v in sorted(by_value):
        fb = by_value[v][0].get("furrballs")
        if fb is None:
            continue
        goal_lines.append(
            "- Goal 1, RSS ≤ 1.05 × budget + 24 MiB at every sample, %d B values: %s "
            "(max RSS / budget %s)." % (v, _yes(fb["rss_bound_held"]),
                                        _num(fb["max_rss_over_budget"], "%.2f")))
    for i in raw["idle"]:
        if i["system"] == "furrballs" and not i.get("error"):
            goal_lines.append(
                "- Goal 2, idle RSS at --memory_mb=%d ≤ 16 MiB: %s (%s MiB)." % (
                    i["budget_mb"], _yes(i["rss_bytes"] <= IDLE_GOAL_BYTES),
                    _mib(i["rss_bytes"])))
    for v in sorted(ratios):
        r = ratios[v]
        if r["goal"] is not None:
            goal_lines.append(
                "- Goal 3, keys per MiB of RSS ≥ %.1f× memcached's, %d B values: %s (%s×)."
                % (r["goal"], v, _yes(r["goal_met"]), _num(r["memcached"], "%.2f")))
    for v in sorted(by_value):
        fb = by_value[v][0].get("furrballs")
        if fb is None:
            continue
        figure = overhead_for_goal(fb)
        goal_lines.append(
            "- Goal 3's aim, ≤ %d B of metadata per resident key, %d B values: %s "
            "(engine's metadata figure %s B; by RSS %s B over idle, %s B in all)." % (
                OVERHEAD_AIM_BYTES, v,
                _yes(figure <= OVERHEAD_AIM_BYTES) if figure is not None else "not measurable",
                _num(fb["engine_metadata_per_key"], "%.0f"),
                _num(fb["overhead_per_key"], "%.0f"),
                _num(fb["rss_overhead_per_key"], "%.0f")))
    lines += goal_lines + [""]

    lines += ["## Keys per MiB of RSS: Furrballs over the peers", ""]
    lines += ratio_table(ratios) + [""]

    for v in sorted(by_value):
        figs, errors = by_value[v]
        lines += ["## %d B values" % v, ""]
        lines += fill_table(v, figs, errors) + [""]
        for s, e in sorted(errors.items()):
            lines.append("- %s did not run: %s" % (s, e))
        if errors:
            lines.append("")

    lines += ["## Idle RSS, no data", "",
              "| budget | %s |" % " | ".join(SYSTEMS), "|---|" + "---|" * len(SYSTEMS)]
    idle_rows = {}
    for i in raw["idle"]:
        idle_rows.setdefault(i["budget_mb"], {})[i["system"]] = (
            "did not start" if i.get("error") else _mib(i["rss_bytes"]))
    for f in raw["fills"]:
        if not f.get("error"):
            idle_rows.setdefault(f["budget_mb"], {}).setdefault(
                f["system"], _mib(f["idle_rss_bytes"]))
    for mb in sorted(idle_rows):
        lines.append("| %d MiB | %s |" % (
            mb, " | ".join(idle_rows[mb].get(s, "—") for s in SYSTEMS)))
    lines.append("")

    lines += _failure_section(raw)
    return "\n".join(lines) + "\n"


def render_small(raw):
    cfg = raw["config"]
    lines = _header(raw, "Memory fill test, small budgets: Furrballs vs memcached")
    lines += _settings(raw, [
        "- Small budgets (issue 13 goal 4): %d B values; the fill above is the Set-heavy "
        "load. Then a cache-aside load from one thread: Zipfian (θ = %.2f, scrambled) reads "
        "over a key space of 3 × budget / (key + value) keys, a Set after every miss, "
        "%d operations per batch; %d reads of warm-up (seed %d) then %d measured reads "
        "(seed %d), the same key sequence for every server." % (
            cfg["small_value_bytes"], cfg["zipf_theta"], cfg["depth"],
            cfg["cache_aside_ops"], cfg["seed"], cfg["cache_aside_ops"], cfg["seed"] + 1),
        "- Live data / budget: Furrballs' Stats live_bytes (value bytes of live entries, "
        "summed over nodes) over the budget, sampled every quarter batch; steady state "
        "is the fill's last batch, judged on its mean."])
    small = {}
    by_budget = {}
    for f in raw["fills"]:
        by_budget.setdefault(f["budget_mb"], []).append(f)
    for mb, fills in sorted(by_budget.items()):
        results = {f["system"]: f["result"] for f in fills if not f.get("error")}
        errors = {f["system"]: f["error"] for f in fills if f.get("error")}
        small[mb] = small_figures(results.get("furrballs"), results.get("memcached"),
                                  errors.get("furrballs"))
    lines += ["## Goal 4", ""] + small_table(small) + [""]
    for mb, fills in sorted(by_budget.items()):
        figs = {f["system"]: fill_figures(f["result"], f["idle_rss_bytes"],
                                          f.get("metadata_bytes"),
                                          f.get("start_page_bytes"))
                for f in fills if not f.get("error")}
        errors = {f["system"]: f["error"] for f in fills if f.get("error")}
        lines += ["## %d MiB budget, the fill" % mb, ""]
        lines += fill_table(cfg["small_value_bytes"], figs, errors, SMALL_SYSTEMS) + [""]
        for s, e in sorted(errors.items()):
            lines.append("- %s did not run: %s" % (s, e))
        if errors:
            lines.append("")
    lines += _failure_section(raw)
    return "\n".join(lines) + "\n"


def _failure_section(raw):
    labelled = [("%s %d MiB %d B" % (f["system"], f["budget_mb"], f["value_bytes"]),
                 f["result"]) for f in raw["fills"] if not f.get("error")]
    bad = failures(labelled)
    lines = ["## Verdict", ""]
    if bad:
        lines += ["**The run failed:**", ""] + ["- " + b for b in bad]
    else:
        lines.append("Every read-back returned only its own key's values (no wrong value, "
                     "no failed read).")
    return lines + [""]


def render(raw):
    return render_small(raw) if raw["mode"] == "small" else render_fill(raw)
