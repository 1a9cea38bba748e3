"""The full OpInfo run: every entry, in worker processes, then the coverage table.

    python -m tests.opinfo.coverage [--jobs N] [--only REGEX] [--write-expected]
    python -m tests.opinfo.coverage --only REGEX --update [--write-expected]
    python -m tests.opinfo.coverage --only REGEX --errors-only   (their error inputs only)
    python -m tests.opinfo.coverage --resume                (after an interrupted run)
    python -m tests.opinfo.coverage --from build/opinfo_results.jsonl [--write-expected]

Workers run entries one by one (each in all its dtypes) and report each as a line on stdout;
a worker that hangs past the timeout or dies is replaced and its entry recorded as failing,
so one bad entry cannot stop the run. Results go to build/opinfo_results.jsonl (--update:
the entries run replace theirs there); results covering every entry rewrite
docs/reference/operator-coverage.md and print the tables; --write-expected rewrites
tests/opinfo/expected_failures.txt from them.
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

from tests.fresh_process import ROOT, start

RESULTS = os.path.join(ROOT, "build", "opinfo_results.jsonl")
TABLE = os.path.join(ROOT, "docs", "reference", "operator-coverage.md")
_TAG = "@@opinfo "


def _worker(indices, timeout, errors_only):
    from . import catalog, harness
    entries = catalog.entries()
    for i in indices:
        eid, op = entries[i]
        dtypes = [] if errors_only else catalog.entry_dtypes(op)
        print(_TAG + json.dumps({"start": i, "dtypes": len(dtypes)}), flush=True)
        t = time.time()
        result = harness.run_entry(op, timeout=timeout, dtypes=dtypes)
        result.update(i=i, id=eid, family=catalog.family(op), seconds=round(time.time() - t, 1))
        print(_TAG + json.dumps(result), flush=True)


class _Worker:
    def __init__(self, indices, timeout, errors_only=False):
        self.todo = list(indices)
        self.timeout = timeout
        self.errors_only = errors_only
        self.lines = queue.Queue()
        self.current, self.since, self.allowed = None, time.time(), timeout
        self._start()

    def _start(self):
        argv = ["-m", "tests.opinfo.coverage", "--worker", ",".join(map(str, self.todo)),
                "--timeout", self.timeout] + (["--errors-only"] if self.errors_only else [])
        self.proc = start(*argv, stderr=subprocess.DEVNULL)
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
                self.allowed = self.timeout * (msg["dtypes"] + 1)  # per dtype, and errors
            else:
                self.todo.remove(msg["i"])
                self.current = None
                out.append(msg)
        # the worker's own alarm ends slow entries; this catches hangs inside C++ code
        if self.current is not None and time.time() - self.since > self.allowed + 120:
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
        grads = catalog.backward_dtypes(op)
        dtypes = {catalog.dtype_name(d): {"forward": fail, "backward": fail if d in grads else None}
                  for d in catalog.entry_dtypes(op)}
        return {"i": i, "id": eid, "family": catalog.family(op), "dtypes": dtypes,
                "errors": dict(fail, passed=0, total=1, unsupported=0, failures=[why])
                if self.errors_only else None, "seconds": None}

    @property
    def done(self):
        return not self.todo


def run(indices, jobs, timeout, path, update=False, errors_only=False):
    """Results of the entries `indices`, written to `path` as they come (update: the other
    entries' results already in `path` are kept, and returned too; errors_only: only the
    error inputs of `indices` run, their other results are kept from `path`)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    kept, previous = [], {}
    if (update or errors_only) and os.path.exists(path):
        previous = {r["i"]: r for r in load(path)}
        kept = [r for i, r in previous.items() if i not in set(indices)]
    if errors_only and not set(indices) <= set(previous):
        sys.exit(f"--errors-only needs the entries' other results in {path}")
    workers = [_Worker(indices[k::jobs], timeout, errors_only)
               for k in range(jobs) if indices[k::jobs]]
    results, start = [], time.time()
    with open(path, "w") as f:
        for r in kept:
            f.write(json.dumps(r) + "\n")
        while not all(w.done for w in workers):
            for w in workers:
                if w.done:
                    continue
                for r in w.poll():
                    if errors_only:
                        r = dict(previous[r["i"]], errors=r["errors"])
                    results.append(r)
                    f.write(json.dumps(r) + "\n")
                    f.flush()
                    print(f"[{len(results)}/{len(indices)} {time.time() - start:.0f}s] {r['id']}: "
                          f"{_brief(r)}", flush=True)
    return sorted(kept + results, key=lambda r: r["i"])


