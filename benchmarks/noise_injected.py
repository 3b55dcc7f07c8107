"""Injected OS noise at normal and real-time priority: named at its fundamental on its core? (prints a tally,
asserts nothing).

Starts its own local cluster (``--network namespaces``, 2 nodes, in a fresh folder under /tmp; FWQ
runs on node1), builds FWQ by its Makefile and the injector ``benchmarks/noise_injector.c``, and runs
FWQ as the product's FWQ check does on this system (checks/fwq.py, layout ``all_cores``, one rank per
core, ``placement.ITERATIONS``, at normal priority: the local partition sets no fwq_realtime_priority).
The injectors are started as an admin would: ``taskset -c CORE noise_injector PERIOD_MS SPIN_US S``
(a daemon at normal priority) or ``chrt -f 10 taskset -c CORE ...`` (real time). Conditions: controls
(no injector), then for each priority every ``--periods`` period alone on core 0 and the pairs
``--pairs`` (the first period on core 0, the second on core 1). Every run is judged by the product's
own analysis and findings (analysis.analyse, findings.host_events / one_core_events):

- named: a source said as its core's event within one spectral bin (or 2 %) of 1000/period Hz;
- said could not: a source not named so (named at another period, on the other core, or not at all), where
  the product's power measurement (families/noise/power.py, the node's noisiest core, at a period 7 % off the
  source's, which its real train cannot lend a line to) says
  the run could not have named a stall as long as what the source took from FWQ: the run was honest about
  what it missed. What a source took (``taken_us``, "took" in each run's line): per burst, the lost time of
  FWQ's iteration running when it fires and of those beginning within its spin, less the same at other phases,
  its bursts found by the injector's clock origin (it prints it; kept as origins.json beside the files).
  Before 2026-11-28 (and for files kept without origins) the injector's whole spin stood for it, which a
  source at normal priority on a loaded core does not take: it preempts FWQ only when FWQ is the one running;
- silent miss: the same, where that power says it could have: the run claimed a power it did not have;
- other: every other period the findings name (one core's or the host's), in any run, controls included; one
  at a known source of systems/local.yaml (``known_noise_sources``: the VM host's 10 ms timer and its 50 ms
  pattern) is listed with a ``*`` and not counted (the product says it as that source, evidence, not "needs a
  look"); so is one whose stalls are of the kernel tick's own size (``findings.tick_sized``, a ``~``: shown
  with its size, not flagged).

    python benchmarks/noise_injected.py --repeat 5 [--keep DIR]
    python benchmarks/noise_injected.py --rejudge DIR     # the kept files, by the analysis as it is now

2026-11-26, 5 runs per condition. Quiet VM (load 0.9-2.0, only this benchmark), the kept files judged by
the analysis as it is now (named / sources; the live run under the earlier analysis named 13 ms at normal
priority 1 of 5, at 19.2 Hz, its beat with the 4 ms tick, and 250 ms 1 of 5):

    injector(s)        normal   fifo10      other periods said (every condition, controls included)
    13 ms @0             3/5      5/5       host 100 Hz and a 20 Hz (50 ms) event on one core: in the controls
    27 ms @0             5/5      5/5       too, run after run, before and after the injectors: this VM's own
    90 ms @0             5/5      5/5       (its host's timer), not invented. Invented (a slow line a few
    250 ms @0            4/5      2/5       cycles held): 1.95-3.96 Hz in 7 of 75 runs, 2 of the 15
    13@0 + 90@1         8/10    10/10       controls among them, and a 10 Hz line once; a real-time 250 ms
    27@0 + 250@1        7/10     7/10       source was once told as the host's (3.87 Hz)

Loaded VM (load 4.1-7.9, median 6.4: this benchmark beside links_faults and kill_sequences), live:

    injector(s)        normal   fifo10      other periods said
    13 ms @0             5/5      4/5       controls: none in 10 of 15 (the host's 100 Hz and a 2.9 Hz line
    27 ms @0             4/5      5/5       in the last five, as the load fell); injected conditions: 25.6,
    90 ms @0             1/5      4/5       38.4 Hz once each, the host's 100 Hz once
    250 ms @0            0/5      0/5
    13@0 + 90@1         4/10     9/10
    27@0 + 250@1        3/10     5/10

At normal priority under load FWQ keeps 15-35 % of its cores (efficiency 0.12-0.45): the other processes'
time slices drown a daemon's 1-2 ms, and what the run says is the node's efficiency below its noise floor,
which is what a job there suffers. 250 ms is never named under load: the check's 300 000 iterations are
3.1-3.3 s here, 12-13 cycles of it, too few once the load's stalls crowd every phase.

2026-11-27: the same kept files (both sets, 80 sources each) judged again with the run's power beside each
miss (``--rejudge``; the power 7 % off the source's period on the node's noisiest core, the grid of
families/noise/power.py):

    set                      named   said could not   silent miss
    quiet (load 0.9-2.0)      66            4              10
    loaded (load 4.1-7.9)     44           31               5

Under load the misses are mostly honest: in 30 of the 31 (90 and 250 ms sources) the run's power says no stall
up to 9.9 ms would have been named at that period, in one a 4.4 ms stall would: the run could not have seen them
and its power says so (since 2026-11-27 the product measures its power at 250 ms too). The 5 silent ones are 1
ms sources every 13 or 27 ms that the power says 0.17-0.86 ms events would have shown: a regular synthetic train
is a best case for a daemon whose wake-ups are late by a varying amount on a loaded core. On the quiet host 10
of 14 misses are silent: three real-time 250 ms sources told at other rates (the host's 3.87 Hz, 20 Hz on core
0), two 2 ms ones at normal priority the power put at 1.3-1.9 ms (a grid step from 2 ms), and four 1 ms sources
every 13 ms at normal priority not named on their core where 34-860 us events would have been.
Live the same day, 5 runs per condition, beside benchmarks/kill_sequences.py and a gitlab-ci-local pipeline (load
4.5-8.8, median 7.2; FWQ kept 8-23 % of its cores): controls 15 of 15 with nothing said; 80 sources: named 33,
said could not 45, silent miss 12. Named: 13 ms alone 5 of 5 at either priority, 27 ms alone 2 of 5 (normal) and 5
of 5 (fifo10); 90 and 250 ms 0 of 40 (alone and in pairs), each with a power of "none" there. The 12 silent misses
are all 1 ms sources every 13 or 27 ms (beside a second source in 9) where the power put the smallest event at
0.17-0.58 ms: at an efficiency near 0.1 the power, which adds a timer-exact train to the rank's own samples,
overstates what a real daemon sharing the crowded core shows. That gap is open (issue 31).

2026-11-27, later: the analysis folds the stall onsets itself (families/noise/folding.py; the spectrum had no
line for a slow daemon on a crowded core, whose stalls start within 0.3 ms of one phase in nearly every cycle
FWQ sees). Live, 5 runs per condition beside benchmarks/links_faults.py (load 3.2-8.7, median 5.3), judged by
the fold's first version (1cc241f):

    injector(s)        normal   fifo10      other periods said
    13 ms @0             5/5      5/5       controls: none in 15 of 15
    27 ms @0             5/5      5/5
    90 ms @0             0/5      4/5       (90 ms at normal priority: 3 said could not, 2 silent)
    250 ms @0            0/5      3/5       (250 ms at normal priority: the run said it could not, 5 of 5)
    13@0 + 90@1         9/10     8/10
    27@0 + 250@1        9/10     5/10

named 58, said could not 15, silent miss 7 (of 80). The day's first live set (load 2.4-7.9), judged by the
analysis before the fold: named 36, could not 27, silent 17; by the fold with a screen step of 4x the
tolerance: 59 / 12 / 9. The fold's step and ranking were tuned on these files afterwards (2x the tolerance
named 55 of 80 normal-priority sources of both sets where 4x named 46).

2026-11-27 afternoon, live (``--keep noise-keep10``, load 3.2-9.8, median 5.5, beside links_faults.py), the power
measured on the event's timer and, for 90 and 250 ms, at the tick too (families/noise/power.py): named 45,
said could not 32, silent 3; controls: 83.22 and 100.04 Hz once each in 15. The two morning sets judged again
with that power: could not 21 and 16, silent 3 and 1 (were 18 and 10, 6 and 7; names unchanged).

2026-11-27 evening, FWQ format 2 (the node's tick the kernel's own, 250 Hz here, where the stalls said 1 kHz
all evening; ``--keep noise-keep13``; periods 13, 27, 90, 250 ms and 27 + 250 ms; load 2.4-5.8, median 5.5:
this benchmark and four busy loops of mine at normal priority, FWQ keeping about a third of its cores):

    injector(s)        normal   fifo10      other periods said
    13 ms @0             5/5      5/5       controls: none in 15 of 15
    27 ms @0             5/5      5/5       injected runs: 20 Hz on core 1 in 3 (the 50 ms seen in earlier
    90 ms @0             0/5      5/5       sets' controls), 38.46 Hz once beside a named 13 ms source (its
    250 ms @0            0/5      2/5       second subharmonic: a wrong period)
    27@0 + 250@1        6/10     7/10

named 40, said could not 14, silent miss 6 (of 60); the real-time 27 ms source is named at 37.04 Hz in 5 of 5
(under the stalls' 1 kHz tick it had been named at 74.1 Hz). The misses at normal priority: 90 ms 4 said could
not, 1 silent; 250 ms 3 and 2.

2026-11-28, the same conditions (``--keep noise-keep14``; load 3.2-6.3, median 4.9: this benchmark, two to four
busy loops of mine and, for its first half, the test suite; FWQ kept 10-15 % of its cores), judged with what
each source took from FWQ (``taken_us``) in place of its spin (``--rejudge``, names unchanged):

    injector(s)        normal   fifo10      took per burst (median of 5 runs; spin 1 ms to 27 ms, 2 ms beyond)
    13 ms @0             5/5      5/5       normal 1.5 ms, fifo10 1.4 ms
    27 ms @0             5/5      5/5       normal 0.99 ms (-0.3 to 1.3), fifo10 1.7 ms
    90 ms @0             2/5      5/5       normal 0.79 ms, fifo10 1.9 ms
    250 ms @0            0/5      0/5       normal 0.15 ms (-16 to 1.3: 11 bursts a run), fifo10 0.48 ms
    27@0 + 250@1        5/10     9/10       the 250 ms source: normal 1.2 ms, fifo10 1.4 ms
    controls (15)       no period said in any

named 41, said could not 19, silent miss 0 (of 60); one wrong period: a real-time 250 ms source named at its
second harmonic (8 Hz) in 1 of 5. The live run's own tally (the first, dropped measure of what a source took)
had 1 silent miss, a 250 ms source at normal priority that "took 2.8 ms" where the run said 1.9 ms would show:
1.3 ms by ``taken_us``.

2026-11-28, with the idle window after a fold's phase (folding.judged; its thresholds chosen on noise-keep13 and
-14, where it named 43 and 44 of 60 where the analysis before it named 40 and 41). Live, the same conditions
(``--keep noise-keep15``; load 3.4-6.3, median 5.1: this benchmark, two busy loops of mine, for the last third
the test suite; FWQ kept 10-18 % of its cores):

    injector(s)        normal   fifo10      other periods said
    13 ms @0             4/5      4/5       controls: the host's 100 Hz on a core in 2 of 15
    27 ms @0             2/5      5/5       wrong periods: a normal-priority 27 ms source at 54 ms (18.52 Hz)
    90 ms @0             1/5      5/5       in 3 of 5, a 13 ms one at 26 ms once, 62.34 Hz beside a real-time
    250 ms @0            0/5      4/5       90 ms source in 2 of 5
    27@0 + 250@1        9/10     5/10       (the 250 ms source: normal 4 of 5, fifo10 0 of 5)

named 39, said could not 19, silent miss 2 (of 60). The same files judged by the analysis before the idle window
(``--rejudge`` from a worktree of 1ac3a21): named 34; the five it missed are a real-time 250 ms source alone and
four normal-priority 250 ms ones beside a 27 ms source (FWQ keeping 18 % there); every other line the same, the
wrong periods and both silent misses (1 ms every 13 ms) included: on a set it was not tuned on, the idle window
named 5 more of 60 and said nothing new on any control.

Then, with a beat's comb asked up to its 16th line (recurrence.BEAT_MAX_MULTIPLE; by named events per file, not
``--rejudge``): named 40, silent 1 (a real-time 13 ms source whose comb the spectrum read 6.41 Hz apart, its
13 ms the 12th line); the 70 kept controls of noise-keep11..15 and -13-loc and this set's other 40 injected runs
name what they named before. Tried and left out the same day: the half phase as the test of a source seen in
only some of its cycles (docs/noise.md): it named the three 27 ms sources at 27 ms and lost all five real-time
90 ms ones.

Then, with a line a little off a whole number of ticks refused where its stalls start at one phase of the tick
(recurrence.tick_locked): noise-keep15's two 62.34 Hz lines beside a real-time 90 ms source are gone, every other
line of the 140 files above the same (one keep13-loc control, written by an FWQ build from before the jiffy was
recorded, read a 611 kHz "tick" and named the tick's 750 Hz: now nothing). Live the same afternoon
(``--periods 90,27 --pairs ""``, load 4.0-7.2, median 5.3: this benchmark, two busy loops of mine for
its first ten minutes, the test suite after them; FWQ kept 10-16 % of its cores; ``--keep noise-keep17``):

    injector(s)        normal   fifo10      other periods said
    27 ms @0             5/5      5/5       none (15 controls included)
    90 ms @0             2/5      4/5       normal 90 ms: could not 2, silent 1 (the power said 0.26 ms would
                                            have shown, the daemon took 1.8 ms); fifo10: could not 1

And the length: normal-priority 90 and 250 ms, 5 runs each with controls, at 6 s (``--iterations 600000``,
load 1.5-6.0, FWQ keeping 9-52 %): 90 ms 5/5, 250 ms 0/5 (the power: the smallest event it would
name 1.9-9.9 ms, above the 0.6-3.3 ms the daemons took), one control named
5.81 Hz, now refused by tick_locked; at 3 s right after (load 5.0-7.2, FWQ keeping 8-18 %): 90 ms 4/5, 250 ms
0/5. A longer run did not name the 250 ms daemons, and the local system keeps 3 s.

With a spectral period from 20 ms up no longer dropped as the harmonic of a fold at a whole fraction of its rate
(analysis.folded_periods; noise-keep15's three normal-priority 27 ms runs named at 54 ms now at 27 ms, nothing
else changed in the 215 kept files of noise-keep11..17), live at normal priority, 5 runs each (2026-11-28
evening, ``--priorities normal``): beside the full test suite (load 1.1-3.2, FWQ keeping 30-52 %;
``--keep noise-keep18``) 27 and 90 ms 5/5 each, nothing in 10 controls; with three busy loops of mine (load
3.7-4.7, FWQ keeping 14 %; ``--keep noise-keep19``):

    injector(s)        normal     other periods said
    27 ms @0             5/5      none (10 controls included)
    90 ms @0             3/5      could not 2 (the power: "none" at 90 ms), silent 0
    250 ms @0            1/5      could not 4 (the power: "none" or 6.6 ms, the daemons took 0.4-1.9 ms), silent 0

The full set at load 3.4-11.2 (median 5.9, FWQ keeping 5-15 %; three busy loops and the test suite beside it;
``--keep noise-keep20``, 2026-11-28 night): named 46 of 80, could not 26, silent 8 (a 13 ms daemon named at 6.5,
17.33 or 26 ms in 6 of 20 runs and missed once, a 27 ms one at 54 ms once); in 15 controls only the host's
100 Hz. With a beat's multiples also tried at the tick's exact beat where the search finds them, and at the
fractions of its recurring lines (recurrence.beat_multiple, 2026-11-29), four of those seven 13 ms runs are named
at 13 ms and nothing else of the 85 files of noise-keep20 and -21 changes. Live after it, three busy loops of
mine (load 2.2-4.7, median 4.5, FWQ keeping 13-15 %; ``--periods 13,27 --pairs 13:90 --keep noise-keep22``):

    injector(s)        normal   fifo10      other periods said
    13 ms @0             5/5      5/5       the host's 100 Hz on core 1 in 2 runs; nothing in 15 controls
    27 ms @0             5/5      5/5
    13@0 + 90@1        10/10    10/10

With seven busy loops (load 7.3-9.8, FWQ keeping 6-7 %; ``--priorities normal --periods 13 --pairs 13:90
--keep noise-keep23``): nothing in 5 controls, 13 ms alone 2/5 and 3 told at 26 ms: the spectrum's comb was
confirmed at 13 ms (76.92 Hz), and the fold's 26 ms, held in 90-97 % of its 63-77 cycles, took it for its
harmonic (analysis.folded_periods keeps that rule below 20 ms: docs/noise.md).

The full set again (2026-11-29 morning, ``--repeat 5 --keep noise-keep27``, two busy loops of mine beside it,
load 1.1-7.5, median 4.7, FWQ keeping 8-32 %), live by 7c7f131:

    injector(s)        normal   fifo10      other periods said
    13 ms @0             5/5      5/5       controls: the host's 100 Hz in 6 of 15, 33.36 Hz once; in 4 of
    27 ms @0             5/5      5/5       60 injected runs 3.34 and 5.13 Hz (one real-time pair run), 8 Hz
    90 ms @0             1/5      5/5       (the 2nd harmonic of a real-time 250 ms source it missed),
    250 ms @0            4/5      5/5       4.05 Hz beside 13 ms, 22.25 Hz beside 250 ms
    13@0 + 90@1        10/10     9/10
    27@0 + 250@1        6/10     9/10

Every miss (11 of 80) was said: the power said the run could not have named what the source took (a
normal-priority 90 ms daemon took -0.25 to 0.85 ms from FWQ keeping 9-11 %). Judged again by the analysis as
it is now (``--rejudge``; recurrence.faster_explains, and the host's 100 Hz a known source of
systems/local.yaml): the same named and missed, nothing but the known timer in the 15 controls (33.36 Hz gone),
and 22.25 Hz gone; 3.34, 4.05, 5.13 and 8 Hz stay (3 of 60 injected runs).

The full set again (2026-11-29 forenoon, ``--repeat 5 --keep noise-keep28``, three busy loops of mine for its
first half and one for a quarter, then my offline analyses beside it; load 3.1-8.3, median 4.5, FWQ keeping
7-19 %), live by b67aa4c:

    injector(s)        normal   fifo10      other periods said
    13 ms @0             5/5      5/5       controls: the host's 100 Hz (known) in 13 of 15, nothing else;
    27 ms @0             5/5      5/5       injected runs: 3.7 Hz once (a normal-priority 90 ms source it
    90 ms @0             0/5      5/5       missed, 270.26 ms: no whole number of its 90.005 ms; FWQ idle
    250 ms @0            0/5      3/5       after one phase in 49 of 50 cycles, after any other in at most
    13@0 + 90@1         5/10    10/10       92 %), the host's 100 Hz (known) beside others
    27@0 + 250@1        5/10     9/10

named 57 of 80, every miss said (the power: "none", or 4.4-9.9 ms where the sources took -2 to 2.2 ms; FWQ kept
7-14 % where the normal-priority 90 and 250 ms daemons were missed), silent 0. Judged again by 777f913 (a
period a whole number of an event named on its core stands out from that event's phases; a share that explains
a fold and is a fold of its own is weighed beside it; ``--rejudge``): named 59, could not 21, silent 0 (the
real-time 250 ms source 4/5 alone, 10/10 in pairs); the same 3.7 Hz once, nothing else. noise-keep27 judged so:
3.34, 4.05, 5.13 and 8 Hz gone, two 250 ms sources more named (71 of 80), no other change.

At 9 s (2026-11-29 afternoon, ``--priorities normal --periods 90,250 --iterations 900000 --keep noise-keep29``,
live by 5fcf09f beside one or two busy loops and, for its last third, the test suite; load 3.0-8.4 (median 5.3), FWQ
holding its cores 16-31 % of the time), normal priority only:

    injector(s)        3 s (keep28)   9 s      other periods said
    90 ms @0               0/5         3/5      controls: the host's 100 Hz (known) or nothing; the two
    250 ms @0              0/5         1/5      90 ms misses told it at 33.36 and 22.24 Hz (its 3rd and
    13@0 + 90@1            5/10        5/10     2nd harmonics: the fold held 90 ms in all its cycles, and
    27@0 + 250@1           5/10        6/10     lost the tie to them: both named at 11.11 Hz since 5fce208)

The 90 ms sources beside a 13 ms one took 0.2-1.1 ms from FWQ and were said could not (power 4.4 ms, 9.9 ms or
none); two 250 ms sources beside a 27 ms one took 2.2 and 1.0 ms where the power said 1.9 and 0.86 ms would
show: silent (the first held 23 of 31 cycles at its phase, chance 7 %, under the fold's 75 % floor). The
analysis costs 3.3 times the CPU of a 3 s run, its power 3.4 times (docs/noise.md "How long FWQ runs").

The power no longer stretches the run (2026-11-29 evening, ``power.inject``: the load's slices keep wall time;
stretched, they piled up at P plus the stall less whole half ticks and the fold's screen ranked those first).
``--rejudge``: noise-keep28 named 59, could not 21, silent 0 as before; noise-keep29 named 17, could not 13,
silent 0 where it had 2 (both 250 ms daemons now "none": on these loaded cores an event waiting for the tick is
named at no size).

Live after it and after the power asked the time domain as core_noise does (2026-11-29 16:10-16:30, ``--priorities
normal --periods 90,250 --pairs 27:250 --repeat 4 --keep noise-keep30``, load 1.9-5.2, median 4.5, FWQ keeping
10-19 %), judged by d711367: 90 ms alone 1/4, 250 ms alone 0/4, 27+250 ms 4/8 (the 27 ms ones); every miss said
("none"), silent 0; controls: the host's 100 Hz (known) only; in injected runs 22.22 Hz (a 90 ms source's comb
raised to its 2nd harmonic), 14.97 and 6 Hz once each.

The fold also folds a daemon's wake-ups (2026-11-29 night, ``folding.WAKE_US``: stalls from 10 us away from the
host's timer, named where its phase also starts long stalls; one source told by two cores counted once). Kept
files, without the power: noise-keep30 7 of 16 normal-priority sources named (5 before), noise-keep28 23 of 40
(20 before), other periods unchanged, controls nothing. Live (``--priorities normal --periods 90,250 --pairs
13:90,27:250 --repeat 3 --keep noise-keep31``, load 3.3-4.4, median 3.9): 90 ms alone 1/3, 250 ms alone 0/3,
13+90 ms 3/6 (the 13 ms ones), 27+250 ms 4/6 (the 27 ms ones and a 250 ms one); silent 0; controls: the host's
100 Hz (known) only; 22.22 Hz once on a 90 ms source's core, whose stalls recurred every 45 ms there.

On a quiet host (2026-11-29 late night, docs/noise.md "A quiet core"): the tick's busiest phase left out only where
it is a crowd, a slow event at its own phase kept beside a faster host event it is a whole share of, spectral
rates known to their bin, "clearly more often" beyond chance, the least common period. Quiet, live (``--repeat 5
--keep noise-keep35-quiet``, load 0.7-1.6), judged again: named 77 of 80 (73 live, by the code before the bin
point), said could not 3, silent 0 (3 live); every 250 ms source alone named (7 of 10 live); other periods
199.98 and 23.43 Hz once each, a control 96.61 Hz once. Loaded (``--repeat 5 --keep noise-keep34``, three busy
loops beside it, load 1.9-6.5, median 5.4, FWQ keeping a tenth of its cores), live and judged again alike: named
65 of 80, said could not 15 (every normal-priority 250 ms source alone: "none"), silent 0; controls the host's
100 Hz only; in injected runs 23.08 and 30.77 Hz (beats of a real-time 13 ms source with the host's timer),
11.54, 200, 19.59 and 8 Hz once each.

Each event's size and the tick's (2026-11-30, docs/noise.md "A fresh quiet set"): an event of the tick's own
size is shown, not flagged (``~``); a fold whose long stalls are a named slower event's train is its share; a
fold within a line's bin is that line's event; a phase's chance is at least the evenly spread onsets'. Quiet,
live (``--repeat 5 --keep noise-keep36-quiet``, load 1.4-1.8): named 74 of 80, silent 6 (a real-time 90 ms
source at 22.22 Hz, 5 of 5, and once at normal priority), a control 2.89 Hz once; judged again by the code with
all four: named 80 of 80, nothing flagged beside them. noise-keep35-quiet judged again: 80 of 80, 23.43 Hz once
on a real-time 27 ms core; noise-keep33-quiet 9 of 9. noise-keep34 (loaded) judged again: the same names in 74
of 75 runs; one normal-priority 27 ms source is named at 18.52 Hz (its long stalls every other cycle, the
spectrum's 54 ms), said could not, not silent. A new quiet set judged live by that code (``--keep
noise-keep37-quiet``, load 1.3-2.0): named 78 of 80, said could not 2, silent 0; controls nothing; 3.74 and 8 Hz
once each beside the sources.

Loaded, live (2026-11-30 02:48-04:19, ``--repeat 5 --keep noise-keep38-loaded``, three busy loops of mine beside
it, load 2.2-8.8, median 6.5, FWQ keeping 7-15 %), judged live by dd66c2f: named 67 of 80, said could not 13
(normal-priority 250 ms alone 4 of 5), silent 0; controls the known host sources only; 22.22 Hz twice and 55.56 Hz
once beside the sources. The fold's idle window asked at its least chance, a misplaced candidate refined again
on all long stalls (docs/noise.md "A loaded set"), and two trains at different phases kept apart: noise-keep34
judged again (8dee71e) named 66 of 80 (64 before: a real-time 90 ms and a real-time 250 ms source), could not 14,
silent 0, controls nothing; noise-keep38-loaded 67 of 80 (one real-time 90 ms source more, one normal-priority
27 ms source told at 54 ms, which the final ``rescreened`` no longer finds: 68 of 80 by it, the analysis alone);
the four quiet sets unchanged (80, 80, 78 of 80 and 9 of 9).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from _cluster import fwq_argv, mpi_env, own_cluster, start_announced, stop_process

from mpiregress.cluster.local import LocalCluster
from mpiregress.errors import InputError
from mpiregress.families.noise import analysis, findings, fwqfile, known, placement, power, probe
from mpiregress.model import systems

REPO = Path(__file__).resolve().parent.parent
INJECTOR = REPO / "benchmarks" / "noise_injector.c"
NODE = "node1"
RT_PRIORITY = 10
OFFSET = 1.07
# The local system's known periodic sources (its host's 10 ms timer): said as other periods, marked, not counted.
KNOWN = known.known_of("local")
KNOWN_MARK = "*"
# An event of the kernel tick's own size on its core(s): said with its size, not flagged
# (findings.tick_sized): listed, not counted.
TICK_MARK = "~"
ORIGINS = "origins.json"  # beside the kept files: each condition's sources' clock origins (taken_us)


def build(work: Path) -> tuple[Path, Path]:
    shutil.copytree(REPO / "checks" / "src" / "fwq", work / "fwq-src")
    subprocess.run(["make", "-C", str(work / "fwq-src"), "MPICC=mpicc", "CFLAGS=-O2", f"PREFIX={work / 'prefix'}",
                    "install"], check=True, capture_output=True, text=True, timeout=300)
    injector = work / "noise_injector"
    subprocess.run(["cc", "-O2", "-o", str(injector), str(INJECTOR)], check=True, capture_output=True, text=True)
    return work / "prefix" / "bin" / "fwq", injector


def spin_us(period_ms: float) -> int:
    """1 ms up to a 27 ms period, 2 ms beyond (the issue's 1 ms every 13 ms and 2 ms every 90 ms)."""
    return 1000 if period_ms < 50 else 2000


def start(injector: Path, core: int, period_ms: float, realtime: bool) -> tuple[subprocess.Popen, int]:
    """The injector, and its clock origin (ns of CLOCK_MONOTONIC: its k-th burst spins from origin + k periods)."""
    argv = (["chrt", "-f", str(RT_PRIORITY)] if realtime else []) + \
        ["taskset", "-c", str(core), str(injector), f"{period_ms:g}", str(spin_us(period_ms)), "3600"]
    proc = start_announced(argv, "noise_injector:", "injector")
    return proc, int(re.search(r"from (\d+) ns", proc.banner).group(1))  # type: ignore[attr-defined,union-attr]


def taken_us(rank: fwqfile.RankData, origin_ns: int, period_ms: float, phases: int = 8) -> float | None:
    """What a source's bursts did to FWQ's rank on their core, on average per burst (us): the lost time of
    the iteration running when a burst fires and of those beginning within its spin, less the same at
    ``phases - 1`` other phases of the period (the baseline: a running iteration is more often a long one, at
    any phase); None when the run holds too few bursts. A synthetic 2 ms stall every 90 ms
    (power.inject) comes out at 2.0 ms.

    At real-time priority a burst stalls FWQ for its whole spin, or lengthens the wait FWQ is in. At normal
    priority FWQ shares its core fairly with the other processes there: a burst preempts FWQ only when FWQ is
    running, and the scheduler moves FWQ's later turns so that its share is kept; the run can only be asked to
    see what the source did to it. Tried and dropped: the iterations ending within the spin and one jiffy more,
    less half a period later (named 13 ms sources at normal priority came out negative: the scheduler moves
    FWQ's losses away from a burst); those beginning within the spin, less the run's average (named real-time
    90 ms sources came out at -0.7 to -1.0 ms: on a loaded core such a burst mostly lengthens a wait begun
    before it)."""
    starts = rank.start_ns + rank.start_times_ns()
    cumulative = np.concatenate(([0], np.cumsum(np.clip(rank.times_ns.astype(np.int64) - rank.quantum_ns, 0, None))))
    period = period_ms * 1e6
    spin = spin_us(period_ms) * 1e3
    first = math.ceil((starts[0] + period - origin_ns) / period)
    last = math.floor((starts[-1] - 2 * period - origin_ns) / period)
    if last < first:
        return None

    def lost_at(fires: np.ndarray) -> float:
        running = np.searchsorted(starts, fires, side="right") - 1
        begun = np.maximum(np.searchsorted(starts, fires + spin, side="left"), running + 1)
        return float((cumulative[begun] - cumulative[running]).mean())

    fires = origin_ns + np.arange(first, last + 1) * period
    baseline = float(np.mean([lost_at(fires + period * j / phases) for j in range(1, phases)]))
    return (lost_at(fires) - baseline) / 1e3


def judge(raw: fwqfile.FwqRun, run: analysis.RunNoise, sources: list[tuple[int, float]],
          origins: dict[str, int] | None = None) -> tuple[int, int, int, list[str], str]:
    """(named, missed where the run's power said it could not see that source, missed silently, other periods
    said, detail) of one run; ``sources``: (core, period ms); ``origins``: each source's clock origin by
    :func:`source_key` (files kept before 2026-11-28 have none).

    A missed source is "silent" when the product's own power measurement (families/noise/power.py, on the
    node's noisiest core, 7 % off the source's period) says this run would have named a stall as long as what
    the source took from FWQ on its core (:func:`taken_us`; the injector's spin where its origin is unknown):
    the run claimed it could have seen what it missed."""
    events = findings.one_core_events(run)
    host = [(p, where) for where, p, _ in findings.host_events(run)]
    named, honest, silent, used, could = 0, 0, 0, set(), []
    node = run.nodes[0]
    noisiest = power.noisiest_rank(raw.nodes[0], node)
    took = []
    for core, period in sources:
        origin = (origins or {}).get(source_key(core, period))
        rank = next((r for r in raw.nodes[0].ranks if r.cpu == core), None)
        taken = taken_us(rank, origin, period) if origin is not None and rank is not None else None
        took.append(f"{period:g}ms:{taken / 1e3:.2g}ms" if taken is not None else f"{period:g}ms:?")
        hz = 1000.0 / period
        hit = next((i for i, (c, p) in enumerate(events) if c.cpu == core and i not in used
                    and abs(p.frequency_hz - hz) <= max(1.0 / c.duration_s, 0.02 * hz)), None)
        if hit is not None:
            used.add(hit)
            named += 1
            continue
        # 7 % off the source's period: at its own period the real train (missed, yet there) would lend its
        # spectral line to the synthetic one, and the run would seem to see what it did not.
        smallest = power.smallest_stall_us(noisiest, period * OFFSET, node.tick_hz,
                                           faster_hz=power.noisiest_spectral(node))
        could.append(f"{period:g}ms>={smallest / 1e3:.2g}ms" if smallest != float("inf") else f"{period:g}ms:none")
        if smallest <= (spin_us(period) if taken is None else taken):
            silent += 1
        else:
            honest += 1
    ticks_us = findings.where_ticks(run)
    other = [f"core{c.cpu}:{p.frequency_hz:g}{mark(p, c.tick_detour_us)}"
             for i, (c, p) in enumerate(events) if i not in used]
    other += [f"host:{p.frequency_hz:g}{mark(p, ticks_us.get(where))}" for p, where in host]
    ticks = sorted({n.tick_hz for n in run.nodes if n.tick_hz})
    eff = " ".join(f"{n.efficiency:.3f}" for n in run.nodes)
    lost = " ".join(f"{c.lost_fraction:.0%}" for n in run.nodes for c in n.cores)
    said = " ".join(f"core{c.cpu}:{p.frequency_hz:g}" for c, p in events) or "-"
    return named, honest, silent, other, (f"named {said}; took {' '.join(took) or '-'}; missed could see "
                                          f"{' '.join(could) or '-'}; tick "
                                          f"{ticks or '-'}; eff {eff}; lost {lost}")


def mark(p: analysis.Period, tick_us: float | None) -> str:
    """KNOWN_MARK for a known source of the local system, TICK_MARK for an event the tick's size, else ''."""
    return KNOWN_MARK if findings.known_as(p, KNOWN) else TICK_MARK if findings.tick_sized(p, tick_us) else ""


def unknown(others: list[str]) -> int:
    """How many of the other periods said are flagged: neither a known source of the local system
    (``KNOWN_MARK``) nor the tick's size (``TICK_MARK``)."""
    return sum(1 for o in others if not o.endswith((KNOWN_MARK, TICK_MARK)))


def file_stem(condition: str) -> str:
    """A condition's name as its kept files begin (``normal 27ms@0+250ms@1`` -> ``normal_27ms@0and250ms@1``)."""
    return condition.replace(" ", "_").replace("+", "and")


def read_origins(folder: Path) -> dict[str, dict[str, int]]:
    """The sources' clock origins kept in ``folder`` (``ORIGINS``), by condition's file stem; none kept: {}."""
    path = folder / ORIGINS
    return json.loads(path.read_text()) if path.exists() else {}


def source_key(core: int, period_ms: float) -> str:
    """How a source's clock origin is filed (``ORIGINS`` beside the kept files)."""
    return f"{period_ms:g}ms@{core}"


def run_once(cluster: LocalCluster, fwq: Path, work: Path, name: str, i: int,
             sources: list[tuple[int, float]], origins: dict[str, int], keep: Path | None,
             iterations: int = placement.ITERATIONS) -> tuple[int, int, int, list[str], str] | None:
    out = work / f"{file_stem(name)}-{i}.fwq"
    prefix = probe.realtime(systems.get("local").partitions[0].reframe.get("extras", {}).get("fwq_realtime_priority"))
    done = subprocess.run(fwq_argv(fwq, out, prefix, NODE, iterations), env=mpi_env(cluster), capture_output=True,
                          text=True, timeout=600, cwd=work)
    if keep and out.exists():
        shutil.copy(out, keep / out.name)
    try:
        raw = fwqfile.read(out)
    except (InputError, OSError) as err:
        print(f"  lost: exit {done.returncode}: {err}; {done.stderr.strip()[-300:]}", flush=True)
        return None
    return judge(raw, analysis.analyse(raw), sources, origins)


def conditions(periods: list[float], pairs: list[tuple[float, float]],
               priorities: tuple[str, ...] = ("normal", "fifo10")) -> list[tuple[str, bool, list]]:
    out: list[tuple[str, bool, list]] = [("control", False, [])]
    for realtime in [p == "fifo10" for p in priorities]:
        tag = "fifo10" if realtime else "normal"
        out += [(f"{tag} {p:g}ms@0", realtime, [(0, p)]) for p in periods]
        out += [(f"{tag} {a:g}ms@0+{b:g}ms@1", realtime, [(0, a), (1, b)]) for a, b in pairs]
        out.append((f"control after {tag}", False, []))
    return out


def print_tally(tally: list) -> None:
    print(f"{'condition':>24} {'sources':>7} {'named':>5} {'said could not':>14} {'silent miss':>11} {'other':>5} "
          f"{'runs':>4} {'lost':>4}  other periods said ({KNOWN_MARK}: a known source of systems/local.yaml, "
          f"{TICK_MARK}: the tick's size, shown, not flagged; not counted)")
    for name, sources, named, honest, silent, other, runs, lost, which in tally:
        print(f"{name:>24} {sources:>7} {named:>5} {honest:>14} {silent:>11} {other:>5} {runs:>4} {lost:>4}  "
              f"{which or '-'}")


def rejudge(folder: Path) -> int:
    """The tally of every kept file (``--keep``), judged by the analysis as it is now."""
    origins = read_origins(folder)
    groups: dict[str, list[Path]] = {}
    for path in sorted(folder.glob("*.fwq")):
        groups.setdefault(path.stem.rsplit("-", 1)[0], []).append(path)
    tally = []
    for name, paths in groups.items():
        sources = [(int(core), float(ms)) for ms, core in re.findall(r"(\d+(?:\.\d+)?)ms@(\d)", name)]
        named = honest = silent = 0
        others: list[str] = []
        for path in paths:
            raw = fwqfile.read(path)
            n, h, q, other, detail = judge(raw, analysis.analyse(raw), sources, origins.get(name))
            named, honest, silent = named + n, honest + h, silent + q
            others += other
            print(f"{path.name}: named {n}/{len(sources)}, other {' '.join(other) or '-'}: {detail}", flush=True)
        tally.append((name, len(sources) * len(paths), named, honest, silent, unknown(others), len(paths), 0,
                      " ".join(sorted(set(others)))))
    print_tally(tally)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--periods", default="13,27,90,250")
    parser.add_argument("--pairs", default="13:90,27:250")
    parser.add_argument("--priorities", default="normal,fifo10", help="the injectors' priorities to run")
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--iterations", type=int, default=placement.ITERATIONS,
                        help="FWQ iterations per run (default: the check's)")
    parser.add_argument("--rejudge", type=Path, default=None, help="judge the files kept in this folder, run nothing")
    args = parser.parse_args()
    if args.rejudge:
        return rejudge(args.rejudge)
    periods = [float(p) for p in args.periods.split(",") if p]
    pairs = [(float(a), float(b)) for a, b in (p.split(":") for p in args.pairs.split(",") if p)]
    if args.keep:
        args.keep.mkdir(parents=True, exist_ok=True)
    print(f"# FWQ on {NODE}, cores 0,1, -n {args.iterations}, as the check runs here (normal priority); "
          f"injectors: taskset, normal or chrt -f {RT_PRIORITY}", flush=True)
    tally = []
    loads: list[float] = []
    with own_cluster(2, "noise-inj") as (cluster, work):
        fwq, injector = build(work)
        cluster.start()
        for name, realtime, sources in conditions(periods, pairs, tuple(args.priorities.split(","))):
            started = {source_key(core, period): start(injector, core, period, realtime) for core, period in sources}
            procs = [proc for proc, _ in started.values()]
            origins = {key: origin for key, (_, origin) in started.items()}
            if args.keep:
                kept = read_origins(args.keep)
                kept[file_stem(name)] = origins
                (args.keep / ORIGINS).write_text(json.dumps(kept, indent=1))
            named = honest = silent = lost = runs = 0
            others: list[str] = []
            try:
                time.sleep(0.3)
                for i in range(args.repeat):
                    judged = run_once(cluster, fwq, work, name, i, sources, origins, args.keep, args.iterations)
                    loads.append(os.getloadavg()[0])
                    runs += 1
                    if judged is None:
                        lost += 1
                        continue
                    n, h, q, other, detail = judged
                    named, honest, silent = named + n, honest + h, silent + q
                    others += other
                    print(f"{name} {i}: named {n}/{len(sources)}, other {' '.join(other) or '-'}, load "
                          f"{loads[-1]:.1f}: {detail}", flush=True)
            finally:
                for proc in procs:
                    stop_process(proc)
            tally.append((name, len(sources) * (runs - lost), named, honest, silent, unknown(others), runs, lost,
                          " ".join(sorted(set(others)))))
    if loads:
        print(f"# load average (1 min) after each run: min {min(loads):.1f}, median {statistics.median(loads):.1f}, "
              f"max {max(loads):.1f}")
    print_tally(tally)
    return 0


if __name__ == "__main__":
    sys.exit(main())
