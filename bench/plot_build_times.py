"""The H200 build-time results (bench/h200_build_times.sh) as a markdown page and a PNG plot.

    python bench/plot_build_times.py DIR [DIR ...] [--out bench/results] [--date YYYY-MM-DD]

DIR holds what the script wrote under $OUT: build-times-pointnet2.tsv, build-times-kaolin.tsv
(either may be missing) and machine-*.txt. With several DIRs (sessions), a step that ran in a later
one (not skipped) replaces the same step of an earlier one. Writes OUT/h200-build-times-DATE.md and
OUT/h200-build-times-DATE.png (pointnet2_ops' build time against the number of archs, from the
hand-tuned builds, with cuda-pip's cold install at its one arch). The date is the run's own (the
``date:`` line of machine-*.txt) unless given. matplotlib is needed for the PNG only; it is not a
dependency of cuda-resolve (install it into a scratch venv).
"""

from __future__ import annotations

import argparse
import csv
import re
from dataclasses import dataclass
from pathlib import Path

#: What each step of bench/h200_build_times.sh measures, in the page's words.
STEPS = {
    "upstream-readme": (
        "upstream's README: `pip install` of pointnet2_ops_lib into a venv that has torch"
    ),
    "upstream-unmodified": (
        "upstream's setup.py unmodified, `pip wheel --no-build-isolation` (its own arch list "
        "overrides TORCH_CUDA_ARCH_LIST)"
    ),
    "cuda-pip-cold": (
        "`cuda-pip install` into a fresh venv: empty wheelhouse and cache (detect, plan, build, "
        "publish, install, import check)"
    ),
    "cuda-pip-cold-build": "of which the build, as cuda-pip measured it",
    "cuda-pip-cache-hit": (
        "`cuda-pip install` into another fresh venv: the wheelhouse's wheel, no compile"
    ),
    "cuda-pip-installed-again": "`cuda-pip install` again into that venv: already installed, kept",
    "cuda-pip-smoke": "the same with `--smoke`: the recipe's GPU test of the installed kernels",
    "cuda-resolve-build": "`cuda-resolve build` (cold wheelhouse): source copied, built, published",
    "upstream-defaults": (
        "kaolin's setup.py with its defaults (no FORCE_CUDA, no TORCH_CUDA_ARCH_LIST: torch picks "
        "the GPU's arch, plus PTX), `pip wheel --no-build-isolation`"
    ),
    "kaolin-c-check": "kaolin._C of the installed wheel on the GPU (bench/kaolin_c_check.py)",
}
HAND_TUNED = re.compile(r"hand-tuned-(\d+)$")


@dataclass(frozen=True)
class Row:
    part: str
    step: str
    n_archs: int | None
    archs: str
    rc: str
    wall_s: float | None
    outcome: str
    command: str

    @property
    def ok(self) -> bool:
        return self.rc == "0" and self.wall_s is not None


def read_rows(path: Path) -> list[Row]:
    rows: list[Row] = []
    with open(path, encoding="utf-8", newline="") as stream:
        for record in csv.DictReader(stream, delimiter="\t", quoting=csv.QUOTE_NONE):
            wall = record.get("wall_s") or ""
            n = record.get("n_archs") or ""
            rows.append(
                Row(
                    part=record["part"],
                    step=record["step"],
                    n_archs=int(n) if n.isdigit() else None,
                    archs=record.get("archs") or "",
                    rc=record.get("rc") or "",
                    wall_s=float(wall) if wall else None,
                    outcome=record.get("outcome") or "",
                    command=record.get("command") or "",
                )
            )
    return rows


def describe(step: str) -> str:
    match = HAND_TUNED.match(step)
    if match:
        return (
            f"hand-tuned `pip wheel --no-build-isolation`, {match.group(1)} arch(s), "
            "setup.py's arch line made a default (issue #180's fix)"
        )
    return STEPS.get(step, step)


