"""``fdp plan``: the accuracy a release would have, per epsilon, before anything is spent.

From the config, the public inputs and ``n`` (the number of privacy units, public under the
replace-one adjacency; only the unit column is read) — no charge, no ledger write (the ledger, if
it exists, is opened read-only), no Prefect. The numbers come from the functions the release flows
use (:mod:`fdp.tasks.planning`), so they equal the published manifest's. One warning counts data: the units that
would enter the release as the zero record (:mod:`fdp.flows.zero_records`), printed on this terminal (and in
``--json``) only, never published, charged or stored.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fdp.flows.config import format_validation_error, load_config
from fdp.flows.registry import SUMMARIES
from fdp.flows.zero_records import ZeroRecords, count_zero_records, zero_records_warning
from fdp.tasks._publish import LOW_TAU_LEVEL, LOW_TAU_SUMMARIES, clip_target, low_level_text
from fdp.tasks.planning import (
    TAU_FOLLOWS_TEXT,
    a_priori_signal_text,
    accuracy,
    alignment_requirement,
    auto_options,
    build_plan,
    count_config_units,
    covariance_centering_check,
    erm_eta_warning,
    expected_l2_error,
    expected_l2_error_with_bias,
    fosr_coefficients_balanced,
    mean_plan,
    tau_search_range,
    tuning_follows_tau,
    with_bias_note,
)
from fdp.tasks.preflight import Inputs, covariates_averaged_warning, read_inputs, repeated_readings_warning
from fdp.tasks.scale_check import (
    OutOfScale,
    count_out_of_scale,
    narrow_values_warning,
    out_of_scale_warning,
    point_scale_warning,
)
from pydantic import ValidationError

from fdpcore.errors import ConfigError, FdpError, LedgerError
from fdpcore.ledger import DatasetBudget, Ledger, default_ledger_url

__all__ = ["LADDER", "check_release_plan", "epsilon_ladder", "plan_report", "print_plan", "release_warnings"]

#: The tuning parameters a plan row shows (``print_plan``'s tuning column).
TUNED = ("rule", "psi_rule", "eta", "psi", "n_basis", "lattice_k", "gamma", "bandwidth", "prior_strength")

#: Multipliers of the config's epsilon shown when no ``--epsilon`` is given.
LADDER = (0.25, 0.5, 1.0, 2.0, 4.0)


def epsilon_ladder(epsilon: float) -> list[float]:
    """The config's epsilon and a ladder around it (x 1/4, 1/2, 1, 2, 4)."""
    return [float(f"{epsilon * m:.6g}") for m in LADDER]


def _read_only_url(url: str) -> str | None:
    """A read-only form of a SQLite ledger URL, or None when the file does not exist (plan never creates one)."""
    if not url.startswith("sqlite:///"):
        return url
    path = url.removeprefix("sqlite:///")
    if path in ("", ":memory:") or not Path(path).is_file():
        return None
    return f"sqlite:///file:{quote(str(Path(path).resolve()))}?mode=ro&uri=true"


def _budget(ledger_url: str | None, config: Any) -> dict[str, Any]:
    """What the dataset has left: from the ledger (read-only) if it knows the dataset, else the config's proposal."""
    url = ledger_url or default_ledger_url()
    ro = _read_only_url(url)
    b: DatasetBudget | None = None
    if ro is not None:
        try:
            found = Ledger(ro, read_only=True).budgets(config.dataset.id)
        except LedgerError:
            found = []
        b = found[0] if found else None
    if b is None:
        return {"source": "config budget proposal (dataset not in the ledger yet)", "accounting": config.budget.accounting,
                "remaining_epsilon": config.budget.epsilon, "remaining_delta": config.budget.delta,
                "period_remaining_epsilon": config.budget.epsilon_per_period}
    period = None
    if b.current is not None and b.current.remaining is not None:
        period = b.current.remaining[0]
    return {"source": "ledger", "accounting": b.accounting, "remaining_epsilon": b.remaining[0],
            "remaining_delta": b.remaining[1], "period_remaining_epsilon": period}


def _at_epsilon(config: Any, epsilon: float) -> Any:
    """The config with ``privacy.epsilon`` replaced (validated again: e.g. a dp_select share must stay below it)."""
    raw = config.model_dump(mode="json")
    raw["privacy"]["epsilon"] = epsilon
    try:
        return SUMMARIES[config.summary].config_model.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc).strip()) from None


