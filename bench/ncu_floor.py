"""How close llama_geglu's kernels come to the tensor pipes' limit, from Nsight Compute.

Reads `ncu --csv` reports (bench/llama_ncu.sh writes them), one forward per report: mlpc's first,
then PyTorch's (eager, torch.compile). Prints each kernel's time, SM clock and tensor-pipe
activity, each forward's sum, mlpc's ratio to each PyTorch forward, and the floor of that ratio:
mlpc's forward with every kernel's tensor pipes busy all of its time (a kernel's time times its
tensor-pipe activity; kernels that barely use the pipes keep their whole time). A target below
the floor is out of reach for kernels doing mlpc's tensor-core work at the clocks measured.

Usage: python3 bench/ncu_floor.py LABEL=REPORT.csv LABEL=REPORT.csv [...]   (mlpc's first)
"""
import csv
import re
import sys

from ncu_csv import number, quoted_lines

TIME = "gpu__time_duration.sum"
CLOCK = "sm__cycles_elapsed.avg.per_second"
TENSOR = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"
DRAM = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
# A kernel whose tensor pipes are busier than this is a GEMM: at 100% its time would be its busy
# time. Below it (GELU, mul: memory-bound) the pipes are not what it waits for.
GEMM_ACTIVITY = 50.0

_TIME_US = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
            "second": 1e6, "s": 1e6}
_CLOCK_GHZ = {"ghz": 1.0, "mhz": 1e-3, "khz": 1e-6, "hz": 1e-9, "cycle/nsecond": 1.0,
              "cycle/usecond": 1e-3, "cycle/msecond": 1e-6, "cycle/second": 1e-9}


def _convert(value, unit, table, what):
    factor = table.get(unit.strip().lower())
    if factor is None:
        raise ValueError(f"{what} in unit {unit!r}, which ncu_floor.py does not know")
    return value * factor


def read_report(path):
    """The kernels of one `ncu --csv` report, in launch order: dicts of name, us, ghz, tensor,
    dram (None where the report lacks the metric)."""
    kernels = {}
    for row in csv.DictReader(quoted_lines(path)):
        if "Metric Name" not in row or row.get("ID") in (None, "ID"):
            continue
        k = kernels.setdefault(int(row["ID"]), {"name": row["Kernel Name"], "us": None,
                                                 "ghz": None, "tensor": None, "dram": None})
        name, unit, value = row["Metric Name"], row["Metric Unit"], number(row["Metric Value"])
        if name == TIME:
            k["us"] = _convert(value, unit, _TIME_US, f"{path}: {name}")
        elif name == CLOCK:
            k["ghz"] = _convert(value, unit, _CLOCK_GHZ, f"{path}: {name}")
        elif name == TENSOR:
            k["tensor"] = value
        elif name == DRAM:
            k["dram"] = value
    if not kernels:
        raise ValueError(f"{path}: no kernels (was it written by `ncu --csv`?)")
    missing = [k["name"] for k in kernels.values() if k["us"] is None]
    if missing:
        raise ValueError(f"{path}: no {TIME} for {missing[0]}")
    return [kernels[i] for i in sorted(kernels)]


def busy_us(kernel):
    """The kernel's time with its tensor pipes busy throughout (GEMMs), else its time."""
    tensor = kernel["tensor"] or 0.0
    return kernel["us"] * tensor / 100 if tensor >= GEMM_ACTIVITY else kernel["us"]


def _short(name, width=56):
    """A kernel's name without its template arguments and parameters, but for the most specific
    functor or kernel they name (PyTorch's elementwise kernels differ only there)."""
    head = name.split("<")[0]
    base = re.sub(r"^void |at::(native::)?", "", head.split("(")[0])
    inner = re.findall(r"(\w*(?:Functor|Kernel)\w*)", name[len(head):])
    if inner:
        base += f"[{inner[-1]}]"
    return base if len(base) <= width else base[: width - 1] + "…"


def _cell(value, fmt):
    return "-" if value is None else format(value, fmt)


def report(forwards):
    """forwards: [(label, kernels)], mlpc's first. Returns the printed lines."""
    lines = []
    for label, kernels in forwards:
        lines.append(f"{label}: {len(kernels)} kernels, {sum(k['us'] for k in kernels):.1f} us")
        lines.append(f"  {'kernel':<56} {'us':>9} {'GHz':>5} {'tensor %':>8} {'dram %':>6}")
        for k in kernels:
            lines.append(f"  {_short(k['name']):<56} {k['us']:>9.1f} {_cell(k['ghz'], '5.2f')} "
                         f"{_cell(k['tensor'], '8.2f')} {_cell(k['dram'], '6.1f')}")
    (label, mlpc), others = forwards[0], forwards[1:]
    total, floor = sum(k["us"] for k in mlpc), sum(busy_us(k) for k in mlpc)
    lines.append(f"{label} with its GEMMs' tensor pipes busy throughout: {floor:.1f} us "
                 f"(measured {total:.1f})")
    for other, kernels in others:
        theirs = sum(k["us"] for k in kernels)
        lines.append(f"{label} / {other}: {total / theirs:.3f} measured, floor {floor / theirs:.3f}")
    return lines


def main(argv):
    if len(argv) < 2 or any("=" not in a for a in argv):
        sys.exit(__doc__.strip().splitlines()[-1])
    try:
        forwards = [(a.split("=", 1)[0], read_report(a.split("=", 1)[1])) for a in argv]
    except (OSError, ValueError, KeyError) as e:
        sys.exit(f"ncu_floor.py: {e}")
    print("\n".join(report(forwards)))


if __name__ == "__main__":
    main(sys.argv[1:])
