# Time per 1,000 Gibbs sweeps of rstiefel's rbing.matrix.gibbs on the same A as bench_gibbs.py.
# Usage: Rscript benchmarks/bingham/rstiefel_gibbs.R [lib_path] [sweeps] [repeats]
# rstiefel is a benchmark reference only (never a dependency of fdp); see README.md to install it.
args <- commandArgs(trailingOnly = TRUE)
lib <- if (length(args) >= 1) args[1] else .libPaths()[1]
sweeps <- if (length(args) >= 2) as.integer(args[2]) else 1000L
repeats <- if (length(args) >= 3) as.integer(args[3]) else 3L
library(rstiefel, lib.loc = lib)
set.seed(2024)

benchmark_matrix <- function(m) {
  i <- seq_len(m)
  a <- 2 * cos(0.7 * outer(i, i))
  diag(a) <- diag(a) + 20 / i - 0.2 * i
  a
}

# (elapsed, CPU = user + system) seconds of this process since t0
since <- function(t0) {
  t1 <- proc.time()
  c(t1[["elapsed"]] - t0[["elapsed"]], (t1[["user.self"]] + t1[["sys.self"]]) - (t0[["user.self"]] + t0[["sys.self"]]))
}

time_case <- function(m, k) {
  A <- benchmark_matrix(m)
  if (k == 1) {
    x <- rnorm(m); x <- x / sqrt(sum(x^2))
    t0 <- proc.time()
    for (s in seq_len(sweeps)) x <- rbing.vector.gibbs(A, x)
    return(since(t0))
  }
  B <- diag(k)
  X <- rustiefel(m, k)
  for (s in 1:5) X <- rbing.matrix.gibbs(A, B, X)  # warm-up
  t0 <- proc.time()
  for (s in seq_len(sweeps)) X <- rbing.matrix.gibbs(A, B, X)
  since(t0)
}

cat("m,k,method,seconds_per_1000_sweeps,cpu_seconds_per_1000_sweeps\n")
for (case in list(c(40, 1), c(40, 3), c(5, 3))) {
  times <- sapply(seq_len(repeats), function(r) time_case(case[1], case[2]))  # 2 x repeats
  cat(sprintf("%d,%d,rstiefel,%.4f,%.4f\n", case[1], case[2], min(times[1, ]) * 1000 / sweeps,
              min(times[2, ]) * 1000 / sweeps))
}
