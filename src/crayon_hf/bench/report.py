"""Writing results: a markdown table, a JSON file with the machine and library versions, PNG plots."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from pathlib import Path

from crayon_hf.bench.subjects import json_safe, versions

# Colours by library: crayon-hf stands out, the references are grey, the optional ones muted.
COLORS = {"crayon-hf": "#d9534f", "tokenizers": "#8c8c8c", "tiktoken": "#5f5f5f", "tokie": "#5b8cc0",
          "fastokens": "#7fb77e", "CrayonTokenizer": "#d9534f", "transformers": "#8c8c8c"}


def machine(load_before: tuple[float, float, float] | None = None) -> dict:
    """The machine, the library versions, and the load average before the run (`load_before`,
    from os.getloadavg() when the run started) and now."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    memory = None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError, AttributeError):
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"date": time.strftime("%Y-%m-%d"), "cpu": cpu, "cores": usable, "memory_gib": memory,
            "python": platform.python_version(), "platform": platform.platform(), "versions": versions(),
            "load": {"before": list(load_before) if load_before else None, "after": list(load_average() or ()) or None}}


def load_average() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except (OSError, AttributeError):  # not on every platform
        return None


# A run is called loaded when other work kept at least half the usable cores busy before it started:
# the single-thread passes are pinned to one core, but batch passes, cold loads and the OS share them.
LOADED_PER_CORE = 0.5


def load_warning(info: dict) -> str | None:
    """A warning when the machine was busy before the run (the 1-minute load average), else None."""
    before = (info.get("load") or {}).get("before")
    cores = info.get("cores") or 1
    if not before or before[0] < LOADED_PER_CORE * cores:
        return None
    return (f"the machine was loaded: 1-minute load average {before[0]:.1f} on {cores} usable cores before the run, "
            "so other processes competed for the cores and speeds are noisy; rerun on an idle machine to compare")


def describe(info: dict) -> str:
    mem = f", {info['memory_gib']:.0f} GiB" if info.get("memory_gib") else ""
    return f"{info['date']}, {info['cpu']} ({info['cores']} cores{mem}), Python {info['python']}"


def describe_load(info: dict) -> str:
    load = info.get("load") or {}
    if not load.get("before"):
        return "load average not available"
    text = f"load average {load['before'][0]:.1f} before the run"
    return text + (" (loaded: speeds are noisy)" if load_warning(info) else " (idle enough)")


def _ref_label(result: dict) -> str:
    return next(k for k, v in result["libraries"].items() if v.get("role") == "reference")


def _labels(result: dict) -> list[str]:
    """Libraries that ran, crayon-hf first, then the reference, then the optional ones."""
    order = {"crayon": 0, "reference": 1, "optional": 2}
    ran = [k for k, v in result["libraries"].items() if v.get("status") == "ok"]
    return sorted(ran, key=lambda k: order[result["libraries"][k]["role"]])


def _mib(entry: dict | None, key: str = "encode_mib_s") -> str:
    if not entry or key not in entry:
        return "-"
    s = entry[key]
    return f"{s['median']:.1f} ({s['min']:.1f}-{s['max']:.1f})"


def _ratio(a: dict | None, b: dict | None, key: str = "encode_mib_s") -> float | None:
    if not a or not b or key not in a or key not in b or not b[key]["median"]:
        return None
    return a[key]["median"] / b[key]["median"]


def _fmt_ratio(x: float | None) -> str:
    return "-" if x is None else f"**{x:.1f}x**"


def _pct(entry: dict | None) -> str:
    return "-" if not entry or "parity" not in entry else f"{100 * entry['parity']:.1f}%"