def machine_facts(folder: Path) -> tuple[list[str], str | None]:
    lines: list[str] = []
    date = None
    for path in sorted(folder.glob("machine-*.txt")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            found = re.match(r"date: (\d{4}-\d\d-\d\d)", line)
            if found:
                date = date or found.group(1)
            elif line.strip() and line not in lines and not line.startswith("W1"):
                lines.append(line)
    return lines, date


def hand_tuned_series(rows: list[Row]) -> list[tuple[int, float, str]]:
    """(number of archs, seconds, arch list) of the successful hand-tuned pointnet2_ops builds."""
    points = [
        (r.n_archs, r.wall_s, r.archs)
        for r in rows
        if r.part == "pointnet2"
        and HAND_TUNED.match(r.step)
        and r.ok
        and r.n_archs is not None
        and r.wall_s is not None
    ]
    return sorted(points)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(rows: list[Row], facts: list[str], date: str, png_name: str | None) -> str:
    out = [
        f"# Build times on the H200 ({date})",
        "",
        "What a source build of pointnet2_ops and kaolin costs through cuda-resolve, by hand, and "
        "as upstream documents it, and how pointnet2_ops' build time grows with the number of "
        "archs (issue 19). Produced by `bench/h200_build_times.sh pointnet2` and `... kaolin` on "
        "the lent H200, then `bench/plot_build_times.py`. Wall-clock times of single runs: "
        "earlier runs on these machines moved by up to a quarter between sessions "
        "(docs/evidence/h200-install-2026-12-02.md).",
        "",
        "Machine:",
        "",
    ]
    out += [f"- {_cell(line)}" for line in facts]
    for part, title in (("pointnet2", "pointnet2_ops"), ("kaolin", "kaolin (master d52da9f)")):
        mine = [r for r in rows if r.part == part]
        if not mine:
            continue
        out += [
            "",
            f"## {title}",
            "",
            "| step | what | archs | wall | result |",
            "| --- | --- | --- | --- | --- |",
        ]
        for r in mine:
            wall = f"{r.wall_s:.1f} s" if r.wall_s is not None else ""
            archs = f"{r.n_archs}: `{r.archs}`" if r.n_archs is not None else r.archs
            out.append(
                f"| {r.step} | {_cell(describe(r.step))} | {_cell(archs)} | {wall} | "
                f"{_cell(r.outcome)} |"
            )
        tuned: dict[int, Row] = {
            r.n_archs: r
            for r in mine
            if HAND_TUNED.match(r.step) and r.ok and r.n_archs is not None
        }
        cold = next(
            (r for r in mine if r.step in ("cuda-pip-cold", "cuda-resolve-build") and r.ok), None
        )
        notes = []
        one = tuned.get(1)
        if cold is not None and one is not None and cold.wall_s and one.wall_s:
            notes.append(f"`{cold.step}` / hand-tuned at one arch: {cold.wall_s / one.wall_s:.2f}")
        if one is not None and one.wall_s and len(tuned) > 1:
            most = max(tuned)
            widest = tuned[most]
            if widest.wall_s:
                notes.append(
                    f"{most} archs / one arch (hand-tuned): {widest.wall_s / one.wall_s:.2f}"
                )
        if notes:
            out += ["", "Ratios: " + "; ".join(notes) + "."]
        out += ["", "Commands, exactly as run (from /tmp):", "", "```"]
        out += [f"# {r.step}\n{r.command}" for r in mine if not r.command.startswith("(from ")]
        out += ["```"]
    if png_name:
        out += ["", f"![pointnet2_ops build time against the number of archs]({png_name})"]
    return "\n".join(out) + "\n"


def plot(rows: list[Row], png: Path, date: str) -> bool:
    points = hand_tuned_series(rows)
    if not points:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    ax.plot(xs, ys, marker="o", label="hand-tuned pip wheel (TORCH_CUDA_ARCH_LIST)")
    for x, y in zip(xs, ys, strict=True):
        ax.annotate(
            f"{y:.0f} s", (x, y), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8
        )
    for step, marker, label in (
        ("cuda-pip-cold", "s", "cuda-pip install, cold (total)"),
        ("cuda-pip-cold-build", "^", "of which cuda-pip's build"),
    ):
        hit = next((r for r in rows if r.part == "pointnet2" and r.step == step and r.ok), None)
        if hit is not None and hit.wall_s is not None:
            ax.plot([1], [hit.wall_s], marker=marker, linestyle="none", label=label)
    ax.set_xticks(xs)
    ax.set_xlabel("number of archs (sm_XX cubins) in one build")
    ax.set_ylabel("wall-clock seconds")
    ax.set_ylim(bottom=0, top=max(ys) * 1.15)
    ax.set_title(f"pointnet2_ops build time on the H200, {date}", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return True


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "folders",
        type=Path,
        nargs="+",
        help="the runs' output folders (the TSVs and machine-*.txt)",
    )
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--date", help="the date in the file names (default: the run's)")
    args = parser.parse_args()
    merged: dict[tuple[str, str], Row] = {}
    facts: list[str] = []
    run_date = None
    for folder in args.folders:
        tsvs = sorted(folder.glob("build-times-*.tsv"))
        if not tsvs:
            parser.error(f"{folder} has no build-times-*.tsv")
        for row in (row for path in tsvs for row in read_rows(path)):
            if row.rc or (row.part, row.step) not in merged:
                merged[(row.part, row.step)] = row
        more, date_here = machine_facts(folder)
        facts += [line for line in more if line not in facts]
        run_date = run_date or date_here
    rows = list(merged.values())
    date = args.date or run_date
    if date is None:
        parser.error("the run's date is not in machine-*.txt: give --date")
    args.out.mkdir(parents=True, exist_ok=True)
    png = args.out / f"h200-build-times-{date}.png"
    drawn = plot(rows, png, date)
    page = args.out / f"h200-build-times-{date}.md"
    page.write_text(markdown(rows, facts, date, png.name if drawn else None), encoding="utf-8")
    print(page)
    if drawn:
        print(png)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
