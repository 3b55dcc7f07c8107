"""The one ReFrame base of every OSU-family check (pt2pt, coll; the project's own programs too).

What every check needs lives here, as in ReFrame's hpctestlib and the EESSI
test-suite: the binary from a build manifest (never a hard-coded path), the
microarchitecture guard before launch and again on every node of the allocation,
sanity through the OSU parser (crashed rank, SIGILL, no data row, failed
validation), the series the check measures, and ReFrame references for ReFrame's
own output. A family declares its parameters at the top and sets ``benchmark``,
``series_parameters`` and the launch in a short hook; it fills ``measured``.

The verdict is not ReFrame's: :mod:`mpiregress.verdict.band` judges every measured
series once, against the baselines files.
"""
from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import Any, Optional, Union

import reframe as rfm
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from mpiregress import paths
from mpiregress.errors import InputError, MpiRegressError
from mpiregress.families import osu_output
from mpiregress.families.noise import probe
from mpiregress.model import launch, manifest, microarch, topology
from mpiregress.model.names import MEASURED_ITERATIONS, METHODS, WARMUP_ITERATIONS
from mpiregress.run.reframe_report import NOT_APPLICABLE  # noqa: F401  (the families' "does not apply here" prefix)

GUARD_EXIT = 86  # the job script's exit code when the µarch guard refused the build
STEP_KILL_AFTER_S = 10  # a bounded step's SIGTERM-to-SIGKILL time
JOB_OVERHEAD_S = 120  # a job's time beside its benchmark step (guard, noise probe, start): limit_step_time



