"""Measures the tracer's overhead on a program: runs it plain and traced, interleaved.

usage: .venv/bin/python lab/tracer/overhead.py [-n RUNS] [--summary] -- COMMAND ...

Prints the best (minimum) wall and CPU (user+sys) time of each, and their ratio. Minimums,
because other load on the machine only ever adds time. The trace goes to a temporary file
in the folder given by $TMPDIR (a disk-backed folder measures the real cost of writing).
"""
import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from locus_lab import runner, trace  # noqa: E402
from locus_lab.common import find_paths  # noqa: E402


def main():
    argv = sys.argv[1:]
    if "--" not in argv:
        sys.exit(__doc__)
    i = argv.index("--")
    p = argparse.ArgumentParser()
    p.add_argument("-n", type=int, default=5)
    p.add_argument("--summary", action="store_true", help="measure summary mode instead")
    args = p.parse_args(argv[:i])
    command = argv[i + 1:]
    tracer = trace.tracer_library(find_paths())
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    best = {"plain": [1e9, 1e9], "traced": [1e9, 1e9]}
    size = 0
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "overhead.trace"
        traced_env = trace.trace_environment(env, tracer, out, summary=args.summary)
        for _ in range(args.n):
            for kind, e in (("plain", env), ("traced", traced_env)):
                trace.clear_trace_files(out)
                r = runner.run_once(command, e)
                if not r.ok:
                    sys.exit(f"{kind} run failed: {r.status} {r.stderr_tail}")
                best[kind][0] = min(best[kind][0], r.wall_s)
                best[kind][1] = min(best[kind][1], r.user_s + r.sys_s)
                if kind == "traced":
                    size = sum(f.stat().st_size for f in trace.trace_files(out))
    (pw, pc), (tw, tc) = best["plain"], best["traced"]
    print(f"{' '.join(command)}")
    print(f"  plain   wall {pw:7.3f} s   cpu {pc:7.3f} s")
    print(f"  traced  wall {tw:7.3f} s   cpu {tc:7.3f} s   trace {size / 2**20:,.0f} MiB")
    print(f"  overhead: wall {tw / pw:.2f}x, cpu {tc / pc:.2f}x (best of {args.n})")


if __name__ == "__main__":
    main()
