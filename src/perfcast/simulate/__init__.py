"""Prediction by simulation (``dperf-block-benchmarking-prediction.txt``): SimGrid platforms
of machines we do not have, and the replay of time-independent traces on them.

Built so far: target platforms from a few numbers (:mod:`.platform`, ``perfcast platform
describe``) and the replay of a trace on a platform with Debian's SimGrid (:mod:`.replay`).
Trace mode of the runtime, the threshold iteration rule, the calibration of this machine and
``perfcast simulate`` are issue 15's remaining steps.
"""
