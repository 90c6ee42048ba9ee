# Sourced by the GPU host scripts with `bundle` and `out` set: unpacks the bundle's runtime
# packages under /opt/deps, points the library path there and the tests at the bundle's data, and
# prints the machine.
mkdir -p "$out" /opt/deps
for f in "$bundle"/debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" /opt/deps; done
export LD_LIBRARY_PATH=/opt/deps/usr/lib/x86_64-linux-gnu:/opt/deps/lib/x86_64-linux-gnu:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export WARP_TEST_DATA=$bundle/data
bin=$bundle/bin
echo "host: $(nproc) CPUs, $(lscpu | sed -n 's/^Model name: *//p'), $(free -g | awk '/Mem:/ {print $2}') GiB; $(date -u +%F)"
nvidia-smi -L 2> /dev/null || echo "no GPU"
for b in "$bin"/*; do
  if ldd "$b" | grep -q "not found"; then ldd "$b" | grep "not found"; echo "missing libraries for $b"; exit 1; fi
done
