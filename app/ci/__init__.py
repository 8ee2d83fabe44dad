"""``draftbench ci``'s parts: the pull-request comment (``comment``), its gate (``gate``) and GitHub (``github``)."""
