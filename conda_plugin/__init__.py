"""cuda-resolve's conda plugin (to come): a ``conda cuda`` subcommand (doctor, plan, install,
lock), a ``conda doctor`` health check, ``.condarc`` settings and activation variables, all
registered through ``conda.plugins`` hooks that stay thin and call into :mod:`cuda_resolve`."""
