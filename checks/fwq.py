"""OS noise: the placement experiments of seed 004 with the project's FWQ program (issue 12).

One node, one rank per core, in each layout the partition's detected topology
offers (mpiregress/families/noise/placement.py): ``all_cores`` (the seed's 24 tasks per
socket), ``one_free_per_socket`` (23: the last core of each socket left to the
OS) and ``smt`` (one rank per core, the sibling threads left to the OS) where the
nodes have SMT. A layout the nodes cannot offer is skipped with its reason.

Records per node the efficiency and the largest detour (mpiregress/families/noise/records.py),
writes summary.txt, cores.tsv and spectrum.png under
``<report dir>/noise/<system>-<partition>/<layout>/``, and puts the kernel's own view
(``rtla osnoise top`` on the same cores, after FWQ) beside it where the kernel has
the osnoise tracer; elsewhere it says why in one sentence.
"""
import os
import shlex
import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError

from mpiregress.errors import InputError
from mpiregress.families.noise import artifacts, findings, outcome, placement, power, probe, records, rtla
from mpiregress.families.noise import known as noise_known
from mpiregress.model.launch import KILL_ON_BAD_EXIT
from mpiregress.model.names import METRICS
from mpiregress.run.checkbase import OsuCheckBase

RTLA_OUTPUT = 'rtla-top.txt'
RTLA_ERRORS = 'rtla.err'


