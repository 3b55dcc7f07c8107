"""The all-pairs link matrix (seed 003, JSC LinkTest's method): every node pair measured, the slow
ones re-tested, the bad node or bad link named.

The program is the project's own ``linktest`` (checks/src/linktest), built by every build method
and taken from the build's manifest; the µarch guard runs before it. Nodes: every idle node of the
partition (ReFrame's flexible allocation) unless ``nodes`` or ``nodelist`` says otherwise; set them
with ``mpiregress run --families links --setvar LinktestCheck.nodes=64`` (the CI jobs pass
LINKTEST_NODES, LINKTEST_NODELIST, LINKTEST_RANKS_PER_NODE, LINKTEST_ARGS, LINKTEST_TIME).

Sanity reads the results file and runs the analysis (mpiregress.families.links.judge): the artifacts go to
``<links_dir>/<system>-<partition>-<method>/`` and every node and slow link becomes a series. A bad
node or link is a ``fail`` naming it, so the run turns red while its series still reach the history.
"""
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import run_after, run_before, variable
from reframe.core.exceptions import SanityError

from mpiregress.cluster import hostlist
from mpiregress.errors import InputError
from mpiregress.families.links import analysis, judge
from mpiregress.model import launch
from mpiregress.model.names import METRICS
from mpiregress.run.checkbase import NOT_APPLICABLE, OsuCheckBase

JOB_END = 'mpiregress-job-end'   # the job script's last line
JOB_END_WAIT = 120               # seconds sanity waits for it


