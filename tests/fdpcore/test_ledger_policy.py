"""Ledger policies: versioned migration, per-period allowances, zCDP accounting (OpenDP), tamper checks."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from fdp.schemas import ChargeRequest, PrivacyBudget

import fdpcore.ledger._store as ledger_store
from fdpcore.errors import BudgetExceededError, ConfigError, LedgerError
from fdpcore.ledger import SCHEMA_VERSION, Ledger, current_period
from fdpcore.privacy.accounting import pure_to_zcdp, zcdp_to_epsilon

V1_DUMP = Path(__file__).parent / "data" / "ledger_v1.sql"
KW = dict(config_sha256="0" * 64, summary="mean", mechanism="iclp_qr", sensitivity_formula="s",
          budget_splits=[], provenance={}, internal={})


def _ledger(tmp_path: Path, name: str = "l.sqlite") -> tuple[Ledger, str]:
    url = f"sqlite:///{tmp_path / name}"
    return Ledger(url), url


def _execute(url: str, sql: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text(sql))
    engine.dispose()


# ----------------------------------------------------------------------------- migrations


def test_a_version_1_ledger_is_migrated_and_still_verifies(tmp_path: Path) -> None:
    db = tmp_path / "v1.sqlite"
    con = sqlite3.connect(db)
    con.executescript(V1_DUMP.read_text())
    con.close()
    led = Ledger(f"sqlite:///{db}")
    with led.engine.connect() as conn:
        assert conn.execute(sa.text("SELECT value FROM fdp_meta WHERE key='schema_version'")).scalar_one() == str(SCHEMA_VERSION)
    assert led.verify() == []
    b = led.budgets("elec")[0]
    assert (b.total, b.spent, b.n_releases, b.accounting) == ((12.0, 0.0), (1.25, 0.0), 2, "basic")
    records = {r.release_id: r for r in led.releases()}
    assert {r.state for r in records.values()} == {"published", "cancelled", "noised"}
    assert all(r.period == r.created_at[:7] for r in records.values())
    migrated = [e for e in led.audit_events() if e["event"] == "ledger.migrated"]
    assert [(e["payload"]["from"], e["payload"]["to"]) for e in migrated] == [(1, 2), (2, 3), (3, 4)]
    assert set(migrated[0]["payload"]["release_periods"]) == set(records)
    assert migrated[1]["payload"]["non_private_releases"] == [] and all(r.charge_kind == "dp" for r in records.values())
    # opening again is a no-op (no further migration entry)
    assert [e["event"] for e in Ledger(f"sqlite:///{db}").audit_events()].count("ledger.migrated") == 3
    # the migrated ledger keeps working
    led.reserve(release_id="after", dataset_id="elec", epsilon=1.0, delta=0.0, **KW)
    assert led.budgets("elec")[0].spent == (2.25, 0.0) and led.verify() == []
    # a migrated release's period edited out of band is caught (the migration entry fixed it)
    _execute(led.url, "UPDATE fdp_releases SET period='1999-01' WHERE release_id='r-published'")
    assert any("r-published" in p for p in led.verify())


def test_version_3_marks_published_non_private_releases_and_still_verifies(tmp_path: Path) -> None:
    """A release published as non-private (PCV) before schema 3 is charged as kind 'non_private' after it."""
    led, url = _ledger(tmp_path)
    led.set_budget("ds", 5.0)
    for rid, flag in (("pcv", True), ("dp", False)):
        led.reserve(release_id=rid, dataset_id="ds", epsilon=1.0, delta=0.0, **KW)
        led.mark_noised(rid)
        led.publish(rid, {"manifest": {"parameters": {"non_private": flag}}, "files": {}})
    _execute(url, "ALTER TABLE fdp_releases DROP COLUMN charge_kind")  # as a schema-2 ledger had it
    _execute(url, "ALTER TABLE fdp_datasets DROP COLUMN max_late_periods")  # (added by schema 4)
    _execute(url, "UPDATE fdp_meta SET value='2' WHERE key='schema_version'")
    led = Ledger(url)
    assert led.get("pcv").charge_kind == "non_private" and led.get("dp").charge_kind == "dp"
    assert led.budgets("ds")[0].n_non_private == 1 and led.verify() == []
    _execute(url, "UPDATE fdp_releases SET charge_kind='dp' WHERE release_id='pcv'")  # hiding it is caught
    assert any("'pcv'" in p for p in led.verify())


def test_a_non_private_charge_is_refused_on_a_zcdp_dataset(tmp_path: Path) -> None:
    led, _ = _ledger(tmp_path)
    led.set_budget("z", 5.0, 1e-6, accounting="zcdp")
    with pytest.raises(ConfigError, match="non-private release cannot be charged"):
        led.reserve(release_id="x", dataset_id="z", epsilon=1.0, delta=0.0, non_private=True, **KW)
    assert led.releases() == []


def test_a_ledger_newer_than_the_code_is_refused(tmp_path: Path) -> None:
    led, url = _ledger(tmp_path)
    _execute(url, f"UPDATE fdp_meta SET value='{SCHEMA_VERSION + 1}' WHERE key='schema_version'")
    with pytest.raises(LedgerError, match="newer than this fdp"):
        Ledger(url)


# ----------------------------------------------------------------------------- periods


def test_monthly_allowance_is_enforced_per_period_and_total_still_holds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    led, _ = _ledger(tmp_path)
    with monkeypatch.context() as m:  # the policy was set in December 2025 and lets late runs go back far
        m.setattr(ledger_store, "_now", lambda: "2025-12-01T00:00:00.000000+00:00")
        led.set_budget("ds", 2.0, period="month", epsilon_per_period=1.0, max_late_periods=1200)
    led.reserve(release_id="a", dataset_id="ds", epsilon=0.6, delta=0.0, period="2026-01", **KW)
    led.reserve(release_id="b", dataset_id="ds", epsilon=0.4, delta=0.0, period="2026-01", **KW)
    with pytest.raises(BudgetExceededError, match=r"allowance of period 2026-01.*Requested: epsilon=0\.1.*Remaining: epsilon=0"):
        led.reserve(release_id="c", dataset_id="ds", epsilon=0.1, delta=0.0, period="2026-01", **KW)
    assert led.get("c") is None
    led.reserve(release_id="d", dataset_id="ds", epsilon=0.9, delta=0.0, period="2026-02", **KW)
    # February has 0.1 left, but the total (2.0) has only 0.1 left too: 0.2 exceeds the total first
    with pytest.raises(BudgetExceededError, match="total budget"):
        led.reserve(release_id="e", dataset_id="ds", epsilon=0.2, delta=0.0, period="2025-12", **KW)
    b = led.budgets("ds")[0]
    usage = {p.period: (p.spent[0], p.remaining) for p in b.periods}
    assert usage["2026-01"] == (1.0, (0.0, 0.0)) and usage["2026-02"][0] == pytest.approx(0.9)
    assert current_period() in usage  # the current period is always listed when there is an allowance
    PrivacyBudget.model_validate(b.as_dict())  # the JSON form matches the published schema
    assert led.verify() == []


def test_periods_cannot_be_borrowed_from_the_future_or_misspelt(tmp_path: Path) -> None:
    led, _ = _ledger(tmp_path)
    led.set_budget("ds", 2.0, period="month", epsilon_per_period=1.0)
    for bad, match in (("2999-01", "must not be after"), ("2026-13", "YYYY-MM"), ("26-01", "YYYY-MM")):
        with pytest.raises(ConfigError, match=match):
            led.reserve(release_id="x", dataset_id="ds", epsilon=0.1, delta=0.0, period=bad, **KW)
    assert led.releases() == []


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"period": "month"}, "epsilon per period"),
        ({"epsilon_per_period": 1.0}, "needs --period"),
        ({"period": "week", "epsilon_per_period": 1.0}, "period"),
        ({"period": "month", "epsilon_per_period": 3.0}, "must not exceed the total"),
        ({"accounting": "zcdp"}, "must be > 0 for zcdp"),
        ({"accounting": "renyi"}, "accounting"),
    ],
)
def test_inconsistent_policies_are_refused_and_change_nothing(tmp_path: Path, kwargs: dict, match: str) -> None:
    led, _ = _ledger(tmp_path)
    led.set_budget("ds", 2.0)
    with pytest.raises(ConfigError, match=match):
        led.set_budget("ds", 2.0, **kwargs)
    b = led.budgets("ds")[0]
    assert (b.accounting, b.period, b.total) == ("basic", None, (2.0, 0.0))


def test_policy_edited_out_of_band_is_caught(tmp_path: Path) -> None:
    led, url = _ledger(tmp_path)
    led.set_budget("ds", 2.0, period="month", epsilon_per_period=1.0)
    _execute(url, "UPDATE fdp_datasets SET epsilon_per_period='5.0'")
    assert led.verify() == ["dataset 'ds': budget differs from its audit trail (edited out of band)"]


# ----------------------------------------------------------------------------- zCDP


def test_zcdp_accounting_uses_openDP_conversions_and_beats_basic_composition(tmp_path: Path) -> None:
    led, _ = _ledger(tmp_path)
    eps_total, delta_total = 3.0, 1e-6
    led.set_budget("z", eps_total, delta_total, accounting="zcdp")
    led.set_budget("b", eps_total, delta_total)
    n_fit = {}
    for ds in ("z", "b"):
        i = 0
        while True:
            try:
                led.reserve(release_id=f"{ds}{i}", dataset_id=ds, epsilon=0.1, delta=0.0, **KW)
            except BudgetExceededError:
                break
            i += 1
        n_fit[ds] = i
    assert n_fit["b"] == 30  # 30 x 0.1 = 3.0 exactly
    rho = n_fit["z"] * pure_to_zcdp(0.1)
    assert zcdp_to_epsilon(rho, delta_total) <= eps_total < zcdp_to_epsilon(rho + pure_to_zcdp(0.1), delta_total)
    assert n_fit["z"] > n_fit["b"]  # many small pure releases: zCDP composes more tightly
    b = led.budgets("z")[0]
    assert b.rho_spent == pytest.approx(rho)
    assert b.spent == (pytest.approx(zcdp_to_epsilon(rho, delta_total)), delta_total)
    assert led.verify() == []


def test_zcdp_gaussian_release_is_charged_by_its_rho(tmp_path: Path) -> None:
    led, _ = _ledger(tmp_path)
    led.set_budget("z", 2.0, 1e-5, accounting="zcdp")
    rho_fit = 0.05
    assert zcdp_to_epsilon(rho_fit, 1e-5) < 2.0
    led.reserve(release_id="g", dataset_id="z", epsilon=1.0, delta=1e-5, rho=rho_fit, **KW)
    assert led.get("g").rho == rho_fit
    with pytest.raises(BudgetExceededError, match=r"Requested: rho=0\.5\. Remaining: rho="):
        led.reserve(release_id="h", dataset_id="z", epsilon=1.0, delta=1e-5, rho=0.5, **KW)
    with pytest.raises(ConfigError, match="no zCDP form"):
        led.reserve(release_id="i", dataset_id="z", epsilon=0.1, delta=1e-9, **KW)


def test_switching_to_zcdp_needs_every_release_to_have_a_zcdp_form(tmp_path: Path) -> None:
    led, _ = _ledger(tmp_path)
    led.set_budget("ds", 2.0, 1e-5)
    led.reserve(release_id="approx", dataset_id="ds", epsilon=0.5, delta=1e-6, **KW)
    with pytest.raises(ConfigError, match="without a zCDP form"):
        led.set_budget("ds", 2.0, 1e-5, accounting="zcdp")
    assert led.budgets("ds")[0].accounting == "basic"


def test_budget_cannot_be_set_below_spent_in_either_mode(tmp_path: Path) -> None:
    led, _ = _ledger(tmp_path)
    led.set_budget("ds", 6.0, 1e-5, accounting="zcdp")
    led.reserve(release_id="a", dataset_id="ds", epsilon=1.0, delta=0.0, **KW)  # rho 0.5 -> epsilon 4.73 at 1e-5
    with pytest.raises(BudgetExceededError, match="new total budget"):
        led.set_budget("ds", 4.0, 1e-5, accounting="zcdp")
    led.set_budget("ds", 1.5, 1e-5)  # basic: spent 1.0 <= 1.5
    with pytest.raises(BudgetExceededError, match="new total budget"):
        led.set_budget("ds", 0.5, 1e-5)
    assert led.budgets("ds")[0].total == (1.5, 1e-5)


# ----------------------------------------------------------------------------- charge requests


def test_a_charge_request_whose_parts_do_not_sum_exactly_is_refused() -> None:
    base = dict(dataset_id="ds", summary="regression", mechanism="fosr", sensitivity_formula="s",
                config_sha256="0" * 64)
    ok = ChargeRequest(epsilon=0.3, budget_splits=[{"name": "T1", "epsilon": 0.1}, {"name": "T2", "epsilon": 0.2}], **base)
    assert [s.name for s in ok.budget_splits] == ["T1", "T2"]  # 0.1 + 0.2 == 0.3 exactly (fractions)
    with pytest.raises(ValueError, match="must sum exactly"):
        ChargeRequest(epsilon=0.3, budget_splits=[{"name": "T1", "epsilon": 0.1}, {"name": "T2", "epsilon": 0.1}], **base)
    with pytest.raises(ValueError, match="must sum exactly"):
        ChargeRequest(epsilon=0.3, delta=1e-6, budget_splits=[{"name": "all", "epsilon": 0.3}], **base)


# ----------------------------------------------------------------------------- allowance vs spending, grants


def test_an_allowance_below_a_periods_spending_is_refused_with_the_numbers(tmp_path: Path) -> None:
    led, _ = _ledger(tmp_path)
    led.set_budget("d", 12.0, period="month", epsilon_per_period=1.0, delta_per_period=0.0)
    led.reserve(release_id="a", dataset_id="d", epsilon=0.75, delta=0.0, period=current_period(), **KW)
    with pytest.raises(ConfigError, match=rf"allowance per month \(epsilon 0.5, delta 0\) must be at least what period "
                                          rf"{current_period()} has spent \(epsilon 0.75, delta 0\); nothing changed"):
        led.set_budget("d", 12.0, period="month", epsilon_per_period=0.5, delta_per_period=0.0)
    assert led.budgets("d")[0].per_period == (1.0, 0.0)
    led.set_budget("d", 12.0, period="month", epsilon_per_period=0.75, delta_per_period=0.0)  # equal is fine
    assert led.verify() == []


def test_a_grant_adds_to_one_month_only_is_audited_and_budget_show_json_never_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    led, url = _ledger(tmp_path)
    with monkeypatch.context() as m:  # a policy in force since 1999 that lets late runs go back that far
        m.setattr(ledger_store, "_now", lambda: "1999-12-01T00:00:00.000000+00:00")
        led.set_budget("d", 12.0, period="month", epsilon_per_period=1.0, delta_per_period=0.0, max_late_periods=1200)
    now = current_period()
    led.reserve(release_id="a", dataset_id="d", epsilon=1.0, delta=0.0, period=now, **KW)
    with pytest.raises(BudgetExceededError, match=f"allowance of period {now}"):
        led.reserve(release_id="b", dataset_id="d", epsilon=0.5, delta=0.0, period=now, **KW)
    b = led.grant("d", now, 0.5)
    period = next(p for p in b.periods if p.period == now)
    assert (period.allowance, period.granted, period.remaining) == ((1.5, 0.0), (0.5, 0.0), (0.5, 0.0))
    assert b.per_period == (1.0, 0.0)  # the policy itself is unchanged: other months keep 1
    led.reserve(release_id="b", dataset_id="d", epsilon=0.5, delta=0.0, period=now, **KW)
    with pytest.raises(BudgetExceededError, match=f"allowance of period {now} \\(with its grant\\)"):
        led.reserve(release_id="c", dataset_id="d", epsilon=0.25, delta=0.0, period=now, **KW)
    earlier = "2000-01"
    led.reserve(release_id="old", dataset_id="d", epsilon=1.0, delta=0.0, period=earlier, **KW)  # another month: 1
    with pytest.raises(BudgetExceededError, match=f"allowance of period {earlier}"):
        led.reserve(release_id="old2", dataset_id="d", epsilon=0.25, delta=0.0, period=earlier, **KW)
    # the grant is one entry of the hash chain; lowering the allowance cannot contradict this month's grant
    grants = [e for e in led.audit_events() if e["event"] == "budget.granted"]
    assert [g["payload"] for g in grants] == [{"period": now, "epsilon": "0.5", "delta": "0.0"}]
    with pytest.raises(ConfigError, match=f"period {earlier} has spent"):
        led.set_budget("d", 12.0, period="month", epsilon_per_period=0.5, delta_per_period=0.0)
    assert led.verify() == []
    for doc in (b.as_dict() for b in led.budgets()):
        PrivacyBudget.model_validate(doc)
    # editing the grant out of band breaks the chain
    _execute(url, "UPDATE fdp_audit SET payload = replace(payload, '0.5', '5.0') WHERE event = 'budget.granted'")
    assert any("edited" in p for p in led.verify())


@pytest.mark.parametrize(("args", "match"), [
    (("d", "2026-13", 1.0), "period .* must be a calendar month"),
    (("d", "2026-01", -1.0), "grant epsilon .* must be a finite number >= 0"),
    (("d", "2026-01", float("nan")), "grant epsilon .* must be a finite number >= 0"),
    (("d", "2026-01", 0.0), "must not both be 0"),
    (("nobody", "2026-01", 1.0), "dataset 'nobody' is not in the ledger"),
    (("flat", "2026-01", 1.0), "has no per-period allowance"),
])
def test_bad_grants_are_refused_and_change_nothing(tmp_path: Path, args: tuple, match: str) -> None:
    led, _ = _ledger(tmp_path)
    led.set_budget("d", 12.0, period="month", epsilon_per_period=1.0, delta_per_period=0.0)
    led.set_budget("flat", 12.0)
    before = len(led.audit_events())
    with pytest.raises((ConfigError, LedgerError), match=match):
        led.grant(*args)
    assert len(led.audit_events()) == before


def test_budget_show_json_works_on_a_ledger_whose_period_overspent_its_allowance(tmp_path: Path) -> None:
    """A ledger made before allowances were checked against spending (policy lowered afterwards) still shows."""
    led, url = _ledger(tmp_path)
    led.set_budget("d", 12.0, period="month", epsilon_per_period=2.0, delta_per_period=0.0)
    led.reserve(release_id="a", dataset_id="d", epsilon=2.0, delta=0.0, **KW)
    _execute(url, "UPDATE fdp_datasets SET epsilon_per_period = '1.0' WHERE dataset_id = 'd'")  # old fdp did this
    doc = PrivacyBudget.model_validate(led.budgets("d")[0].as_dict())
    assert doc.current_period is not None and doc.current_period.remaining is not None
    assert doc.current_period.remaining.epsilon == -1.0


def test_a_policy_dated_by_a_clock_that_ran_ahead_is_named_as_such(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trial U, M4: a policy set while the clock was in next month locked the dataset with two contradictory refusals
    ("charge that month or later" / "no later period than the current one"); the refusal now names the cause."""
    led, _ = _ledger(tmp_path)
    now = current_period()
    year, month = (int(x) for x in now.split("-"))
    ahead = f"{year + month // 12}-{month % 12 + 1:02d}"
    with monkeypatch.context() as m:
        m.setattr(ledger_store, "_now", lambda: f"{ahead}-01T00:00:05.000000+00:00")
        led.set_budget("d", 12.0, period="month", epsilon_per_period=1.0, delta_per_period=0.0)
    with pytest.raises(ConfigError, match=rf"is dated {ahead}, after the current period {now} by this machine's clock"):
        led.reserve(release_id="a", dataset_id="d", epsilon=0.5, delta=0.0, period=now, **KW)
    led.set_budget("d", 12.0, period="month", epsilon_per_period=1.0, delta_per_period=0.0)  # the named way out
    led.reserve(release_id="a", dataset_id="d", epsilon=0.5, delta=0.0, period=now, **KW)
    assert led.verify() == []
