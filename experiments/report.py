"""Generate the results report ``docs/results.md`` (and ``docs/results/*.png|csv``) from the experiments.

    .venv/bin/python -m experiments.report [--reps R] [--seed S] [--only NAME ...] [--out docs]

Runs the modules listed in :data:`SECTIONS` in order. Each module ``experiments/<name>.py`` exposes
``TITLE`` and ``run(out_dir, reps, seed) -> str`` (the Markdown body of its section; it writes its
figures and CSVs into ``out_dir`` with the prefix ``<name>_``). Without ``--reps`` each section runs
with its module's ``DEFAULT_REPS`` (chosen so that the whole report takes about 20 minutes on a
2-core machine), or :data:`FALLBACK_REPS` when the module has none. A module listed in
:data:`SECTIONS` that cannot be imported stops the report, unless ``--only`` names a subset.

Every number in the report is computed by the run; the header records the command, the date, the
git commit, the reps and seed, the wall time of each section and the machine (cores, load).
"""

from __future__ import annotations

import os

# many small LAPACK calls (FPCA chains, eigen-decompositions): BLAS threads only add latency on a shared
# 2-core machine; set before numpy is imported (the header records the value)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse  # noqa: E402
import datetime as dt  # noqa: E402
import importlib  # noqa: E402
import importlib.util  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import shlex  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass, field  # noqa: E402
from pathlib import Path  # noqa: E402
from types import ModuleType  # noqa: E402

import matplotlib  # noqa: E402

matplotlib.use("Agg")

from experiments._util import Verdict, md_table, tagged_verdicts  # noqa: E402

REPO = Path(__file__).resolve().parents[1]

#: The report's sections, in order (module names under ``experiments/``).
SECTIONS: tuple[str, ...] = ("mean_simulations", "electricity_table2", "mortality_kde", "kde_figures", "timing_table1",
                             "fpca_table1", "fpca_deflation", "fpca_simulation", "hrw_examples", "defaults_vs_paper")

#: Reps for a section whose module does not define ``DEFAULT_REPS``.
FALLBACK_REPS = 10

#: Default seed of the report (each section gets this seed; simulations only, never a release).
DEFAULT_SEED = 20240610

#: Markdown links into the results folder: ``](results/<file>)``.
LINK = re.compile(r"\]\((results/[^)\s]+)\)")


@dataclass
class SectionResult:
    """One section's output and its cost."""

    name: str
    title: str
    reps: int
    seconds: float
    body: str
    verdicts: list[Verdict] = field(default_factory=list)


def load_sections(only: list[str] | None) -> list[tuple[str, ModuleType]]:
    """Import the section modules (all of :data:`SECTIONS`, or ``only`` in :data:`SECTIONS` order).

    Raises:
        SystemExit: an unknown name in ``only``, or a module that cannot be imported.
    """
    if only:
        unknown = sorted(set(only) - set(SECTIONS))
        if unknown:
            raise SystemExit(f"--only ({', '.join(unknown)}) must name sections of {SECTIONS}")
        names = [s for s in SECTIONS if s in only]
    else:
        names = list(SECTIONS)
    modules = []
    for name in names:
        try:
            module = importlib.import_module(f"experiments.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"experiments.{name}":
                raise
            raise SystemExit(
                f"section {name!r} (experiments/{name}.py) does not exist; the full report needs every section of "
                f"{SECTIONS} (use --only to generate a subset)"
            ) from exc
        for attr in ("TITLE", "run"):
            if not hasattr(module, attr):
                raise SystemExit(f"experiments/{name}.py must define {attr} (see experiments/report.py)")
        modules.append((name, module))
    return modules


def _git_commit() -> str:
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, capture_output=True,
                              text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "fdpcore", "experiments"],
                               cwd=REPO, capture_output=True, text=True, check=True).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    files = sorted(line[3:] for line in dirty if line.strip())
    return head + (f" (with uncommitted changes in {', '.join(files)})" if files else "")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _versions() -> str:
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "not installed"

    return f"Python {platform.python_version()}, " + ", ".join(f"{p} {v(p)}" for p in ("numpy", "scipy", "opendp", "matplotlib"))


