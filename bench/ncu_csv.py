"""What bench's readers of Nsight Compute's CSV share (ncu_floor.py, stall_ledger.py)."""


def quoted_lines(path):
    """The CSV lines of an `ncu --csv` output: those that start with a quote, which leaves out
    ==PROF== lines and the profiled program's own output."""
    with open(path, newline="") as f:
        return [line for line in f if line.startswith('"')]


def number(text):
    """A value as ncu writes it, thousands separators included."""
    return float(text.replace(",", ""))
