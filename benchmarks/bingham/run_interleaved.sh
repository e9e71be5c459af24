#!/usr/bin/env bash
# fdp and rstiefel Gibbs benchmarks, interleaved (fdp, R, fdp, R), with the machine load before each.
# Usage (from the repository root): benchmarks/bingham/run_interleaved.sh [R library path, default /tmp/Rlib]
set -euo pipefail
lib="${1:-/tmp/Rlib}"
export OPENBLAS_NUM_THREADS=1
for round in 1 2; do
  echo "== round $round fdp $(uptime)"
  .venv/bin/python benchmarks/bingham/bench_gibbs.py --repeats 3
  echo "== round $round rstiefel $(uptime)"
  Rscript benchmarks/bingham/rstiefel_gibbs.R "$lib" 1000 3
done
echo "== end $(uptime)"
