"""The files of one analysed FWQ run: summary.txt (findings, kernel side by side), cores.tsv, spectrum.png.

Written by ``mpiregress noise analyze`` and by the FWQ check (checks/fwq.py) alike.
"""
from __future__ import annotations

import gzip
import shutil
from collections.abc import Sequence
from pathlib import Path

from mpiregress.errors import InputError
from mpiregress.families.noise import analysis, findings, rtla
from mpiregress.families.noise.known import KnownSource
from mpiregress.families.pyplot import agg_pyplot


def core_table(run: analysis.RunNoise) -> str:
    """Tab-separated per-core table (one header line)."""
    header = ("node\trank\tcpu\tbound\tnominal_us\tlost_fraction\tmax_detour_us\tdetours_per_s\tthreshold_us\t"
              "periods_hz\tprominence\tperiods_detour_us\ttick_detour_us")
    lines = [header]
    for node in run.nodes:
        for c in node.cores:
            lines.append(
                f"{node.node}\t{c.rank}\t{c.cpu}\t{'yes' if c.bound and not c.migrated else 'no'}\t"
                f"{c.nominal_us:.3f}\t{c.lost_fraction:.5f}\t{c.max_detour_us:.1f}\t{c.detours_per_s:.1f}\t"
                f"{c.threshold_us:.2f}\t{','.join(f'{p.frequency_hz:g}' for p in c.periods) or '-'}\t"
                f"{','.join(f'{p.prominence:g}' for p in c.periods) or '-'}\t"
                f"{','.join(f'{p.detour_us:g}' for p in c.periods) or '-'}\t"
                f"{'-' if c.tick_detour_us is None else f'{c.tick_detour_us:g}'}")
    return "\n".join(lines) + "\n"


def kernel_side_by_side(run: analysis.RunNoise, rtla_text: str | None, reason: str | None = None) -> list[str]:
    """FWQ's and rtla's lost share per CPU, or the sentence why the kernel was not asked.

    ``reason``: why rtla did not run where FWQ ran (a compute node); default: why not here.
    """
    if rtla_text is None:
        reason = reason or rtla.available()
        return [f"kernel cross-check (rtla osnoise): not run: {reason or 'no --rtla-output given'}."]
    rows = {r.cpu: r for r in rtla.parse_top(rtla_text)}
    if not rows:
        raise InputError("the --rtla-output file holds no `rtla osnoise top` rows")
    out = ["kernel cross-check: cpu, FWQ lost share, rtla noise share, FWQ largest detour us, rtla max single us"]
    for node in run.nodes:
        for c in node.cores:
            k = rows.get(c.cpu)
            kernel = f"{k.lost_fraction:.4%}\t{k.max_single_us}" if k else "not traced\t-"
            out.append(f"{node.node} cpu {c.cpu}\t{c.lost_fraction:.4%}\t{kernel.split(chr(9))[0]}\t"
                       f"{c.max_detour_us:.1f}\t{kernel.split(chr(9))[1]}")
    return out


def spectrum_figure(run: analysis.RunNoise, path: Path, max_hz: float = 1000.0) -> None:
    """One panel per core (the first 8): power of the lost-time signal, periods marked."""
    plt = agg_pyplot()
    cores = [c for n in run.nodes for c in n.cores][:8]
    fig, axes = plt.subplots(len(cores), 1, figsize=(8, 1.8 * len(cores) + 0.6), squeeze=False, sharex=True)
    for ax, core in zip(axes[:, 0], cores):
        freqs, power = core.spectrum
        keep = (freqs > 0) & (freqs <= max_hz)
        if keep.any():
            ax.semilogy(freqs[keep], power[keep] + 1e-30, lw=0.6)
        for p in core.periods:
            if p.frequency_hz <= max_hz:
                ax.axvline(p.frequency_hz, color="red", lw=0.8, ls="--")
                ax.annotate(f"{p.frequency_hz:g} Hz", (p.frequency_hz, 0.9), xycoords=("data", "axes fraction"),
                            color="red", fontsize=8)
        ax.set_ylabel(f"{core.node}\ncore {core.cpu}", fontsize=8)
    axes[-1, 0].set_xlabel("frequency (Hz) of the time lost by FWQ")
    fig.suptitle("FWQ lost-time spectrum per core")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write(run: analysis.RunNoise, out: Path, rtla_text: str | None, rtla_reason: str | None = None,
          known: Sequence[KnownSource] = ()) -> list[str]:
    """Write summary.txt, cores.tsv and spectrum.png into ``out``; return the summary's lines (the system's
    ``known`` sources said as such)."""
    out.mkdir(parents=True, exist_ok=True)
    lines = findings.sentences(run, known) + kernel_side_by_side(run, rtla_text, rtla_reason)
    (out / "summary.txt").write_text("\n".join(lines) + "\n")
    (out / "cores.tsv").write_text(core_table(run))
    spectrum_figure(run, out / "spectrum.png")
    return lines


def keep_raw(fwq: Path, out: Path) -> Path:
    """A gzip copy of the raw FWQ file in ``out`` (fwqfile.read reads it as it is): the run's artifacts
    keep what was measured, and the analysis can be re-run on it."""
    out.mkdir(parents=True, exist_ok=True)
    kept = out / (fwq.name + ".gz")
    with open(fwq, "rb") as source, gzip.open(kept, "wb", compresslevel=6) as target:
        shutil.copyfileobj(source, target)
    return kept
