#!/usr/bin/env bash
# bench/compare.py's machine_quiet, without a GPU or torch: a process that exits leaving a busy
# child and an idle one in its session (as a PyTorch run could leave compile workers) has both
# reported, the busy one among the cores' busy processes, and both stopped before mlpc would run.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
timeout 60 python3 - "$root/bench" <<'PY'
import json, subprocess, sys
sys.path.insert(0, sys.argv[1])
import compare
p = subprocess.Popen(["sh", "-c", "(while :; do :; done) & sleep 300 & exit 0"],
                     start_new_session=True)
p.wait()
report = compare.machine_quiet(p.pid)
print(json.dumps(report))
left = sorted(x["comm"] for x in report["torch_leftovers"])
# the spinning subshell and the sleep's ("sh" still, if it has not exec'd sleep yet under load)
assert len(left) == 2 and set(left) <= {"sh", "sleep"}, left
# listed as busy (over 5% of a core in the sample): how much more depends on the machine's load
assert any(b["comm"] == "sh" for b in report["before"]["busy_processes"]), report
assert compare.processes_in_session(p.pid) == [], "the session's processes were not stopped"
assert not any(b["comm"] == "sh" for b in report["after"]["busy_processes"]), report
print("compare_machine_quiet: ok")
PY
