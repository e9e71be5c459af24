"""What the audit check before every charge costs as a ledger grows (trial U, M1; docs/audit.md).

``Ledger.reserve`` runs ``Ledger.verify``'s check in its transaction before a new charge. This builds a SQLite ledger
of ``--releases`` published releases (each with a ``--kb`` KB public record, about what a mean release stores) and
prints the time of ``verify()`` and of one more charge (reserve) on it.

    .venv/bin/python benchmarks/ledger_verify.py --releases 1000     # about 3 min (building the ledger)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from fdpcore.ledger import Ledger

KW = dict(dataset_id="d", delta=0.0, config_sha256="a" * 64, summary="mean", mechanism="iclp_qr",
          sensitivity_formula="sensitivity.mean.iclp_qr.exact_l2@1", provenance={}, internal={},
          budget_splits=[{"name": "mean", "epsilon": 0.01, "delta": 0.0}])


def main() -> None:
    """Build the ledger, then time verify() and one more reserve()."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--releases", type=int, default=1000)
    ap.add_argument("--kb", type=int, default=60)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        led = Ledger(f"sqlite:///{Path(tmp) / 'ledger.sqlite'}")
        led.set_budget("d", 1e9)
        public = {"manifest": {"padding": "x" * (args.kb * 1000)}}
        start = time.perf_counter()
        for i in range(args.releases):
            led.reserve(release_id=f"r{i}", epsilon=0.01, **KW)
            led.mark_noised(f"r{i}")
            led.publish(f"r{i}", public)
        built = time.perf_counter() - start
        start = time.perf_counter()
        problems = led.verify()
        verify = time.perf_counter() - start
        start = time.perf_counter()
        led.reserve(release_id="one-more", epsilon=0.01, **KW)
        reserve = time.perf_counter() - start
    print(f"| releases | KB each | verify() | one more charge | (building took {built:.0f} s) |")
    print("|---|---|---|---|---|")
    print(f"| {args.releases} | {args.kb} | {verify:.3f} s | {reserve:.3f} s | problems: {len(problems)} |")


if __name__ == "__main__":
    main()
