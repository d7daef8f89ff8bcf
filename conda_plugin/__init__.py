"""cuda-resolve's conda plugin: the hooks in :mod:`conda_plugin.plugin` (entry point group
``conda``) and, in :mod:`conda_plugin.actions`, conda's objects turned into plain data for
:class:`cuda_resolve.conda.session.CondaSession`, where the decisions and the state between hooks
are (conda-agnostic, tested in CI with py-rattler). What it does and why: docs/conda.md."""
