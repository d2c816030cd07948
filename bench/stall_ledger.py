"""Where a kernel's warps wait, from Nsight Compute's per-instruction page.

Reads the CSV of `ncu --import REPORT --page source --csv --print-source sass` (bench/
gated_stalls.sh writes it) for a report collected with the SourceCounters section (PC sampling).
Prints:
  - blocks: runs of consecutive instructions executed equally often (a basic block, near enough),
    each with its share of all warp samples, its execution count and its hottest instruction
    with that instruction's main stall reasons;
  - the k-loop: the most executed block that issues WGMMAs (HGMMA), its samples split into
    waiting for a stage's data (the mbarrier try-wait and the branch on its result), waiting for
    earlier WGMMAs (WARPGROUP.DEPBAR), issuing WGMMAs, and the rest of the loop;
  - every mbarrier wait (SYNCS.PHASECHK) with its execution count and, where ptxas put its retry
    loop out of line, how often the retry ran per wait: each retry follows a try that suspended
    the warp for the hardware's time limit and found the barrier (a stage's data, a free stage,
    the hand-over) still not ready.

Usage: python3 bench/stall_ledger.py SASS.csv [--min-share PERCENT]   (default 0.5)
"""
import csv
import sys

from ncu_csv import number, quoted_lines

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


def _count(text):
    """A count, 0 where ncu left the cell empty."""
    return number(text) if text and text.strip() else 0.0


def read_sass(path):
    """(kernel name, [instruction dicts: addr, source, samples, executed, stalls {reason: n}])."""
    lines = quoted_lines(path)
    if not lines:
        raise ValueError(f"{path}: no CSV rows (was it written by `ncu --page source --csv`?)")
    first = next(csv.reader(lines[:1]))
    kernel = first[1] if len(first) > 1 and first[0] == "Kernel Name" else "?"
    body = lines[1:] if first[0] == "Kernel Name" else lines
    reader = csv.DictReader(body)
    fields = reader.fieldnames or []
    for need in ("Address", "Source", SAMPLES, EXECUTED):
        if need not in fields:
            raise ValueError(f"{path}: no column {need!r} (collect with --section SourceCounters)")
    reasons = [h for h in fields if h.startswith("stall_") and "Not Issued" not in h]
    rows = []
    for r in reader:
        if r["Address"] in (None, "", "Address"):
            continue
        rows.append({"addr": int(r["Address"], 16), "source": " ".join(r["Source"].split()),
                     "samples": _count(r[SAMPLES]), "executed": _count(r[EXECUTED]),
                     "stalls": {h[len("stall_"):]: _count(r[h]) for h in reasons}})
    if not rows:
        raise ValueError(f"{path}: no instructions")
    if sum(r["samples"] for r in rows) == 0:
        raise ValueError(f"{path}: no warp samples (collect with --section SourceCounters)")
    return kernel, rows


def blocks(rows):
    """Runs of consecutive instructions with the same execution count."""
    out = []
    for r in rows:
        if out and out[-1][-1]["executed"] == r["executed"]:
            out[-1].append(r)
        else:
            out.append([r])
    return out


def top_reasons(r, count=3):
    total = sum(r["stalls"].values())
    if not total:
        return ""
    best = sorted(r["stalls"].items(), key=lambda kv: -kv[1])[:count]
    return " ".join(f"{name} {n / total * 100:.0f}%" for name, n in best if n)


def opcode(source):
    """The opcode of a SASS line, past its predicate: '@!P0 BRA 0x10' -> 'BRA'."""
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def k_loop_split(block):
    """Samples of the k-loop by what its warps do: (data wait, WGMMA wait, WGMMA issue, rest)."""
    data = mma_wait = issue = rest = 0.0
    after_trywait = False
    for r in block:
        op = opcode(r["source"])
        if op.startswith("SYNCS.PHASECHK"):
            data += r["samples"]
            after_trywait = True
            continue
        if after_trywait and op == "BRA":  # the branch that consumes the try-wait's predicate
            data += r["samples"]
        elif op.startswith("WARPGROUP.DEPBAR"):
            mma_wait += r["samples"]
        elif op.startswith("HGMMA"):
            issue += r["samples"]
        else:
            rest += r["samples"]
        after_trywait = False
    return data, mma_wait, issue, rest


def branch_target(r):
    """(target address, predicated?) of a BRA, else None."""
    words = r["source"].split()
    if opcode(r["source"]) != "BRA" or not words[-1].startswith("0x"):
        return None
    return int(words[-1], 16), words[0].startswith("@")


