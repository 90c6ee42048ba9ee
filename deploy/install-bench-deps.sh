#!/usr/bin/env bash
# Packages only the serving benchmarks need (tests/bench/serve_bench.sh, sphinx_compare.py); CI
# and the README's two commands do without them.
set -euo pipefail
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends wrk sphinxsearch python3-pymysql