def _break_even_of(config: Any, row: dict[str, Any], alternative: dict[str, Any] | None, n: int) -> float | None:
    """The released tau below which ``tau: auto`` beats tau fixed at the range's upper end, by the plan's own error.

    A row that buys tau is priced at ``tau = 1`` with the epsilon the split leaves; the same config with
    ``clipping.tau`` = the upper end of ``tau_range`` (nothing bought, the whole epsilon) is priced too, by the
    plan's error including the smoothing bias of a typical mean where the plan states it (``with bias``: the
    tuning trades the two, and with less epsilon it smooths more), else its noise. Both scale as ``tau``
    (``tau^2`` for a covariance) at fixed epsilon, and the tunings do not depend on tau, so buying is better
    exactly when the released tau is below ``(E_fixed / E_auto(1))^(1/power)``. ``None`` when nothing is bought at
    this epsilon, or the summary has no additive noise (FPCA) or no closed-form error yet (public inputs only).
    ``alternative``: :func:`_fixed_tau_alternative`'s, priced once. With ``tuning.signal_rms`` the tuning does depend
    on tau: :func:`_solved_break_even`.
    """
    auto_error = row.get(alternative["measure"]) if alternative is not None else None
    if alternative is None or auto_error is None or auto_error <= 0.0:
        return None
    if tuning_follows_tau(config):
        return _solved_break_even(config, n, alternative)
    power = 2 if config.summary == "covariance" else 1
    return float((alternative["error"] / auto_error) ** (1.0 / power))


def _solved_break_even(config: Any, n: int, alternative: dict[str, Any]) -> float:
    """The break-even tau of a mean whose tuning follows tau (``tuning.signal_rms``): solved, not scaled.

    The row's error at a released tau ``t`` is the plan at ``t`` (its smoothing re-chosen there) with the epsilon the
    split leaves; it rises with ``t``. Bisection in ``log t`` over ``[1e-6, 1] x`` the range's upper end for the ``t``
    where it equals the fixed-tau alternative's (public inputs and ``n`` only).
    """
    def error(t: float) -> float:
        plan = mean_plan(config, n, tau=t)
        if alternative["measure"] == "expected_l2_error_with_bias":
            return float(expected_l2_error_with_bias(config, plan) or 0.0)
        return float((expected_l2_error(config, plan) or (0.0, 0.0))[0])

    hi = tau_search_range(config)[1]
    if error(hi) <= alternative["error"]:
        return float(hi)
    lo_log, hi_log = math.log(hi * 1e-6), math.log(hi)
    for _ in range(40):
        mid = 0.5 * (lo_log + hi_log)
        lo_log, hi_log = (mid, hi_log) if error(math.exp(mid)) <= alternative["error"] else (lo_log, mid)
    return float(math.exp(lo_log))


def _fixed_tau_alternative(config: Any, n: int, row: dict[str, Any]) -> dict[str, Any] | None:
    """The same release with ``clipping.tau`` fixed at the upper end of ``tau_range`` (nothing bought, the whole epsilon).

    ``{"tau", "measure", "error", "noise"}``: its ``with bias`` error where the plan states one, else its noise
    (``measure`` names which), and its noise (source units), for a row that buys tau; ``None`` otherwise. Public
    inputs and ``n`` only.
    """
    bought = [b for b in row.get("bought") or () if b["name"] == "tau" and not b["a_priori"]]
    if not bought:
        return None
    key = "expected_l2_error_with_bias" if row.get("expected_l2_error_with_bias") is not None else "expected_l2_error"
    raw = config.model_dump(mode="json")
    tau = tau_search_range(config)[1]
    raw["clipping"]["tau"] = tau
    for option in ("tau_share", "tau_range"):
        raw["clipping"].pop(option, None)
    fixed = SUMMARIES[config.summary].config_model.model_validate(raw)
    fixed_row = accuracy(fixed, build_plan(fixed, n), n, band=False).as_dict()  # its errors only
    error = fixed_row.get(key)
    return None if error is None else {"tau": tau, "measure": key, "error": float(error),
                                       "noise": float(fixed_row["expected_l2_error"])}


