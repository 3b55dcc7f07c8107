"""The one ReFrame base of every OSU-family check (pt2pt, coll; the project's own programs too).

What every check needs lives here, as in ReFrame's hpctestlib and the EESSI
test-suite: the binary from a build manifest (never a hard-coded path), the
microarchitecture guard before launch and again on every node of the allocation,
sanity through the OSU parser (crashed rank, SIGILL, no data row, failed
validation), the series the check measures, and ReFrame references for ReFrame's
own output. A family declares its parameters at the top and sets ``benchmark``,
``series_parameters`` and the launch in a short hook; it fills ``measured``.

The verdict is not ReFrame's: :mod:`mpiregress.verdict` judges every measured
series once, against the baselines files.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any, Optional

import reframe as rfm
from reframe.core.builtins import parameter, run_after, sanity_function, variable
from reframe.core.exceptions import SanityError
from reframe.core.launchers import LauncherWrapper

from . import manifest, microarch, osu_output, paths
from .reframe_report import NOT_APPLICABLE  # noqa: F401  (the families' "does not apply here" prefix)
from .errors import MpiRegressError
from .names import MEASURED_ITERATIONS, METHODS, WARMUP_ITERATIONS

GUARD_EXIT = 86  # the job script's exit code when the µarch guard refused the build



class OsuCheckBase(rfm.RunOnlyRegressionTest):
    """Build from a manifest, guard, run, parse; families add placement and launch."""

    build_method = parameter(list(METHODS))

    valid_systems = ['*']
    valid_prog_environs = ['+osu']
    exclusive_access = True
    time_limit = '10m'
    warmup = variable(int, value=WARMUP_ITERATIONS)
    iterations = variable(int, value=MEASURED_ITERATIONS)
    manifest_dir = variable(str, value=str(paths.manifest_dir()))
    baselines_dir = variable(str, value=str(paths.baselines_dir()))
    # The series this check measures (one metric; a sweep measures it at many sizes).
    benchmark = variable(str, value='')
    series_parameters = variable(dict, value={})
    # Filled in at setup or run time, kept in ReFrame's report for the results import.
    build_target = variable(str, value='')
    build_manifest = variable(str, value='')
    cpu_binding = variable(str, value='')
    skip_reason = variable(str, value='')    # ReFrame's report keeps no skip message
    nodes_used = variable(list, value=[])     # from inside the job: squeue may never see a short job run
    measured = variable(list, value=[])       # [{benchmark, parameters, metric, value}], see reframe_report
    conditions = variable(dict, value={})     # what the results should carry about how they were measured
    maintainers = ['mpiregress']

    # -- helpers for the families ----------------------------------------
    def skip_with(self, reason: str) -> None:
        self.skip_reason = reason
        self.skip(reason)

    def node_count(self) -> int:
        return int(self.current_partition.extras.get('num_nodes', 2))

    def site_launcher_options(self) -> list[str]:
        return list(self.current_partition.extras.get('launcher_options', []))

    def limit_step_time(self, scale: float = 1.0) -> None:
        """Wrap srun in ``timeout`` when the partition asks for a step time limit (a hung step ends)."""
        step_timeout = self.current_partition.extras.get('step_timeout')
        if step_timeout:
            seconds = max(60, int(step_timeout * scale * self.iterations / MEASURED_ITERATIONS))
            self.job.launcher = LauncherWrapper(self.job.launcher, 'timeout', ['-k', '10', str(seconds)])

    def record(self, parameters: dict[str, Any], value: float, metric: Optional[str] = None) -> None:
        self.measured.append({'benchmark': self.benchmark, 'parameters': parameters,
                              'metric': metric or self.metric, 'value': value})

    # -- build and guard ---------------------------------------------------
    @run_after('setup')
    def select_build(self):
        node_target = self.current_partition.processor.arch
        found = manifest.find(Path(self.manifest_dir), self.build_method)
        if not found:
            self.skip_with(f'no {self.build_method} build here: no manifest in {self.manifest_dir} '
                           f"(run 'mpiregress build --method {self.build_method}')")
        best = microarch.best_build([m.target for m in found], [node_target])
        if best is None:
            raise MpiRegressError('; '.join(microarch.refusal(m.target, node_target) for m in found))
        self.build = found[best]
        self.build_target = self.build.target
        self.build_manifest = self.build.path
        self.modules = list(self.build.env.get('modules', []))
        self.env_vars.update(self.build.env.get('env_vars', {}))

    def guard_commands(self, nodes: int) -> list[str]:
        """Job-script lines: the node names, each node's archspec target, and the guard's refusal."""
        python = shlex.quote(sys.executable)
        return list(self.build.env.get('setup', [])) + [
            'read -r MPIREGRESS_NODE0 MPIREGRESS_NODE1 <<< '
            '"$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd" ")"',
            f'mpiregress_targets=$(srun -N{nodes} -n{nodes} --ntasks-per-node=1 --mpi=none '
            f'{python} -m mpiregress node-target)',
            'echo "$mpiregress_targets"',
            f'{python} -m mpiregress guard --build-target {self.build.target} '
            f'--node-target "$(echo "$mpiregress_targets" | awk \'{{print $3}}\' | paste -sd,)" '
            f'|| exit {GUARD_EXIT}',
        ]

    # -- sanity ---------------------------------------------------------------
    def read_stage_file(self, name: str) -> str:
        path = os.path.join(self.stagedir, name)
        return open(path, errors='replace').read() if os.path.exists(path) else ''

    def _probed(self) -> list[list[str]]:
        return [line.split()[1:3] for line in self.read_stage_file(self.job.stdout).splitlines()
                if line.startswith('mpiregress-node-target ')]

    def node_targets(self) -> list[str]:
        return sorted({target for _, target in self._probed()})

    def verify_binding(self, stderr: str) -> Optional[str]:
        """A sentence when the binding obtained is not the one asked for; families override."""
        return None

    @sanity_function
    def assert_measured(self):
        out, err = self.read_stage_file(self.job.stdout), self.read_stage_file(self.job.stderr)
        self.nodes_used = sorted({node for node, _ in self._probed()})
        for line in err.splitlines():
            if line.startswith('refusing to run:'):
                raise SanityError(line)
        reason = osu_output.failure_reason(out + '\n' + err)
        if reason:
            if 'illegal instruction' in reason:
                reason += (f'; build target {self.build_target}, node target(s) '
                           f'{", ".join(self.node_targets()) or "unknown"}')
            raise SanityError(reason)
        try:
            parsed = osu_output.parse(out)
        except osu_output.OsuOutputError as err_:
            raise SanityError(str(err_)) from None
        mismatch = self.verify_binding(err)
        if mismatch:
            raise SanityError(mismatch)
        self.measured = []
        self.record_measurements(parsed)
        return True

    def record_measurements(self, parsed: osu_output.OsuOutput) -> None:
        """Turn the parsed OSU output into ``measured`` entries; families override."""
        raise NotImplementedError