@rfm.simple_test
class FwqNoiseCheck(OsuCheckBase):
    layout = parameter(list(records.LAYOUTS))
    metric = variable(str, value='efficiency')
    # Iterations of FWQ (0: the partition's fwq_iterations, else placement.ITERATIONS): a slow period needs
    # cycles (docs/noise.md, what each length names).
    fwq_iterations = variable(int, value=0)
    rtla_seconds = variable(int, value=5)
    # FWQ runs at the priority a job runs at (normal): it then sees what steals time from an MPI
    # application, daemons and agents included. A SCHED_FIFO priority (here, or the partition's
    # fwq_realtime_priority in systems/*.yaml) is the explicit option for isolating the hardware's and
    # the kernel's own noise: it preempts exactly those daemons (docs/noise.md). 0: the partition's.
    realtime_priority = variable(int, value=0)
    noise_probe = False                      # this check is the noise measurement itself
    problems = variable(list, value=[])      # nodes cut short or lost, beside the nodes kept
    findings = variable(list, value=[])      # sentences for the report

    @run_after('init')
    def describe(self):
        self.benchmark = records.BENCHMARK
        self.series_parameters = {'layout': self.layout}
        self.descr = f'FWQ noise, {self.layout}, {self.build_method} build'
        self.tags = {'noise', 'fwq', self.layout, self.build_method}

    @run_after('setup')
    def place_ranks(self):
        part = self.current_partition
        placed = None
        try:
            placed = placement.layout(self.layout, part.processor.info)
        except ValueError:
            self.skip_with(f'no detected topology for {part.fullname}: record one with '
                           f'reframe --detect-host-topology (see checks/topology/README.md)')
        if isinstance(placed, placement.LayoutUnavailable):
            self.skip_with(f'{self.layout} is not available on {part.fullname}: {placed.reason}')
        self.placed = placed
        self.num_tasks = self.num_tasks_per_node = placed.tasks_per_node
        per_socket = [o for o in placed.srun_options if o.startswith('--ntasks-per-socket=')]
        if per_socket:
            self.num_tasks_per_socket = int(per_socket[0].split('=', 1)[1])
        self.num_cpus_per_task = 1
        self.cpu_binding = ' '.join(f'cpu{c}' for c in placed.cpus)

    @run_after('setup')
    def set_launch(self):
        fwq = str(self.build.program('fwq'))
        # The job is exclusive already; srun's own --exclusive would mean a step-exclusive allocation.
        options = [o for o in self.placed.srun_options if o != '--exclusive']
        self.job.launcher.options = (self.site_launcher_options() + [KILL_ON_BAD_EXIT, f'--ntasks={self.num_tasks}']
                                     + options)
        iterations = self.fwq_iterations or self.current_partition.extras.get('fwq_iterations', placement.ITERATIONS)
        args = ['-n', str(iterations), '-o', self.fwq_file]
        prefix = probe.realtime(self.priority)
        self.executable = shlex.quote(prefix[0]) if prefix else fwq
        self.executable_opts = [shlex.quote(a) for a in prefix[1:]] + ([fwq] if prefix else []) + args
        self.prerun_cmds = self.guard_commands(1)
        python = shlex.quote(sys.executable)
        cpus = ','.join(str(c) for c in self.placed.cpus)
        # After FWQ, on the same cores: the kernel's own count; where it cannot run, its one sentence.
        self.postrun_cmds = [
            f'srun -N1 -n1 --mpi=none --cpu-bind=none {python} -m mpiregress noise rtla --cpus {cpus} '
            f'--seconds {self.rtla_seconds} --out {RTLA_OUTPUT} > /dev/null 2> {RTLA_ERRORS} || true']

    @property
    def priority(self) -> int | None:
        """The SCHED_FIFO priority FWQ asks for, or None: normal priority, as the system's jobs run."""
        return self.realtime_priority or self.current_partition.extras.get('fwq_realtime_priority') or None

    @property
    def fwq_file(self):
        return f'fwq-{self.layout}.fwq'

    def artifacts_dir(self) -> Path:
        root = os.environ.get('MPIREGRESS_REPORT_DIR')
        where = f'{self.current_system.name}-{self.current_partition.name}'
        base = Path(root) / 'noise' if root else Path(self.stagedir) / 'noise'
        return base / where / self.layout

    def artifacts_where(self) -> str:
        """The artifacts folder relative to the report dir (reports move between CI jobs), else absolute."""
        root = os.environ.get('MPIREGRESS_REPORT_DIR')
        where = self.artifacts_dir()
        return str(where.relative_to(root)) if root else str(where)

    def rtla_view(self):
        """(rtla top text, None) where the kernel was asked, else (None, the sentence why not)."""
        text = self.read_stage_file(RTLA_OUTPUT)
        if text.strip() and rtla.parse_top(text):
            return text, None
        # mpiregress's own sentence, not srun's "task 0: Exited with exit code 4" after it.
        said = [line.split('error: ', 1)[1] for line in self.read_stage_file(RTLA_ERRORS).splitlines()
                if line.startswith('mpiregress') and 'error: ' in line]
        if said:
            return None, said[-1].removeprefix('kernel cross-check skipped: ')
        return None, 'rtla did not run on the node (no output, no reason given; see the job script)'

    @sanity_function
    def assert_noise_measured(self):
        self.nodes_used = sorted({node for node, _ in self._probed()})
        try:
            found = outcome.read(Path(self.stagedir) / self.fwq_file, self.read_stage_file(self.job.stdout),
                                 self.read_stage_file(self.job.stderr), self.placed.cpus, self.layout)
        except InputError as error:
            raise SanityError(str(error)) from None
        run, self.problems, self.measured = found.run, found.problems, []
        for node, samples in zip(run.nodes, found.raw.nodes):     # analysis.analyse keeps the file's order
            # What this node's pass could have seen (families/noise/power.py), on the series the noise judge passes.
            said = {'power': power.node_power(samples, node).to_conditions()}
            self.record({'node': node.node, 'layout': self.layout}, round(node.efficiency, 6), 'efficiency',
                        conditions=said)
            self.record({'node': node.node, 'layout': self.layout}, round(node.max_detour_us, 6), 'max_detour')
        rtla_text, rtla_reason = self.rtla_view()
        known = noise_known.known_of(self.current_system.name)
        self.findings = artifacts.write(run, self.artifacts_dir(), rtla_text, rtla_reason, known)
        # The raw file beside the analysis: `mpiregress noise analyze` re-runs on it (docs/noise.md).
        artifacts.keep_raw(Path(self.stagedir) / self.fwq_file, self.artifacts_dir())
        self.conditions = {'layout': self.layout, 'cores': list(self.placed.cpus),
                           'priority': probe.priority_label(self.priority),
                           'nodes': {n.node: records.node_conditions(n) for n in run.nodes},
                           'findings': findings.sentences(run, known),
                           'events': findings.event_sentences(run, known),
                           'rtla': '\n'.join(artifacts.kernel_side_by_side(run, rtla_text, rtla_reason)),
                           'artifacts': self.artifacts_where(),
                           'judged_by': records.JUDGED_BY}
        return True

    def measured_value(self):
        return min(m['value'] for m in self.measured if m['metric'] == 'efficiency')

    @run_before('performance')
    def set_perf_variables(self):
        self.perf_variables = {'efficiency': sn.make_performance_function(
            self.measured_value, METRICS['efficiency'].unit)}