def plan_report(config_path: str | Path, epsilons: list[float] | None, ledger_url: str | None) -> dict[str, Any]:
    """The plan of a config at each epsilon (JSON-able); raises :class:`FdpError` on a bad config or data file."""
    path = Path(config_path)
    config = load_config(path)
    here = str(path.resolve().parent)
    # the data read as `fdp release` reads it (what it would refuse, exit 2, is refused here too); it gives n
    inputs = read_inputs(config, here)
    n = inputs.n or count_config_units(config, here)
    # data, before any noise: for this terminal (and --json) only, never published, stored or logged
    zero = count_zero_records(config, inputs)
    outside = count_out_of_scale(config, inputs)
    from_data = data_warnings(config, inputs, zero, outside)
    budget = _budget(ledger_url, config)
    rows: list[dict[str, Any]] = []
    per_epsilon: dict[str, list[float]] = {}  # a warning's text -> the epsilons it holds at (said once)
    low_tau: list[tuple[float, dict[str, Any]]] = []  # the epsilons whose tau level is low: one warning lists them
    ro_url = _read_only_url(ledger_url or default_ledger_url())
    for eps in epsilons or epsilon_ladder(config.privacy.epsilon):
        row: dict[str, Any]
        try:
            cfg = _at_epsilon(config, eps)
            plan = build_plan(cfg, n)
            row = accuracy(cfg, plan, n).as_dict()
            if cfg.summary == "fosr":
                row["coefficients_balanced"] = fosr_coefficients_balanced(cfg, plan)
            if cfg.summary == "erm":  # what its 'with bias' (the prior error of psi: auto's rule) is
                row["with_bias_note"] = with_bias_note(cfg, plan)
            alternative = _fixed_tau_alternative(cfg, n, row)  # priced once: the break-even and the warning
            row["tau_break_even"] = _break_even_of(cfg, row, alternative, n)
            low = _low_tau_facts(cfg, row, n, alternative)
            if low is not None:
                low_tau.append((eps, low))
            found = [fpca_shortfall_warning(cfg, row),
                     covariance_centering_check(cfg, n, ro_url) if cfg.summary == "covariance" else None]
            for text in filter(None, found):
                per_epsilon.setdefault(text, []).append(eps)
        except FdpError as exc:
            row = {"epsilon": eps, "error": str(exc)}
        left = None
        if budget["accounting"] == "basic":
            left = budget["remaining_epsilon"] - eps
        row["budget_remaining_epsilon_after"] = left
        short = []  # the measures the remaining budget cannot pay (trial M: delta too)
        period = budget["period_remaining_epsilon"]
        if left is not None and (left < -1e-12 or (period is not None and eps > period + 1e-12)):
            short.append("epsilon")
        if left is not None and float(config.privacy.delta) > budget["remaining_delta"] + 1e-15:
            short.append("delta")
        row["fits_budget"] = None if left is None else not short
        row["budget_short"] = short
        rows.append(row)
    if low_tau:
        per_epsilon = {low_tau_text(config, [f for _, f in low_tau]): [e for e, _ in low_tau], **per_epsilon}
    warnings = [f"at epsilon {', '.join(f'{e:g}' for e in eps_list)}: {text}" for text, eps_list in per_epsilon.items()]
    warnings += from_data + [w for w in (erm_eta_warning(config),) if w is not None]
    ds = config.dataset
    assumptions = [
        "n counts the privacy units in the data file (public under the replace-one adjacency); the file is read only to "
        "refuse what the release would refuse (columns, numbers, units that cannot be aligned): no number here depends "
        "on a data value, except the counts of zero records, of records outside the public value range, of units "
        "whose covariate changes between their rows and of points outside the domain, responses beyond their bound or "
        "labels of one class, in a warning (data, for this terminal only: never published or "
        "stored)",
        "every number comes from the public config and n: nothing was charged and the ledger was not written",
    ]
    if hasattr(ds, "time_column"):  # a curve release: which units the public alignment rule can align
        assumptions.append(alignment_requirement(config))
    clip = getattr(config, "clipping", None)
    if getattr(clip, "tau", None) == "auto":
        lo, hi = tau_search_range(config)
        power = 2 if config.summary in ("covariance", "fpca") else 1  # the noise (FPCA: the temperature) scales as tau^2
        scale = "linearly with the tau released" if power == 1 else "with the square of the tau released"
        scaling = (f"scale {scale} (at the upper end of the range, tau = {hi:g}, {hi**power:g}x larger)"
                   if not tuning_follows_tau(config) else TAU_FOLLOWS_TEXT)
        assumptions.append(
            f"tau: auto — part of each epsilon (the 'tau' budget split: {clip.tau_share:g} of it, more where n * epsilon is small) buys tau as a DP "
            f"quantile of the record norms over the public range [{lo:g}, {hi:g}]; the errors are priced at tau = 1 and "
            f"{scaling}; where n * epsilon is too small for the DP quantile"
            + (", or buying it could not pay for its split (tuning.tau.bound_pays@1)" if tuning_follows_tau(config) else "")
            + ", tau is that upper end and nothing is charged for it; the errors leave out "
            "the clipping bias: the records above the released tau (about 1 - level of them expected, half at level "
            "0.5; the level is the quantile's target, and at small n * epsilon a draw can land below every record) are "
            "shrunk to it, which biases the release by an amount, and in a direction, that depend on how far their "
            "norms exceed tau (data, so no plan can state it; docs/configuration.md)")
    if getattr(config, "bandwidth", None) == "auto":
        assumptions.append(
            f"bandwidth: auto — part of each epsilon (the 'bandwidth' budget split: {config.bandwidth_share:g} of it, more "
            "for small n) buys the points' scale as DP quartiles of each coordinate of the units' mean points; the "
            "bandwidth then minimises the normal-reference error at that scale plus the release's noise "
            "(tuning.kde.bandwidth_auto@1); the errors are at the normal_reference bandwidth with the epsilon the "
            "split leaves; where n * epsilon is too small for the quartiles the bandwidth is normal_reference and "
            "nothing is charged for it")
    if getattr(ds, "value_offset", None) == "auto":
        assumptions.append("value_offset: auto — part of each epsilon (the 'value_offset' budget split) buys the centre "
                           "as a DP median of the records' levels over the public value_offset_range")
    return {
        "config": str(path), "summary": config.summary, "dataset_id": ds.id, "n": n,
        "coefficient_names": config.coefficient_names() if config.summary == "fosr" else None,
        "n_basis": config.basis.n_basis if config.summary == "fpca" else None,
        "privacy_unit": ds.privacy_unit, "config_epsilon": config.privacy.epsilon,
        "time_column": getattr(ds, "time_column", None), "value_column": getattr(ds, "value_column", None),
        "value_scale": getattr(ds, "value_scale", None), "value_offset": getattr(ds, "value_offset", None),
        "tau": getattr(getattr(config, "clipping", None), "tau", None),
        "tuning_follows_tau": tuning_follows_tau(config),
        "centred_on_reference": config.summary in ("mean", "fosr") and getattr(config, "centering", None) is not None,
        "budget": budget, "rows": rows, "warnings": warnings, "assumptions": assumptions,
        "zero_records": None if zero is None else zero.as_dict(),
        "out_of_scale": None if outside is None else outside.as_dict(),
        "covariates_averaged": inputs.covariates_averaged,
    }


