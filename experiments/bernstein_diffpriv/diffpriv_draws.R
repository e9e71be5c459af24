# Draws of R diffpriv's DPMechBernstein (Rubinstein & Alda) for the side-by-side check in compare.py.
# Usage: Rscript diffpriv_draws.R LIBDIR OUT.csv DRAWS
# The target, lattice, sensitivity and epsilon must match compare.py.
args <- commandArgs(trailingOnly = TRUE)
.libPaths(c(args[1], .libPaths()))
suppressMessages(library(diffpriv))
set.seed(20261122)
target <- function(X) function(x) sin(2 * pi * x[1]) * x[2] + 0.5 * x[1]^2
mech <- DPMechBernstein(target = target, latticeK = 5, dims = 2, sensitivity = 0.1)
pts <- rbind(c(0.1, 0.2), c(0.5, 0.5), c(0.9, 0.7), c(0.3, 0.95))
draws <- as.integer(args[3])
out <- matrix(NA_real_, draws, nrow(pts))
for (i in seq_len(draws)) {
  r <- releaseResponse(mech, privacyParams = DPParamsEps(epsilon = 2), X = NULL)
  out[i, ] <- r$response(pts)
}
# the noise-free Bernstein approximation, for an exact check of the lattice order and the basis
exact <- predict(bernstein(target(NULL), dims = 2, k = 5), pts)
write.csv(rbind(exact, out), args[2], row.names = FALSE)
