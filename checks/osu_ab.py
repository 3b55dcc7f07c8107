"""A/B point-to-point check of a toolchain MR: A (the target branch's build) and B (the MR's)
alternate in ONE job, on the same nodes, with the same binding.

One test per series (metric x placement x build method). Its job runs k pairs in the
balanced order of :func:`mpiregress.run.ab.plan.interleaved_order` (ABBA or BAAB blocks): each step is
its own srun of the side's binary, in a subshell that applies that side's manifest
environment (setup lines, env_vars) and clears the other side's variables, so the
toolchain's environment is the one thing that differs. Every step's output is kept
(``ab-<pair>-<side>.out/.err`` in the stage folder) and becomes one sample in ``measured``
with its side, pair and position (``conditions``), or an error sample saying why; the
pairing and the verdict are :mod:`mpiregress.verdict.ab.paired`'s, run by ``mpiregress run
--ab-against``. Without an A build (``MPIREGRESS_AB_MANIFEST_DIR`` empty) the job runs B
k times and the series fall back to the history gate.

A later round of a sequential run (``MPIREGRESS_AB_FIRST_PAIR``, ``MPIREGRESS_AB_PAIRS``,
``MPIREGRESS_AB_LOOK``; the runner selects the series still inconclusive) continues the pair
numbers and the alternation; every sample says its look and the run's budget (``ab_look``,
``ab_max_pairs``), which the judge needs to spend alpha over the looks.
"""
import os
import shlex
from pathlib import Path

import reframe as rfm
from reframe.core.backends import getlauncher
from reframe.core.builtins import parameter, run_after, sanity_function, variable
from reframe.core.exceptions import SanityError

from mpiregress.families import osu_output
from mpiregress.model import launch, manifest, topology
from mpiregress.model.names import MEASURED_ITERATIONS, PLACEMENTS, PT2PT
from mpiregress.run import stepwatch
from mpiregress.run.ab.plan import DEFAULT_PAIRS, Step, interleaved_order
from mpiregress.run.checkbase import OsuCheckBase

STEP_MARK = 'mpiregress-ab-step'
# A pair whose B hit its time limit where A finished: the job measures no further pair (step_line).
SETTLED_MARK = 'mpiregress-ab-settled'
# The output of the job's warm-up step (warmup_line): kept, never a sample.
WARMUP_STEM = 'ab-warmup'


