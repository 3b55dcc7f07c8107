"""OSU 7.2 collectives with OpenMPI coll/tuned algorithm selection (seed 002).

osu_bcast, osu_scatter, osu_allreduce and osu_alltoall, each with OpenMPI's default
decision and every coll/tuned algorithm of the toolchain's OpenMPI forced
(``checks/config/coll_tuned/``), over process counts, both distributions and a
message-size sweep: one OSU invocation per size range, every size kept as its own
series. What runs is data: ``checks/config/coll_sweep.yaml`` names the ``mr``
subset that gates merge requests and the ``weekly`` full sweep.

A forced run is only a measurement of the forced algorithm when coll/tuned is the
component in charge and OpenMPI accepted the setting: anything else (hcoll, ucc or
han outranking tuned; an id OpenMPI rejected and replaced by its default) is said
in one sentence, never recorded as that algorithm.
"""
import os

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, variable

from mpiregress.families import osu_output
from mpiregress.families.coll import algorithms, components, plan
from mpiregress.model import launch, toolchain, topology
from mpiregress.model.names import METRICS
from mpiregress.run.checkbase import NOT_APPLICABLE, OsuCheckBase

TUNED = algorithms.load(toolchain.load(toolchain.default_path()).mpi['version'])
SWEEP = plan.load()
# Process counts are data too, but a partition's core count is only known at setup:
# powers of two are declared up to the largest node the site has (Aion, 128 cores) and
# each partition skips those its nodes cannot hold.
MAX_POWER_OF_TWO = 128


def _scales(keywords):
    for key in keywords:
        if key == 'powers_of_two':
            n = 2
            while n <= MAX_POWER_OF_TWO:
                yield str(n)
                n *= 2
        else:
            yield str(key)


def _variants():
    """(subset, collective, algorithm, scale, distribution, size range index) of every test.

    Only the subsets the run asked for (``MPIREGRESS_COLL_SUBSETS``, set by ``mpiregress run``
    from its families) are declared: the weekly sweep is thousands of tests per partition,
    which ReFrame would otherwise build for every merge request only to filter them out.
    """
    wanted = os.environ.get('MPIREGRESS_COLL_SUBSETS', ','.join(SWEEP)).split(',')
    found = set()
    for subset in (SWEEP[name] for name in wanted if name in SWEEP):
        for coll in subset.collectives:
            names = TUNED.names(coll) if subset.algorithms == 'all' else list(subset.algorithms)
            for alg in names:
                for scale in _scales(subset.nprocs):
                    for dist in subset.distributions:
                        for index in subset.ranges_for(coll):
                            found.add((subset.name, coll, alg, scale, dist, index))
    return sorted(found)


