"""PNG plots of bench/run.py's results (matplotlib, part of the ``bench`` extra).

    python bench/plot.py bench/results/latest.json      # redraw the plots of a saved run

* ``scaling.png``: time per node and bytes per node against graph size (chains and random
  DAGs), one line per system; flat lines = linear total cost.
* ``ratios.png``: per workload, cgrad's time divided by the NumPy floor's, torch's and HIPS
  autograd's (log scale; below 1 = cgrad is faster).
* ``soak.png``: RSS against step of each memory soak scenario (bench/soak.py), the warm-up
  shaded and the +-2 % band around the RSS at its end drawn (flat = no leak).
"""
import json
import os
import sys

COLORS = {"cgrad": "#d62728", "numpy": "#7f7f7f", "torch": "#1f77b4", "hips": "#2ca02c"}
LABELS = {"cgrad": "cgrad", "numpy": "NumPy floor", "torch": "torch", "hips": "HIPS autograd"}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_scaling(res, path, title_note=""):
    plt = _plt()
    kinds = res["kinds"]
    fig, axes = plt.subplots(2, len(kinds), figsize=(5.2 * len(kinds), 7.5), squeeze=False)
    for j, k in enumerate(kinds):
        for s in res["systems"]:
            d = res["results"][k].get(s, {})
            ns = sorted(int(n) for n in d)
            if not ns:
                continue
            kw = dict(color=COLORS.get(s), marker="o", label=LABELS.get(s, s))
            axes[0][j].plot(ns, [d[str(n)].get("cpu_us_per_node", d[str(n)]["us_per_node"])
                                 for n in ns], **kw)
            axes[1][j].plot(ns, [d[str(n)]["bytes_per_node"] for n in ns], **kw)
        for sk in res.get("skipped", []):
            if sk["kind"] == k:
                axes[0][j].annotate(f"{LABELS.get(sk['system'], sk['system'])}: "
                                    f"{sk['n']:,} skipped", xy=(0.02, 0.02),
                                    xycoords="axes fraction", fontsize=7)
        shape = ("chain: y*1.0001, y+0.5" if k == "chain" else
                 "random DAG: v[i] = (v[i-1] + v[b_i]) * 0.5")
        axes[0][j].set_title(f"{shape}\ntime per node (build + backward)", fontsize=10)
        axes[1][j].set_title("bytes per node (RSS growth while building)", fontsize=10)
        for i in (0, 1):
            axes[i][j].set_xscale("log")
            axes[i][j].set_xlabel("graph nodes")
            axes[i][j].grid(True, which="both", alpha=0.3)
        axes[0][j].set_yscale("log")
        axes[0][j].set_ylabel("us per node (median, process CPU time)")
        axes[1][j].set_ylabel("bytes per node")
        axes[1][j].set_ylim(bottom=0)
    axes[0][0].legend(fontsize=8)
    fig.suptitle("cgrad scaling: flat lines = linear total cost" + title_note, fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_ratios(rows, path, title_note=""):
    """rows: bench/run.py's summary rows (dicts with 'label' and 'ratios' {system: x})."""
    plt = _plt()
    rows = [r for r in rows if r.get("kind", "time") == "time"
            and any(v for v in r["ratios"].values())]
    if not rows:
        return False
    systems = [s for s in ("numpy", "torch", "hips") if any(r["ratios"].get(s) for r in rows)]
    h = 0.8 / max(1, len(systems))
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.6))
    for i, s in enumerate(systems):
        ys, xs = [], []
        for k, r in enumerate(rows):
            v = r["ratios"].get(s)
            if v:
                ys.append(k + (i - (len(systems) - 1) / 2) * h)
                xs.append(v)
        ax.barh(ys, xs, height=h, color=COLORS[s], label=f"cgrad / {LABELS[s]}")
        for y, x in zip(ys, xs):
            ax.annotate(f"{x:.2f}", (x, y), xytext=(2, 0), textcoords="offset points",
                        va="center", fontsize=6)
    ax.axvline(1.0, color="black", lw=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["label"] for r in rows], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time ratio (median / median, same run); < 1: cgrad is faster")
    ax.grid(True, axis="x", which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title("cgrad against the NumPy floor, torch and HIPS autograd" + title_note,
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_soak(res, path, machine=None):
    """res: bench/soak.py's run() result. One panel per scenario: RSS after gc.collect()
    (the criterion) and before it, against the step. -> False when there is nothing to plot."""
    scen = {k: r for k, r in res["scenarios"].items() if "samples" in r}
    if not scen:
        return False
    plt = _plt()
    ncol = 2 if len(scen) > 1 else 1
    nrow = -(-len(scen) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(6.2 * ncol, 3.4 * nrow), squeeze=False)
    for ax, (name, r) in zip(axes.flat, scen.items()):
        s, x = r["samples"], r["result"]
        steps = [p["step"] for p in s]
        ax.axvspan(0, x["warmup"], color="#dddddd", lw=0, label="warm-up")
        lo, hi = x["rss_warm"] * 0.98 / 2 ** 20, x["rss_warm"] * 1.02 / 2 ** 20
        ax.axhspan(lo, hi, color="#2ca02c", alpha=0.12, lw=0, label="+-2 % of warm-up end")
        color = COLORS["torch"] if name == "d" else COLORS["cgrad"]
        if any(p["rss_run"] != p["rss"] for p in s):
            ax.plot(steps, [p["rss_run"] / 2 ** 20 for p in s], color=color, lw=0.8,
                    alpha=0.35, label="before gc.collect()")
        ax.plot(steps, [p["rss"] / 2 ** 20 for p in s], color=color, lw=1.4,
                label="after gc.collect()" if r.get("collect", True) else "RSS")
        ax.set_title(f"{name} {r['label']}\n{x['growth_pct']:+.2f} % after warm-up, "
                     f"{x['bytes_per_step']:+.2f} B/{r['unit']}", fontsize=9)
        ax.set_xlabel(f"{r['unit']}s")
        ax.set_ylabel("RSS (MB)")
        ax.set_xlim(0, steps[-1])
        ymin = min(min(min(p["rss"], p["rss_run"]) for p in s), x["rss_warm"] * 0.98) / 2 ** 20
        ymax = max(max(p["rss_run"] for p in s), x["rss_warm"] * 1.02) / 2 ** 20
        pad = 0.05 * (ymax - ymin)
        ax.set_ylim(ymin - pad, ymax + pad)
        ax.grid(True, alpha=0.3)
        ax.ticklabel_format(axis="x", style="plain")
        ax.legend(fontsize=7, loc="lower right")
    for ax in list(axes.flat)[len(scen):]:
        ax.set_visible(False)
    note = ""
    if machine:
        note = (f" ({machine.get('date', '')}; python {machine.get('python')}, numpy "
                f"{machine.get('numpy')}, git {machine.get('git', '?')})")
    fig.suptitle("cgrad memory soak: RSS against step (flat = nothing leaks)" + note,
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def plot_all(data, outdir):
    """data: the JSON bench/run.py writes. -> list of files written (empty without
    matplotlib)."""
    try:
        _plt()
    except ImportError:
        return []
    la = data.get("machine", {}).get("loadavg_start")
    note = f" (loadavg {la[0]:.1f})" if la else ""
    files = []
    sc = data.get("results", {}).get("scaling")
    if sc and any(sc["results"][k][s] for k in sc["kinds"] for s in sc["systems"]):
        p = os.path.join(outdir, "scaling.png")
        plot_scaling(sc, p, note)
        files.append(p)
    so = data.get("results", {}).get("soak")
    if so and "scenarios" in so:
        p = os.path.join(outdir, "soak.png")
        if plot_soak(so, p, data.get("machine")):
            files.append(p)
    if data.get("summary"):
        p = os.path.join(outdir, "ratios.png")
        if plot_ratios(data["summary"], p, note):
            files.append(p)
    return files


if __name__ == "__main__":
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(
        os.path.abspath(__file__)), "results", "latest.json")
    with open(src) as f:
        d = json.load(f)
    for p in plot_all(d, os.path.dirname(os.path.abspath(src))):
        print("wrote", p)
