"""Everything read out of a vLLM log, in one place: pure functions of the log's text, no I/O.

- ``lines``: the log's lines without what vLLM, Ray, torch.distributed and launchers put before each
  message (colours, process labels, logger headers, timestamps), split by process;
- ``tracebacks``: Python tracebacks in those lines, their exception, the wrappers that point elsewhere;
- ``failures``: failures that print no Python exception (kernel assertions, CUDA abort lines, NCCL
  watchdog timeouts, dead worker processes, compiler errors, ``faulthandler`` dumps);
- ``ran``: what ran, from vLLM's resolution lines (backends, graph modes, draft eager).

The service reads what ran and why a cell died from the stored log with these rules, so both can be
read again when the rules change (``draftbench rederive``). Every pattern here is linear in the text
it reads, and each line is cut at ``lines.MAX_LINE`` before any pattern reads it.
"""