class OsuCheckBase(rfm.RunOnlyRegressionTest):
    """Build from a manifest, guard, run, parse; families add placement and launch."""

    build_method = parameter(list(METHODS))

    valid_systems = ['*']
    valid_prog_environs = ['+osu']
    exclusive_access = True
    time_limit = '10m'
    warmup = variable(int, value=WARMUP_ITERATIONS)
    # Measured iterations per step (0: the partition's ``osu_iterations`` for the check's metric, else 1000).
    iterations = variable(int, value=0)
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
    noise_probe = variable(bool, value=True)  # the FWQ probe after the benchmark (off for the noise checks)
    maintainers = ['mpiregress']

    @run_after('setup')
    def resolve_iterations(self) -> None:
        """The partition's iterations for this metric where the run asked for none: a slow link's 1 MiB
        bandwidth step moves 64 MiB per iteration (OSU's window), 21 s at 1000 over the local TCP."""
        if not self.iterations:
            per_metric = self.current_partition.extras.get('osu_iterations') or {}
            self.iterations = int(per_metric.get(getattr(self, 'metric', None), MEASURED_ITERATIONS))

    # -- helpers for the families ----------------------------------------
    def skip_with(self, reason: str) -> None:
        self.skip_reason = reason
        self.skip(reason)

    def node_count(self) -> int:
        return int(self.current_partition.extras.get('num_nodes', 2))

    def site_launcher_options(self) -> list[str]:
        return list(self.current_partition.extras.get('launcher_options', []))

    def limit_step_time(self, scale: float = 1.0, marked_ranks: int = 0) -> None:
        """Wrap srun in ``timeout`` when the partition asks for a step time limit (a hung step ends).

        The partition's ``step_timeout`` is seconds for the default warm-up plus measured iterations;
        a step gets its share for the iterations it runs, warm-up included (OSU runs both at every
        size: with few measured iterations the warm-up is most of the step), times ``scale`` (a sweep
        runs many sizes). The job's time limit grows to hold the step when it would not. A step whose
        ``marked_ranks`` mark their exit (launch.Step) is bounded by the step watcher instead when the
        partition names ``step_end_grace``: srun then ends that long after its last rank.
        """
        step_timeout = self.current_partition.extras.get('step_timeout')
        if step_timeout:
            share = (self.warmup + self.iterations) / (WARMUP_ITERATIONS + MEASURED_ITERATIONS)
            seconds = max(60, int(step_timeout * scale * share))
            modifier = self.step_bound(seconds, marked_ranks)
            self.job.launcher.modifier = modifier[0]
            self.job.launcher.modifier_options = modifier[1:]
            # Room beside the step: the guard before it, the noise probe after it, Slurm's own start.
            needed = seconds + STEP_KILL_AFTER_S + JOB_OVERHEAD_S
            if self.time_limit is not None and float(self.time_limit) < needed:
                self.time_limit = f'{needed}s'

    def step_bound(self, seconds: int, marked_ranks: int = 0) -> list[str]:
        """The launcher modifier bounding a step to ``seconds``: :func:`launch.step_bound` with this
        partition's ``step_end_grace``."""
        return launch.step_bound(sys.executable, seconds, STEP_KILL_AFTER_S, marked_ranks,
                                 self.current_partition.extras.get('step_end_grace'))

    def record(self, parameters: dict[str, Any], value: float, metric: Optional[str] = None, **judged: Any) -> None:
        """One measured series. ``judged``: what a check that judges its own run adds (the link
        matrix: ``status`` fail with the ``reason`` naming the node or link, ``nodelist``, ``samples``,
        ``conditions``); see reframe_report.case_to_results."""
        self.measured.append({'benchmark': self.benchmark, 'parameters': parameters,
                              'metric': metric or self.metric, 'value': value, **judged})

    def place_two_ranks(self, placement: str) -> None:
        """Bind two ranks as ``placement`` asks on the partition's detected topology (or skip, saying why)."""
        part = self.current_partition
        try:
            topo = topology.Topology.from_processor_info(part.processor.info)
        except ValueError:
            self.skip_with(f'no detected topology for {part.fullname}: record one with '
                           f'reframe --detect-host-topology (see checks/topology/README.md)')
            return
        placed = topology.place(placement, topo, self.node_count(), bool(part.extras.get('nodes_share_cpus')))
        if isinstance(placed, topology.Unavailable):
            self.skip_with(f'{placement} is not available on {part.fullname}: {placed.reason}')
            return
        self.binding = placed
        self.cpu_binding = ' '.join(f'node{n}:cpu{c}' for n, c in placed.ranks)
        self.num_tasks_per_node = 1 if placed.nodes == 2 else 2
        self.num_cpus_per_task = part.processor.num_cpus // self.num_tasks_per_node

    # -- build and guard ---------------------------------------------------
    @run_after('setup')
    def select_build(self):
        node_target = self.current_partition.processor.arch
        system = self.current_system.name
        found = manifest.of_system(manifest.find(Path(self.manifest_dir), self.build_method), system)
        if not found:
            self.skip_with(f'no {self.build_method} build here: no manifest for {system} in {self.manifest_dir} '
                           f"(run 'mpiregress build --method {self.build_method}')")
        best = microarch.best_build([m.target for m in found], [node_target])
        if best is None:
            raise MpiRegressError('; '.join(microarch.refusal(m.target, node_target) for m in found))
        self.build = found[best]
        self.build_target = self.build.target
        self.build_manifest = self.build.path
        self.modules = list(self.build.env.get('modules', []))
        self.env_vars.update(self.build.env.get('env_vars', {}))

    def guard_commands(self, nodes: Union[int, str], with_setup: bool = True) -> list[str]:
        """Job-script lines: the node names, each node's archspec target, and the guard's refusal.

        ``nodes``: how many nodes to probe, a number or a shell expression (``"$SLURM_JOB_NUM_NODES"``
        when Slurm sizes the job, ReFrame's flexible allocation). ``with_setup=False`` leaves out the
        build's setup lines (the A/B check applies each side's environment to that side's steps only)."""
        python = shlex.quote(sys.executable)
        return list(self.build.env.get('setup', []) if with_setup else []) + [
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

    def wait_for_job_end(self) -> None:
        """Called before sanity reads the job's files; a family whose job must really have ended overrides it."""

    # -- the noise probe (issue 12): a condition of every benchmark, never its verdict ----------
    def _probe_plan(self) -> tuple[str, list[int]] | str:
        """(fwq path, cores of a node) for the probe, or why it is not run."""
        seconds = float(self.current_partition.extras.get('noise_probe_s', 0) or 0)
        if seconds <= 0:
            return f'noise_probe_s is {seconds:g} for {self.current_partition.fullname} (systems/*.yaml)'
        try:
            fwq = str(self.build.program('fwq'))
        except InputError as err:
            return str(err)
        try:
            cores = list(topology.Topology.from_processor_info(self.current_partition.processor.info).cores)
        except ValueError:
            return f'no detected topology for {self.current_partition.fullname}, so no core list to probe'
        return fwq, cores

    @run_before('run')
    def add_noise_probe(self):
        if not self.noise_probe:
            return

        plan = self._probe_plan()
        if isinstance(plan, str):
            self.conditions = {**self.conditions, 'noise': probe.NOT_PROBED + plan}
            return
        fwq, cores = plan
        extras = self.current_partition.extras
        # After the benchmark, so the probe can never disturb what it describes: on a shared machine
        # (local) a real-time probe holds back everyone else's work and releases it in a burst at
        # its end, which is when a benchmark after it would start. The benchmark's exit code is kept.
        self.postrun_cmds = (['mpiregress_benchmark_rc=$?'] + list(self.postrun_cmds or [])  # type: ignore[has-type]
                             + probe.commands(fwq, cores, float(extras['noise_probe_s']),
                                              bool(extras.get('nodes_share_cpus')), self.site_launcher_options(),
                                              extras.get('probe_realtime_priority'))
                             + ['exit "$mpiregress_benchmark_rc"'])

    def read_noise_probe(self) -> None:
        """The probe's conditions; a probe that failed is one sentence there, the benchmark goes on."""
        if not self.noise_probe or isinstance(self.conditions.get('noise'), str):
            return

        self.conditions = {**self.conditions, 'noise': probe.conditions(self.stagedir)}

    def read_job_output(self) -> tuple[str, str]:
        """The job's stdout and stderr, after the noise probe and the nodes used are read; the
        job script's own refusal (the microarchitecture guard) is the sanity error."""
        self.read_noise_probe()
        out, err = self.read_stage_file(self.job.stdout), self.read_stage_file(self.job.stderr)
        self.nodes_used = sorted({node for node, _ in self._probed()})
        for line in err.splitlines():
            if line.startswith('refusing to run:'):
                raise SanityError(line)
        return out, err

    @sanity_function
    def assert_measured(self):
        self.wait_for_job_end()
        out, err = self.read_job_output()
        reason = self.program_refusal(err) or osu_output.failure_reason(out + '\n' + err)
        if reason:
            if 'illegal instruction' in reason:
                reason += (f'; build target {self.build_target}, node target(s) '
                           f'{", ".join(self.node_targets()) or "unknown"}')
            raise SanityError(reason)
        self.measure(out, err)
        return True

    def program_refusal(self, err: str) -> Optional[str]:
        """The program's own sentence when it refused to run (its ranks then exit with its usage code, which
        the launcher reports as deaths); OSU has none, the project's programs override this."""
        return None

    def measure(self, out: str, err: str) -> None:
        """Read what the launched program wrote and fill ``measured`` (OSU output here; a family
        running one of the project's own programs overrides it)."""
        try:
            parsed = osu_output.parse(out)
        except osu_output.OsuOutputError as err_:
            raise SanityError(str(err_)) from None
        mismatch = self.verify_binding(err)
        if mismatch:
            raise SanityError(mismatch)
        self.measured = []
        self.record_measurements(parsed)

    def record_measurements(self, parsed: osu_output.OsuOutput) -> None:
        """Turn the parsed OSU output into ``measured`` entries; families override."""
        raise NotImplementedError
