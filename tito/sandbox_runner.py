"""The program that runs inside the sandbox, beside the package under test.

It imports nothing from tito: the grader copies it, wire.py, checklib.py and the compute slice of the
suite into the job folder. It reads the cases, runs each check's compute part on them, and appends one
JSON line per check to out/outputs.jsonl. It decides nothing: the trusted parent judges the outputs.
"""

import importlib
import json
import os
import signal
import sys

JOB = sys.argv[1]
sys.path[:0] = [os.path.join(JOB, "pkg"), os.path.join(JOB, "lib")]

import wire  # noqa: E402


class CheckTimeout(BaseException):
    pass


def _expire(signum, frame):
    raise CheckTimeout()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else '(no message)'}"[:500]


def main() -> None:
    with open(os.path.join(JOB, "cases.json"), encoding="utf-8") as stream:
        plan = wire.loads(stream.read())
    out = open(os.path.join(JOB, "out", "outputs.jsonl"), "a", encoding="utf-8")

    def emit(record: dict) -> None:
        out.write(json.dumps(record) + "\n")
        out.flush()

    emit({"started": True})  # before any code of the package under test runs
    try:
        suite = importlib.import_module("compute_slice")
        tt = importlib.import_module("tinytorch")
    except BaseException as error:  # the package under test may raise anything on import
        emit({"import_error": _first_line(error)})
        return
    signal.signal(signal.SIGALRM, _expire)
    for check in plan:
        compute = getattr(suite, check["name"])
        results = []
        signal.setitimer(signal.ITIMER_REAL, check["timeout"])
        try:
            for case in check["cases"]:
                try:
                    results.append({"output": wire.encode(compute(tt, case))})
                except NotImplementedError as error:
                    results.append({"stub": str(error).strip()[:500]})
                    break
                except CheckTimeout:
                    raise
                except BaseException as error:
                    results.append({"error": _first_line(error)})
        except CheckTimeout:
            results.append({"timeout": check["timeout"]})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        emit({"check": check["name"], "results": results})


if __name__ == "__main__":
    main()
    os._exit(0)
