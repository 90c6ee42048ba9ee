# Sourced by the GPU machine's profiling scripts (scheduler_profile_device_run.sh,
# cpu_search_profile_device_run.sh), after they set `out`: the binaries of
# .device-carry/sched/bin.tar.gz unpacked (.device-bin/), the Debian libraries of .device-debs/ and
# perf's packages of .device-carry/perf/ (see index_profile_device_run.sh) unpacked under /opt;
# then `perf`, a function running perf with its libraries, `bench`, the scheduler benchmark (its
# unstripped copy .device-bin/scheduler_bench_sym where carried, for symbol names), and `work`, a
# scratch directory removed at exit.
mkdir -p "$out" /opt/perf /opt/deps
[ -f .device-carry/sched/bin.tar.gz ] && tar -xzf .device-carry/sched/bin.tar.gz
for f in .device-debs/*.deb; do dpkg -x "$f" /opt/deps; done
for f in .device-carry/perf/*.deb; do dpkg -x "$f" /opt/perf; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
perf_libs=/opt/perf/usr/lib/x86_64-linux-gnu:/opt/perf/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH
perf() { LD_LIBRARY_PATH=$perf_libs /opt/perf/usr/bin/perf "$@"; }
bench=.device-bin/scheduler_bench
[ -x .device-bin/scheduler_bench_sym ] && bench=.device-bin/scheduler_bench_sym
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
