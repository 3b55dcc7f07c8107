"""OSU 7.2 point-to-point checks: latency at 8 KiB and bandwidth at 1 MiB, two ranks,
four process placements, every build method.

The binding comes from the partition's detected topology; a placement the hardware
cannot offer is skipped with its reason. Everything else (build from a manifest,
µarch guard, sanity, the measured series) is the base's.
"""
import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before

from mpiregress.model import baselines, launch, topology
from mpiregress.model.names import METRICS, PLACEMENTS, PT2PT
from mpiregress.run.checkbase import OsuCheckBase


@rfm.simple_test
class OsuPt2PtCheck(OsuCheckBase):
    metric = parameter(list(PT2PT))
    placement = parameter(list(PLACEMENTS))
    num_tasks = 2

    @run_after('init')
    def describe(self):
        spec = PT2PT[self.metric]
        self.benchmark = spec.benchmark
        self.series_parameters = {'placement': self.placement, 'size': spec.size}
        self.descr = f'{spec.benchmark} {spec.size} B, {self.placement}, {self.build_method} build'
        self.tags = {'osu', 'pt2pt', self.metric, self.placement, self.build_method}

    @run_after('setup')
    def place_ranks(self):
        self.place_two_ranks(self.placement)

    @run_after('setup')
    def set_reference(self):
        # ReFrame's own output shows the reference; the verdict is mpiregress.verdict's.
        part = self.current_partition
        refs = baselines.for_system(self.current_system.name, self.baselines_dir)
        ref = refs.lookup_pt2pt(part.name, self.build_method, self.placement, self.metric)
        if ref is not None:
            self.reference = {part.fullname: {self.metric: ref.reframe()}}

    @run_after('setup')
    def set_launch(self):
        spec = PT2PT[self.metric]
        self.executable = str(self.build.binary(spec.benchmark))
        args = ['-m', f'{spec.size}:{spec.size}', '-x', str(self.warmup), '-i', str(self.iterations)]
        step = launch.pt2pt_step(self.binding, self.num_cpus_per_task, self.executable, args,
                                 self.site_launcher_options())
        self.job.launcher.options = step.options
        self.executable_opts = step.executable_opts
        self.limit_step_time(marked_ranks=step.marked_ranks)
        self.prerun_cmds = self.guard_commands(self.binding.nodes)

    def verify_binding(self, stderr):
        return topology.verify(self.binding, stderr)

    def record_measurements(self, parsed):
        spec = PT2PT[self.metric]
        self.record(self.series_parameters, parsed.value(spec.size))

    def measured_value(self):
        return self.measured[0]['value']

    @run_before('performance')
    def set_perf_variables(self):
        self.perf_variables = {self.metric: sn.make_performance_function(
            self.measured_value, METRICS[self.metric].unit)}