def summary_row(result: dict) -> dict:
    """Per target: worst parity, encode/decode ratios over corpora (median, min, max), batch ratio."""
    ref = _ref_label(result)
    enc, dec, parity = [], [], []
    for row in result["corpora"].values():
        libs = row["libraries"]
        ours = libs.get("crayon-hf")
        if not ours or "encode_mib_s" not in ours:
            continue
        parity.append(ours.get("parity", 0.0))
        if (x := _ratio(ours, libs.get(ref))) is not None:
            enc.append(x)
        if (x := _ratio(ours, libs.get(ref), "decode_mib_s")) is not None:
            dec.append(x)
    batch = result.get("batch", {}).get("libraries", {})
    cold = result.get("cold", {})
    tf = result.get("transformers") or {}
    tf_ratio = None
    if "libraries" in tf:
        t = tf["libraries"]
        tf_ratio = t["transformers"]["ms"]["median"] / t["CrayonTokenizer"]["ms"]["median"]
    import statistics

    def stats(xs: list[float]) -> dict | None:
        return {"median": statistics.median(xs), "min": min(xs), "max": max(xs)} if xs else None

    return {
        "target": result["target"], "reference": ref, "backend": result.get("backend"),
        "parity": min(parity) if parity else None,
        "encode_ratio": stats(enc), "decode_ratio": stats(dec),
        "batch_ratio": _ratio(batch.get("crayon-hf"), batch.get(ref)),
        "scaling": result.get("batch", {}).get("crayon_scaling"),
        "transformers_ratio": tf_ratio,
        "transformers_parity": tf.get("libraries", {}).get("CrayonTokenizer", {}).get("parity"),
        "cold_ms": {k: cold.get(k, {}).get("cold_load_ms", {}).get("median") for k in ("crayon-hf", ref)},
        "cartridge_mb": result["cartridge_bytes"] / 1e6 if result.get("cartridge_bytes") else None,
    }


def summary_table(results: list[dict]) -> list[str]:
    lines = [
        "| vocabulary | reference | parity | encode, 1 thread (median, range over corpora) | batch, N threads "
        "| decode | transformers call | cold load ms (ref / crayon) | cartridge MB |",
        "|---|---|---:|---|---:|---:|---:|---|---:|",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['target']} | - | not benchmarked: {r['error']} | | | | | | |")
            continue
        s = summary_row(r)
        e, d = s["encode_ratio"], s["decode_ratio"]
        enc = f"**{e['median']:.1f}x** ({e['min']:.1f}-{e['max']:.1f})" if e else "-"
        dec = f"{d['median']:.1f}x" if d else "-"
        tf = f"{s['transformers_ratio']:.1f}x" if s["transformers_ratio"] else "-"
        cold = s["cold_ms"]
        cold_s = (f"{cold[s['reference']]:.0f} / {cold['crayon-hf']:.0f}"
                  if cold.get("crayon-hf") and cold.get(s["reference"]) else "-")
        parity = "-" if s["parity"] is None else f"{100 * s['parity']:.1f}%"
        if s["transformers_parity"] is not None and s["transformers_parity"] < 1:
            parity += f" (transformers {100 * s['transformers_parity']:.1f}%)"
        cart = f"{s['cartridge_mb']:.1f}" if s["cartridge_mb"] else "-"
        batch = f"{s['batch_ratio']:.1f}x" if s["batch_ratio"] else "-"
        lines.append(f"| {s['target']} | {s['reference']} | {parity} | {enc} | {batch} | {dec} | {tf} | {cold_s} | {cart} |")
    return lines


def _mismatch_lines(label: str, corpus: str, m: dict) -> list[str]:
    pieces = lambda toks: " ".join(f"{t}:{p!r}" for t, p in toks)  # noqa: E731
    return [
        f"- **{label}** on {corpus}: document {m['doc']}, token {m['token']} ({m['differs_in']} differ), "
        f"text around it: `{m['context']!r}`",
        f"  - reference: {pieces(m['reference'])}",
        f"  - {label}: {pieces(m['got'])}",
    ]


