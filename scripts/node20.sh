# Sourced by scripts/test: makes `node` on the PATH Node.js 20.19 or later.
#
# The JavaScript tests need Node.js 20.19 or later (the SDK's @noble
# dependencies require it); Debian 12's own nodejs is 18. When the node on
# the PATH is missing or older, this puts a pinned
# official Linux build of Node.js first on the PATH: the npm registry's
# package node-linux-<arch> (the node binary of the official release,
# nothing else), fetched with `npm pack` (so the machine needs no other
# host than the npm registry, which `npm ci` needs anyway), checked against
# the sha512 pinned here, and unpacked once into a cache directory
# (${XDG_CACHE_HOME:-~/.cache}/ternio/node-<version>; TERNIO_NODE_CACHE
# names another). Later runs find it there and fetch nothing. Debian's npm
# runs on it. With a node of 20.19 or later already on the PATH, it does
# nothing.

ternio_node_version=20.20.2
# `npm view node-linux-<arch>@<version> dist.integrity`, for each arch.
ternio_node_sha512_x64='PeHQM8wAdmHtZA1mBocygZxs5LiUWtsJezQTkBd0iY987KpGrD1O2tVEydvMZiuXceRanxt7rjTnDEBwOPujoQ=='
ternio_node_sha512_arm64='LCXJnNTFiyGuYBw2gZSI5OBFMbkjAPt8sqD/NKrWoE2QmDgSubTqFng6GaNJ9EJ8HpxBMGcWWpbbcs4Vo+CnGg=='

# The version of the node on the PATH as major * 1000 + minor (20019 for
# 20.19); 0 when there is none.
ternio_node_version_number() {
  node -p 'const [a, b] = process.versions.node.split(".").map(Number); a * 1000 + b' 2>/dev/null || echo 0
}

ternio_ensure_node20() {
  if [ "$(ternio_node_version_number)" -ge 20019 ]; then
    return 0
  fi
  local arch expected
  case "$(uname -m)" in
    x86_64 | amd64) arch=x64 expected=$ternio_node_sha512_x64 ;;
    aarch64 | arm64) arch=arm64 expected=$ternio_node_sha512_arm64 ;;
    *)
      echo "scripts/test: the JavaScript tests need Node.js 20.19 or later, found" \
        "$(node --version 2>/dev/null || echo none), and no build is pinned for $(uname -m):" \
        "install one" >&2
      return 1
      ;;
  esac
  local cache="${TERNIO_NODE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/ternio/node-$ternio_node_version-$arch}"
  if ! [ -x "$cache/bin/node" ]; then
    command -v npm >/dev/null 2>&1 || {
      echo "scripts/test: npm is needed to fetch Node.js $ternio_node_version" >&2
      return 1
    }
    echo "scripts/test: node $(node --version 2>/dev/null || echo missing) is older than 20.19:" \
      "fetching Node.js $ternio_node_version (npm package node-linux-$arch) into $cache"
    local work tarball actual
    work="$(mktemp -d)"
    tarball="$(cd "$work" && npm pack --silent "node-linux-$arch@$ternio_node_version" | tail -n 1)"
    actual="$(openssl dgst -sha512 -binary "$work/$tarball" | base64 -w0)"
    if [ "$actual" != "$expected" ]; then
      echo "scripts/test: node-linux-$arch@$ternio_node_version: sha512 $actual," \
        "expected $expected" >&2
      rm -rf "$work"
      return 1
    fi
    mkdir -p "$work/unpacked"
    tar -xzf "$work/$tarball" -C "$work/unpacked" --strip-components=1 package/bin/node
    mkdir -p "$(dirname "$cache")"
    rm -rf "$cache"
    # Whole or not at all: a run stopped half-way leaves no broken cache.
    mv "$work/unpacked" "$cache"
    rm -rf "$work"
  fi
  export PATH="$cache/bin:$PATH"
  hash -r
  if [ "$(ternio_node_version_number)" -lt 20019 ]; then
    echo "scripts/test: $cache/bin/node does not run as Node.js 20.19 or later" >&2
    return 1
  fi
}
