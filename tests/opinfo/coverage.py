"""The full OpInfo run: every entry, in worker processes, then the coverage table.

    python -m tests.opinfo.coverage [--jobs N] [--only REGEX] [--write-expected]
    python -m tests.opinfo.coverage --from build/opinfo_results.jsonl [--write-expected]

Workers run entries one by one and report each as a line on stdout; a worker that hangs
past the timeout or dies is replaced and its entry recorded as failing, so one bad entry
cannot stop the run. Results go to build/opinfo_results.jsonl; a full run (no --only)
rewrites OPINFO_COVERAGE.md and prints the table; --write-expected rewrites
tests/opinfo/expected_failures.txt from the results.
"""
import argparse
import collections
import json
import os
import queue
import re
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "build", "opinfo_results.jsonl")
TABLE = os.path.join(ROOT, "OPINFO_COVERAGE.md")
_TAG = "@@opinfo "


def _worker(indices, timeout):
    from . import catalog, harness
    entries = catalog.entries()
    for i in indices:
        eid, op = entries[i]
        print(_TAG + json.dumps({"start": i}), flush=True)
        t = time.time()
        result = harness.run_entry(op, timeout=timeout)
        result.update(i=i, id=eid, family=catalog.family(op), seconds=round(time.time() - t, 1))
        print(_TAG + json.dumps(result), flush=True)


class _Worker:
    def __init__(self, indices, timeout):
        self.todo = list(indices)
        self.timeout = timeout
        self.lines = queue.Queue()
        self.current, self.since = None, time.time()
        self._start()

    def _start(self):
        cmd = [sys.executable, "-m", "tests.opinfo.coverage", "--worker",
               ",".join(map(str, self.todo)), "--timeout", str(self.timeout)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.since = time.time()
        threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True).start()

    @staticmethod
    def _read(proc, lines):
        for line in proc.stdout:
            if line.startswith(_TAG):
                lines.put(json.loads(line[len(_TAG):]))
        lines.put(None)

    def poll(self):
        """Results finished since the last poll; restarts the worker after a hang or crash."""
        out = []
        while True:
            try:
                msg = self.lines.get(timeout=1)
            except queue.Empty:
                break
            if msg is None:  # the process ended
                self.proc.wait()
                if self.todo:
                    if self.current is None:  # died before its next entry started
                        self.current = self.todo[0]
                    out.append(self._lost(f"worker died (exit code {self.proc.returncode})"))
                    if self.todo:
                        self._start()
                return out
            if "start" in msg:
                self.current, self.since = msg["start"], time.time()
            else:
                self.todo.remove(msg["i"])
                self.current = None
                out.append(msg)
        # the worker's own alarm ends slow entries; this catches hangs inside C++ code
        if self.current is not None and time.time() - self.since > self.timeout + 120:
            self.proc.kill()
            self.proc.wait()
            out.append(self._lost("timeout"))
            self.lines = queue.Queue()
            if self.todo:
                self._start()
        return out

    def _lost(self, why):
        from . import catalog
        i = self.current
        eid, op = catalog.entries()[i]
        self.todo.remove(i)
        self.current = None
        fail = {"status": "fail", "detail": why, "fallbacks": []}
        return {"i": i, "id": eid, "family": catalog.family(op), "forward": fail,
                "backward": dict(fail) if op.supports_autograd else None, "dtypes": [],
                "seconds": None}

    @property
    def done(self):
        return not self.todo