@rfm.simple_test
class OsuAbCheck(OsuCheckBase):
    metric = parameter(list(PT2PT))
    placement = parameter(list(PLACEMENTS))
    num_tasks = 2
    time_limit = '30m'
    ab_manifest_dir = variable(str, value=os.environ.get('MPIREGRESS_AB_MANIFEST_DIR', ''))
    ab_pairs = variable(int, value=int(os.environ.get('MPIREGRESS_AB_PAIRS') or DEFAULT_PAIRS))
    # A later round of a sequential run (mpiregress.verdict.ab.sequential): its first pair, its look, the budget.
    ab_first_pair = variable(int, value=int(os.environ.get('MPIREGRESS_AB_FIRST_PAIR') or 0))
    ab_look = variable(int, value=int(os.environ.get('MPIREGRESS_AB_LOOK') or 1))
    ab_max_pairs = variable(int, value=int(os.environ.get('MPIREGRESS_AB_MAX_PAIRS') or 0))
    # Each ABBA block's orientation (plan.block_flipped): one seed per run, set by the runner, and the series.
    ab_order_seed = variable(str, value=os.environ.get('MPIREGRESS_AB_ORDER_SEED', ''))
    ab_order = variable(list, value=[])       # [[position, pair, side], ...] as run

    @run_after('init')
    def describe(self):
        spec = PT2PT[self.metric]
        self.benchmark = spec.benchmark
        self.series_parameters = {'placement': self.placement, 'size': spec.size}
        self.descr = f'A/B {spec.benchmark} {spec.size} B, {self.placement}, {self.build_method} build'
        self.tags = {'osu', 'ab', self.metric, self.placement, self.build_method}

    @run_after('setup')
    def place_ranks(self):
        self.place_two_ranks(self.placement)

    @run_after('setup')
    def select_a(self):
        """A: the build of the same method and target in the A folder; none there: B alone."""
        b = self.build
        self.sides = {'B': b}
        if self.ab_manifest_dir:
            same = [m for m in manifest.find(Path(self.ab_manifest_dir), self.build_method) if m.target == b.target]
            if same:
                self.sides['A'] = same[0]
        if 'A' in self.sides:
            seed = self.ab_order_seed and f'{self.ab_order_seed}/{self.build_method}/{self.placement}/{self.metric}'
            order = interleaved_order(self.ab_pairs, first=self.ab_first_pair, seed=seed)
        else:
            first = self.ab_first_pair
            order = [Step(position=first + i, pair=first + i, side='B') for i in range(self.ab_pairs)]
        self.ab_order = [[s.position, s.pair, s.side] for s in order]
        # Each side's environment goes on its own steps only (run_steps), never on the whole job.
        self.modules = []
        for name in b.env.get('env_vars', {}):
            self.env_vars.pop(name, None)

    def step_command(self, side):
        """The side's step: its environment in a subshell, its srun (bounded where the partition says)."""
        spec = PT2PT[self.metric]
        build = self.sides[side]
        binary = str(build.binary(spec.benchmark))
        args = ['-m', f'{spec.size}:{spec.size}', '-x', str(self.warmup), '-i', str(self.iterations)]
        step = launch.pt2pt_step(self.binding, self.num_cpus_per_task, shlex.quote(binary), args,
                                 self.site_launcher_options())
        names = sorted({n for m in self.sides.values() for n in m.env.get('env_vars', {})})
        env = ([f'unset {" ".join(names)}'] if names else []) + list(build.env.get('setup', [])) + [
            f'export {n}={shlex.quote(str(v))}' for n, v in build.env.get('env_vars', {}).items()]
        # The partition's step timeout bounds the two-node step's teardown hang (see systems/local.yaml);
        # a one-node step has none, and bounding it would cut a slow B (the very regression) short.
        limit = self.step_limit()
        bounded = ' '.join(self.step_bound(limit, step.marked_ranks)) + ' ' if limit else ''
        run = f'{bounded}srun {" ".join(step.options)} {shlex.quote(binary)} {" ".join(step.executable_opts)}'
        return f'( {"; ".join(env + [run])} )'

    def warmup_line(self):
        """A step of A (B where there is no A) before the pairs, measured by nobody: the first step of a job
        ran 40-65 % slower than the rest on the local host (same_numa bandwidth, 2026-11-27), and a job
        always starts with A (pair ``first`` is even), so the cold start fell on A in every look."""
        side = 'A' if 'A' in self.sides else 'B'
        return f'{self.step_command(side)} >{WARMUP_STEM}.out 2>{WARMUP_STEM}.err || true'

    def step_line(self, position, pair, side):
        """One step: :meth:`step_command`, its output files, its exit code and wall time."""
        stem = f'ab-{pair}-{side}'
        limit = self.step_limit()
        # The step's wall time (ms) goes with its exit code: a B step killed at its limit where A's finished
        # is a regression of at least limit / A's time (mpiregress.verdict.ab.paired), not a failed check.
        line = (f'_t0=$(date +%s%N); {self.step_command(side)} >{stem}.out 2>{stem}.err; _rc=$?; '
                f'echo "{STEP_MARK} {position} {pair} {side} $_rc $(( ($(date +%s%N) - _t0) / 1000000 ))"; '
                f'_ab_rc_{pair}_{side}=$_rc')
        if limit and self.closes_pair(position, pair):
            # That pair settles the series: one such pair is the regression with its bound, and every further
            # B step would spend the whole limit again (4 pairs of 400 s where A's took 30 s).
            timed_out = ' || '.join(f'[ "$_ab_rc_{pair}_B" -eq {rc} ]'
                                    for rc in (stepwatch.TIMED_OUT, stepwatch.KILLED))
            line += (f'; if [ "$_ab_rc_{pair}_A" -eq 0 ] && {{ {timed_out}; }}; then _ab_settled={position}; '
                     f'echo "{SETTLED_MARK} {position}"; fi')
        return f'if [ -z "${{_ab_settled:-}}" ]; then {line}; fi'

    def closes_pair(self, position, pair):
        """Is the step at ``position`` the later of its pair's two?"""
        return position == max(p for p, q, _ in self.ab_order if q == pair)

    def step_limit(self):
        """Seconds a step may take (0: unbounded). The partition's step timeout bounds the two-node step's
        teardown hang (see systems/local.yaml); a one-node step has none, and bounding it would cut a slow B
        (the very regression) short."""
        timeout = self.current_partition.extras.get('step_timeout') if self.binding.nodes == 2 else None
        return max(60, int(timeout * self.iterations / MEASURED_ITERATIONS)) if timeout else 0

    @run_after('setup')
    def set_launch(self):
        # The steps are the job: ReFrame's own launch is a no-op marker after them.
        self.job.launcher = getlauncher('local')()
        self.executable = 'echo'
        self.executable_opts = [f'{STEP_MARK}-done']
        self.prerun_cmds = self.guard_commands(self.binding.nodes, with_setup=False) + [self.warmup_line()] + [
            self.step_line(*s) for s in self.ab_order]
        # Every step's own output survives the run (ReFrame's output folder), not only its value.
        self.keep_files = [f'{stem}.{ext}' for stem in [WARMUP_STEM] + [f'ab-{pair}-{side}' for _, pair, side in
                                                                        self.ab_order] for ext in ('out', 'err')]

    def step_sample(self, position, pair, side, rc, millis=None):
        """The measured sample of one step, or an error sample with its reason."""
        spec = PT2PT[self.metric]
        stem = f'ab-{pair}-{side}'
        out, err = self.read_stage_file(f'{stem}.out'), self.read_stage_file(f'{stem}.err')
        conditions = {'ab_side': side, 'ab_pair': pair, 'ab_position': position,
                      'ab_manifest': str(self.sides[side].path), 'ab_look': self.ab_look,
                      'ab_max_pairs': self.ab_max_pairs or self.ab_first_pair + self.ab_pairs}
        if millis is not None:
            conditions['ab_seconds'] = millis / 1000
        sample = {'benchmark': self.benchmark, 'parameters': self.series_parameters, 'metric': self.metric,
                  'value': None, 'status': 'error', 'conditions': conditions}
        if rc is None:
            job_err = self.read_stage_file(self.job.stderr)
            sample['reason'] = (osu_output.infrastructure_reason(job_err) or
                                'not run: the job ended before this step (time limit or lost allocation)')
            return sample
        limit = self.step_limit()
        # timeout(1) or the step watcher ended it at the limit (srun then prints Slurm's "CANCELLED" too); a
        # lost node is the infrastructure's, not B's.
        lost = (osu_output.infrastructure_reason(err) or '').startswith('node lost')
        if limit and rc in (stepwatch.TIMED_OUT, stepwatch.KILLED) and not lost:
            conditions.update(ab_timed_out=True, ab_step_limit=limit)
            sample['reason'] = (f'{side} step of pair {pair} hit its {limit} s time limit and was ended '
                                f'(exit {rc}): the benchmark did not finish')
            return sample
        reason = osu_output.failure_reason(out + '\n' + err)
        if reason is None:
            try:
                sample['value'] = osu_output.parse(out).value(spec.size)
            except (osu_output.OsuOutputError, KeyError, ValueError) as parse_error:
                reason = str(parse_error) or f'{spec.benchmark} printed no {spec.size} B row'
        reason = reason or topology.verify(self.binding, err)
        if reason:
            # Reason first: Slurm's own words (a lost node) must stay recognisable as infrastructure.
            sample.update(value=None, reason=f'{reason} ({side} step of pair {pair}, exit {rc})')
        else:
            sample['status'] = 'pass'
        return sample

    @sanity_function
    def assert_measured(self):
        # Not the base's: a job-level fault (a lost node, the time limit) must not discard the steps
        # measured before it; each step is judged from its own output files instead.
        out, _ = self.read_job_output()
        codes = {}
        settled = None
        for line in out.splitlines():
            fields = line.split()
            if len(fields) in (5, 6) and fields[0] == STEP_MARK:
                codes[int(fields[1])] = (int(fields[4]), int(fields[5]) if len(fields) == 6 else None)
            elif len(fields) == 2 and fields[0] == SETTLED_MARK:
                settled = int(fields[1])
        # Steps after a settling pair were not wanted, not lost: they are no samples at all.
        self.measured = [self.step_sample(position, pair, side, *codes.get(position, (None, None)))
                         for position, pair, side in self.ab_order if settled is None or position <= settled]
        if not any(m['status'] == 'pass' for m in self.measured):
            raise SanityError(f'no A/B step measured: {self.measured[0].get("reason", "?")}')
        return True
