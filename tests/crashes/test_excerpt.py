"""A crash's excerpt: which lines it keeps, and how it says that a line was cut."""

from app.crashes.excerpt import excerpt


def test_a_line_cut_for_the_excerpt_ends_in_a_mark() -> None:
    long = "RuntimeError: CUDA error: an illegal memory access " + "x" * 400 + " END"
    shown = excerpt(f"INFO start\n{long}\nINFO exit", "RuntimeError").splitlines()
    # The reader sees where the line stops, and that it went on (the whole line is in the log).
    assert shown[1] == long[:300] + " […]" and "END" not in shown[1]
    assert shown[0] == "INFO start" and shown[2] == "INFO exit"


def test_a_line_of_300_characters_is_kept_whole_and_unmarked() -> None:
    line = "ValueError: " + "y" * 288
    assert excerpt(line, "ValueError") == line