def wait_sites(rows):
    """The mbarrier try-waits reached in line, each as (row, retry, spins). retry: the out-of-line
    retry loop ptxas built for it (a try-wait that branches back to itself, or to a YIELD just
    before it, then jumps back past the first try), or None. spins: whether the first try itself
    loops in line (its executions then count every try)."""
    by_addr = {r["addr"]: i for i, r in enumerate(rows)}
    tries = [i for i, r in enumerate(rows) if opcode(r["source"]).startswith("SYNCS.PHASECHK")]
    # the branches of the two instructions after each try: the one on its predicate comes first
    after = {i: [branch_target(r) for r in rows[i + 1:i + 3]] for i in tries}
    retry_of = {}  # index of a first try -> index of its retry
    for i in tries:
        on_fail, then = (after[i] + [None, None])[:2]
        loops = on_fail and on_fail[1] and 0 <= rows[i]["addr"] - on_fail[0] <= 0x20
        back = by_addr.get(then[0]) if loops and then and not then[1] else None
        if back is None:
            continue
        firsts = [t for t in tries if t < back and t != i]  # the try the retry returns past
        if firsts:
            retry_of[firsts[-1]] = i
    retries = set(retry_of.values())
    sites = []
    for i in tries:
        if i in retries:
            continue
        spins = any(t and t[1] and t[0] < rows[i]["addr"] for t in after[i])
        retry = retry_of.get(i)
        sites.append((rows[i], rows[retry] if retry is not None else None, spins))
    return sites


def main(argv):
    args = list(argv)
    min_share = 0.5
    usage = "usage: stall_ledger.py SASS.csv [--min-share PERCENT]"
    if "--min-share" in args:
        i = args.index("--min-share")
        try:
            min_share = float(args[i + 1])
        except (IndexError, ValueError):
            raise ValueError(usage) from None
        del args[i:i + 2]
    if len(args) != 1:
        raise ValueError(usage)
    kernel, rows = read_sass(args[0])
    total = sum(r["samples"] for r in rows)
    base = rows[0]["addr"]
    print(f"{kernel}: {len(rows)} instructions, {total:.0f} warp samples")
    print(f"\nblocks with at least {min_share}% of the samples (offset, executions, share, "
          "instructions, hottest instruction: its stall reasons)")
    bs = blocks(rows)
    for b in bs:
        share = sum(r["samples"] for r in b) / total * 100
        if share < min_share:
            continue
        hot = max(b, key=lambda r: r["samples"])
        print(f"  {b[0]['addr'] - base:#7x} {b[0]['executed']:>10.0f} {share:5.1f}% {len(b):4d}  "
              f"{hot['source'][:60]}: {top_reasons(hot)}")
    loops = [b for b in bs if any(opcode(r["source"]).startswith("HGMMA") for r in b)]
    if loops:
        loop = max(loops, key=lambda b: b[0]["executed"])
        data, mma_wait, issue, rest = k_loop_split(loop)
        in_loop = data + mma_wait + issue + rest
        print(f"\nk-loop at {loop[0]['addr'] - base:#x}: {loop[0]['executed']:.0f} warp iterations, "
              f"{in_loop / total * 100:.1f}% of all samples; of the loop's samples:")
        for what, n in (("waiting for a stage's data (mbarrier try-wait)", data),
                        ("waiting for earlier WGMMAs (WARPGROUP.DEPBAR)", mma_wait),
                        ("issuing WGMMAs (HGMMA)", issue), ("the rest of the loop", rest)):
            print(f"  {n / in_loop * 100:5.1f}%  {what}")
    print("\nmbarrier waits (offset, executions, share of samples; retries of a first try that found "
          "the barrier not ready, each after the hardware's own suspended wait)")
    for r, retry, spins in wait_sites(rows):
        line = f"  {r['addr'] - base:#7x} {r['executed']:>10.0f} {r['samples'] / total * 100:5.1f}%"
        if retry is not None and r["executed"]:
            line += (f"  retried {retry['executed']:.0f} times at {retry['addr'] - base:#x} "
                     f"({retry['executed'] / r['executed']:.2f} per wait)")
        elif spins:
            line += "  spins in line (every try counted)"
        print(line)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (OSError, ValueError) as e:
        print(f"stall_ledger.py: {e}", file=sys.stderr)
        sys.exit(1)
