"""The kernel's own view of noise: ``rtla osnoise top`` on the same cores, where the kernel allows it.

rtla needs root, a mounted tracefs and a kernel built with the osnoise tracer
(CONFIG_OSNOISE_TRACER). Where any is missing, ``available()`` says which in one
sentence and the caller skips; nothing is estimated in its place.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from mpiregress.errors import InfrastructureError, NotAvailableError

TRACEFS = (Path("/sys/kernel/tracing"), Path("/sys/kernel/debug/tracing"))

# One row of `rtla osnoise top` (times in us): CPU, #periods, runtime, noise, % CPU available,
# max noise, max single, HW, NMI, IRQ, softirq, thread.
_ROW = re.compile(r"^\s*(\d+)\s+#(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)"
                  r"\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$")


@dataclass(frozen=True)
class KernelNoise:
    """One CPU as the osnoise tracer saw it (us over the tracer's runtime)."""

    cpu: int
    runtime_us: int
    noise_us: int
    available_percent: float
    max_noise_us: int
    max_single_us: int
    hw: int
    nmi: int
    irq: int
    softirq: int
    thread: int

    @property
    def lost_fraction(self) -> float:
        return self.noise_us / self.runtime_us if self.runtime_us else 0.0


def available() -> str | None:
    """None when rtla osnoise can run here, else the one sentence why not."""
    if not shutil.which("rtla"):
        return "rtla is not installed (Debian package rtla)"
    if os.geteuid() != 0:
        return "rtla osnoise needs root"
    tracers = next((d / "available_tracers" for d in TRACEFS if (d / "available_tracers").exists()), None)
    if tracers is None:
        return "tracefs is not mounted (/sys/kernel/tracing), so the kernel's tracers cannot be reached"
    if "osnoise" not in tracers.read_text().split():
        return (f"this kernel ({os.uname().release}) has no osnoise tracer (CONFIG_OSNOISE_TRACER is not set; "
                f"{tracers} lists: {tracers.read_text().strip()})")
    return None


def parse_top(text: str) -> list[KernelNoise]:
    """Per-CPU rows of ``rtla osnoise top -q`` output."""
    rows = []
    for line in text.splitlines():
        m = _ROW.match(line)
        if m:
            v = m.groups()
            rows.append(KernelNoise(int(v[0]), int(v[2]), int(v[3]), float(v[4]), int(v[5]), int(v[6]),
                                    int(v[7]), int(v[8]), int(v[9]), int(v[10]), int(v[11])))
    return rows


def run_top(cpus: Sequence[int], seconds: int) -> list[KernelNoise]:
    """Run ``rtla osnoise top`` on ``cpus`` for ``seconds``; NotAvailableError where it cannot run."""
    reason = available()
    if reason:
        raise NotAvailableError(f"kernel cross-check skipped: {reason}")
    cmd = ["rtla", "osnoise", "top", "-q", "-c", ",".join(str(c) for c in cpus), "-d", f"{seconds}s"]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=seconds + 60)
    rows = parse_top(proc.stdout)
    if proc.returncode != 0 or not rows:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise InfrastructureError(f"rtla osnoise top failed (exit {proc.returncode}): "
                                  f"{detail[-1] if detail else 'no output'}")
    return rows