def run_sections(modules: list[tuple[str, ModuleType]], results_dir: Path, reps: int | None,
                 seed: int) -> list[SectionResult]:
    """Run each section into ``results_dir`` (its old ``<name>_*`` files removed first)."""
    results_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for name, module in modules:
        for stale in results_dir.glob(f"{name}_*"):
            stale.unlink()
        r = reps if reps is not None else int(getattr(module, "DEFAULT_REPS", FALLBACK_REPS))
        print(f"[report] {name}: reps={r} seed={seed} ...", flush=True)
        t0 = time.perf_counter()
        body = module.run(results_dir, r, seed)
        seconds = time.perf_counter() - t0
        print(f"[report] {name}: {seconds:.1f} s", flush=True)
        found = list(module.verdicts(results_dir)) if hasattr(module, "verdicts") else []
        out.append(SectionResult(name, str(module.TITLE), r, seconds, body.strip(), found))
    return out


def render(sections: list[SectionResult], *, command: str, seed: int, started: dt.datetime, commit: str,
           load_before: tuple[float, float, float], load_after: tuple[float, float, float], subset: bool) -> str:
    """The whole report: header (provenance, machine, per-section reps and time), contents, sections."""
    total = sum(s.seconds for s in sections)
    lines = [
        "# fdp: reproduction of the papers' experiments",
        "",
        "Generated by the command below; every number, table and figure in this file comes from that run "
        "(paper reference numbers are quoted from MATH.md §13 via `experiments/reference.py`). Do not edit by hand.",
        "",
        f"* Command: `{command}`",
        f"* Date: {started.strftime('%Y-%m-%d %H:%M:%S %Z').strip()}",
        f"* Git commit: {commit} (at the start of the run)",
        f"* Seed: {seed} (simulations use NumPy noise, `secure=False`; the library's releases use OpenDP)",
        f"* Machine: {os.cpu_count()} cores ({_cpu_model()}), {platform.system()} {platform.release()}; "
        f"load average (1/5/15 min) {' / '.join(f'{x:.2f}' for x in load_before)} at the start, "
        f"{' / '.join(f'{x:.2f}' for x in load_after)} at the end (the machine is shared, so timings vary)",
        f"* Software: {_versions()}"
        + "".join(f"; {k}={os.environ[k]}" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
                  if k in os.environ),
        f"* Run time: {total:.1f} s in total (the sum of the section times below; this is the only statement of "
        "the report's run time)",
    ]
    if subset:
        lines.append(f"* Subset: only {', '.join(s.name for s in sections)} of {', '.join(SECTIONS)} (`--only`)")
    lines += ["", "| section | module | reps | wall time (s) |", "| --- | --- | --- | --- |"]
    for i, s in enumerate(sections, 1):
        lines.append(f"| {i}. [{s.title}](#{_anchor(i, s.title)}) | `experiments/{s.name}.py` | {s.reps} | {s.seconds:.1f} |")
    lines += ["", *summary(sections)]
    for i, s in enumerate(sections, 1):
        lines += ["", f"## {i}. {s.title}", "", s.body]
    lines += ["", *closing_note(sections)]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def summary(sections: list[SectionResult]) -> list[str]:
    """The verdict table: every paper item the sections judge, its paper number, ours, the computed verdict."""
    rows = [[f"{i}", _cell(v.claim), _cell(v.paper), _cell(v.ours), v.tagged]
            for i, s in enumerate(sections, 1) for v in s.verdicts]
    if not rows:
        return []
    return ["## Verdicts", "",
            "Every verdict below (and the same verdict where a section repeats it) is computed by code from the "
            "section's CSVs (`verdicts()` of each module); `tests/experiments/test_verdicts.py` recomputes every "
            "tagged verdict of this file from `docs/results/` and fails when a sentence and its numbers disagree.",
            "", md_table(["section", "claim", "paper", "ours", "verdict"], rows)]


#: Paper items with no row above, and why (the closing note lists them with the computed shortfalls).
NOT_RUN = (
    "[ICLP-v2] Table 2 and [AKRS] Tables 1-2, DTI rows: the DTI `cca` data are not shipped and cannot be downloaded here.",
    "FRL densities ([ICLP-v2] Table 3 and the KDE study): built from the library's FRL mean release of the records' "
    "kernel bumps with M by PSS (the paper: PCV, not DP); not run in 2-D.",
    "[HRW] Fig. 2 (the Sobolev mechanism): fdpcore has no Sobolev-space release; Figs. 1 and 3 are figures only, so "
    "only our own checks are judged there.",
    "[AKRS] Figs. 2-3: the paper gives figures only (no numbers), so only the trend is judged; the design's unstated "
    "constants are ours (section text).",
    "[ICLP-v2] §6.1 FRL oracle pick of M (uses the true mean; not privacy-safe) is replaced by PSS.",
)


