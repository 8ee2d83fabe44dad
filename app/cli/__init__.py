"""``draftbench``: the command line (serve, worker, submit, status, expand, import, migrate, token)."""