@rfm.simple_test
class OsuCollCheck(OsuCheckBase):
    variant = parameter(_variants(), fmt=lambda v: '_'.join(str(x) for x in v).replace(':', '-'))
    metric = variable(str, value='latency')
    problems = variable(list, value=[])   # what was asked and not measured, kept beside the measured rows

    @run_after('init')
    def describe(self):
        self.subset, self.collective, self.algorithm, self.scale, self.distribution, index = self.variant
        self.benchmark = f'osu_{self.collective}'
        self.size_range = SWEEP[self.subset].ranges_for(self.collective)[index]
        family = 'coll' if self.subset == 'mr' else 'coll-sweep'
        self.descr = (f'{self.benchmark} {self.algorithm}, {self.scale} ranks, {self.distribution}, '
                      f'{self.size_range.low}:{self.size_range.high} B, {self.build_method} build')
        self.tags = {'osu', family, self.collective, self.algorithm, self.build_method, self.metric}

    @run_after('setup')
    def place_ranks(self):
        part = self.current_partition
        coll_extras = part.extras.get('coll', {})
        try:
            topo = topology.Topology.from_processor_info(part.processor.info)
        except ValueError:
            self.skip_with(f'no detected topology for {part.fullname}: record one with '
                           f'reframe --detect-host-topology (see checks/topology/README.md)')
        self.topology = topo
        cores = int(coll_extras.get('cores_per_node', len(topo.cores)))
        nodes_available = self.node_count()
        if self.scale == 'full_node':
            nprocs, nodes = cores, 1
        elif self.scale == 'two_nodes':
            nprocs, nodes = 2 * cores, 2
        else:
            nprocs, nodes = int(self.scale), 1
            if nprocs >= cores:
                self.skip_with(f'{nprocs} ranks do not fit below one {part.fullname} node of {cores} cores '
                               '(full_node and two_nodes measure the full counts)')
        if nodes > nodes_available:
            self.skip_with(f'{nodes} nodes asked, {part.fullname} offers {nodes_available}')
        alg = None if self.algorithm == algorithms.DEFAULT else TUNED.algorithm(self.collective, self.algorithm)
        if alg is not None and alg.only_nprocs is not None and alg.only_nprocs != nprocs:
            self.skip_with(f'{self.collective} algorithm {alg.name} runs only on {alg.only_nprocs} processes')
        self.nprocs, self.nodes = nprocs, nodes
        subset = SWEEP[self.subset]
        self.step = plan.Step(self.collective, self.algorithm, nprocs, nodes, self.distribution, self.size_range,
                              subset.repeats, subset.segsize)
        self.overcommit = nprocs // nodes > len(topo.cores)
        # An oversubscribed step cannot be a job's task geometry (Slurm refuses more tasks than
        # cores): the job asks for whole nodes and the step overcommits them.
        self.num_tasks = nodes if self.overcommit else nprocs
        self.num_tasks_per_node = 1 if self.overcommit else nprocs // nodes
        # The check's own record (what it asked for) names its size range; each measured size is a series.
        point = {k: v for k, v in self.step.parameters(0).items() if k != 'size'}
        self.series_parameters = {**point, 'sizes': f'{self.size_range.low}:{self.size_range.high}'}
        self.conditions = {'oversubscribed': True} if self.overcommit else {}
        self.cpu_binding = f'{self.distribution}, cores' + (' (oversubscribed)' if self.overcommit else '')

    @run_after('setup')
    def set_launch(self):
        part = self.current_partition
        self.executable = str(self.build.binary(self.benchmark, kind='collective'))
        self.executable_opts = self.step.osu_args()
        self.job.launcher.options = launch.collective_step(self.nprocs, self.nodes, self.distribution,
                                                           self.site_launcher_options(),
                                                           overcommit=self.overcommit).options
        self.env_vars.update(self.step.env(TUNED))
        if self.algorithm != algorithms.DEFAULT:
            # Proof that coll/tuned, not hcoll/ucc/han, runs the forced algorithm (read in sanity).
            self.env_vars['OMPI_MCA_coll_base_verbose'] = '100'
        site = part.extras.get('coll', {})
        if self.nodes > 1:
            self.env_vars.update(site.get('multinode_env', {}))
        if self.overcommit:
            self.env_vars.update(site.get('oversubscribed_env', {}))
        self.prerun_cmds = self.guard_commands(self.nodes)

    def verify_binding(self, stderr):
        out = self.read_stage_file(self.job.stdout)
        if self.algorithm != algorithms.DEFAULT:
            rejected = components.forced_run_problem(out + '\n' + stderr)
            if rejected:
                return rejected
            not_tuned = components.tuned_problem(out + '\n' + stderr, self.collective)
            if not_tuned:
                return NOT_APPLICABLE + not_tuned
        return topology.verify_distribution(stderr, self.nprocs, self.nodes, self.distribution, self.topology,
                                            self.overcommit)

    def record_measurements(self, parsed):
        average = osu_output.column_index(parsed, 'Avg Latency')
        for size in sorted(parsed.rows):
            self.record(self.step.parameters(size), parsed.value(size, average))
        gap = osu_output.sweep_gap(parsed, self.size_range.low, self.size_range.high)
        if gap:
            self.problems = [gap]

    @run_before('performance')
    def set_perf_variables(self):
        # ReFrame's own perflog gets the smallest and largest size; the results carry every size.
        sizes = sorted({m['parameters']['size'] for m in self.measured}) if self.measured else []
        unit = METRICS[self.metric].unit
        self.perf_variables = {
            f'latency_{size}B': sn.make_performance_function(
                lambda size=size: next(m['value'] for m in self.measured if m['parameters']['size'] == size), unit)
            for size in sizes[:1] + sizes[-1:]}
