"""The few lines of a crash log a reader needs first: around the last line that names the crash."""

LINE = 300
CUT = " […]"


def excerpt(log: str, needle: str, *, before: int = 6, after: int = 4, tail: int = 10) -> str:
    """Lines around the last line containing ``needle`` (the group's exception type or the first words of
    its message): ``before`` lines above, ``after`` below. Without a match, the log's last ``tail`` lines.
    A line longer than ``LINE`` characters keeps its first ``LINE`` and ends in ``CUT``, so a reader knows it goes on
    (the whole line is in the log). O(len(log))."""
    lines = log.splitlines()
    at = next((i for i in range(len(lines) - 1, -1, -1) if needle and needle in lines[i]), None)
    chosen = lines[-tail:] if at is None else lines[max(0, at - before): at + after + 1]
    return "\n".join(line if len(line) <= LINE else line[:LINE] + CUT for line in chosen)
