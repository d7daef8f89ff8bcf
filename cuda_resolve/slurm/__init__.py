"""Source builds fanned out over a Slurm cluster (``cuda-resolve build ... --slurm``).

Slurm is the engine: one ``sbatch`` job array, one task per (package, profile) whose wheel is
not in the wheelhouse yet, each task the ordinary ``cuda-resolve build REQ --profile P`` into
the shared wheelhouse (a cross-build: nvcc needs no GPU). Following it reads ``squeue`` and
``scontrol show job`` no faster than every 2 s, and the files each task leaves (its log, its
``--json`` answer, its exit status) in the run's folder, which ``build --status JOBID`` reads
again later. :mod:`.scheduler` runs Slurm's programs; :mod:`.fanout` decides, writes and reads.
"""
