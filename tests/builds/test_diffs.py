"""Cutting a pull request's diff into files, and refusing what a patched build cannot take."""

import pytest

from app.builds.diffs import DiffError, for_package, split
from tests.builds.conftest import diff

PR = (
    "From 1234 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] faster drafts\n\n"
    + diff("vllm/v1/proposer.py", "a\n", "b\n")
    + diff("tests/test_proposer.py", "x\n", "y\n")
    + "diff --git a/vllm/gone.py b/vllm/gone.py\ndeleted file mode 100644\nindex 1..0\n"
    "--- a/vllm/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n"
)


def test_a_pull_request_is_cut_into_its_files_after_the_commit_message() -> None:
    changes = split(PR)
    assert [c.path for c in changes] == ["vllm/v1/proposer.py", "tests/test_proposer.py", "vllm/gone.py"]
    assert changes[0].text.startswith("diff --git a/vllm/v1/proposer.py")
    assert changes[2].text.startswith("diff --git a/vllm/gone.py b/vllm/gone.py\ndeleted file mode")
    assert "".join(c.text for c in changes) == PR[PR.index("diff --git"):]


def test_only_the_package_is_applied() -> None:
    assert [c.path for c in for_package(split(PR))] == ["vllm/v1/proposer.py", "vllm/gone.py"]


@pytest.mark.parametrize(
    "path", ["csrc/attention/kernel.cu", "vllm/csrc/x.py", "csrc/ops.h", "vllm/kernels/op.cuh", "csrc/cpu/x.cpp"]
)
def test_compiled_sources_need_a_wheel(path: str) -> None:
    with pytest.raises(DiffError, match=rf"changes compiled sources \({path}\).*--wheel"):
        for_package(split(diff("vllm/a.py", "a\n", "b\n") + diff(path, "a\n", "b\n")))


def test_a_diff_outside_the_package_has_nothing_to_build() -> None:
    with pytest.raises(DiffError, match=r"nothing under vllm/ .it changes docs/x.md"):
        for_package(split(diff("docs/x.md", "a\n", "b\n")))


def test_text_that_is_no_diff_is_refused() -> None:
    with pytest.raises(DiffError, match="is it a unified diff"):
        split("just some words\n")


def test_paths_without_git_prefixes_are_refused() -> None:
    with pytest.raises(DiffError, match="must start with a/ or b/"):
        split("--- vllm/x.py\n+++ vllm/x.py\n@@ -1 +1 @@\n-a\n+b\n")