def data_warnings(config: Any, inputs: Inputs, zero: ZeroRecords | None = None,
                  outside: OutOfScale | None = None) -> list[str]:
    """The warnings read off the data, for the operator's terminal only.

    Zero records, records outside the public scale, covariates averaged within units, KDE/ERM points outside their
    domain or labels (``zero``/``outside``: the counts, if already made).
    Data read before any noise: ``fdp init``, ``fdp plan`` and ``fdp release`` (before it charges, before Prefect
    starts) print them on the operator's terminal only; never published, stored or logged.
    """
    zero = count_zero_records(config, inputs) if zero is None else zero
    outside = count_out_of_scale(config, inputs) if outside is None else outside
    found = (zero_records_warning(config, zero), out_of_scale_warning(config, outside),
             narrow_values_warning(config, inputs), repeated_readings_warning(config, inputs),
             covariates_averaged_warning(config, inputs),
             point_scale_warning(config, inputs))
    return [w for w in found if w is not None]


def _fmt(x: Any, spec: str = ".4g") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def print_plan(report: dict[str, Any]) -> None:
    """The plan as a table for a person."""
    b = report["budget"]
    print(f"plan: {report['summary']} of {report['dataset_id']} (n = {report['n']} privacy units: "
          f"{report['privacy_unit']}); nothing charged")
    scale = f", value_scale {report['value_scale']:g}" if report["value_scale"] is not None else ""
    tau = ("" if report["tau"] is None else f"tau {report['tau']:g}" if not isinstance(report["tau"], str)
           else "tau auto (a DP quantile of the record norms, charged with the release; the errors below are at tau = 1 "
                + ("and scale with the square of the tau it releases)" if report["summary"] in ("covariance", "fpca")
                   else f"; {TAU_FOLLOWS_TEXT})" if report.get("tuning_follows_tau")
                   else "and scale linearly with the tau it releases)"))
    if tau or scale:
        print(f"  public inputs: {tau}{scale}")
    left = f"{b['remaining_epsilon']:g}" + (f" (this period {b['period_remaining_epsilon']:g})"
                                            if b["period_remaining_epsilon"] is not None else "")
    print(f"  budget: remaining epsilon {left}, delta {b['remaining_delta']:g} — {b['source']}, {b['accounting']} accounting")
    biased = any(r.get("expected_l2_error_with_bias") is not None for r in report["rows"])
    banded = any(r.get("band_half_width_max") is not None for r in report["rows"])
    fpca = report["summary"] == "fpca"  # no additive noise: the expected captured-energy shortfall instead
    error_key = "expected_energy_shortfall" if fpca else "expected_l2_error"
    print(f"  {'epsilon':>8} {'sensitivity':>11} {'noise scale':>11} {'E shortfall' if fpca else 'E L2 error':>11} "
          f"{'of tau^2' if fpca else 'relative':>9} "
          + (f"{'with bias':>10} " if biased else "") + (f"{'95% band':>10} " if banded else "")
          + f"{'eps left':>9}  tuning")
    for r in report["rows"]:
        if "error" in r:
            print(f"  {r['epsilon']:>8g}  not valid at this epsilon: {r['error']}")
            continue
        t = r["tuning"]
        tuning = ", ".join(f"{k}={_fmt(v) if isinstance(v, float) else v}" for k, v in t.items()
                           if k in TUNED
                           and v is not None)
        rel = "-" if r["relative_error"] is None else f"{100 * r['relative_error']:.3g}%"
        fits = "" if r["fits_budget"] in (None, True) else f" (over budget: {', '.join(r['budget_short'])})"
        mark = "*" if any(b["a_priori"] and b["name"] == "tau" for b in r.get("bought") or ()) and any(
            not b["a_priori"] and b["name"] == "tau" for q in report["rows"] for b in q.get("bought") or ()) else ""
        print(f"  {format(r['epsilon'], 'g') + mark:>8} {_fmt(r['sensitivity']):>11} {_fmt(r['noise_scale']):>11} "
              f"{_fmt(r.get(error_key)):>11} {rel:>9} "
              + (f"{_fmt(r.get('expected_l2_error_with_bias')):>10} " if biased else "")
              + (f"{_fmt(r['band_half_width_max']):>10} " if banded else "")
              + f"{_fmt(r['budget_remaining_epsilon_after'], 'g'):>9}  {tuning}{fits}")
    notes = {(r["note"], r.get("relative_note")) for r in report["rows"] if "note" in r}
    # a note another row's note extends is said by it (kde bandwidth: auto: the rows that buy the bandwidth add its
    # explanation to the note of the rows where n * epsilon is too small, which get their own line below)
    notes = {(n, rel) for n, rel in notes if not any(o != n and o.startswith(n) and o_rel == rel for o, o_rel in notes)}
    for note, relative in sorted(notes, key=lambda x: (x[0], x[1] or "")):
        print(f"  {note}" if fpca else f"  E L2 error: {note}; relative: {relative}"
              + ("; 95% band: widest pointwise half-width of the noise (in the release's units)" if banded else ""))
    erm_notes = sorted({r["with_bias_note"] for r in report["rows"] if r.get("with_bias_note")})
    for text in erm_notes:
        print(f"  with bias: {text}")
    if biased and not erm_notes:
        target = {"mean": "a mean of norm signal_fraction x tau",
                  "covariance": "a surface of size signal_fraction x tau^2",
                  "fosr": "cross-moment curves of norm signal_fraction x tau"}.get(report["summary"], "a typical target")
        print(f"  with bias: sqrt(E L2 error^2 + smoothing bias^2) for {target} (the risk_prior assumption; the real "
              "bias depends on the unknown data, and clipping below the largest record adds its own): what the tuning "
              "minimises, so it falls as epsilon grows even where the noise alone does not"
              + ("; an average over time: a " + ("mean" if report["summary"] == "mean" else "coefficient curve (the "
                 "intercept most)") + " that trends away from value_offset is pulled towards it most at the ends of "
                 "time_domain, several times this figure there (centring on a public reference curve, even a straight "
                 "line through two public figures, removes it: docs/summaries/mean.md)"
                 if report["summary"] in ("mean", "fosr") and not report.get("centred_on_reference") else ""))
    resolved = [(r["epsilon"], r["resolution"]) for r in report["rows"] if r.get("resolution") is not None]
    if resolved and fpca:
        unit = report.get("time_column") or "time"
        print(f"  resolution: the components are combinations of the basis's {report['n_basis']} functions; the "
              f"shortest feature (one peak or dip) they can hold is about {resolved[0][1]:.3g} in {unit}'s units "
              "(time_domain / basis.n_basis); finer structure of the true components is lost and 'E shortfall' is "
              "measured against the best subspace of the basis, not of all curves: raise basis.n_basis for finer "
              "components (the shortfall grows with k (m - k))")
    elif resolved:
        unit = report.get("time_column") or "time"
        print("  resolution: the shortest feature (one peak or dip, half a cycle) the release keeps at least half of, "
              f"in {unit}'s units: " + ", ".join(f"{x:.3g} at epsilon {e:g}" for e, x in resolved)
              + " — narrower ones are smoothed away whatever the data (a public consequence of the kernel's length "
              "scale and epsilon, docs/configuration.md, \"The kernel\"); 'with bias' assumes a mean without them")
    bought: dict[str, list[str]] = {}
    for r in report["rows"]:
        for b in r.get("bought") or ():
            if not b["a_priori"]:
                bought.setdefault(b["name"], []).append(
                    f"{b['epsilon']:g} of {r['epsilon']:g} (level {b['quantile_level']:.3g})")
    for name, parts in bought.items():
        if name == "bandwidth":  # KDE bandwidth: auto: 2d quartiles, not one quantile at a level
            parts = [p.split(" (level")[0] for p in parts]
            print("  bought with budget: bandwidth (DP quartiles of each coordinate), epsilon " + ", ".join(parts))
            continue
        print(f"  bought with budget: {name}, epsilon " + ", ".join(parts))
    spans = [(r["epsilon"], r["expected_l2_error_range"]) for r in report["rows"]
             if r.get("expected_l2_error_range") is not None and report["summary"] == "kde"]
    if spans:
        print("  bandwidth: auto — E L2 error above is at the normal_reference bandwidth; the release's bandwidth is "
              "chosen after the charge among the public candidates, and its noise is between "
              + ", ".join(f"{lo:.4g} (widest) and {hi:.4g} (narrowest) at epsilon {e:g}" for e, (lo, hi) in spans)
              + "; the smoothing bias it saves is not in these numbers (it depends on the data)")
    even = [(r["epsilon"], r["tau_break_even"]) for r in report["rows"] if r.get("tau_break_even") is not None]
    if even:
        print("  tau: auto beats tau fixed at the upper end of tau_range (the whole epsilon, nothing bought) if the "
              "tau it releases is below " + ", ".join(f"{t:.3g} at epsilon {e:g}" for e, t in even)
              + " (by the error above: 'with bias' where shown; clipping below the largest norm adds its own bias; "
              "a tight a-priori bound puts the records' norms near the upper end, and then a fixed tau is better)")
    a_priori_tau = [(r["epsilon"], b) for r in report["rows"] for b in r.get("bought") or ()
                    if b["a_priori"] and b["name"] == "tau"]  # (epsilon, the choice) where tau was not bought
    fixed = [e for e, _ in a_priori_tau]
    free = [r["epsilon"] for r in report["rows"]
            if any(b["a_priori"] and b["name"] == "bandwidth" for b in r.get("bought") or ())]
    if free:
        print(f"  bandwidth at epsilon {', '.join(f'{e:g}' for e in free)}: n * epsilon is too small to buy it, so it "
              "is the public normal_reference rule (nothing charged for it)")
    if fixed:
        hi = a_priori_tau[0][1]["candidates"][-1]
        by_reason: dict[str, list[float]] = {}
        for e, b in a_priori_tau:
            by_reason.setdefault(b["a_priori_reason"], []).append(e)
        why = "; ".join(reason + (f" (at {', '.join(f'{e:g}' for e in eps)})" if len(by_reason) > 1 else "")
                        for reason, eps in by_reason.items())
        follows = bool(report.get("tuning_follows_tau"))
        print(f"  tau at epsilon {', '.join(f'{e:g}' for e in fixed)}: {why}, so it is the public upper end of "
              f"tau_range, {hi:g} (a priori, nothing charged for it)"
              + ("; rows marked * are on that footing, the others buy tau and are priced at tau = 1: their error is "
                 + ("lower at the smaller tau they release (not in proportion: the smoothing is re-chosen there)"
                    if follows else "that figure times " + ("the square of " if report["summary"] in ("covariance", "fpca")
                                                            else "") + "the tau they release (usually well below 1)")
                 + ", so two rows with the same figure are not the same accuracy"
                 if len(fixed) < len([r for r in report["rows"] if "error" not in r]) else ""))
        signal = a_priori_signal_text(report["summary"], fixed, report["rows"])
        if signal is not None:
            print(f"  {signal}")
    floors = [(r["epsilon"], r["tuning"]["safe_inverse_floor"]) for r in report["rows"]
              if "error" not in r and r["tuning"].get("safe_inverse_floor") is not None]
    if floors:  # FoSR: where the coefficient curves are shrunk by the safe inverse (postprocess.fosr.safe_inverse@1)
        n = report["n"]
        print("  coefficients: the released design moments T1 are inverted with their eigenvalues raised to at least "
              "rho (" + ", ".join(f"{f:.3g} at epsilon {e:g}" for e, f in floors) + "); a covariate direction with "
              "less weight than rho is shrunk towards 0, and its coefficient curve is biased and unreliable — with "
              "one-hot covariates, any level held by fewer than rho x n units ("
              + ", ".join(f"{f * n:.3g}" for _, f in floors) + f" of {n}) makes the smallest eigenvalue fall below "
              "rho; a binary covariate coded -1/+1 with the intercept: its smaller group, when it holds fewer than "
              "rho x n / 2 units (" + ", ".join(f"{f * n / 2:.3g}" for _, f in floors) + ": T1's smallest eigenvalue "
              "is 2 x that group's size / n); more epsilon lowers rho. The E L2 error above is the noise of T2 only: the coefficients' error is "
              "larger (the inverse of T1 amplifies it)")
        if any(r["tuning"].get("rule") == "risk_prior" for r in report["rows"] if "error" not in r):
            print("  T2's smoothing: the eta and psi above are risk_prior's for a design with T1 = I; the release draws T1 "
                  "first and re-chooses them with T2's noise scaled by A = tr((T1~^+)^2)/p of the released T1~ "
                  "(tuning.fosr.t2_given_t1@1; post-processing, same budget), so a poorly conditioned design (one-hot "
                  "dummies: A of 10-60) is smoothed more, and its T2 noise is smaller, than this plan shows; the "
                  "manifest records the pair used and A")
    balanced = [(r["epsilon"], r["coefficients_balanced"]) for r in report["rows"]
                if "error" not in r and r.get("coefficients_balanced") is not None]
    if balanced:
        names = report["coefficient_names"]
        shrunk = sorted({names[i] for _, b in balanced for i, v in enumerate(b["pass_through"]) if v < 0.9},
                        key=names.index)
        at = ("at the public shares of the levels (covariates[].shares; equal where none is given)"
              if any(b.get("shares") == "public" for _, b in balanced) else "if every level of the covariates occurs "
              "equally often (or at public shares: covariates[].shares)")
        print(f"  coefficients, {at} (a public assumption, not the data): expected L2 error of the coefficient curves "
              "with bias "
              + ", ".join(f"{_fmt(b['expected_l2_error_with_bias'])} at epsilon {e:g}" for e, b in balanced)
              + " (for coefficient curves of norm signal_fraction x tau_y each: T2's noise through the inverse of T1, "
              "the floor's shrinkage and the smoothing; of it, noise alone "
              + ", ".join(_fmt(b["expected_l2_error"]) for _, b in balanced) + ", A = "
              + ", ".join(f"{b['t2_amplification']:.3g}" for _, b in balanced) + "; T1's own noise comes on top)"
              + ("" if not shrunk else "; the safe inverse's floor would shrink " + ", ".join(
                  f"beta_{name} (keeps " + "/".join(f"{100 * b['pass_through'][names.index(name)]:.0f}" for _, b in balanced)
                  + " %)" for name in shrunk) + " towards 0")
              + "; each coefficient's T2 noise: " + "; ".join(
                  f"beta_{name} " + "/".join(_fmt(b["coefficient_t2_noise"][i], ".3g") for _, b in balanced)
                  for i, name in enumerate(names))
              + ". An effect smaller than twice its noise cannot be told from 0 at that epsilon (the release names it)")
    rising = _rising_note(report["rows"], error_key, biased)
    if rising is not None:
        print(f"  {rising}")
    for a in report["assumptions"][2:]:
        print(f"  assumes: {a}")
    for w in report["warnings"]:
        print(f"  warning: {w}")