def _brief(r):
    """One line per entry: its dtypes' statuses, forward / backward, and its error inputs."""
    cells = []
    for name, res in r["dtypes"].items():
        cell = f"{name}:{res['forward']['status']}"
        if res["backward"] is not None:
            cell += f"/{res['backward']['status']}"
        cells.append(cell)
    errs = r.get("errors")
    if errs is not None:
        cells.append(f"errors:{errs['passed']}/{errs['total']}")
    return " ".join(cells)


def _most_common(counter, n):
    """The n most common, ties by name: the same results give the same table."""
    return sorted(counter.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def load(path):
    with open(path) as f:
        return sorted((json.loads(line) for line in f if line.strip()), key=lambda r: r["i"])


# ---- the tables --------------------------------------------------------------------------

_STATUSES = ("pass", "fallback", "fail", "wrong")


def _pct(n, d):
    return f"{100 * n / d:.1f}%" if d else "-"


def _pairs(results):
    """(entry result, dtype name, direction, status) for every counted (entry, dtype) pair."""
    for r in results:
        for name, res in r["dtypes"].items():
            for direction in ("forward", "backward"):
                one = res[direction]
                if one is not None and one["status"] != "none":
                    yield r, name, direction, one


def _table(groups, label, order):
    head = (f"| {label} | pairs | pass | fallback | fail | wrong | pass % | "
            "pairs with gradients | pass | fallback | fail | wrong | pass % |")
    rows = [head, "|" + " --- |" * 13]
    for key in sorted(groups, key=order):
        cells = [key]
        for direction in ("forward", "backward"):
            c = groups[key][direction]
            n = sum(c.values())
            cells += [str(n)] + [str(c[s]) for s in _STATUSES] + [_pct(c["pass"], n)]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _counters():
    return collections.defaultdict(lambda: {"forward": collections.Counter(),
                                            "backward": collections.Counter()})


def table(results) -> str:
    """Per family: (entry, dtype) pairs by status, forward and with gradients."""
    fams = _counters()
    for r, _, direction, res in _pairs(results):
        fams[r["family"]][direction][res["status"]] += 1
        fams["**total**"][direction][res["status"]] += 1
    return _table(fams, "family", lambda f: (f == "**total**", f))


def dtype_table(results) -> str:
    """Per dtype: (entry, dtype) pairs by status, forward and with gradients."""
    from . import catalog
    dtypes = _counters()
    for _, name, direction, res in _pairs(results):
        dtypes[name][direction][res["status"]] += 1
        dtypes["**total**"][direction][res["status"]] += 1
        if name != "complex32":
            dtypes[_LESS_COMPLEX32][direction][res["status"]] += 1
    order = {catalog.dtype_name(d): i for i, d in enumerate(catalog.DTYPE_ORDER)}
    order.update({"**total**": 1 << 30, _LESS_COMPLEX32: (1 << 30) + 1})
    return _table(dtypes, "dtype", lambda d: order.get(d, 1 << 29))


# complex32 has no XLA type: every pair of it raises, saying so
_LESS_COMPLEX32 = "**total without complex32** (not on XLA devices)"


def error_summary(results) -> str:
    entries = [r["errors"] for r in results if r.get("errors")]
    total = sum(e["total"] for e in entries)
    passed = sum(e["passed"] for e in entries)
    unsupported = sum(e.get("unsupported", 0) for e in entries)
    whole = sum(e["status"] == "pass" for e in entries)
    return (f"{len(entries)} entries have error inputs; {total} error inputs, of which "
            f"{passed} ({_pct(passed, total)}) raise the CPU's exception type with a message "
            f"matching OpInfo's pattern, at the op; {unsupported} hold what XLA devices cannot "
            f"(the copy to the device raises, naming it); {total - passed - unsupported} do "
            f"not. {whole} entries pass all of theirs.")


def _causes(results):
    """(CPU-fallback ops by pairs, error messages by pairs, wrong results)."""
    fallback_ops, errors, wrong = collections.Counter(), collections.Counter(), []
    for r, name, direction, res in _pairs(results):
        for op in set(res["fallbacks"]):
            fallback_ops[op] += 1
        if res["status"] == "fail":
            errors[_cause(res["detail"])] += 1
        elif res["status"] == "wrong":
            wrong.append((r["id"], name, direction, res["detail"]))
    return fallback_ops, errors, wrong


def _cause(detail):
    """An error message with its numbers and names of shapes blurred, to group like ones."""
    detail = re.sub(r"\d+", "N", detail)
    return detail[:110]


def report(results) -> str:
    fallback_ops, errors, wrong = _causes(results)
    total = len(results)
    err_causes = collections.Counter(_cause(r["errors"]["detail"]) for r in results
                                     if r.get("errors") and r["errors"]["status"] == "fail")
    lines = [
        "# OpInfo coverage on the XLA device",
        "",
        "PyTorch's own operator test database (`op_db`, torch "
        f"{_torch_version()}): {total} entries that support float32, each run on the CPU "
        "and on the XLA device from the same `sample_inputs` in every dtype the CPU supports "
        "for it (the first few samples of each), comparing values (within the dtype's "
        "tolerance as PyTorch's own tests set it, a float64 run arbitrating rounding), dtypes "
        "and shapes; gradients in float32, float64 and bfloat16 for the entries that support "
        "autograd in them; and OpInfo's error inputs. A pair is one (entry, dtype). `pass`: "
        "right, fully lowered; `fallback`: right, but some op ran on the CPU; `fail`: an error "
        "the CPU does not raise (or a missing one); `wrong`: a different result without an "
        "error (a bug). Regenerate with `scripts/opinfo_coverage`; harness in `tests/opinfo/`.",
        "",
        "## Per dtype",
        "",
        dtype_table(results),
        "",
        "## Per family (all dtypes)",
        "",
        table(results),
        "",
        "## Error inputs",
        "",
        error_summary(results),
        "",
    ]
    lines += [f"- {n}: `{msg}`" for msg, n in _most_common(err_causes, 15)]
    lines += ["", "## Ops that ran on the CPU (pairs affected)", ""]
    lines += [f"- `{op}`: {n}" for op, n in _most_common(fallback_ops, 40)] or ["none"]
    lines += ["", "## Most common errors (pairs and directions affected)", ""]
    lines += [f"- {n}: `{msg}`" for msg, n in _most_common(errors, 25)] or ["none"]
    lines += ["", "## Wrong results (bugs)", ""]
    lines += [f"- `{eid}` {name} {d}: {msg[:200]}" for eid, name, d, msg in wrong] or ["none"]
    return "\n".join(lines) + "\n"


def _torch_version():
    import torch
    return torch.__version__


def write_expected(results):
    from . import catalog, harness
    old = catalog.read_expected()
    rows = {}

    def add(key, res):
        """The category already given to this pair, or to the entry's direction in another
        dtype with the same status, else a first guess."""
        same = [v[1] for k, v in old.items() if (k[0], k[2]) == (key[0], key[2])
                and v[0] == res["status"]]
        cat = old[key][1] if key in old else same[0] if same else harness.category(res)
        rows[key] = (res["status"], cat, harness.summary(res))
    for r, name, direction, res in _pairs(results):
        if res["status"] in ("fallback", "fail"):
            add((r["id"], name, direction), res)
    for r in results:
        errs = r.get("errors")
        if errs and errs["status"] == "fail":
            add((r["id"], "-", "errors"), dict(errs, fallbacks=[], detail=(
                f"{errs['total'] - errs['passed']}/{errs['total']} fail; {errs['detail']}")))
    catalog.write_expected(rows)
    return len(rows)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    p.add_argument("--timeout", type=int, default=300,
                   help="seconds per entry and dtype (default 300)")
    p.add_argument("--only", help="run only entries whose id matches this regex")
    p.add_argument("--ci-slice", action="store_true", help="run only the CI slice")
    p.add_argument("--from", dest="source", help="tabulate this results file instead of running")
    p.add_argument("--out", default=RESULTS, help=f"results file (default {RESULTS})")
    p.add_argument("--update", action="store_true",
                   help="keep the other entries' results in the results file")
    p.add_argument("--resume", action="store_true",
                   help="run only the entries the results file lacks (an interrupted run)")
    p.add_argument("--errors-only", action="store_true",
                   help="run only the entries' error inputs; their other results are kept")
    p.add_argument("--write-expected", action="store_true",
                   help="rewrite tests/opinfo/expected_failures.txt from the results")
    args = p.parse_args(argv)
    if args.worker is not None:
        return _worker([int(i) for i in args.worker.split(",")], args.timeout, args.errors_only)
    from . import catalog
    if args.source:
        results = load(args.source)
    else:
        picked = [(e, o) for e, o, _ in catalog.ci_slice()] if args.ci_slice else catalog.entries()
        ids = {eid for eid, _ in picked}
        done = {r["i"] for r in load(args.out)} if args.resume and os.path.exists(args.out) \
            else set()
        indices = [i for i, (eid, op) in enumerate(catalog.entries())
                   if eid in ids and (not args.only or re.search(args.only, eid)) and i not in done
                   and (not args.errors_only or op.error_inputs_func is not None)]
        results = run(indices, args.jobs, args.timeout, args.out, args.update or args.resume,
                      args.errors_only)
    full = len({r["i"] for r in results}) == len(catalog.entries())
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
