"""The experiment harness behind bench/run: section 5 (E1, E2) of the PPIOS paper
(Zhao, Yoshigoe and Xie, 2013) on the ppios-simfs contended-storage emulator. One
module per concept:

  resources  what must not outlive the harness (children, mounts, redis) + signals
  profiles   the run sizes (full, quick, smoke, demo) and the device model chosen
  simfs      mounting the emulator, its model/stats files, the calibration run
  redis      a private redis-server for E2's shared coordinator
  inputs     gen-input files, cached across runs
  builds     the mpicc kernels and their ppios-cc prefetching builds
  jobs       one mpirun job: environment, output parsing
  harness    the E1/E2/E3 loops, result checking, results.csv / runs.jsonl
  report     medians, ratios, efficiency (bound / wall), the targets, summary.md
  plots      the paper's figures as PNGs
"""