def low_tau_warning(config: Any, row: dict[str, Any], n: int, alternative: dict[str, Any] | None = None) -> str | None:
    """``fdp plan``'s warning for a row whose ``tau: auto`` targets a low quantile level (< 0.9); ``None`` otherwise.

    Public inputs only: the level is the plan's (``tuning.tau.quantile_level@2``, from n and the tau split). It
    ends with the error of the alternative a user can pick before spending: ``tau`` fixed at the upper end of
    ``tau_range`` with the whole epsilon (:func:`_fixed_tau_alternative`; not for FPCA, which has no additive noise).
    """
    facts = _low_tau_facts(config, row, n, alternative)
    return None if facts is None else low_tau_text(config, [facts])


def _low_tau_facts(config: Any, row: dict[str, Any], n: int,
                   alternative: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """What :func:`low_tau_warning` says of one row: its level, and the fixed-tau alternative's noise and break-even."""
    if config.summary not in LOW_TAU_SUMMARIES:
        return None
    level = next((b["quantile_level"] for b in row.get("bought") or () if b["name"] == "tau" and not b["a_priori"]),
                 None)
    if level is None or level >= LOW_TAU_LEVEL:
        return None
    if config.summary == "fpca":
        return {"level": level}
    alternative = alternative or _fixed_tau_alternative(config, n, row)
    even = row["tau_break_even"] if "tau_break_even" in row else _break_even_of(config, row, alternative, n)
    if alternative is None or even is None:
        return {"level": level}
    return {"level": level, "tau": alternative["tau"], "noise": alternative["noise"], "even": even}


def low_tau_text(config: Any, facts: list[dict[str, Any]]) -> str:
    """The low-level warning of one or more epsilons (``facts`` in their order, :func:`_low_tau_facts`): said once.

    Five epsilons of one plan used to repeat the same paragraph five times with a different level; their levels,
    the alternative's errors and break-evens are now listed in one sentence.
    """
    centering = getattr(config, "centering", None)
    target = clip_target(None if centering is None else centering.model_dump(mode="json"),
                         config.dataset.value_offset)
    levels = [f["level"] for f in facts]
    if config.summary == "fpca":  # its level is the median whatever n and epsilon (tuning.tau.summary_level@1)
        return (low_level_text("fpca", levels, target, planned=True) + " (FPCA's tau: auto always targets the median); "
                "lever: a public clipping.tau if a tight a-priori bound on the norms is known")
    fixed = ""
    if all("even" in f for f in facts):
        fixed = (f"; the alternative, clipping.tau: {facts[0]['tau']:g} fixed (the upper end of tau_range: the whole "
                 "epsilon, no split, and no clipping bias if no record's norm exceeds it), has E L2 error "
                 + ", ".join(f"{f['noise']:.4g}" for f in facts) + ": buying wins only if the tau it releases is below "
                 + ", ".join(f"{f['even']:.3g}" for f in facts) + " and the shrunk records' bias stays small")
    return (low_level_text(config.summary, levels, target, planned=True)
            + " (the level rises with n * epsilon); levers: more epsilon, a public clipping.tau if a tight "
            "a-priori bound on the norms is known, a public reference curve close to the expected mean ("
            + ("centering.reference)" if config.summary == "covariance" else "centering)") + fixed)


def fpca_shortfall_warning(config: Any, row: dict[str, Any]) -> str | None:
    """A warning for an FPCA row whose expected energy shortfall is at least ``tau^2``, a record's energy bound.

    Trial N: k = 11 of m = 12 planned 397 % of it without a word. No record's captured energy can exceed ``tau^2``,
    so the release is about as informative as draws of the base measure. Public inputs only.
    """
    if config.summary != "fpca" or row.get("relative_error") is None or row["relative_error"] < 1.0:
        return None
    return (f"the expected energy shortfall is {row['relative_error']:.3g} x tau^2, the bound on a record's energy: the "
            f"{config.n_components} components are about as informative as draws of the base measure; release fewer "
            "components (n_components), use a smaller basis or more epsilon (docs/summaries/fpca.md)")


def fosr_floor_warning(floor: float, n: int) -> str:
    """The FoSR warning on the safe inverse's floor ``rho`` (public: it needs ``n`` and the plan only)."""
    return (f"the coefficients are T1~^+ T2~ with the eigenvalues of the released design moments T1 raised to at least "
            f"rho = {floor:.3g}: a covariate direction with less weight than rho is shrunk towards 0 and its "
            f"coefficient curve is biased and unreliable — with one-hot covariates, any level held by fewer than "
            f"rho x n = {floor * n:.3g} of the {n} units, and at risk up to about twice that (with an intercept a "
            "level's direction weighs less than its share of the units, and T1's noise moves it); more epsilon lowers "
            "rho. The stated error is the T2 noise only: "
            "the coefficients' error is larger (the inverse of T1 amplifies it)")


def _tuned(row: dict[str, Any]) -> dict[str, Any]:
    """The tuning parameters a row's rule picked (what changes the smoothing)."""
    return {k: v for k, v in row["tuning"].items() if k in TUNED}


def _rising_note(rows: list[dict[str, Any]], key: str, biased: bool) -> str | None:
    """Why the E L2 error column rises with epsilon where it does (more epsilon never buys more noise by itself).

    Two causes, both public: rows on different footings for ``tau`` (the a-priori upper end of ``tau_range``
    with the whole epsilon for the noise, against a bought tau with what its split leaves; both priced at
    ``tau = 1``), and the tuning, which trades smoothing for noise (less smoothing as epsilon grows).
    """
    valid = sorted((r for r in rows if "error" not in r and r.get(key) is not None), key=lambda r: r["epsilon"])
    pairs = [(a, b) for a, b in zip(valid, valid[1:], strict=False) if b[key] > a[key] * (1 + 1e-9)]
    if not pairs:
        return None

    def a_priori(r: dict[str, Any]) -> bool:
        return any(b["name"] == "tau" and b["a_priori"] for b in r.get("bought") or ())

    def bought(r: dict[str, Any]) -> bool:
        return any(b["name"] == "tau" and not b["a_priori"] for b in r.get("bought") or ())

    steps = ", ".join(f"{a['epsilon']:g} -> {b['epsilon']:g}" for a, b in pairs)
    why = []
    if any(a_priori(a) and bought(b) for a, b in pairs):
        hi = next(b["candidates"][-1] for r in valid for b in r.get("bought") or () if b["a_priori"])
        why.append(f"where tau is not bought (see the tau line), the whole epsilon goes to the noise and the release uses "
                   f"the a-priori tau = {hi:g}; where tau is bought, part of epsilon buys it (the split above) and less "
                   "is left for the noise — every row is priced at tau = 1, and a bought tau is at most that upper "
                   "end, so the release's noise scales down with it"
                   + (" (not in proportion: with tuning.signal_rms the smoothing is re-chosen at the tau released)"
                      if any("signal_rms" in r["tuning"] for r in valid) else ""))
    if any(_tuned(a) != _tuned(b) for a, b in pairs):
        why.append("the tuning trades smoothing for noise: with more epsilon it smooths less, so the noise alone can "
                   "grow" + (" while the error with the smoothing bias falls (see `with bias`)" if biased else ""))
    return f"E L2 error rises with epsilon at {steps}: " + "; ".join(why) + "; this column alone does not rank releases across epsilon"


def release_warnings(config: Any, config_path: str | Path, ledger_url: str, n: int | None = None) -> list[str]:
    """Warnings ``fdp release`` prints before anything is charged (the same checks as ``fdp plan``).

    A covariance on a private mean whose noise would dominate; FoSR's safe-inverse floor (rho x n against the
    group sizes); a ``tau: auto`` that can only target a low quantile level (mean, covariance, FoSR, FPCA). The last two
    need the plan at the config's ``n``: memory engine only. ``n``: the units the pre-flight read, if it did (else counted
    in the data file's unit column).
    """
    auto_tau = getattr(getattr(config, "clipping", None), "tau", None) == "auto"
    private_mean = config.summary == "covariance" and config.centering.kind == "private_mean"
    # the plan's warnings need n before the data is read: counted in a file (the memory engine; a streaming engine
    # reads a directory of parts, counted only by the release's own pass, and never buys tau)
    memory = getattr(getattr(config, "engine", None), "name", "memory") == "memory"  # FPCA has no engine: memory
    planned = memory and (config.summary == "fosr" or auto_tau)
    if not (private_mean or planned):
        return []
    if n is None:
        n = count_config_units(config, str(Path(config_path).resolve().parent))
    warnings: list[str] = []
    if private_mean:
        warning = covariance_centering_check(config, n, _read_only_url(ledger_url))
        if warning is not None:
            warnings.append(warning)
    if planned:
        row = accuracy(config, build_plan(config, n), n, band=False).as_dict()
        floor = row["tuning"].get("safe_inverse_floor")
        if floor is not None:
            warnings.append(fosr_floor_warning(floor, n))
        low = low_tau_warning(config, row, n)
        if low is not None:
            warnings.append(low)
    return warnings


def check_release_plan(config: Any, config_path: str | Path, n: int | None = None) -> None:
    """``fdp release``'s pre-flight of a config that buys ``tau`` or ``value_offset``: its plan, as ``fdp plan`` builds it.

    Run before Prefect's server starts and before anything is charged. ``n`` counts the units of the data file
    (the unit column only, as ``fdp plan``) unless the caller read it already; a plan the epsilon cannot pay for raises
    :class:`fdpcore.errors.PrivacyParameterError` with the least epsilon that suffices (exit 2). A config that buys
    nothing is left to the flow (its plan does not depend on ``n`` being large enough).
    """
    if not auto_options(config):
        return
    build_plan(config, n if n is not None else count_config_units(config, str(Path(config_path).resolve().parent)))
