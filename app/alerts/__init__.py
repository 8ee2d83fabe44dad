"""Open regressions in each cell's history across builds (``app.analysis.changepoints``), and their acknowledgements."""