def _defaults_note(names: list[str]) -> list[str]:
    """The issue-20 comparison of the new defaults with the papers' rules, when it is not in this run."""
    if "defaults_vs_paper" in names:
        return []
    if importlib.util.find_spec("fdpcore.noise.quantiles") is None:
        return ["The new defaults of the utility work (`tau: auto`, `risk_prior` tuning; issue 16) side by side with the "
                "papers' rules at equal total ε: not run, because they were not on main when this report was generated "
                "(no `fdpcore.noise.quantiles`)."]
    return ["The new defaults of the utility work side by side with the papers' rules: not in this run (`--only`)."]


def closing_note(sections: list[SectionResult]) -> list[str]:
    """What is still not reproduced and why: the computed shortfalls, then the items not run."""
    lines = ["## Still not reproduced", ""]
    for s in sections:
        for v in s.verdicts:
            if v.word != "confirmed":
                lines.append(f"* {_cell(v.claim)} ({v.key}): {v.word}" + (f" — {v.why}" if v.why else "") + ".")
    lines += [f"* {item}" for item in (*NOT_RUN, *_defaults_note([s.name for s in sections]))]
    return lines


def _anchor(i: int, title: str) -> str:
    """GitHub's heading anchor of ``## i. title``."""
    text = f"{i}. {title}".lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def recompute_verdicts(results_dir: Path, names: tuple[str, ...] = SECTIONS) -> dict[str, Verdict]:
    """Every verdict the sections compute from the CSVs in ``results_dir`` (sections whose CSVs are absent skipped)."""
    out: dict[str, Verdict] = {}
    for name in names:
        module = importlib.import_module(f"experiments.{name}")
        if not hasattr(module, "verdicts") or not any(results_dir.glob(f"{name}_*.csv")):
            continue
        for v in module.verdicts(results_dir):
            out[v.key] = v
    return out


def check_report(markdown: str, results_dir: Path, names: tuple[str, ...] = SECTIONS) -> list[str]:
    """Disagreements between the report's tagged verdicts and the verdicts recomputed from the CSVs.

    Each problem is a sentence: a tag whose word differs from the recomputed one, a tag no section
    computes, or a computed verdict that the report never prints.
    """
    found = recompute_verdicts(results_dir, names)
    problems = []
    tags = tagged_verdicts(markdown)
    for key, word in tags:
        if key not in found:
            problems.append(f"{key}: printed '{word}' but no section computes this verdict from {results_dir}")
        elif found[key].word != word:
            problems.append(f"{key}: printed '{word}' but the CSVs give '{found[key].word}' ({found[key].ours})")
    printed = {k for k, _ in tags}
    problems += [f"{key}: computed ('{v.word}') but never printed" for key, v in found.items() if key not in printed]
    return problems


def missing_links(markdown: str, docs_dir: Path) -> list[str]:
    """Links ``](results/...)`` in ``markdown`` whose file does not exist under ``docs_dir``."""
    return [link for link in LINK.findall(markdown) if not (docs_dir / link).is_file()]


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, run the sections, write ``<out>/results.md``."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=None,
                    help="replicates for every section (default: each module's DEFAULT_REPS; the papers use 100)")
    ap.add_argument("--seed", type=int, default=DEFAULT_SEED)
    ap.add_argument("--only", nargs="+", metavar="NAME", help=f"run only these sections of {SECTIONS}")
    ap.add_argument("--out", type=Path, default=REPO / "docs", help="writes OUT/results.md and OUT/results/")
    args = ap.parse_args(argv)
    if args.reps is not None and args.reps < 1:
        ap.error(f"--reps ({args.reps}) must be >= 1")
    modules = load_sections(args.only)
    started = dt.datetime.now().astimezone()
    commit = _git_commit()
    load_before = os.getloadavg()
    sections = run_sections(modules, args.out / "results", args.reps, args.seed)
    command = "python -m experiments.report " + shlex.join(argv if argv is not None else sys.argv[1:])
    text = render(sections, command=command.strip(), seed=args.seed, started=started, commit=commit, load_before=load_before,
                  load_after=os.getloadavg(), subset=bool(args.only))
    broken = missing_links(text, args.out)
    if broken:
        raise SystemExit(f"the report links files that were not written: {broken}")
    disagree = check_report(text, args.out / "results", tuple(s.name for s in sections))
    if disagree:
        raise SystemExit("the report's verdicts disagree with its CSVs: " + "; ".join(disagree))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.md").write_text(text)
    print(f"[report] wrote {args.out / 'results.md'} ({sum(s.seconds for s in sections):.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
