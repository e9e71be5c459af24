"""Accounting, tuning rules and the formula registry (MATH.md §5, §12).

:mod:`fdpcore.privacy.formulas` maps every formula id a manifest cites to the function that
implements it, its MATH.md section and its proof note.
"""
