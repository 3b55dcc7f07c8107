"""OSU 7.2 point-to-point checks: latency at 8 KiB and bandwidth at 1 MiB, two ranks,
four process placements, every build method.

What a check needs comes from data: the binary from a build manifest, the CPU
binding from the partition's detected topology, the reference from baselines/.
A placement the hardware cannot offer, or a build method this machine does not
have, is skipped with its reason; a binary the nodes cannot execute is refused
before launch.
"""
import os
import shlex
import sys
from pathlib import Path

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import parameter, run_after, run_before, sanity_function, variable
from reframe.core.exceptions import SanityError
from reframe.core.launchers import LauncherWrapper

from mpiregress import baselines, manifest, microarch, osu_output, paths, topology
from mpiregress.errors import MpiRegressError
from mpiregress.names import MEASURED_ITERATIONS, METHODS, METRICS, PLACEMENTS, WARMUP_ITERATIONS

GUARD_EXIT = 86  # the job script's exit code when the µarch guard refused the build


@rfm.simple_test
class OsuPt2PtCheck(rfm.RunOnlyRegressionTest):
    metric = parameter(list(METRICS))
    placement = parameter(list(PLACEMENTS))
    build_method = parameter(list(METHODS))

    valid_systems = ['*']
    valid_prog_environs = ['+osu']
    num_tasks = 2
    exclusive_access = True
    time_limit = '10m'
    warmup = variable(int, value=WARMUP_ITERATIONS)
    iterations = variable(int, value=MEASURED_ITERATIONS)
    manifest_dir = variable(str, value=str(paths.manifest_dir()))
    baselines_dir = variable(str, value=str(paths.baselines_dir()))
    # Filled in at setup, kept in ReFrame's report for the results import.
    build_target = variable(str, value='')
    build_manifest = variable(str, value='')
    cpu_binding = variable(str, value='')
    skip_reason = variable(str, value='')   # ReFrame's report keeps no skip message
    nodes_used = variable(list, value=[])    # from inside the job: squeue may never see a short job run
    maintainers = ['mpiregress']

    @run_after('init')
    def describe(self):
        spec = METRICS[self.metric]
        self.descr = (f'{spec.benchmark} {spec.message_size} B, {self.placement}, '
                      f'{self.build_method} build')
        self.tags = {'osu', 'pt2pt', self.metric, self.placement, self.build_method}

    def skip_with(self, reason):
        self.skip_reason = reason
        self.skip(reason)

    @run_after('setup')
    def place_ranks(self):
        part = self.current_partition
        try:
            topo = topology.Topology.from_processor_info(part.processor.info)
        except ValueError:
            self.skip_with(f'no detected topology for {part.fullname}: record one with '
                      f'reframe --detect-host-topology (see checks/topology/README.md)')
        nodes = int(part.extras.get('num_nodes', 2))
        placed = topology.place(self.placement, topo, nodes, bool(part.extras.get('nodes_share_cpus')))
        if isinstance(placed, topology.Unavailable):
            self.skip_with(f'{self.placement} is not available on {part.fullname}: {placed.reason}')
        self.binding = placed
        self.cpu_binding = ' '.join(f'node{n}:cpu{c}' for n, c in placed.ranks)
        self.num_tasks_per_node = 1 if placed.nodes == 2 else 2
        self.num_cpus_per_task = part.processor.num_cpus // self.num_tasks_per_node

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

    @run_after('setup')
    def set_reference(self):
        part = self.current_partition
        refs = baselines.for_system(self.current_system.name, self.baselines_dir)
        ref = refs.lookup(part.name, self.build_method, self.placement, self.metric)
        if ref is not None:
            self.reference = {part.fullname: {self.metric: ref.reframe()}}

    @run_after('setup')
    def set_launch(self):
        spec = METRICS[self.metric]
        self.executable = str(self.build.binary(spec.benchmark))
        self.executable_opts = ['-m', f'{spec.message_size}:{spec.message_size}',
                                '-x', str(self.warmup), '-i', str(self.iterations)]
        # A rank that dies (SIGILL, crash) must end the step, not leave its peer waiting.
        options = list(self.current_partition.extras.get('launcher_options', [])) + ['--kill-on-bad-exit=1']
        first, second = self.binding.ranks
        if self.binding.nodes == 1 or first[1] == second[1]:
            # Explicit geometry: inside an existing allocation (scheduler 'local') srun
            # would otherwise take the allocation's.
            options += [f'--nodes={self.binding.nodes}', '--ntasks=2',
                        f'--ntasks-per-node={self.num_tasks_per_node}',
                        f'--cpu-bind=verbose,map_cpu:{self.binding.map_cpu() if self.binding.nodes == 1 else first[1]}']
        else:
            # Nodes sharing one host's CPUs: a heterogeneous step gives each rank its own
            # core and still forms one MPI_COMM_WORLD through PMIx. The second component
            # ends half a second late: Slurm 22.05 can hang when both end at once (SchedMD 16817).
            cpus = self.num_cpus_per_task
            options += ['-w', '"$MPIREGRESS_NODE0"', '-n1', f'-c{cpus}', f'--cpu-bind=verbose,map_cpu:{first[1]}']
            late_exit = shlex.quote('"$0" "$@"; rc=$?; sleep 0.5; exit $rc')
            self.executable_opts += [':', '-w', '"$MPIREGRESS_NODE1"', '-n1', f'-c{cpus}',
                                     f'--cpu-bind=verbose,map_cpu:{second[1]}',
                                     'sh', '-c', late_exit, self.executable] + self.executable_opts
        self.job.launcher.options = options
        step_timeout = self.current_partition.extras.get('step_timeout')
        if step_timeout:
            seconds = max(60, int(step_timeout * self.iterations / MEASURED_ITERATIONS))
            self.job.launcher = LauncherWrapper(self.job.launcher, 'timeout', ['-k', '10', str(seconds)])

    @run_after('setup')
    def guard_microarchitecture(self):
        python = shlex.quote(sys.executable)
        nodes = self.binding.nodes
        self.prerun_cmds = list(self.build.env.get('setup', [])) + [
            'read -r MPIREGRESS_NODE0 MPIREGRESS_NODE1 <<< '
            '"$(scontrol show hostnames "$SLURM_JOB_NODELIST" | paste -sd" ")"',
            f'mpiregress_targets=$(srun -N{nodes} -n{nodes} --ntasks-per-node=1 --mpi=none '
            f'{python} -m mpiregress node-target)',
            'echo "$mpiregress_targets"',
            f'{python} -m mpiregress guard --build-target {self.build.target} '
            f'--node-target "$(echo "$mpiregress_targets" | awk \'{{print $3}}\' | paste -sd,)" '
            f'|| exit {GUARD_EXIT}',
        ]

    def _read(self, name):
        path = os.path.join(self.stagedir, name)
        return open(path).read() if os.path.exists(path) else ''

    def _probed(self):
        return [line.split()[1:3] for line in self._read(self.job.stdout).splitlines()
                if line.startswith('mpiregress-node-target ')]

    def node_targets(self):
        return sorted({target for _, target in self._probed()})

    @sanity_function
    def assert_measured(self):
        out, err = self._read(self.job.stdout), self._read(self.job.stderr)
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
            osu_output.parse(out)
        except osu_output.OsuOutputError as err_:
            raise SanityError(str(err_)) from None
        mismatch = topology.verify(self.binding, err)
        if mismatch:
            raise SanityError(mismatch)
        return True

    def measured_value(self):
        spec = METRICS[self.metric]
        return osu_output.parse(self._read(self.job.stdout)).value(spec.message_size)

    @run_before('performance')
    def set_perf_variables(self):
        self.perf_variables = {self.metric: sn.make_performance_function(
            self.measured_value, METRICS[self.metric].unit)}