def run(indices, jobs, timeout, path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    workers = [_Worker(indices[k::jobs], timeout) for k in range(jobs) if indices[k::jobs]]
    results, start = [], time.time()
    with open(path, "w") as f:
        while not all(w.done for w in workers):
            for w in workers:
                if w.done:
                    continue
                for r in w.poll():
                    results.append(r)
                    f.write(json.dumps(r) + "\n")
                    f.flush()
                    print(f"[{len(results)}/{len(indices)} {time.time() - start:.0f}s] {r['id']}: "
                          f"{_brief(r['forward'])} / {_brief(r['backward'])}", flush=True)
    return sorted(results, key=lambda r: r["i"])


def _brief(res):
    if res is None:
        return "-"
    return res["status"] + (f" ({res['detail'][:80]})" if res["detail"] else "")


def load(path):
    with open(path) as f:
        return sorted((json.loads(line) for line in f if line.strip()), key=lambda r: r["i"])


# ---- the table ---------------------------------------------------------------------------

_STATUSES = ("pass", "fallback", "fail", "wrong")


def _pct(n, d):
    return f"{100 * n / d:.1f}%" if d else "-"


def table(results) -> str:
    fams = collections.defaultdict(lambda: {"forward": collections.Counter(),
                                            "backward": collections.Counter()})
    for r in results:
        for direction in ("forward", "backward"):
            res = r[direction]
            if res is not None and res["status"] != "none":
                fams[r["family"]][direction][res["status"]] += 1
                fams["**total**"][direction][res["status"]] += 1
    head = ("| family | entries | pass | fallback | fail | wrong | pass % | "
            "autograd entries | pass | fallback | fail | wrong | pass % |")
    rows = [head, "|" + " --- |" * 13]
    for fam in sorted(fams, key=lambda f: (f == "**total**", f)):
        cells = [fam]
        for direction in ("forward", "backward"):
            c = fams[fam][direction]
            n = sum(c.values())
            cells += [str(n)] + [str(c[s]) for s in _STATUSES] + [_pct(c["pass"], n)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _causes(results):
    """(CPU-fallback ops by entries, error messages by entries, wrong results)."""
    fallback_ops, errors, wrong = collections.Counter(), collections.Counter(), []
    for r in results:
        for direction in ("forward", "backward"):
            res = r[direction]
            if res is None:
                continue
            for op in set(res["fallbacks"]):
                fallback_ops[op] += 1
            if res["status"] == "fail":
                errors[_cause(res["detail"])] += 1
            elif res["status"] == "wrong":
                wrong.append((r["id"], direction, res["detail"]))
    return fallback_ops, errors, wrong


def _cause(detail):
    """An error message with its numbers and names of shapes blurred, to group like ones."""
    detail = re.sub(r"\d+", "N", detail)
    return detail[:110]


def report(results) -> str:
    fallback_ops, errors, wrong = _causes(results)
    total = len(results)
    lines = [
        "# OpInfo coverage on the XLA device",
        "",
        "PyTorch's own operator test database (`op_db`, torch "
        f"{_torch_version()}): {total} entries that support float32, each run on the CPU "
        "and on the XLA device from the same `sample_inputs` (float32, and int64/bool where "
        "supported; the first few samples of each), comparing values, dtypes and shapes; "
        "gradients for the entries that support autograd. `pass`: right, fully lowered; "
        "`fallback`: right, but some op ran on the CPU; `fail`: an error the CPU does not "
        "raise (or a missing one); `wrong`: a different result without an error (a bug). "
        "Regenerate with `scripts/opinfo_coverage`; harness in `tests/opinfo/`.",
        "",
        table(results),
        "",
        "## Ops that ran on the CPU (entries affected)",
        "",
    ]
    lines += [f"- `{op}`: {n}" for op, n in fallback_ops.most_common(40)] or ["none"]
    lines += ["", "## Most common errors (entries and directions affected)", ""]
    lines += [f"- {n}: `{msg}`" for msg, n in errors.most_common(25)] or ["none"]
    lines += ["", "## Wrong results (bugs)", ""]
    lines += [f"- `{eid}` {d}: {msg[:200]}" for eid, d, msg in wrong] or ["none"]
    return "\n".join(lines) + "\n"


def _torch_version():
    import torch
    return torch.__version__


def write_expected(results):
    from . import catalog, harness
    old = catalog.read_expected()
    rows = {}
    for r in results:
        for direction in ("forward", "backward"):
            res = r[direction]
            if res is None or res["status"] not in ("fallback", "fail"):
                continue
            key = (r["id"], direction)
            cat = old[key][1] if key in old else harness.category(res)
            rows[key] = (res["status"], cat, harness.summary(res))
    catalog.write_expected(rows)
    return len(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--timeout", type=int, default=300, help="seconds per entry (default 300)")
    p.add_argument("--only", help="run only entries whose id matches this regex")
    p.add_argument("--ci-slice", action="store_true", help="run only the CI slice")
    p.add_argument("--from", dest="source", help="tabulate this results file instead of running")
    p.add_argument("--out", default=RESULTS, help=f"results file (default {RESULTS})")
    p.add_argument("--write-expected", action="store_true",
                   help="rewrite tests/opinfo/expected_failures.txt from the results")
    args = p.parse_args(argv)
    if args.worker is not None:
        return _worker([int(i) for i in args.worker.split(",")], args.timeout)
    from . import catalog
    full = not args.only and not args.ci_slice
    if args.source:
        results = load(args.source)
        full = len(results) == len(catalog.entries())
    else:
        picked = catalog.ci_slice() if args.ci_slice else catalog.entries()
        ids = {eid for eid, _ in picked}
        indices = [i for i, (eid, _) in enumerate(catalog.entries())
                   if eid in ids and (not args.only or re.search(args.only, eid))]
        results = run(indices, args.jobs, args.timeout, args.out)
    text = report(results)
    print(text)
    if full:
        with open(TABLE, "w") as f:
            f.write(text)
        print(f"wrote {TABLE}")
    if args.write_expected:
        if not full:
            sys.exit("--write-expected needs a full run")
        print(f"wrote {write_expected(results)} lines to {catalog.EXPECTED_FILE}")


if __name__ == "__main__":
    main()
