#!/usr/bin/env bash
# Builds the tools in release and installs them, their man pages and their
# bash/zsh/fish completions under PREFIX (default ~/.local).
#
#   ./install.sh                      # build, install under ~/.local
#   PREFIX=/usr/local ./install.sh    # or --prefix DIR
#   ./install.sh --bin-dir DIR        # install already-built binaries from DIR
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; }

PREFIX=${PREFIX:-$HOME/.local}
BIN_DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) PREFIX=$2; shift 2 ;;
    --prefix=*) PREFIX=${1#*=}; shift ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --bin-dir=*) BIN_DIR=${1#*=}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "install.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done

# Relative paths are the caller's, not the repository's.
case "$PREFIX" in /*) ;; *) PREFIX="$PWD/$PREFIX" ;; esac
if [ -n "$BIN_DIR" ]; then case "$BIN_DIR" in /*) ;; *) BIN_DIR="$PWD/$BIN_DIR" ;; esac; fi
cd "$(dirname "$0")"
if [ -z "$BIN_DIR" ]; then
  if ! command -v cargo >/dev/null; then
    echo "install.sh: cargo is needed to build (https://rustup.rs)" >&2
    exit 2
  fi
  cargo build --release --locked --workspace
  BIN_DIR=target/release
fi

install -d "$PREFIX/bin" "$PREFIX/share/man/man1" \
  "$PREFIX/share/bash-completion/completions" \
  "$PREFIX/share/zsh/site-functions" \
  "$PREFIX/share/fish/vendor_completions.d"

installed=""
for tool in pt2ir ts2ir ir-decompose ir2onnx ir-run ir-bench ir-diff; do
  [ -x "$BIN_DIR/$tool" ] || continue
  install -m 755 "$BIN_DIR/$tool" "$PREFIX/bin/$tool"
  [ -f "man/$tool.1" ] && install -m 644 "man/$tool.1" "$PREFIX/share/man/man1/$tool.1"
  "$BIN_DIR/$tool" --completions bash > "$PREFIX/share/bash-completion/completions/$tool"
  "$BIN_DIR/$tool" --completions zsh > "$PREFIX/share/zsh/site-functions/_$tool"
  "$BIN_DIR/$tool" --completions fish > "$PREFIX/share/fish/vendor_completions.d/$tool.fish"
  installed="$installed $tool"
done
if [ -z "$installed" ]; then
  echo "install.sh: no tools found in $BIN_DIR" >&2
  exit 1
fi
echo "installed:$installed"
echo "  binaries    $PREFIX/bin"
echo "  man pages   $PREFIX/share/man/man1"
echo "  completions $PREFIX/share/{bash-completion/completions,zsh/site-functions,fish/vendor_completions.d}"
case ":$PATH:" in
  *":$PREFIX/bin:"*) ;;
  *) echo "add $PREFIX/bin to PATH (and $PREFIX/share/man to MANPATH if man does not find the pages)" ;;
esac
