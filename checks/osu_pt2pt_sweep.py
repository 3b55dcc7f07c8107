"""OSU 7.2 point-to-point size sweeps: osu_latency and osu_bw over 1 B - 4 MiB, two ranks,
four process placements, every build method (family ``pt2pt-sweep``, weekly).

Each measured size is one series, ``{placement, size, sweep}``: the ``sweep`` parameter (the
size range asked) keeps these apart from the gated 8 KiB / 1 MiB series of ``osu_pt2pt.py``,
which run on their own. An eager/rendezvous threshold that moves shows as a step of the
curve at one size: the report draws the curves and marks the sizes that moved.
The sizes come from checks/config/pt2pt_sweep.yaml; placement, build and sanity are the base's.
"""
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
import yaml
from reframe.core.builtins import parameter, run_after, run_before, variable

from mpiregress.families import osu_output
from mpiregress.model import launch, topology
from mpiregress.model.names import METRICS, PLACEMENTS, PT2PT
from mpiregress.run.checkbase import OsuCheckBase

CONFIG = yaml.safe_load((Path(__file__).parent / 'config' / 'pt2pt_sweep.yaml').read_text())
LOW, HIGH = int(CONFIG['sizes']['min']), int(CONFIG['sizes']['max'])
STEP_TIME_SCALE = {metric: float(scale) for metric, scale in CONFIG['step_time_scale'].items()}


@rfm.simple_test
class OsuPt2PtSweepCheck(OsuCheckBase):
    metric = parameter(list(PT2PT))
    placement = parameter(list(PLACEMENTS))
    num_tasks = 2
    problems = variable(list, value=[])   # sizes asked and not printed, kept beside the measured rows

    @run_after('init')
    def describe(self):
        spec = PT2PT[self.metric]
        self.benchmark = spec.benchmark
        self.sweep = f'{LOW}:{HIGH}'
        # The check's own record names its range; each measured size is a series.
        self.series_parameters = {'placement': self.placement, 'sizes': self.sweep}
        self.descr = f'{spec.benchmark} {self.sweep} B, {self.placement}, {self.build_method} build'
        self.tags = {'osu', 'pt2pt-sweep', self.metric, self.placement, self.build_method}

    @run_after('setup')
    def place_ranks(self):
        self.place_two_ranks(self.placement)

    @run_after('setup')
    def set_launch(self):
        self.executable = str(self.build.binary(self.benchmark))
        args = ['-m', self.sweep, '-x', str(self.warmup), '-i', str(self.iterations)]
        step = launch.pt2pt_step(self.binding, self.num_cpus_per_task, self.executable, args,
                                 self.site_launcher_options())
        self.job.launcher.options = step.options
        self.executable_opts = step.executable_opts
        # Every size of the range, not one: the step may take as long as the sizes to 4 MiB need.
        self.limit_step_time(scale=STEP_TIME_SCALE[self.metric], marked_ranks=step.marked_ranks)
        self.prerun_cmds = self.guard_commands(self.binding.nodes)

    def verify_binding(self, stderr):
        return topology.verify(self.binding, stderr)

    def record_measurements(self, parsed):
        for size in sorted(parsed.rows):
            self.record({'placement': self.placement, 'size': size, 'sweep': self.sweep}, parsed.value(size))
        gap = osu_output.sweep_gap(parsed, LOW, HIGH)
        if gap:
            self.problems = [gap]

    @run_before('performance')
    def set_perf_variables(self):
        # ReFrame's perflog gets the smallest and largest size; the results carry every size.
        sizes = sorted(m['parameters']['size'] for m in self.measured) if self.measured else []
        unit = METRICS[self.metric].unit
        self.perf_variables = {
            f'{self.metric}_{size}B': sn.make_performance_function(
                lambda size=size: next(m['value'] for m in self.measured if m['parameters']['size'] == size), unit)
            for size in sizes[:1] + sizes[-1:]}
