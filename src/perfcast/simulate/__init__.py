"""Prediction by simulation (``dperf-block-benchmarking-prediction.txt``): one traced run on
this machine, its run time predicted on machines we do not have.

The pieces, in the order a user meets them:

- ``perfcast build --trace`` (runtime ``measure/runtime/perfcast_trace.c``) makes a run write
  SimGrid time-independent traces: the compute blocks between MPI calls, timed, and every
  MPI call with its arguments; :mod:`.trace` reads them (and refuses a run that crashed).
  ``--threshold PROFILE`` shortens the taint profile's parameter-dependent loops by dPerf's
  threshold iteration rule (:mod:`perfcast.measure.threshold`).
- :mod:`.calibrate` (``perfcast platform calibrate``) describes this machine as a SimGrid
  platform from an MPI ping-pong, with SMPI's piecewise factors; :mod:`.platform`
  (``perfcast platform describe``) writes target machines from a few numbers and reads any
  platform file.
- :mod:`.replay` runs SimGrid's ``smpirun -replay``; :mod:`.simulation` (``perfcast
  simulate``) predicts a trace on each platform and splits the time into compute and
  communication.
- :mod:`.synthesis` (``perfcast simulate T1 T2 ... --synthesize P -o DIR``) writes the trace
  of a rank count nobody ran from traces at a few small ones: peers as offsets (in rank
  numbers, or in the positions of a 2-D or 3-D grid, :mod:`.grid`) or fixed ranks, counts
  and compute blocks as PMNF models in ``p``; what it refuses and how far it
  goes are in its docstring.
"""
