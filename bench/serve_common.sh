# What the serving benchmarks share (sourced, from the repository's root, with BUILD_DIR set):
# igb-serve and igb-tools built, vtest.avi found (Debian's opencv-doc, installed when missing), a
# work folder, worker processes killed and the folder removed on exit, and free loopback ports.
BIN="$BUILD_DIR/apps"
[ -x "$BIN/igb-serve" ] && [ -x "$BIN/igb-tools" ] || cmake --build "$BUILD_DIR" --target igb-serve igb-tools -j 2
VIDEO=$(find /usr/share/doc/opencv-doc -name vtest.avi 2>/dev/null | head -1)
if [ -z "$VIDEO" ]; then
  scripts/install_packages.sh serve_bench opencv-doc
  VIDEO=$(find /usr/share/doc/opencv-doc -name vtest.avi | head -1)
fi
WORK=$(mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
# free_ports N: N free TCP ports on 127.0.0.1, into the array PORTS.
free_ports() {
  PORTS=()
  for _ in $(seq 1 "$1"); do
    PORTS+=($(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'))
  done
}
