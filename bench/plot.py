"""PNG plots of bench/run.py's results (matplotlib, part of the ``bench`` extra).

    python bench/plot.py bench/results/latest.json      # redraw the plots of a saved run

* ``scaling.png``: time per node and bytes per node against graph size (chains and random
  DAGs), one line per system; flat lines = linear total cost.
* ``ratios.png``: per workload, cgrad's time divided by the NumPy floor's, torch's and HIPS
  autograd's (log scale; below 1 = cgrad is faster).
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
