#!/usr/bin/env bash
# K20: builds the image of ./Dockerfile and checks it: the image's own command
# (the demos) runs on the CPU simulator and must write out/container/mandelbrot.png
# and out/container/life.gif, exit 0, and show every row of its table "ok" or
# "hardware-only". .ci/run runs it after scripts/test.sh.
#
#   bash scripts/container.sh               # the full build: the test suite runs inside it
#   bash scripts/container.sh --skip-tests  # the set-up and the release build only
#
# The engine: docker where its daemon answers, else podman (installed with
# apt, with mmdebstrap, where neither is). The base image (BASE, default
# docker.io/library/debian:bookworm-slim) is used when present, else pulled,
# else bootstrapped with `mmdebstrap --variant=minbase <suite>` and imported
# under that name. Podman's build gets the host's CA bundle (builds behind a
# TLS-inspecting proxy need it). The check runs the image as a container where
# the engine can run one, else (a sandbox that refuses crun's setrlimit, as
# here) the image's exported root filesystem with chroot, with the image's own
# entry point, command, environment and working folder.
#
# Environment: CUDA_KERNELS_IMAGE (default localhost/cuda-kernels; the build
# stage is tagged <image>-build), BASE, CARGO_BUILD_JOBS (passed to the build).
# In CI (CI=true or 1) anything that stops the check fails the script; outside
# CI, a missing engine only reports "container check skipped".
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
IMAGE=${CUDA_KERNELS_IMAGE:-localhost/cuda-kernels}
BASE=${BASE:-docker.io/library/debian:bookworm-slim}
OUT=$ROOT/out/container
SKIP_TESTS=0
case "${1:-}" in
  --skip-tests) SKIP_TESTS=1 ;;
  "") ;;
  *) echo "usage: bash scripts/container.sh [--skip-tests]" >&2; exit 2 ;;
esac