@rfm.simple_test
class LinktestCheck(OsuCheckBase):
    nodes = variable(int, value=0)              # 0: every idle node of the partition
    nodelist = variable(str, value='')          # a Slurm node list (after maintenance); its size wins over nodes
    ranks_per_node = variable(int, value=0)     # 0: the partition's default (systems/<name>.yaml links:), else 1
    linktest_args = variable(str, value='')     # '': the partition's default, else '-Z 20'
    ratio = variable(float, value=0.0)          # how many times worse than typical is slow; 0: the partition's, else 2
    switches = variable(str, value='')          # YAML node -> switch map: same-/inter-switch pair kinds
    links_dir = variable(str, value=os.environ.get('MPIREGRESS_LINKS_DIR', ''))
    metric = variable(str, value='latency')     # the check's own record; its series carry both metrics
    problems = variable(list, value=[])         # what makes the run an error beside its kept measurements
    benchmark = 'linktest'
    time_limit = '60m'
    sourcesdir = None                           # the program comes from the build manifest

    @run_after('init')
    def describe(self):
        self.descr = f'all-pairs link matrix (linktest), {self.build_method} build'
        self.tags = {'links', 'linktest', self.build_method}
        self.series_parameters = {'nodes': self.nodelist or (str(self.nodes) if self.nodes else 'partition')}

    @run_after('setup')
    def size_job(self):
        site = self.current_partition.extras.get('links', {})
        if self.nodes < 0 or self.ranks_per_node < 0:
            raise SanityError(f'nodes={self.nodes}, ranks_per_node={self.ranks_per_node}: give whole numbers '
                              f'from 0 (the default) up')
        self.per_node = self.ranks_per_node or int(site.get('ranks_per_node', 1))
        try:
            self.thresholds = analysis.Thresholds.from_site(site, ratio=self.ratio)
        except InputError as err:
            raise SanityError(str(err)) from None
        try:
            names = hostlist.expand(self.nodelist) if self.nodelist else []
        except InputError as err:
            raise SanityError(str(err)) from None
        count = len(names) or self.nodes
        if not count and self.is_dry_run():
            # Every idle node is only known to Slurm at submission: a dry run writes the script for the
            # partition's usual allocation instead (set nodes= to see another size).
            count = self.node_count()
        if count == 1:
            self.skip_with('the link matrix needs two nodes or more; one was asked for')
        # Nodes sharing one host's cores (the local system) cannot hold more tasks than cores in the
        # job's geometry: the job asks for whole nodes and the step overcommits them.
        self.shared_cpus = bool(self.current_partition.extras.get('nodes_share_cpus'))
        job_per_node = 1 if self.shared_cpus else self.per_node
        self.num_tasks_per_node = job_per_node
        # 0 is ReFrame's flexible allocation: as many nodes as the partition has idle.
        self.num_tasks = count * job_per_node
        self.node_count_asked = count
        if names:
            self.job.options += [f'--nodelist={self.nodelist}']
        self.site = site

    @run_after('setup')
    def set_launch(self):
        self.executable = str(self.build.program('linktest'))
        args = shlex.split(self.linktest_args or self.site.get('args', '-Z 20'))
        self.executable_opts = args + ['-o', judge.RESULTS_FILE]
        count = self.node_count_asked
        self.job.launcher.options = launch.linktest_step(count, self.per_node, self.nodelist,
                                                         self.site_launcher_options(), self.shared_cpus).options
        self.env_vars.update(self.site.get('env', {}))
        # The job's last line, however it ends (the guard's refusal included): see wait_for_job_end.
        self.prerun_cmds = [f'trap "echo {JOB_END}" EXIT'] + self.guard_commands(count or '"$SLURM_JOB_NUM_NODES"')
        self.cpu_binding = 'none (the nodes share cores, overcommitted)' if self.shared_cpus else 'cores'
        self.postrun_cmds = self.more_rounds(args)

    def more_rounds(self, args):
        # A run whose power is short of its targets (systems/<name>.yaml links: node_target, link_target)
        # measures further all-pairs rounds in the same allocation, up to its budget (rounds), each round
        # every pair again: the suspects and the healthy pairs in the same minutes, so the host's load
        # hits both. `mpiregress links enough` decides (exit 1: short), the analysis combines the rounds.
        t = self.thresholds
        # A target under its own ratio floor no round can reach.
        reachable = ((t.node_target and t.ratio < t.node_target)
                     or (t.link_target and (t.link_ratio or t.ratio) < t.link_target))
        if t.rounds <= 1 or not reachable:
            return []
        judging = t.cli_args()
        step = self.job.launcher.run_command(self.job)
        program = ' '.join(shlex.quote(a) for a in [self.executable] + args)
        return [
            # $? of the step, unless the noise probe's line already kept it.
            'mpiregress_links_rc=${mpiregress_benchmark_rc:-$?}',
            f'for mpiregress_round in $(seq 2 {t.rounds}); do\n'
            f'  [ "$mpiregress_links_rc" -eq 0 ] || break\n'
            f'  {shlex.quote(sys.executable)} -m mpiregress links enough {judge.RESULTS_FILE} '
            f'$(ls -v {judge.ROUND_PATTERN} 2>/dev/null) {" ".join(shlex.quote(a) for a in judging)}; '
            f'[ $? -eq 1 ] || break\n'
            f'  {step} {program} -o links-round-"$mpiregress_round".bin || break\n'
            f'done',
        ]

    def output_dir(self) -> Path:
        base = Path(self.links_dir) if self.links_dir else Path(self.stagedir) / 'links'
        part = self.current_partition
        return base / f'{part.fullname.replace(":", "-")}-{self.build_method}'

    def wait_for_job_end(self):
        # ReFrame's squeue scheduler (the local system: no accounting for sacct) takes a job whose squeue
        # query failed for a finished one; on a loaded host that happens while linktest still writes.
        # The job script's last line says it really ended; wait for it (bounded), then judge what is there.
        deadline = time.monotonic() + JOB_END_WAIT
        while JOB_END not in self.read_stage_file(self.job.stdout) and time.monotonic() < deadline:
            time.sleep(2)

    def program_refusal(self, err):
        # linktest says why it refused (zero iterations, an unwritable file) and writes no results file.
        said = [line for line in judge.program_said(err) if ' is odd: ' not in line]   # that one is a note
        if said and not (Path(self.stagedir) / judge.RESULTS_FILE).exists():
            return said[-1]
        return None

    def measure(self, out, err):
        try:
            judged = judge.judge_file(Path(self.stagedir) / judge.RESULTS_FILE, self.output_dir(), self.thresholds,
                                      rounds=judge.round_files(Path(self.stagedir)),
                                      switches=self.switches or self.site.get('switches'), focus=','.join(
                                          hostlist.expand(self.nodelist)) if self.nodelist else None, stderr=err)
        except InputError as err_:
            raise SanityError(str(err_)) from None
        found = judged.analysis.nodes
        if len(found) < 2:
            raise SanityError(f'{NOT_APPLICABLE}the link matrix needs two nodes or more; the run had '
                              f'{len(found)} ({", ".join(found)})')
        self.nodes_used = sorted(found)
        self.problems = list(judged.problems)
        self.conditions = {**self.conditions, 'links_dir': str(judged.out)}
        self.measured = []
        for r in judged.records({}):
            self.record(r['parameters'], r['value'], r['metric'], status=r['status'], reason=r['reason'],
                        nodelist=r['nodelist'], samples=r['samples'], conditions=r['conditions'])

    @run_before('performance')
    def set_perf_variables(self):
        # ReFrame's perflog gets the median node; the results carry every node and link.
        def typical(metric):
            return lambda: statistics.median([m['value'] for m in self.measured
                                              if m['metric'] == metric and 'node' in m['parameters']] or [0.0])
        self.perf_variables = {metric: sn.make_performance_function(typical(metric), METRICS[metric].unit)
                               for metric in ('latency', 'bandwidth')}
