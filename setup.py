"""Package discovery for setuptools (the rest of the build configuration is in pyproject.toml).

Every package under cuda_resolve/, conda_plugin/ and pip_plugin/ is found, so a new subpackage
ships without a list to update; index/ (the curated data, kept at the top level beside the code
that reads it) ships as the package cuda_resolve.index_data, and the user documents docs/*.md
(not docs/evidence/) as cuda_resolve.docs, where the hints name them. A table in pyproject.toml
can either list packages or find them, but cannot find them under a renamed folder, hence this
file.
"""

from setuptools import find_namespace_packages, find_packages, setup

_INDEX_FOLDER = "index"
_INDEX_PACKAGE = "cuda_resolve.index_data"

_code_packages = find_packages(
    include=[
        "cuda_resolve",
        "cuda_resolve.*",
        "conda_plugin",
        "conda_plugin.*",
        "pip_plugin",
        "pip_plugin.*",
    ]
)
# Its data folders have no __init__.py (index/packages/): namespace discovery finds them.
_index_subpackages = find_namespace_packages(where=_INDEX_FOLDER, exclude=["*__pycache__*"])
_index_packages = {_INDEX_PACKAGE: _INDEX_FOLDER} | {
    f"{_INDEX_PACKAGE}.{name}": f"{_INDEX_FOLDER}/{name.replace('.', '/')}"
    for name in _index_subpackages
}

_docs_package = {"cuda_resolve.docs": "docs"}  # its *.md: package data (pyproject.toml)

setup(
    packages=[*_code_packages, *_index_packages, *_docs_package],
    package_dir=_index_packages | _docs_package,
)
