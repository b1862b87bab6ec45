"""`grade --bundle gradescope|prairielearn --out DIR`: the grader packaged for a course
platform, from this checkout.

Both bundles hold the same `lockbench/` folder: the `analysis` package without its tests
(the grader itself needs the standard library only), the lock tracer's source
(profile/lockprof*.cpp and the lock headers of common/ they include, whose trace mode the
design check preloads), the course's weights,
bundle.json (budget, quick, sandbox) and setup.sh, which installs what grading needs from the
distribution's packages and compiles the lock tracer and the grader's kit-style servers;
nothing is fetched from anywhere else.

- Gradescope: DIR/autograder.zip with setup.sh and run_autograder at its root.
- PrairieLearn: DIR/prairielearn/ with a Dockerfile for the external grader image,
  lockbench/ (entrypoint lockbench/run_prairielearn) and info.json, the question's
  externalGradingOptions to paste.
"""

import json
import os
import shutil
import stat
import zipfile
from pathlib import Path

from analysis.grade import score
from analysis.grade.trust import outer

REPO = Path(__file__).resolve().parents[3]
# Gradescope stops an autograder at 10 minutes by default (and then scores 0 with no
# result): 450 s of grading leaves 90 s for start-up and hosted.py's own margin.
DEFAULT_BUDGET = {"gradescope": 450.0, "prairielearn": 240.0}
PL_TIMEOUT_S = 300   # PrairieLearn's externalGradingOptions.timeout to set (its default is 30)
PACKAGES = ("gcc", "g++", "libc6-dev", "make", "python3", "bubblewrap", "util-linux", "procps")

SETUP = """#!/usr/bin/env bash
# lockbench's grader: install what grading needs (the distribution's packages only) and
# compile the lock tracer and the grader's own kit-style servers. Gradescope runs this once
# when it builds the autograder image (as root, in /autograder/source); the PrairieLearn
# Dockerfile runs it too.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
code="$here"; [ -d "$here/lockbench" ] && code="$here/lockbench"
packages=(%(packages)s)
python3 -c 'import tomllib' 2>/dev/null || packages+=(python3-tomli)  # Python 3.10
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
mkdir -p "$code/bin"
# the lock tracer (its trace mode): C++ on common/'s lock types, linked by the C driver
# without the C++ runtime library, as CMakeLists.txt builds it
gcc -std=c++20 -O2 -Wall -Wextra -shared -fPIC -fno-exceptions -fno-rtti \\
  -fno-threadsafe-statics -fvisibility=hidden -fvisibility-inlines-hidden -I"$code" \\
  -o "$code/bin/liblockprof.so" "$code"/profile/lockprof*.cpp -Wl,--no-undefined -ldl -pthread
for design in 1 4; do  # the grader's own kit-style servers (one mutex, an rwlock per string)
  gcc -O2 -Wall -Wextra -DDESIGN=$design -o "$code/bin/kitref$design" \\
    "$code/analysis/grade/kitref.c" -pthread
done
echo "lockbench grader ready: $code"
"""

RUN = """#!/usr/bin/env bash
# %(platform)s runs this for every submission; it always writes the results file.
# %(root_var)s moves the root (default %(root)s), for trying it on a fake one.
code="%(code)s"
cd "$code" && PYTHONPATH="$code" exec python3 -m analysis.grade.platforms.hosted %(platform_arg)s
"""

DOCKERFILE = """# The external grader image for PrairieLearn: build and push it, then name it in the
# question's info.json (see info.json beside this file):
#   docker build -t YOUR_ORG/lockbench-grader . && docker push YOUR_ORG/lockbench-grader
FROM debian:12
COPY lockbench /lockbench
RUN /lockbench/setup.sh && rm -rf /var/lib/apt/lists/*
"""


def tracer_sources() -> list[str]:
    """The preload's sources (profile/lockprof*.cpp) and every header of this repository
    they include, followed through the headers: paths relative to the repository."""
    todo = sorted(str(p.relative_to(REPO)) for p in (REPO / "profile").glob("lockprof*.cpp"))
    seen = set()
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        for line in (REPO / rel).read_text().splitlines():
            if line.startswith('#include "'):
                todo.append(line.split('"')[1])
    return sorted(seen)


