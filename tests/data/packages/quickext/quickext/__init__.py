"""tests/test_slurm_build.py: the fixture package a Slurm array task builds."""
