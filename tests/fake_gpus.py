"""A stand-in ``nvidia-smi`` for hosts without GPUs: prints the rows a real one would."""

import os
import stat
from pathlib import Path

H200_X2 = "0, GPU-aaaaaaaa-0000-0000-0000-000000000000, NVIDIA H200\n1, GPU-bbbbbbbb-0000-0000-0000-000000000000, NVIDIA H200\n"


def fake_nvidia_smi(folder: Path, rows: str = H200_X2) -> str:
    """Write ``folder/nvidia-smi`` printing ``rows`` for any query; returns a PATH that finds it first."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "rows.txt").write_text(rows)
    script = folder / "nvidia-smi"
    script.write_text(f"#!/bin/sh\ncat '{folder / 'rows.txt'}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"