def _copy_code(dst: Path, weights: Path) -> None:
    """The grading code and the weights."""
    outer.copy_grading_code(dst)
    for rel in tracer_sources():  # the lock tracer's source: setup.sh compiles it
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, dst / rel)
    shutil.copy(weights, dst / "grade_weights.toml")


def _script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def lockbench_folder(dst: Path, weights: Path, settings: dict,
                     version: str) -> None:
    dst.mkdir(parents=True)
    _copy_code(dst, weights)
    (dst / "bundle.json").write_text(json.dumps({**settings, "version": version}, indent=1))
    (dst / "VERSION").write_text(version + "\n")
    _script(dst / "setup.sh", SETUP % {"packages": " ".join(PACKAGES)})


def run_script(platform: str) -> str:
    if platform == "gradescope":
        return RUN % {"platform": "Gradescope", "root_var": "AUTOGRADER_ROOT",
                      "root": "/autograder",
                      "code": "${AUTOGRADER_ROOT:-/autograder}/source/lockbench",
                      "platform_arg": "gradescope"}
    return RUN % {"platform": "PrairieLearn", "root_var": "PL_ROOT", "root": "/grade",
                  "code": "$(cd \"$(dirname \"$0\")\" && pwd)", "platform_arg": "prairielearn"}


def write_gradescope(out: Path, weights: Path, settings: dict, version: str) -> Path:
    """DIR/autograder.zip: setup.sh and run_autograder at its root, lockbench/ beside."""
    stage = out / "gradescope"
    if stage.exists():
        shutil.rmtree(stage)
    lockbench_folder(stage / "lockbench", weights, settings, version)
    _script(stage / "setup.sh", "#!/usr/bin/env bash\nexec \"$(dirname \"$0\")/lockbench/"
                                "setup.sh\"\n")
    _script(stage / "run_autograder", run_script("gradescope"))
    zpath = out / "autograder.zip"
    with zipfile.ZipFile(zpath, "w", zipfile.ZIP_DEFLATED) as z:
        for f in sorted(stage.rglob("*")):
            info = zipfile.ZipInfo(str(f.relative_to(stage)) + ("/" if f.is_dir() else ""))
            info.external_attr = (f.stat().st_mode & 0o777 | (0o040000 if f.is_dir()
                                                               else 0o100000)) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, b"" if f.is_dir() else f.read_bytes())
    shutil.rmtree(stage)
    return zpath


def write_prairielearn(out: Path, weights: Path, settings: dict, version: str) -> Path:
    """DIR/prairielearn/: Dockerfile, lockbench/ (entrypoint run_prairielearn), info.json."""
    dst = out / "prairielearn"
    if dst.exists():
        shutil.rmtree(dst)
    lockbench_folder(dst / "lockbench", weights, settings, version)
    _script(dst / "lockbench" / "run_prairielearn", run_script("prairielearn"))
    (dst / "Dockerfile").write_text(DOCKERFILE)
    (dst / "info.json").write_text(json.dumps({
        "gradingMethod": "External",
        "externalGradingOptions": {"enabled": True, "image": "YOUR_ORG/lockbench-grader",
                                   "entrypoint": "/lockbench/run_prairielearn",
                                   "timeout": PL_TIMEOUT_S}}, indent=2) + "\n")
    return dst


def write(platform: str, out: Path, weights: Path, budget: float | None, quick: bool,
          sandbox: str, version: str, lab: str | None = None,
          folder: str | None = None) -> Path:
    """Writes the bundle; returns its path. The weights are checked first (WeightsError).
    lab: the version every submission is graded as (None: told apart per submission);
    folder: where in each submission to build (None: found per submission)."""
    score.load_weights(weights)
    out.mkdir(parents=True, exist_ok=True)
    settings = {"budget_s": budget or DEFAULT_BUDGET[platform], "quick": quick,
                "sandbox": sandbox, **({"lab": lab} if lab else {}),
                **({"folder": folder} if folder else {})}
    writer = write_gradescope if platform == "gradescope" else write_prairielearn
    path = writer(out, weights, settings, version)
    os.chmod(out, 0o755)
    return path
