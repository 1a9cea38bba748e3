"""torch_xla._internal.pjrt: a function on every device, its results gathered by global
ordinal, the exception of the first process to fail raised again (in a fresh process: the runtime must not have started)."""
import os
import subprocess
import sys
import textwrap

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_SCRIPT = textwrap.dedent("""
    import torch_xla.runtime as xr
    from torch_xla._internal import pjrt

    def _where():
        return xr.global_ordinal(), xr.world_size()

    def _fail():
        raise TypeError("from process %d" % xr.global_ordinal())

    if __name__ == "__main__":
        print(pjrt.run_multiprocess(_where))
        try:
            pjrt.run_multiprocess(_fail)
        except TypeError as e:
            print("raised", e)
        try:
            pjrt.spawn(print, nprocs=2)
        except ValueError:
            print("refused")
""")


def test_run_multiprocess_gathers_results_and_raises_the_first_error(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(_SCRIPT)
    env = dict(os.environ, PYTHONPATH=ROOT, CPU_NUM_DEVICES="2", PJRT_DEVICE="CPU")
    proc = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.split("\n")
    assert lines[0] == "{0: (0, 2), 1: (1, 2)}" and lines[2] == "refused", proc.stdout
    assert lines[1] in ("raised from process 0", "raised from process 1"), proc.stdout