def target_markdown(r: dict) -> list[str]:
    if "error" in r:
        return [f"## {r['target']}", "", f"Not benchmarked: {r['error']}", ""]
    labels = _labels(r)
    ref = _ref_label(r)
    lines = [f"## {r['target']}", "", f"`{r['source']}`, crayon-hf backend: {r.get('backend')}.", ""]
    skipped = [f"{k}: {v['status']}" for k, v in r["libraries"].items() if v.get("status") != "ok"]
    if skipped:
        lines += ["Not run: " + "; ".join(skipped) + ".", ""]
    head = "| corpus | MiB | " + " | ".join(f"{x} MiB/s" for x in labels) + " | crayon-hf / " + ref
    head += " | Mtokens/s crayon-hf / " + ref
    head += " | parity " + " / ".join(x for x in labels if x != ref) + " | decode MiB/s " + " / ".join(labels) + " |"
    lines += [head, "|---|---:|" + "---:|" * len(labels) + "---:|---:|---|---|"]
    mismatches = []
    for corpus, row in r["corpora"].items():
        libs = row["libraries"]
        cells = [_mib(libs.get(x)) for x in labels]
        parity = " / ".join(_pct(libs.get(x)) for x in labels if x != ref)
        decode = " / ".join(f"{libs[x]['decode_mib_s']['median']:.0f}" if "decode_mib_s" in libs.get(x, {}) else "-"
                            for x in labels)
        tokens = " / ".join(f"{libs[x]['tokens_s'] / 1e6:.2f}" if "tokens_s" in libs.get(x, {}) else "-"
                            for x in ("crayon-hf", ref))
        lines.append(f"| {corpus} | {row['bytes'] / 2**20:.2f} | " + " | ".join(cells)
                     + f" | {_fmt_ratio(_ratio(libs.get('crayon-hf'), libs.get(ref)))} | {tokens} | {parity} | {decode} |")
        for x in labels:
            if (libs.get(x) or {}).get("mismatch"):
                mismatches += _mismatch_lines(x, corpus, libs[x]["mismatch"])
            if (libs.get(x) or {}).get("decode_error"):
                mismatches.append(f"- **{x}** could not decode its ids on {corpus}: {libs[x]['decode_error']}")
    b = r.get("batch")
    if b:
        rep = " (the corpus was too small for separate batch text: repeated, caches warm)" if b["repeated_text"] else ""
        lines += ["", f"Batch: {b['docs']} documents of {b['corpus']} ({b['bytes'] / 2**20:.1f} MiB) in "
                  f"{b['passes']} passes, {b['threads']} threads{rep}: "
                  + ", ".join(f"{k} {_mib(v)} MiB/s ({_pct(v) if k != ref else 'reference'})"
                              for k, v in b["libraries"].items()) + "."]
        if b.get("crayon_scaling"):
            lines[-1] += f" crayon-hf on {b['threads']} threads: {b['crayon_scaling']:.2f}x its single-thread speed."
    tf = r.get("transformers")
    if tf and "libraries" in tf:
        t = tf["libraries"]
        lines += ["", f"transformers face ({tf['class']}): `{tf['call']}` on {tf['batch_docs']} documents, "
                  f"{tf['passes']} passes: stock {t['transformers']['ms']['median']:.1f} ms, CrayonTokenizer "
                  f"{t['CrayonTokenizer']['ms']['median']:.1f} ms "
                  f"({t['transformers']['ms']['median'] / t['CrayonTokenizer']['ms']['median']:.1f}x), "
                  f"identical rows {100 * t['CrayonTokenizer']['parity']:.1f}%."]
        if t["CrayonTokenizer"].get("mismatch"):
            mismatches.append(f"- **CrayonTokenizer**: first differing row {t['CrayonTokenizer']['mismatch']}")
    elif tf:
        lines += ["", f"transformers face: {tf['status']}."]
    cold = r.get("cold") or {}
    if cold:
        cells = []
        for k, v in cold.items():
            if "cold_load_ms" not in v:
                cells.append(f"{k}: {v['status']}")
                continue
            mem = f", peak RSS {v['rss_load_mib']:.0f} MiB loaded" if v.get("rss_load_mib") else ""
            mem += f" / {v['rss_peak_mib']:.0f} MiB after encoding" if v.get("rss_peak_mib") else ""
            cells.append(f"{k} {v['cold_load_ms']['median']:.0f} ms{mem}")
        lines += ["", "Fresh interpreter (import + load, median): " + "; ".join(cells) + "."]
    sizes = []
    if r.get("source_bytes"):
        sizes.append(f"source {r['source_bytes'] / 1e6:.1f} MB")
    if r.get("cartridge_bytes"):
        sizes.append(f"cartridge {r['cartridge_bytes'] / 1e6:.1f} MB")
    if sizes:
        lines += ["", "Sizes: " + ", ".join(sizes) + "."]
    if mismatches:
        lines += ["", "First mismatches and failures:", ""] + mismatches
    return lines + [""]


