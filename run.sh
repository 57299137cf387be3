#!/usr/bin/env bash
# faultkit set-up and entry point. Installs whatever is missing on a fresh Debian 12 machine
# (system packages via apt, a virtualenv with the project), then:
#   bash run.sh scenarios [PYTEST_ARGS...]  bring the testbed up, run the scenario suite (in
#                                           lanes; with PYTEST_ARGS, one pytest), list reports
#   bash run.sh tests [PYTEST_ARGS...]      static checks (ruff, mypy, lint-imports), then run the
#                                           harness's own tests, incl. the scenario suite's
#                                           expected verdicts (what CI runs)
#   bash run.sh setup                       only install
set -euo pipefail
cd "$(dirname "$0")"

say() { printf '\033[1m[faultkit %s]\033[0m %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

APT_PACKAGES=(docker.io debootstrap prometheus prometheus-alertmanager prometheus-blackbox-exporter iptables iproute2 g++ make git curl python3-venv)
VENV=.venv

need_apt() {
  local missing=()
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    say "installing system packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q >/dev/null
    apt-get install -y -q "${missing[@]}" >/dev/null
  fi
}

need_venv() {
  local stamp="$VENV/.installed-$(sha256sum pyproject.toml | cut -c1-12)"
  if [[ ! -x "$VENV/bin/python" ]]; then
    say "creating virtualenv $VENV"
    python3 -m venv "$VENV"
  fi
  if [[ ! -f "$stamp" ]]; then
    say "installing faultkit and its dependencies into $VENV"
    "$VENV/bin/pip" install -q --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
    "$VENV/bin/pip" install -q -e '.[dev]' 2>&1 | grep -v "^WARNING: Location" || true
    "$VENV/bin/python" -c "import faultkit, slo, reports, testbed" || { say "install failed"; exit 1; }
    rm -f "$VENV"/.installed-* && touch "$stamp"
  fi
}

setup() {
  if [[ $EUID -ne 0 ]]; then say "run as root (the testbed manages Docker and network namespaces)"; exit 1; fi
  need_apt
  need_venv
}

testbed_up() {
  say "bringing the testbed up (first time: base image, llama.cpp build, vLLM and LiteLLM envs: ~12 min)"
  "$VENV/bin/faultkit" testbed up
}

list_reports() {
  local reports
  reports=$(find runs -name incident.md -newer "$1" 2>/dev/null | sort || true)
  if [[ -n "$reports" ]]; then
    say "incident reports written by this run:"
    printf '  %s\n' $reports >&2
  else
    say "no incident reports were written"
  fi
}

cmd=${1:-}
shift || true
case "$cmd" in
  setup)
    setup
    ;;
  scenarios)
    setup
    testbed_up
    marker=$(mktemp)
    rc=0
    if (($#)); then  # a selection of your own: exactly that, in one pytest process
      "$VENV/bin/pytest" scenarios "$@" || rc=$?
    else  # the whole catalogue in lanes, as CI runs it (docs/ci.md): about 10 minutes
      "$VENV/bin/faultkit" lanes --lanes 5 --run || rc=$?
    fi
    list_reports "$marker"
    rm -f "$marker"
    exit $rc
    ;;
  tests)
    setup
    say "static checks: ruff, mypy --strict (the packages, tests, scenarios, bench), import contracts (pyproject.toml)"
    "$VENV/bin/ruff" check --no-cache .
    "$VENV/bin/mypy" --cache-dir=/dev/null
    "$VENV/bin/lint-imports"
    mkdir -p test-results
    export FAULTKIT_REQUIRE_PROMTOOL=1  # installed with Debian's prometheus above: never skip
    if (($#)); then  # a targeted run: exactly the given selection, in one process
      testbed_up
      exec "$VENV/bin/pytest" tests -p no:cacheprovider --durations=25 \
        --junitxml=test-results/junit.xml "$@"
    fi
    # CI: the unit tests, the integration tests in two processes side by side, the e2e
    # tests; each with the 25 slowest tests and its JUnit file, per-test timeouts in
    # pyproject.toml. Every phase runs whatever the one before found; the exit code is the
    # worst. Why these phases and processes, and what was measured: docs/ci.md.
    worst=0
    run_pytest() {  # NAME PYTEST_ARGS...: one pytest process, named in its JUnit file
      local name=$1 code=0
      shift
      "$VENV/bin/pytest" -p no:cacheprovider --durations=25 \
        --junitxml="test-results/junit-$name.xml" "$@" || code=$?
      say "$name tests: exit $code"
      return "$code"
    }
    note() { local code=$1; ((code > worst)) && worst=$code; return 0; }
    # The harness comes first for the CPU during the integration phase (docs/ci.md). On a
    # cgroup-v1 host (this lab, CI) this shell moves into a CPU cgroup of its own at 10 x
    # the weight of /docker, whatever session started it; elsewhere the nice of its
    # scheduler group (autogroup) or, in the root group (started by a process that never
    # called setsid), its own nice, which its children inherit.
    cpu_root=/sys/fs/cgroup/cpu harness_cgroup=/sys/fs/cgroup/cpu/faultkit-harness harness_shares=10240
    harness_first() {
      if mkdir -p "$harness_cgroup" 2>/dev/null && echo "$harness_shares" 2>/dev/null >"$harness_cgroup/cpu.shares" \
        && echo $$ 2>/dev/null >"$harness_cgroup/cgroup.procs"; then
        say "CPU: the harness in cgroup cpu:/${harness_cgroup#"$cpu_root"/}, $harness_shares shares (/docker: 1024)"
      else
        harness_nice -10
      fi
    }
    harness_as_before() {
      if [[ $(</proc/$$/cgroup) == *":cpu:/${harness_cgroup#"$cpu_root"/}"* ]]; then
        if ! echo $$ 2>/dev/null >"$cpu_root/cgroup.procs"; then
          say "CPU: could not move back to the root cgroup: the e2e phase keeps $harness_shares shares"
        elif ! rmdir "$harness_cgroup" 2>/dev/null; then
          say "CPU: $harness_cgroup still holds a process: left in place"
        fi
      else
        harness_nice 0
      fi
    }
    harness_nice() {  # NICE
      local group=/proc/$$/autogroup content=""
      [[ -r $group ]] && content=$(<"$group")
      if [[ $content == /autogroup-* ]] && echo "$1" 2>/dev/null >"$group"; then
        say "CPU: this session's scheduler group at nice $1"
      elif renice -n "$1" -p $$ >/dev/null; then
        say "CPU: the harness's processes at nice $1 (no scheduler group of its own)"
      else
        say "CPU: weights unchanged (neither $group nor renice accepted nice $1)"
      fi
    }
    say "unit tests"
    code=0; run_pytest unit tests/unit || code=$?; note "$code"
    testbed_up  # after the unit tests, which do not need it
    say "integration tests, two processes side by side: the testbed's, and those on their own containers (logs: test-results/integration-*.log)"
    export FAULTKIT_TESTS_TESTBED_IS_UP=1  # brought up above; neither process brings it up again
    harness_first  # the CPU goes to the harness first, the containers get what it leaves
    run_pytest integration-testbed tests/integration -m "not own_containers" \
      >test-results/integration-testbed.log 2>&1 &
    testbed_pid=$!
    (renice -n 10 -p "$BASHPID" >/dev/null && run_pytest integration-own tests/integration \
      -m own_containers) >test-results/integration-own.log 2>&1 &
    own_pid=$!
    code=0; wait "$testbed_pid" || code=$?; note "$code"
    code=0; wait "$own_pid" || code=$?; note "$code"
    harness_as_before
    unset FAULTKIT_TESTS_TESTBED_IS_UP
    for name in testbed own; do
      say "integration tests ($name): output"
      cat "test-results/integration-$name.log"
    done
    say "end-to-end tests (the whole scenario suite and its expected verdicts)"
    code=0; run_pytest e2e tests/e2e || code=$?; note "$code"
    exit "$worst"
    ;;
  *)
    echo "usage: bash run.sh scenarios|tests|setup [pytest args...]" >&2
    exit 2
    ;;
esac
