"""cuda-resolve's conda plugin: the hooks in :mod:`conda_plugin.plugin` (entry point group
``conda``), thin over :mod:`conda_plugin.actions`, whose logic is conda-agnostic code in
:mod:`cuda_resolve.conda`. What it does and why: docs/conda.md."""
