"""Alignment onto the release grid, norm clipping and exact streaming sums (MATH.md §1.7)."""
