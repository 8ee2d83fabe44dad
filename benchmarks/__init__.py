"""Research beside the product: scripts that measure it and print tables, and the statistics only they use.

Run each from the repository's root as a module, ``.venv/bin/python -m benchmarks.NAME --help``; they
import ``app``, ``runners`` and the test helpers (``tests.scratchdb``, ``tests.vllm_fixtures``) as the
packages they are. Nothing in ``app``, ``runners`` or ``dashboards`` imports this package.
"""
