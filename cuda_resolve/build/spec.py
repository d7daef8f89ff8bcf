"""BuildSpec: the decided half of one source build, and its JSON form inside a Plan.

A BuildSpec holds everything the builder needs and nothing it has to look up: the whole Recipe
(repository, revision or archive hash, patches, build requirements, smoke test), the toolkit,
the arch list, the variables (``CUDA_HOME``, ``TORCH_CUDA_ARCH_LIST``, the compiler switch ...),
``MAX_JOBS``, the torch it builds against and the wheel's ABI key fields. A plan written on one
machine and applied on another hands the executor these, not names to find in an index.

:func:`spec_from_json` reads what :meth:`BuildSpec.to_json` wrote; errors name the key path.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from .._frozen import frozen
from ..environment import Toolkit
from ..index.model import Patch, Recipe, SmokeTest, SourceArchive
from ..versions import ComputeCapability, CudaVersion

if TYPE_CHECKING:
    from .._toml import Table

__all__ = [
    "BuildSpec",
    "recipe_from_json",
    "recipe_to_json",
    "spec_from_json",
    "toolkit_from_json",
    "toolkit_to_json",
]


@frozen
class BuildSpec:
    """What to build and how: the decided half of a build (no I/O has happened yet)."""

    recipe: Recipe
    package: str
    import_name: str
    python: str  # the target interpreter that runs `pip wheel`
    python_tag: str  # cp311
    platform: str  # linux_x86_64
    torch_version: str  # base version built against: 2.14.1
    torch_requirement: (
        str | None
    )  # set when the target's torch is not that build: install it in the overlay
    torch_index: str | None
    variant: str  # cu130
    toolkit: Toolkit
    arch_list: str  # TORCH_CUDA_ARCH_LIST: 8.6;9.0+PTX
    variables: tuple[
        tuple[str, str], ...
    ]  # CUDA_HOME, TORCH_CUDA_ARCH_LIST, recipe env, CC/CXX ...
    include_dirs: tuple[
        str, ...
    ] = ()  # headers torch needs that the toolkit lacks (nvidia-* wheels)
    missing_headers: tuple[str, ...] = ()  # still to be found in the overlay's nvidia-* wheels
    build_requires: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    max_jobs: int | None = (
        None  # decided at planning from the machine's cores and memory; None: at build time
    )
    torch_index_option: str = "--index-url"  # or "--find-links" for a flat PyTorch mirror

    def to_json(self) -> dict[str, Any]:
        return {
            "package": self.package,
            "import_name": self.import_name,
            "python": self.python,
            "python_tag": self.python_tag,
            "platform": self.platform,
            "torch_version": self.torch_version,
            "torch_requirement": self.torch_requirement,
            "torch_index": self.torch_index,
            "torch_index_option": self.torch_index_option,
            "variant": self.variant,
            "toolkit": toolkit_to_json(self.toolkit),
            "arch_list": self.arch_list,
            "max_jobs": self.max_jobs,
            "variables": {name: value for name, value in self.variables},
            "include_dirs": list(self.include_dirs),
            "missing_headers": list(self.missing_headers),
            "build_requires": list(self.build_requires),
            "notes": list(self.notes),
            "recipe": recipe_to_json(self.recipe),
        }


def toolkit_to_json(toolkit: Toolkit) -> dict[str, Any]:
    return {
        "version": str(toolkit.version),
        "root": toolkit.root,
        "nvcc": toolkit.nvcc,
        "release": toolkit.release,
        "gpu_archs": [str(cap) for cap in toolkit.gpu_archs],
        "missing_headers": list(toolkit.missing_headers),
        "found_via": toolkit.found_via,
    }


def toolkit_from_json(table: Table) -> Toolkit:
    toolkit = Toolkit(
        version=table.parsed("version", CudaVersion.parse),
        root=table.string("root", None),
        nvcc=table.string("nvcc", None),
        release=table.string("release", None),
        gpu_archs=tuple(ComputeCapability.parse(text) for text in table.strings("gpu_archs", ())),
        missing_headers=table.strings("missing_headers", ()),
        found_via=table.string("found_via", "plan"),
    )
    table.finish()
    return toolkit


def _specifier(text: str) -> SpecifierSet:
    try:
        return SpecifierSet(text)
    except InvalidSpecifier as exc:
        raise ValueError(str(exc)) from None


def recipe_to_json(recipe: Recipe) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": recipe.name,
        "package": recipe.package,
        "version": str(recipe.version),
        "repository": recipe.repository,
        "revision": recipe.revision,
        "archive": None
        if recipe.archive is None
        else {
            "url": recipe.archive.url,
            "sha256": recipe.archive.sha256,
            "strip": recipe.archive.strip,
        },
        "subdirectory": recipe.subdirectory,
        "submodules": recipe.submodules,
        "torch": str(recipe.torch),
        "torch_window": str(recipe.torch_window),
        "python": str(recipe.python),
        "cuda_min": str(recipe.cuda_min) if recipe.cuda_min else None,
        "cuda_max": str(recipe.cuda_max) if recipe.cuda_max else None,
        "build_requires": list(recipe.build_requires),
        "env": {name: value for name, value in recipe.env},
        "patches": [
            {
                "file": p.file,
                "find": p.find,
                "replace": p.replace,
                "reason": p.reason,
                "count": p.count,
                "torch": str(p.torch),
            }
            for p in recipe.patches
        ],
        "smoke": None
        if recipe.smoke is None
        else {
            "imports": list(recipe.smoke.imports),
            "gpu_script": recipe.smoke.gpu_script,
            "description": recipe.smoke.description,
        },
    }
    return data


def _string_map(table: Table, key: str) -> tuple[tuple[str, str], ...]:
    child = table.table(key)
    if child is None:
        return ()
    pairs = tuple((name, child.string(name)) for name in child.keys())
    child.finish()
    return pairs


def recipe_from_json(table: Table) -> Recipe:
    archive_table = table.table("archive")
    archive = None
    if archive_table is not None:
        archive = SourceArchive(
            url=archive_table.string("url"),
            sha256=archive_table.string("sha256"),
            strip=archive_table.string("strip", None),
        )
        archive_table.finish()
    patches = []
    for patch_table in table.tables("patches"):
        patches.append(
            Patch(
                file=patch_table.string("file"),
                find=patch_table.string("find"),
                replace=patch_table.string("replace"),
                reason=patch_table.string("reason", ""),
                count=patch_table.integer("count", 1),
                torch=patch_table.parsed("torch", _specifier, SpecifierSet()),
            )
        )
        patch_table.finish()
    smoke_table = table.table("smoke")
    smoke = None
    if smoke_table is not None:
        smoke = SmokeTest(
            imports=smoke_table.strings("imports", ()),
            gpu_script=smoke_table.string("gpu_script", None),
            description=smoke_table.string("description", ""),
        )
        smoke_table.finish()
    recipe = Recipe(
        name=table.string("name"),
        package=table.string("package"),
        version=table.parsed("version", Version),
        repository=table.string("repository", None),
        revision=table.string("revision", None),
        archive=archive,
        subdirectory=table.string("subdirectory", ""),
        submodules=table.boolean("submodules", False),
        torch=table.parsed("torch", _specifier, SpecifierSet()),
        torch_window=table.parsed("torch_window", _specifier, SpecifierSet()),
        python=table.parsed("python", _specifier, SpecifierSet()),
        cuda_min=table.parsed("cuda_min", CudaVersion.parse, None),
        cuda_max=table.parsed("cuda_max", CudaVersion.parse, None),
        build_requires=table.strings("build_requires", ()),
        env=_string_map(table, "env"),
        patches=tuple(patches),
        smoke=smoke,
    )
    table.finish()
    return recipe


def spec_from_json(table: Table) -> BuildSpec:
    toolkit_table = table.table("toolkit", required=True)
    recipe_table = table.table("recipe", required=True)
    assert toolkit_table is not None and recipe_table is not None
    spec = BuildSpec(
        package=table.string("package"),
        import_name=table.string("import_name"),
        python=table.string("python"),
        python_tag=table.string("python_tag"),
        platform=table.string("platform"),
        torch_version=table.string("torch_version"),
        torch_requirement=table.string("torch_requirement", None),
        torch_index=table.string("torch_index", None),
        torch_index_option=table.string("torch_index_option", "--index-url"),
        variant=table.string("variant"),
        toolkit=toolkit_from_json(toolkit_table),
        arch_list=table.string("arch_list"),
        max_jobs=table.integer("max_jobs", None),
        variables=_string_map(table, "variables"),
        include_dirs=table.strings("include_dirs", ()),
        missing_headers=table.strings("missing_headers", ()),
        build_requires=table.strings("build_requires", ()),
        notes=table.strings("notes", ()),
        recipe=recipe_from_json(recipe_table),
    )
    table.finish()
    return spec