say() { echo "[container] $*" >&2; }
fail() { echo "[container] error: $*" >&2; exit 1; }
in_ci() { [ "${CI:-}" = true ] || [ "${CI:-}" = 1 ]; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cuda-kernels-container.XXXXXX")
ROOTFS=""
cleanup() {
  if [ -n "$ROOTFS" ]; then umount "$ROOTFS/proc" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
SECONDS=0
t_phase=0
took() { echo "$((SECONDS - t_phase)) s"; }
# A log's reason in one line: its first "E: " line (apt, mmdebstrap), else
# its last line that says something.
last_line() {
  { grep -m1 '^E: ' "$1" || grep -v '^[[:space:]]*$' "$1" | tail -n 1; } | cut -c1-300
}

apt_install() {
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"; } \
    >"$WORK/apt.log" 2>&1
}

# ---- 1. the engine ----
if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  ENGINE=docker
elif command -v podman >/dev/null; then
  ENGINE=podman
else
  say "no container engine (docker with a daemon, or podman): installing podman and mmdebstrap with apt"
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null && apt_install podman mmdebstrap \
    && command -v podman >/dev/null; then
    ENGINE=podman
  else
    why="no container engine (docker with a daemon, or podman), and apt-get could not install podman"
    [ -f "$WORK/apt.log" ] && why="$why: $(last_line "$WORK/apt.log")"
    in_ci && fail "$why"
    echo "container check skipped: $why" >&2
    exit 0
  fi
fi
say "engine: $($ENGINE --version)"

# ---- 2. the base image ----
if ! $ENGINE image inspect "$BASE" >/dev/null 2>&1; then
  if $ENGINE pull -q "$BASE" >"$WORK/pull.log" 2>&1; then
    say "base $BASE: pulled"
  else
    pulled="$(last_line "$WORK/pull.log")"
    # debian:<suite>[-slim] → mmdebstrap <suite>
    suite=${BASE##*:}
    suite=${suite%-slim}
    case "$BASE" in
      debian:* | */debian:*) ;;
      *) fail "base image $BASE: cannot be pulled ($pulled), and only a debian:<suite> base can be bootstrapped" ;;
    esac
    if ! command -v mmdebstrap >/dev/null && ! apt_install mmdebstrap; then
      fail "base image $BASE: cannot be pulled ($pulled), and mmdebstrap could not be installed ($(last_line "$WORK/apt.log"))"
    fi
    say "base $BASE: no registry serves it ($pulled); bootstrapping it with mmdebstrap --variant=minbase $suite"
    if ! mmdebstrap --variant=minbase "$suite" "$WORK/base.tar" >"$WORK/mmdebstrap.log" 2>&1; then
      fail "base image $BASE: cannot be pulled ($pulled) nor bootstrapped (mmdebstrap --variant=minbase $suite: $(last_line "$WORK/mmdebstrap.log"))"
    fi
    # With the configuration Debian's own images have.
    $ENGINE import --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' "$WORK/base.tar" "$BASE" >"$WORK/import.log" 2>&1 \
      || fail "base image $BASE: bootstrapped, but $ENGINE import failed: $(last_line "$WORK/import.log")"
    rm -f "$WORK/base.tar"
    say "base $BASE: bootstrapped and imported ($(took))"
  fi
fi

# Whether the engine can run a container here (not in this sandbox: crun's
# setrlimit is refused). Where it cannot, the build's RUN steps use chroot
# isolation and the check runs the exported root filesystem with chroot.
if $ENGINE run --rm --network=none "$BASE" true >"$WORK/run-probe.log" 2>&1; then
  CAN_RUN=1
else
  CAN_RUN=0
  [ "$(id -u)" = 0 ] || fail "$ENGINE cannot run a container here ($(last_line "$WORK/run-probe.log")), and the check's fallback (chroot) needs root"
  say "$ENGINE cannot run a container here ($(last_line "$WORK/run-probe.log")): building with chroot isolation, checking through an exported root filesystem"
fi

# ---- 3. the build ----
args=(--build-arg "BASE=$BASE" --build-arg "SKIP_TESTS=$SKIP_TESTS")
[ -n "${CARGO_BUILD_JOBS:-}" ] && args+=(--build-arg "CARGO_BUILD_JOBS=$CARGO_BUILD_JOBS")
if [ "$ENGINE" = podman ]; then
  # The host's network for RUN steps (as chroot isolation has anyway): a
  # podman without network plugins builds all the same.
  args+=(--pull=never --network=host)
  [ "$CAN_RUN" = 0 ] && args+=(--isolation=chroot)
  for bundle in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt; do
    if [ -f "$bundle" ]; then
      args+=(-v "$bundle:/usr/local/share/ca-certificates/host-bundle.crt:ro")
      break
    fi
  done
else
  export DOCKER_BUILDKIT=1
  args+=(--progress=plain)
fi

# Builds one target of the Dockerfile; on failure prints the failing step's
# own output (not the engine's wrapper lines) and exits.
build() {
  local tag=$1 log="$WORK/build-$2.log"
  shift 2
  say "building $tag (log: $ENGINE build output, shown on failure)"
  if $ENGINE build "${args[@]}" "$@" -t "$tag" . >"$log" 2>&1; then
    return
  fi
  if [ "$ENGINE" = podman ]; then
    # From the last "STEP n/m:" line to podman's own "Error:" line.
    awk '/^(\[[0-9]+\/[0-9]+\] )?STEP [0-9]+\/[0-9]+: /{n=0; delete buf} {buf[n++]=$0}
         END{for(i=0;i<n;i++) if(buf[i] !~ /^(Error: |time=|subprocess exited with status)/) print buf[i]}' "$log" >&2
    step=$(grep -o -E '^(\[[0-9]+/[0-9]+\] )?STEP [0-9]+/[0-9]+' "$log" | tail -n 1)
  else
    # BuildKit repeats the failing step's output between "------" lines.
    awk '/^------$/{on=!on; next} on' "$log" >&2
    step=$(grep -m1 -E '^ > \[' "$log" | cut -c1-120)
  fi
  fail "the image build failed at ${step:-an unknown step}: its output is above"
}
t_phase=$SECONDS
build "$IMAGE" main
say "built $IMAGE ($(took))"
build "$IMAGE-build" build --target build
# Earlier builds' images that no name holds any more (the layers of these two
# stay: they are the next build's cache).
$ENGINE image prune -f >/dev/null
size() { $ENGINE image inspect --format '{{.Size}}' "$1" | awk '{printf "%.0f MB", $1 / 1e6}'; }
say "image sizes: build stage $(size "$IMAGE-build"), run stage $(size "$IMAGE")"

# ---- 4. the check: the image's demo on the simulator ----
t_phase=$SECONDS
rm -rf "$OUT"
mkdir -p "$OUT"
log="$OUT/demo.log"
if [ "$CAN_RUN" = 1 ]; then
  say "running $IMAGE as a container"
  status=0
  $ENGINE run --rm --network=none -v "$OUT:/work/out" "$IMAGE" >"$log" 2>&1 || status=$?
else
  say "running $IMAGE from its exported root filesystem with chroot"
  ROOTFS="$WORK/rootfs"
  mkdir -p "$ROOTFS"
  cid=$($ENGINE create "$IMAGE")
  $ENGINE export "$cid" | tar -x -C "$ROOTFS"
  $ENGINE rm "$cid" >/dev/null
  # The image's configuration, one item a line.
  config() { $ENGINE image inspect --format "{{range .Config.$1}}{{.}}{{\"\\n\"}}{{end}}" "$IMAGE"; }
  mapfile -t entry < <(config Entrypoint)
  mapfile -t cmd < <(config Cmd)
  mapfile -t env < <(config Env)
  workdir=$($ENGINE image inspect --format '{{.Config.WorkingDir}}' "$IMAGE")
  mkdir -p "$ROOTFS/proc" "$ROOTFS/${workdir:-/}"
  mount -t proc proc "$ROOTFS/proc"
  status=0
  chroot "$ROOTFS" /usr/bin/env -i "${env[@]}" /bin/sh -c 'cd "$1" && shift && exec "$@"' sh \
    "${workdir:-/}" "${entry[@]}" "${cmd[@]}" >"$log" 2>&1 || status=$?
  umount "$ROOTFS/proc"
  cp -r "$ROOTFS/work/out/." "$OUT/" 2>/dev/null || true
fi
say "demo finished with status $status ($(took)); its output: ${log#"$ROOT"/}"

# The results table: the lines after its header ("kernel  size ...  check")
# and dashes, up to a blank line or the closing "SIMULATED: ..." line.
awk '/^kernel  .*check$/{t=1; next} t==1 && /^-+( +-+)*$/{t=2; next}
     t==2 && (/^$/ || /^SIMULATED/){exit} t==2' "$log" >"$WORK/rows"
bad=$(grep -v -E '  (ok \(.*|skipped: hardware-only.*)$' "$WORK/rows" || true)
problems=()
[ "$status" = 0 ] || problems+=("the demo exited with status $status")
[ -s "$WORK/rows" ] || problems+=("no results table in its output")
[ -z "$bad" ] || problems+=("rows neither ok nor hardware-only:"$'\n'"$bad")
[ "$(head -c 8 "$OUT/mandelbrot.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] \
  || problems+=("no PNG at out/container/mandelbrot.png")
head -c 6 "$OUT/life.gif" 2>/dev/null | grep -q -E '^GIF8[79]a' || problems+=("no GIF at out/container/life.gif")
if [ "${#problems[@]}" -gt 0 ]; then
  tail -n 40 "$log" >&2
  for p in "${problems[@]}"; do say "check failed: $p"; done
  exit 1
fi
say "ok: $(wc -l <"$WORK/rows") rows ok or hardware-only, out/container/mandelbrot.png and life.gif written; $SECONDS s in all"