METHOD = (
    "Single thread: the process pinned to one core, one long-lived instance per library, every pass over "
    "documents no library has seen before (word caches make repeated text meaningless), libraries taking turns "
    "in a rotating order, GC off in timed regions; median MiB/s over passes (min-max). Parity: documents whose "
    "ids equal the reference's (and offsets, where both report them). Batch: new documents every pass. "
    "Decode: each library decodes its own ids. Optional libraries (tokie, fastokens) are other fast tokenizers, "
    "shown for context when installed."
)


def markdown(results: list[dict], info: dict, title: str = "crayon-hf benchmark") -> str:
    v = info["versions"]
    lib_versions = ", ".join(f"{k} {x}" for k, x in v.items() if x)
    lines = [f"# {title}", "", f"{describe(info)}, {describe_load(info)}. {lib_versions}.", ""]
    if (warning := load_warning(info)):
        lines += [f"**Warning**: {warning}.", ""]
    lines += [METHOD, "", "## Summary", ""]
    lines += summary_table(results) + [""]
    for r in results:
        lines += target_markdown(r)
    return "\n".join(lines)


def write(out: Path, results: list[dict], info: dict, config: dict, stem: str = "bench",
          title: str = "crayon-hf benchmark") -> list[Path]:
    """Writes <stem>.json, <stem>.md and the plots; returns the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    path = out / f"{stem}.json"
    path.write_text(json.dumps(json_safe({"machine": info, "config": config, "results": results}), indent=1) + "\n")
    written.append(path)
    path = out / f"{stem}.md"
    path.write_text(markdown(results, info, title) + "\n")
    written.append(path)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        # Said, not skipped silently: on stderr and in the report.
        note = (f"matplotlib is not installed, so {stem}.png was not drawn: pip install matplotlib "
                "(or pip install 'crayon-hf[bench]')")
        print(f"crayon bench: {note}", file=sys.stderr, flush=True)
        with path.open("a") as f:
            f.write(f"\nNo plot: {note}.\n")
        return written
    written += plot(out, results, info, stem)
    return written


# ------------------------------------------------------------------------------------- plots
#
# What the tables say, drawn: crayon-hf's single-thread speed over the reference's and over each
# peer's, per corpus (bar: ratio of the medians, as in the table; whiskers: the lowest and highest
# ratio of a single pass, every pass being the same documents for every library), on a log axis
# where 1x is "as fast". Parity, batch, decode and the machine's load are written beside it.

PEER_COLORS = {"tiktoken": "#4d4d4d", "tokenizers": "#4d4d4d", "tokie": "#5b8cc0", "fastokens": "#6aa865"}


def pass_ratio(a: dict | None, b: dict | None) -> tuple[float, float, float] | None:
    """(ratio of median speeds, lowest and highest per-pass ratio) of a over b, or None."""
    if not a or not b or "encode_mib_s" not in a or "encode_mib_s" not in b or not b["encode_mib_s"]["median"]:
        return None
    sa, sb = a["encode_mib_s"], b["encode_mib_s"]
    mid = sa["median"] / sb["median"]
    pa, pb = a.get("encode_mib_s_passes"), b.get("encode_mib_s_passes")
    if pa and pb and len(pa) == len(pb):
        ratios = [x / y for x, y in zip(pa, pb) if y]
    else:  # results written before per-pass speeds were kept: the widest band the spreads allow
        ratios = [sa["min"] / sb["max"], sa["max"] / sb["min"]]
    return mid, min(ratios + [mid]), max(ratios + [mid])


def _compared(r: dict) -> list[str]:
    """The libraries crayon-hf is compared with: the reference first, then the peers that ran."""
    return [x for x in _labels(r) if x != "crayon-hf"]


def parity_line(r: dict) -> str:
    ref = _ref_label(r)
    worst = min(((row["libraries"].get("crayon-hf", {}).get("parity", 0.0), c) for c, row in r["corpora"].items()),
                default=(None, None))
    if worst[0] is None:
        return "parity: not measured"
    if worst[0] == 1.0:
        text = f"parity: 100% of documents identical to {ref} on every corpus"
    else:
        text = f"parity: NOT exact, {100 * worst[0]:.2f}% of documents identical to {ref} on {worst[1]} (worst)"
    peers = []
    for label in _compared(r)[1:]:
        vals = [row["libraries"].get(label, {}).get("parity") for row in r["corpora"].values()]
        vals = [v for v in vals if v is not None]
        if vals:
            peers.append(f"{label} {100 * min(vals):.1f}%")
    return text + (f" (peers, worst corpus: {', '.join(peers)})" if peers else "")


def _notes(r: dict) -> list[str]:
    ref = _ref_label(r)
    lines = [parity_line(r)]
    s = summary_row(r)
    extra = []
    if s["batch_ratio"]:
        b = r["batch"]
        extra.append(f"batch on {b['threads']} threads {s['batch_ratio']:.1f}x {ref}")
    if s["decode_ratio"]:
        extra.append(f"decode {s['decode_ratio']['median']:.1f}x (median over corpora)")
    if s["transformers_ratio"]:
        extra.append(f"transformers call {s['transformers_ratio']:.1f}x stock")
    if extra:
        lines.append("; ".join(extra))
    return lines


def _ratio_panel(ax, r: dict, fontsize: float = 9) -> None:
    import matplotlib.ticker as ticker

    corpora = list(r["corpora"])
    compared = _compared(r)
    height = 0.8 / max(1, len(compared))
    values: list[float] = []
    bars: list[tuple[float, float]] = []
    for j, label in enumerate(compared):
        for i, corpus in enumerate(corpora):
            libs = r["corpora"][corpus]["libraries"]
            ratio = pass_ratio(libs.get("crayon-hf"), libs.get(label))
            if ratio is None:
                continue
            mid, lo, hi = ratio
            y = i - 0.4 + height * (j + 0.5)
            ax.barh(y, mid, height=height * 0.9, left=0, color=PEER_COLORS.get(label, "#999999"),
                    label=f"vs {label}" if i == 0 or not values else None)
            ax.errorbar(mid, y, xerr=[[mid - lo], [hi - mid]], fmt="none", ecolor="black", elinewidth=0.9, capsize=2.5)
            bars.append((mid, y))
            values += [lo, hi]
    ax.set_xscale("log")
    low = min(values + [1.0]) / 1.6
    high = max(values + [1.0]) * 1.6
    ax.set_xlim(low, high)
    for mid, y in bars:  # the value at the end of its bar, inside it where the bar is long enough
        inside = mid / low > 2.2
        ax.text(mid / 1.03 if inside else mid * 1.03, y, f"{mid:.2f}x" if mid < 10 else f"{mid:.1f}x", va="center",
                ha="right" if inside else "left", fontsize=fontsize - 1, color="white" if inside else "black",
                fontweight="bold")
    ax.axvline(1, color="black", lw=1)
    ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda x, _: f"{x:g}x"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_yticks(range(len(corpora)))
    ax.set_yticklabels([f"{c.rsplit('.', 1)[0]}\n{r['corpora'][c]['bytes'] / 2**20:.2f} MiB" for c in corpora],
                       fontsize=fontsize - 1)
    ax.set_ylim(len(corpora) - 0.5, -0.5)  # first corpus on top
    ax.set_xlabel("crayon-hf speed / other library's speed (single thread, new text; log scale; 1x: as fast)",
                  fontsize=fontsize)
    ax.tick_params(axis="x", labelsize=fontsize - 1)
    ax.grid(axis="x", which="both", alpha=0.25)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, fontsize=fontsize - 1, frameon=False, loc="lower right")


def plot(out: Path, results: list[dict], info: dict, stem: str) -> list[Path]:
    """<stem>.png: per target, crayon-hf's speed-up over the reference and each peer per corpus,
    with per-pass min-max whiskers, parity and the rest in words; with several targets also
    <stem>_summary.png: the encode ratio to the reference per target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written: list[Path] = []
    results = [r for r in results if "error" not in r]
    if not results:
        return written
    warning = load_warning(info)
    cols = 1 if len(results) == 1 else min(len(results), 3)
    rows = (len(results) + cols - 1) // cols
    n_corpora = max(len(r["corpora"]) for r in results)
    n_compared = max(len(_compared(r)) for r in results)
    panel_h = 1.2 + n_corpora * (0.35 + 0.2 * n_compared)
    fig = plt.figure(figsize=(11 if cols == 1 else 6.5 * cols, panel_h * rows + 1.4), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for ax in axes.flat[len(results):]:
        ax.set_visible(False)
    import textwrap

    for ax, r in zip(axes.flat, results):
        _ratio_panel(ax, r, fontsize=10 if cols == 1 else 8)
        notes = "\n".join(textwrap.fill(line, 120 if cols == 1 else 85) for line in _notes(r))
        ax.set_title(f"{r['target']} (reference: {_ref_label(r)}, backend {r.get('backend')})\n{notes}",
                     fontsize=10 if cols == 1 else 8, loc="left")
    width = int((11 if cols == 1 else 6.5 * cols) * 13)  # characters that fit the figure at this font size
    lines = ["crayon-hf encode speed-up per corpus (bars: ratio of median speeds; whiskers: slowest and fastest pass)",
             f"{describe(info)}; {describe_load(info)}"]
    if warning:
        lines.append("WARNING: " + warning)
    fig.suptitle("\n".join(textwrap.fill(line, width) for line in lines), fontsize=10,
                 color="#a00000" if warning else "black")
    path = out / f"{stem}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)
    if len(results) > 1:
        written.append(plot_summary(out / f"{stem}_summary.png", results, info))
    return written


def plot_summary(path: Path, results: list[dict], info: dict) -> Path:
    """One bar per vocabulary: crayon-hf's single-thread speed over the reference's (median over
    corpora, whiskers from the slowest to the fastest corpus), tiktoken and tokenizers side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.patches as mpatches
    import matplotlib.pyplot as plt

    rows = [summary_row(r) for r in results if "error" not in r]
    rows = [s for s in rows if s["encode_ratio"]]
    fig, ax = plt.subplots(figsize=(max(8, 0.5 * len(rows) + 3), 5.5), layout="constrained")
    xs = range(len(rows))
    med = [s["encode_ratio"]["median"] for s in rows]
    lo = [m - s["encode_ratio"]["min"] for m, s in zip(med, rows)]
    hi = [s["encode_ratio"]["max"] - m for m, s in zip(med, rows)]
    colors = ["#4d4d4d" if s["reference"] == "tiktoken" else "#d9534f" for s in rows]
    ax.bar(xs, med, yerr=[lo, hi], color=colors, capsize=3, error_kw={"elinewidth": 0.8})
    for x, m, s in zip(xs, med, rows):
        exact = s["parity"] == 1.0
        ax.text(x, 0.3, f"{m:.1f}x" + ("" if exact else "\nNOT exact"), ha="center", fontsize=7,
                color="white" if exact else "yellow", rotation=90 if not exact else 0)
    ax.axhline(1, color="black", lw=0.8)
    ax.set_xticks(list(xs))
    ax.set_xticklabels([s["target"] for s in rows], rotation=60, ha="right", fontsize=8)
    ax.set_ylabel("crayon-hf speed / reference speed (single thread)")
    exact = all(s["parity"] == 1.0 for s in rows)
    import textwrap

    width = int(max(8, 0.5 * len(rows) + 3) * 12)
    lines = ["crayon-hf single-thread encode on new text, x times the reference (median over corpora, whiskers: "
             "slowest and fastest corpus)",
             "parity: every document identical to the reference on every corpus" if exact else
             "parity: NOT exact for some vocabularies (see suite.md)",
             f"{describe(info)}; {describe_load(info)}"]
    if (warning := load_warning(info)):
        lines.append("WARNING: " + warning)
    ax.set_title("\n".join(textwrap.fill(line, width) for line in lines), fontsize=9,
                 color="#a00000" if warning else "black")
    ax.set_ylim(0, max(s["encode_ratio"]["max"] for s in rows) * 1.15 if rows else 2)
    ax.legend(handles=[mpatches.Patch(color="#4d4d4d", label="vs tiktoken"),
                       mpatches.Patch(color="#d9534f", label="vs tokenizers")], fontsize=8, frameon=True,
              loc="upper left", ncols=2)
    ax.grid(axis="y", alpha=0.3)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
